#!/usr/bin/env bash
# Serving benchmark on this machine, as a new user would measure it (see scripts/bench/serving.py):
#   scripts/bench/serving.sh [serving.py options]      throughput: wrk against /healthz and inference
#   scripts/bench/serving.sh --latency                   light-load latency with loadgen (300, 1000 q/s)
#   scripts/bench/serving.sh --soak 60                   resident memory under a steady load, per minute
#   scripts/bench/serving.sh --peer mlserver             side by side with MLServer 1.7.1 (installed
#                                                        into ~/.cache/infaas/peers/mlserver-venv)
# Installs wrk (apt) and the Python packages the models need, builds the release binary, and writes
# the two bench models to ~/.cache/infaas/bench-models.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "$ROOT/scripts/lib.sh"
eval "$(bash "$ROOT/scripts/setup.sh" --print-env)"
if ! command -v wrk >/dev/null; then
  apt_ensure wrk
fi
if ! python3 -c "import sklearn, skl2onnx, onnx, onnxruntime, numpy" 2>/dev/null; then
  python3 -m pip install -q scikit-learn skl2onnx onnx "onnxruntime==$ORT_VERSION" numpy
fi
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/infaas/target}"
"$ROOT/scripts/infaas" --help >/dev/null   # builds the release binary when it is out of date
cargo build -q --release --locked --manifest-path "$ROOT/Cargo.toml" -p infaas-api --example grpc_load
BIN="$CARGO_TARGET_DIR/release/infaas"
MODELS="$HOME/.cache/infaas/bench-models"
if [ ! -f "$MODELS/bench-cnn.onnx" ] || [ "$ROOT/scripts/bench/make_models.py" -nt "$MODELS/bench-cnn.onnx" ]; then
  python3 "$ROOT/scripts/bench/make_models.py" "$MODELS"
fi
if [[ " $* " == *" --peer "* ]]; then
  PEER="$HOME/.cache/infaas/peers/mlserver-venv"
  if ! "$PEER/bin/python3" -c "import mlserver, onnxruntime" 2>/dev/null; then
    log "installing MLServer 1.7.1 into $PEER (about a minute)"
    python3 -m venv "$PEER" || { apt_ensure python3-venv; python3 -m venv "$PEER"; }
    "$PEER/bin/pip" install -q mlserver==1.7.1 "onnxruntime==$ORT_VERSION" numpy
  fi
fi
exec python3 "$ROOT/scripts/bench/serving.py" --binary "$BIN" --models "$MODELS" "$@"
