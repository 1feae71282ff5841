#!/usr/bin/env bash
# What a query costs on three controller replicas against one controller (see
# scripts/bench/replicas.py): starts Postgres and Garage (scripts/services.sh), builds the release
# binary and the bench models, then runs the three setups.
#   scripts/bench/replicas.sh [--rate 200] [--duration 20] [--json OUT]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "$ROOT/scripts/lib.sh"
eval "$(bash "$ROOT/scripts/setup.sh" --print-env)"
if ! python3 -c "import sklearn, skl2onnx, onnx, onnxruntime, numpy" 2>/dev/null; then
  python3 -m pip install -q scikit-learn skl2onnx onnx "onnxruntime==$ORT_VERSION" numpy
fi
bash "$ROOT/scripts/services.sh" start >/dev/null
set -a
# shellcheck disable=SC1091
. "$HOME/.cache/infaas/services.env"
set +a
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/infaas/target}"
"$ROOT/scripts/infaas" --help >/dev/null   # builds the release binary when it is out of date
MODELS="$HOME/.cache/infaas/bench-models"
if [ ! -f "$MODELS/bench-mlp.onnx" ] || [ "$ROOT/scripts/bench/make_models.py" -nt "$MODELS/bench-mlp.onnx" ]; then
  python3 "$ROOT/scripts/bench/make_models.py" "$MODELS"
fi
cd "$ROOT/scripts/bench"
exec python3 replicas.py --binary "$CARGO_TARGET_DIR/release/infaas" --models "$MODELS" \
  --database-url "$INFAAS_TEST_DATABASE_URL" --object-store "s3://infaas-test/bench-$$" \
  --s3-endpoint "$INFAAS_TEST_S3_ENDPOINT" "$@"
