#!/usr/bin/env bash
# A pipeline on the real server (see scripts/bench/pipeline.py): three zoo models, a
# 3-model-node pipeline with one switch, planned at a steady rate and then loaded at it;
# reports SLO attainment and the planner's predicted p99 against the measured one.
#   scripts/bench/pipeline.sh [--rate 100] [--duration 60] [--slo-ms 10] [--runs 3]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
eval "$(bash "$ROOT/scripts/setup.sh" --print-env)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/infaas/target}"
"$ROOT/scripts/infaas" --help >/dev/null   # builds the release binary when it is out of date
if ! python3 -c "import numpy" 2>/dev/null; then
  python3 -m pip install -q numpy
fi
exec python3 "$ROOT/scripts/bench/pipeline.py" --binary "$CARGO_TARGET_DIR/release/infaas" "$@"
