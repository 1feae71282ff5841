#!/usr/bin/env bash
# The platform's autoscaling on the real server with a milliseconds-a-row model against fixed
# peak provisioning (`--autoscale false`), same queries, same machine (see
# scripts/bench/autoscale_real.py).
#   scripts/bench/autoscale_real.sh                         the residual CNN, low 0.15x, high 0.6x
#   scripts/bench/autoscale_real.sh --phases 20,40,90 --json out.json
# Installs the Python packages it needs and builds the release binary.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "$ROOT/scripts/lib.sh"
eval "$(bash "$ROOT/scripts/setup.sh" --print-env)"
if ! python3 -c "import onnxruntime, onnx, numpy" 2>/dev/null; then
  python3 -m pip install -q "onnxruntime==$ORT_VERSION" onnx numpy
fi
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/infaas/target}"
"$ROOT/scripts/infaas" --help >/dev/null # builds the release binary when it is out of date
exec python3 "$ROOT/scripts/bench/autoscale_real.py" --binary "$CARGO_TARGET_DIR/release/infaas" "$@"
