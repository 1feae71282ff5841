#!/usr/bin/env bash
# Serving a milliseconds-a-row model of a real architecture on this machine's cores (see
# scripts/bench/real_models.py): capacity measured in the same run, Poisson 1-row queries at 0.5x
# and 0.8x of it with an SLO of 10x the batch-1 latency, busy threads against cores, and the
# throughput at saturation.
#   scripts/bench/real_models.sh                          the residual CNN (zoo/cifar-resnet.onnx)
#   scripts/bench/real_models.sh --model text-encoder     the transformer encoder
#   scripts/bench/real_models.sh --duration 30 --json out.json
# Installs wrk (apt) and the Python packages it needs, and builds the release binary.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "$ROOT/scripts/lib.sh"
eval "$(bash "$ROOT/scripts/setup.sh" --print-env)"
if ! command -v wrk >/dev/null; then
  apt_ensure wrk
fi
if ! python3 -c "import onnxruntime, onnx, numpy" 2>/dev/null; then
  python3 -m pip install -q "onnxruntime==$ORT_VERSION" onnx numpy
fi
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/infaas/target}"
"$ROOT/scripts/infaas" --help >/dev/null # builds the release binary when it is out of date
exec python3 "$ROOT/scripts/bench/real_models.py" --binary "$CARGO_TARGET_DIR/release/infaas" "$@"
