#!/usr/bin/env bash
# The whole test suite, as CI runs it. Installs what is missing (ONNX Runtime,
# Debian and Python test dependencies, Garage), starts the services, then runs
# formatting, lint, doc tests and tests. Exits non-zero if any step fails.
#
# Usage: scripts/test.sh [--fast] [--] [RUNNER ARGS...]
#   --fast          skip clippy
#   RUNNER ARGS     passed to `cargo nextest run` (or `cargo test` without
#                   nextest), e.g. scripts/test.sh -- store::  (doc tests are
#                   skipped when runner args are given)
#
# Environment: INFAAS_CACHE (default ~/.cache/infaas), CARGO_TARGET_DIR
# (default $INFAAS_CACHE/target). The services' settings are in
# $INFAAS_CACHE/services.env once this has run.
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

fast=""
runner_args=()
while (($# > 0)); do
  case "$1" in
    --fast) fast=1 ;;
    --)
      shift
      runner_args+=("$@")
      break
      ;;
    -h | --help)
      awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"
      exit 0
      ;;
    *) runner_args+=("$1") ;;
  esac
  shift
done

T0=$SECONDS
section() { printf '\n==> [%5ss] %s\n' "$((SECONDS - T0))" "$*"; }

cd "$INFAAS_ROOT"

# ------------------------------------------------------------ preparation --
# Any failure here stops the run at once (set -e).

section "setup: toolchain, ONNX Runtime"
eval "$(bash "$INFAAS_ROOT/scripts/setup.sh" --print-env)"
export ORT_DYLIB_PATH
echo "ORT_DYLIB_PATH=$ORT_DYLIB_PATH"

section "test dependencies: Debian and Python packages"
# Building garage (first time only, ~11 min of CPU) overlaps with the apt and
# pip downloads below; services.sh waits for it.
garage_install_pid=""
if [[ ! -x "$GARAGE_BIN" ]]; then
  bash "$INFAAS_ROOT/scripts/services.sh" install &
  garage_install_pid=$!
fi
# postgresql: test database; cmake + libclang-dev: the optional HiGHS MILP solver's
# build (the CBC solver of the default build comes from setup.sh, BUILD_DEBS);
# chromium + chromium-driver: browser tests; python3-venv: the SDK generator's and the
# API fuzzer's venvs (scripts/gen-clients.sh, scripts/fuzz-api.sh).
apt_ensure postgresql cmake libclang-dev chromium chromium-driver python3-venv nginx-light iproute2
# httpx and attrs: what the generated Python SDK client (openapi/clients/python) needs.
PY_DEPS=(scikit-learn skl2onnx onnx "onnxruntime==$ORT_VERSION" numpy "tritonclient[http]" "tritonclient[grpc]"
  "httpx>=0.23.1,<0.29" "attrs>=22.2.0")
py_check="import sklearn, skl2onnx, onnx, onnxruntime, tritonclient.http, tritonclient.grpc, httpx, attrs
assert onnxruntime.__version__ == '$ORT_VERSION', onnxruntime.__version__"
if ! python3 -c "$py_check" >/dev/null 2>&1; then
  mkdir -p "$INFAAS_LOGS"
  log "installing Python test packages: ${PY_DEPS[*]} (log: $INFAAS_LOGS/pip-test-deps.log)"
  if ! python3 -m pip install -q "${PY_DEPS[@]}" >"$INFAAS_LOGS/pip-test-deps.log" 2>&1; then
    show_log_tail "$INFAAS_LOGS/pip-test-deps.log"
    die "pip install of the Python test packages failed"
  fi
  python3 -c "$py_check" || die "Python test packages installed but do not import"
fi
# Node.js for the TypeScript SDK client (its packages are installed by gen-clients.sh).
command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || apt_ensure nodejs npm
echo "Debian and Python test packages present"

section "services: PostgreSQL, Garage"
if [[ -n "$garage_install_pid" ]]; then
  kill -0 "$garage_install_pid" 2>/dev/null && echo "waiting for the garage build to finish..."
  wait "$garage_install_pid" || log "background garage install failed; services.sh retries it"
