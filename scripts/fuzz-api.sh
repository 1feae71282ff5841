#!/usr/bin/env bash
# Fuzzes the HTTP API against its OpenAPI document (openapi/openapi.json) with Schemathesis,
# on a live release server with embedded defaults (fresh data directory, free port):
#   1. with a valid bearer token and every check (`--checks all`): status codes, content
#      types, headers and bodies as documented, schema-valid requests accepted, invalid ones
#      refused with a 4xx, no 5xx, resources available after creation and gone after deletion;
#   2. with an expired token and with a forged one (signed with another secret): every
#      operation that requires a token answers 401 (check `only_401`,
#      scripts/fuzz_hooks.py).
# Exits non-zero when any check fails. Installs Schemathesis into a venv under the cache.
#
# Usage: scripts/fuzz-api.sh [--max-examples N] [--seed N]
#   --max-examples N   generated cases per operation and phase (default 50)
#   --seed N           Schemathesis seed (default: random; printed by Schemathesis)
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

SCHEMATHESIS_VERSION="4.32.5"
max_examples=50
seed=()
while (($# > 0)); do
  case "$1" in
    --max-examples)
      max_examples="$2"
      shift
      ;;
    --seed)
      seed=(--seed "$2")
      shift
      ;;
    -h | --help)
      awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"
      exit 0
      ;;
    *) die "unknown argument: $1 (try --help)" ;;
  esac
  shift
done

venv="$INFAAS_TOOLS/schemathesis-$SCHEMATHESIS_VERSION"
if [[ ! -x "$venv/bin/st" ]]; then
  mkdir -p "$INFAAS_LOGS" "$INFAAS_TOOLS"
  log "installing Schemathesis $SCHEMATHESIS_VERSION into $venv (log: $INFAAS_LOGS/schemathesis.log)"
  rm -rf -- "$venv"
  if ! { python3 -m venv "$venv" && "$venv/bin/pip" install -q "schemathesis==$SCHEMATHESIS_VERSION"; } \
    >"$INFAAS_LOGS/schemathesis.log" 2>&1; then
    show_log_tail "$INFAAS_LOGS/schemathesis.log"
    rm -rf -- "$venv"
    die "installing Schemathesis failed"
  fi
fi

eval "$(bash "$INFAAS_ROOT/scripts/setup.sh" --print-env)"
export ORT_DYLIB_PATH
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$INFAAS_CACHE/target}"
locked=()
[[ -f "$INFAAS_ROOT/Cargo.lock" ]] && locked=(--locked)
cargo build --release -q "${locked[@]}" --manifest-path "$INFAAS_ROOT/Cargo.toml" -p infaas --bin infaas ||
  die "building infaas failed"
bin="$CARGO_TARGET_DIR/release/infaas"

work="$(mktemp -d)"
port=18287
while port_open "$port"; do port=$((port + 1)); done
export INFAAS_DATA_DIR="$work/data" INFAAS_LISTEN="127.0.0.1:$port" INFAAS_GRPC_LISTEN="127.0.0.1:0"
# A known signing secret, so that an expired token can be made; the forged one uses another.
INFAAS_JWT_SECRET="$(rand_hex 32)"
export INFAAS_JWT_SECRET
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

# A tenant whose rate limit the fuzzer cannot reach, and its admin token.
key="$("$bin" admin create-tenant fuzz --rps 1000000 --max-models 1000)"
token="$(python3 - "$port" "$key" <<'EOF'
import json, sys, urllib.request
req = urllib.request.Request(
    f"http://127.0.0.1:{sys.argv[1]}/v1/auth/token",
    data=json.dumps({"api_key": sys.argv[2]}).encode(),
    headers={"content-type": "application/json"},
)
print(json.load(urllib.request.urlopen(req))["access_token"])
EOF
)"
# Expired (an hour ago) and forged (another secret) tokens with the same claims.
read -r expired forged < <(python3 - "$token" "$INFAAS_JWT_SECRET" <<'EOF'
import base64, hashlib, hmac, json, sys, time
def b64(b): return base64.urlsafe_b64encode(b).rstrip(b"=").decode()
def unb64(s): return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))
header, payload, _ = sys.argv[1].split(".")
claims = json.loads(unb64(payload))
def sign(claims, secret):
    body = header + "." + b64(json.dumps(claims).encode())
    mac = hmac.new(secret.encode(), body.encode(), hashlib.sha256).digest()
    return body + "." + b64(mac)
now = int(time.time())
expired = dict(claims, iat=now - 7200, exp=now - 3600)
print(sign(expired, sys.argv[2]), sign(claims, "not-the-server-secret"))
EOF
)

echo "registering zoo/digits-mlp-s as model fuzz-model of application fuzz-app"
python3 "$INFAAS_ROOT/scripts/fuzz_setup.py" "$port" "$token" "$INFAAS_ROOT/zoo" ||
  die "could not register the fuzzing fixtures"

# filter_too_much: file-area paths (segments of at most 255 characters, 512 in all) make
# Hypothesis discard many long candidates; that health check is about generation speed, not about
# the API, so it does not stop the run.
st=("$venv/bin/st" --config-file "$INFAAS_ROOT/openapi/schemathesis.toml" run "$INFAAS_ROOT/openapi/openapi.json" --url "http://127.0.0.1:$port"
  --max-examples "$max_examples" "${seed[@]}" --request-timeout 30 --workers 1 --no-color
  --suppress-health-check filter_too_much)
export SCHEMATHESIS_HOOKS=fuzz_hooks
export PYTHONPATH="$INFAAS_ROOT/scripts${PYTHONPATH:+:$PYTHONPATH}"

failed=()
# Revoking keys runs last and alone: the fuzzer may revoke the key behind its own token (after
# creating another admin key), and every later request would then answer 401.
echo "==> fuzz: valid token, every check"
"${st[@]}" -H "Authorization: Bearer $token" --checks all --exclude-operation-id revoke ||
  failed+=("valid token")
echo "==> fuzz: valid token, every check, revoking API keys"
"${st[@]}" -H "Authorization: Bearer $token" --checks all --include-operation-id revoke ||
  failed+=("valid token, revoke")
for kind in expired forged; do
  echo "==> fuzz: $kind token, every operation that requires one answers 401"
  t="${!kind}"
  INFAAS_FUZZ_BAD_TOKEN=1 "${st[@]}" -H "Authorization: Bearer $t" --checks only_401 --mode positive \
    --phases examples,coverage,fuzzing || failed+=("$kind token")
done
if grep -q 'panicked' "$server_log"; then
  grep -m5 'panicked' "$server_log" >&2
  failed+=("server panicked")
fi
if [[ ${#failed[@]} -gt 0 ]]; then
  die "API fuzzing failed: ${failed[*]}"
fi
echo "API fuzzing: passed"
