#!/usr/bin/env bash
# Regenerates the SDK clients from openapi/openapi.json:
#   openapi/clients/python                  openapi-python-client (the whole directory)
#   openapi/clients/typescript/src/schema.d.ts   openapi-typescript (types for openapi-fetch)
# Everything else under openapi/clients is written by hand (the TypeScript wrapper and
# tests, the Python test) and left alone.
#
# Usage: scripts/gen-clients.sh [--check] [--root DIR]
#   --check     generate into a temporary directory and compare with the committed
#               clients; exit 1 with a summary of the differences when they drift
#   --root DIR  work on the repository copy at DIR (default: this repository)
#
# Environment: INFAAS_GEN_OFFLINE=1 fails instead of installing missing tools.
#
# The generators are pinned and installed once outside the clone: a Python venv in
# $INFAAS_CACHE/tools/openapi-python-client-<version>, and the TypeScript package's
# node_modules (npm ci of its package-lock.json) in $INFAAS_CACHE/tools/npm/<lock hash>,
# linked as openapi/clients/typescript/node_modules. Also run by scripts/test.sh.
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

OPENAPI_PYTHON_CLIENT_VERSION="0.29.1"
# The formatter openapi-python-client runs on its output: pinned, so output is stable.
RUFF_VERSION="0.17.6"

check=""
root="$INFAAS_ROOT"
while (($# > 0)); do
  case "$1" in
    --check) check=1 ;;
    --root)
      shift
      root="$(cd -- "${1:?--root needs a directory}" && pwd -P)"
      ;;
    -h | --help)
      awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"
      exit 0
      ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
  shift
done

spec="$root/openapi/openapi.json"
clients="$root/openapi/clients"
ts_dir="$clients/typescript"
[[ -f "$spec" ]] || die "no OpenAPI document at $spec"
[[ -f "$ts_dir/package-lock.json" ]] || die "no $ts_dir/package-lock.json"
mkdir -p "$INFAAS_LOGS"

# ------------------------------------------------------------- generators --

py_venv="$INFAAS_TOOLS/openapi-python-client-$OPENAPI_PYTHON_CLIENT_VERSION"
py_gen="$py_venv/bin/openapi-python-client"
if [[ ! -x "$py_gen" ]] || ! "$py_venv/bin/ruff" --version 2>/dev/null | grep -qx "ruff $RUFF_VERSION"; then
  [[ -z "${INFAAS_GEN_OFFLINE:-}" ]] ||
    die "openapi-python-client $OPENAPI_PYTHON_CLIENT_VERSION is not installed in $py_venv: run scripts/gen-clients.sh (or scripts/test.sh)"
  log "installing openapi-python-client $OPENAPI_PYTHON_CLIENT_VERSION into $py_venv"
  rm -rf "$py_venv"
  python3 -m venv "$py_venv" >"$INFAAS_LOGS/gen-clients-pip.log" 2>&1 ||
    {
      show_log_tail "$INFAAS_LOGS/gen-clients-pip.log"
      die "python3 -m venv failed (Debian: apt-get install python3-venv)"
    }
  "$py_venv/bin/pip" install -q "openapi-python-client==$OPENAPI_PYTHON_CLIENT_VERSION" \
    "ruff==$RUFF_VERSION" >>"$INFAAS_LOGS/gen-clients-pip.log" 2>&1 ||
    {
      show_log_tail "$INFAAS_LOGS/gen-clients-pip.log"
      rm -rf "$py_venv"
      die "pip install of openapi-python-client failed"
    }
fi

# node_modules of the TypeScript package, keyed by its lock file.
lock_hash="$(sha256sum "$ts_dir/package-lock.json" | cut -c1-16)"
npm_dir="$INFAAS_TOOLS/npm/infaas-client-ts-$lock_hash"
if [[ ! -f "$npm_dir/node_modules/.package-lock.json" ]]; then
  [[ -z "${INFAAS_GEN_OFFLINE:-}" ]] ||
    die "the TypeScript client's packages are not installed in $npm_dir: run scripts/gen-clients.sh (or scripts/test.sh)"
  command -v npm >/dev/null 2>&1 || die "npm not found (Node.js 20 or later is needed)"
  log "installing the TypeScript client's packages (npm ci) into $npm_dir"
  rm -rf "$npm_dir"
  mkdir -p "$npm_dir"
  cp "$ts_dir/package.json" "$ts_dir/package-lock.json" "$npm_dir/"
  (cd "$npm_dir" && npm ci --no-audit --no-fund) >"$INFAAS_LOGS/gen-clients-npm.log" 2>&1 ||
    {
      show_log_tail "$INFAAS_LOGS/gen-clients-npm.log"
      rm -rf "$npm_dir"
      die "npm ci of the TypeScript client's packages failed"
    }
