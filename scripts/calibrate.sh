#!/usr/bin/env bash
# Calibrates the simulator against the real server on this machine: one small trace replayed
#   1. on a live release server (embedded defaults, fresh data directory, free port) by the
#      load generator (`infaas loadgen --trace`), after registering zoo/digits-mlp-l and
#      letting the platform profile it;
#   2. in the simulator, through the what-if API (`POST /v1/whatif`, policy infaas_greedy)
#      on the profiles the platform measured for that model, on a simulated cluster the size
#      of this machine (one CPU worker with its cores): once with the instances alone, once
#      with the request path (`request_overhead_ms`) measured on the idle server first, one
#      query at a time (`infaas loadgen --rate 0`);
# and prints p50, p99 and SLO attainment of each with their relative difference.
#
# Usage: scripts/calibrate.sh [--rate N] [--duration S] [--slo MS] [--json FILE]
#   --rate N       Poisson arrivals per second (default 200)
#   --duration S   seconds of trace (default 20)
#   --slo MS       latency SLO of every query (default 20)
#   --json FILE    also write both results and the differences as JSON
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

rate=200
duration=20
slo=20
json_out=""
while (($# > 0)); do
  case "$1" in
    --rate) rate="$2"; shift ;;
    --duration) duration="$2"; shift ;;
    --slo) slo="$2"; shift ;;
    --json) json_out="$2"; shift ;;
    -h | --help)
      awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"
      exit 0
      ;;
    *) die "unknown argument: $1 (try --help)" ;;
  esac
  shift
done

eval "$(bash "$INFAAS_ROOT/scripts/setup.sh" --print-env)"
export ORT_DYLIB_PATH
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$INFAAS_CACHE/target}"
locked=()
[[ -f "$INFAAS_ROOT/Cargo.lock" ]] && locked=(--locked)
cargo build --release -q "${locked[@]}" --manifest-path "$INFAAS_ROOT/Cargo.toml" -p infaas --bin infaas ||
  die "building infaas failed"
bin="$CARGO_TARGET_DIR/release/infaas"

work="$(mktemp -d)"
port=18387
while port_open "$port"; do port=$((port + 1)); done
export INFAAS_DATA_DIR="$work/data" INFAAS_LISTEN="127.0.0.1:$port" INFAAS_GRPC_LISTEN="127.0.0.1:0"
server_log="$work/server.log"
"$bin" serve >"$server_log" 2>&1 &
server=$!
cleanup() {
  kill "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
  rm -rf -- "$work"
}
trap cleanup EXIT
for _ in $(seq 1 120); do
  port_open "$port" && break
  kill -0 "$server" 2>/dev/null || {
    show_log_tail "$server_log"
    die "the server exited"
  }
  sleep 0.5
done
port_open "$port" || die "the server did not listen on $port"

key="$("$bin" admin create-tenant calibrate --rps 1000000)"
python3 "$INFAAS_ROOT/scripts/calibrate.py" \
  --bin "$bin" --url "http://127.0.0.1:$port" --key "$key" --zoo "$INFAAS_ROOT/zoo" \
  --rate "$rate" --duration "$duration" --slo "$slo" --work "$work" ${json_out:+--json "$json_out"}