fi
bash "$INFAAS_ROOT/scripts/services.sh" start
set -a
# shellcheck source=/dev/null
source "$SERVICES_ENV"
set +a

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$INFAAS_CACHE/target}"
# The shared target dir outlives clones; keep it from filling the disk.
bash "$INFAAS_ROOT/scripts/prune-target.sh" "$CARGO_TARGET_DIR" || log "prune-target failed; continuing"
locked=()
[[ -f Cargo.lock ]] && locked=(--locked)

# ------------------------------------------------------------------ checks --
# Every check runs even if an earlier one failed; the exit code says if any did.

failed=()
step() {
  local name="$1"
  shift
  section "$name"
  echo "\$ $*"
  if ! "$@"; then
    failed+=("$name")
  fi
}

step "format: cargo fmt --check" cargo fmt --all -- --check
step "docs: links and anchors" python3 "$INFAAS_ROOT/scripts/check-links.py"
if [[ -z "$fast" ]]; then
  step "lint: cargo clippy" cargo clippy --workspace --all-targets "${locked[@]}" -- -D warnings
fi

# Installs the generator tools and the TypeScript client's packages (cached outside the
# clone) that the SDK tests use, and fails when the committed clients drift from
# openapi/openapi.json.
step "SDK clients: scripts/gen-clients.sh --check" bash "$INFAAS_ROOT/scripts/gen-clients.sh" --check

# The OpenAPI document is the contract: Schemathesis against a live release server, every
# check with a valid token, only 401s with an expired or a forged one.
step "API contract: scripts/fuzz-api.sh" bash "$INFAAS_ROOT/scripts/fuzz-api.sh"

# The optional solver keeps building and agrees with the default one (milp tests run every
# solver of the build on the same problems).
step "MILP solvers: CBC and HiGHS" cargo test -p infaas-scheduler --features highs "${locked[@]}" --lib milp::

# INT8 files answer alike on every x86-64 CPU ONNX Runtime supports: the INT8 tests again under
# qemu-user's emulation of an AVX2-only CPU without VNNI (about 2-3 minutes).
step "INT8 on an AVX2-only CPU: scripts/test-avx2.sh" bash "$INFAAS_ROOT/scripts/test-avx2.sh"

if cargo nextest --version >/dev/null 2>&1; then
  nextest_profile=()
  if [[ -n "${CI:-}" ]] && grep -qs '^\[profile\.ci\]' .config/nextest.toml; then
    nextest_profile=(--profile ci)
  fi
  # nextest does not run doc tests: run them first, so the last thing printed
  # is the summary of the main test run.
  if [[ ${#runner_args[@]} -eq 0 ]]; then
    step "doc tests: cargo test --doc" cargo test --workspace --doc "${locked[@]}"
  fi
  step "tests: cargo nextest" cargo nextest run --workspace "${locked[@]}" "${nextest_profile[@]}" \
    --no-fail-fast "${runner_args[@]}"
else
  step "tests: cargo test" cargo test --workspace "${locked[@]}" --no-fail-fast "${runner_args[@]}"
fi

# Evaluations on third-party data (the Proteus traces and profiles, never in the repository):
# run when the data is beside the repository or where INFAAS_PROTEUS_TRACES points; they fail,
# not skip, when run without it.
proteus="${INFAAS_PROTEUS_TRACES:-$INFAAS_ROOT/../shared/data/proteus/twitter}"
if [[ ${#runner_args[@]} -eq 0 ]]; then
  if [[ -d "$proteus" ]]; then
    step "evaluations on the Proteus data" cargo test -p infaas-eval "${locked[@]}" \
      --test themis_proteus --test forecast_proteus --test headroom_proteus -- --ignored
  else
    section "evaluations on the Proteus data"
    echo "not run: no Proteus traces at $proteus (third-party data, kept beside the repository; set INFAAS_PROTEUS_TRACES and INFAAS_PROTEUS_PROFILES)"
  fi
fi

if [[ ${#failed[@]} -gt 0 ]]; then
  msg="$(printf '%s; ' "${failed[@]}")"
  printf '\nFAILED: %s\n' "${msg%; }" >&2
  exit 1
fi
