#!/usr/bin/env bash
# What the `infaas` binary needs to build and run, and nothing more:
#   - a Rust toolchain (cargo) — checked, not installed;
#   - the Debian packages its build links against (BUILD_DEBS below);
#   - the ONNX Runtime shared library, installed once into the cache from the
#     onnxruntime wheel on PyPI.
# Idempotent and quiet when everything is already there. `.ci/run` runs this
# alone on the CI machine before anything else installs, then builds and starts
# the binary, so a missing step here fails CI.
#
# Usage: scripts/setup.sh [--print-env]
#   --print-env   print `export ORT_DYLIB_PATH=...` on stdout, e.g.
#                 eval "$(scripts/setup.sh --print-env)"
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

print_env=""
for arg in "$@"; do
  case "$arg" in
    --print-env) print_env=1 ;;
    -h | --help)
      awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"
      exit 0
      ;;
    *) die "unknown argument: $arg (try --help)" ;;
  esac
done

command -v cargo >/dev/null 2>&1 ||
  die "cargo not found: install the Rust toolchain (rustup) first"

install_ort() {
  command -v python3 >/dev/null 2>&1 || die "python3 not found (needed to fetch onnxruntime from PyPI)"
  # Debian's python3 comes without pip unless python3-pip is installed.
  python3 -m pip --version >/dev/null 2>&1 || apt_ensure python3-pip
  mkdir -p "$INFAAS_LOGS" "$(dirname -- "$ORT_DIR")"
  local logf="$INFAAS_LOGS/ort-install.log" tmp
  log "installing ONNX Runtime $ORT_VERSION into $ORT_DIR (log: $logf)"
  tmp="$(mktemp -d "$ORT_DIR.tmp.XXXXXX")"
  if ! python3 -m pip install -q --no-deps --target "$tmp" "onnxruntime==$ORT_VERSION" >"$logf" 2>&1; then
    rm -rf -- "$tmp"
    show_log_tail "$logf"
    die "pip install onnxruntime==$ORT_VERSION failed"
  fi
  [[ -f "$tmp/onnxruntime/capi/libonnxruntime.so.$ORT_VERSION" ]] || {
    rm -rf -- "$tmp"
    die "onnxruntime wheel has no libonnxruntime.so.$ORT_VERSION"
  }
  rm -rf -- "$ORT_DIR"
  mv -- "$tmp" "$ORT_DIR"
}

# BUILD_DEBS: Debian packages the `infaas` binary links against (see lib.sh).
apt_ensure "${BUILD_DEBS[@]}"
[[ -f "$ORT_LIB" ]] || install_ort

if [[ -n "$print_env" ]]; then
  printf 'export ORT_DYLIB_PATH=%q\n' "$ORT_LIB"
fi