fi
# The package's own node_modules is a link to the cached one (ignored by git).
if [[ "$(readlink "$ts_dir/node_modules" 2>/dev/null)" != "$npm_dir/node_modules" ]]; then
  rm -rf "$ts_dir/node_modules"
  ln -s "$npm_dir/node_modules" "$ts_dir/node_modules"
fi

# -------------------------------------------------------------- generate --

# generate OUT: writes OUT/python (the package) and OUT/schema.d.ts.
generate() {
  local out="$1" work
  work="$(mktemp -d)"
  # openapi-python-client runs ruff from PATH on what it writes.
  (cd "$work" && PATH="$py_venv/bin:$PATH" RUFF_NO_CACHE=true "$py_gen" generate --path "$spec" \
    --config "$clients/python-config.yaml" --meta setup --output-path "$out/python" \
    --overwrite) >"$INFAAS_LOGS/gen-clients-python.log" 2>&1 ||
    {
      show_log_tail "$INFAAS_LOGS/gen-clients-python.log"
      rm -rf "$work"
      die "openapi-python-client failed on $spec"
    }
  rm -rf "$work"
  # It exits 0 on warnings (an operation or schema it skipped): those are errors here.
  if grep -q "Warning(s) encountered" "$INFAAS_LOGS/gen-clients-python.log"; then
    cat "$INFAAS_LOGS/gen-clients-python.log" >&2
    die "openapi-python-client skipped parts of $spec (see above)"
  fi
  # openapi-python-client $OPENAPI_PYTHON_CLIENT_VERSION annotates a request body that has
  # several content types (POST /v1/jobs: JSON or multipart) with `Unset` without importing
  # it: add the import, then sort and format as its own post-hooks do.
  local f patched=""
  while IFS= read -r f; do
    if ! grep -qE '^from \.\.\.types import .*\bUnset\b' "$f"; then
      sed -i 's/^import httpx$/import httpx\n\nfrom ...types import Unset/' "$f"
      patched=1
    fi
  done < <(grep -rlE '\| Unset = UNSET' "$out/python/infaas_client/api")
  if [[ -n "$patched" ]]; then
    (cd "$out/python" && export RUFF_NO_CACHE=true && "$py_venv/bin/ruff" check . --fix-only -q && "$py_venv/bin/ruff" format -q .) ||
      die "ruff failed on the generated Python client"
  fi
  "$npm_dir/node_modules/.bin/openapi-typescript" "$spec" -o "$out/schema.d.ts" \
    >"$INFAAS_LOGS/gen-clients-typescript.log" 2>&1 ||
    {
      show_log_tail "$INFAAS_LOGS/gen-clients-typescript.log"
      die "openapi-typescript failed on $spec"
    }
}

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
generate "$tmp"

if [[ -z "$check" ]]; then
  rm -rf "$clients/python"
  cp -a "$tmp/python" "$clients/python"
  mkdir -p "$ts_dir/src"
  cp "$tmp/schema.d.ts" "$ts_dir/src/schema.d.ts"
  echo "regenerated $clients/python and $ts_dir/src/schema.d.ts from $spec"
  exit 0
fi

drift=0
if ! diff -r -q -x __pycache__ "$clients/python" "$tmp/python" >"$tmp/python.diff" 2>&1; then
  drift=1
  log "openapi/clients/python differs from what openapi/openapi.json generates:"
  sed "s#$tmp/python#(generated)#g; s#$clients/#openapi/clients/#g" "$tmp/python.diff" >&2
fi
if ! diff -u "$ts_dir/src/schema.d.ts" "$tmp/schema.d.ts" >"$tmp/ts.diff" 2>&1; then
  drift=1
  log "openapi/clients/typescript/src/schema.d.ts differs from what openapi/openapi.json generates:"
  head -n 40 "$tmp/ts.diff" >&2
fi
if ((drift)); then
  die "the committed SDK clients are out of date: run scripts/gen-clients.sh and commit the result"
fi
echo "SDK clients are current with openapi/openapi.json"
