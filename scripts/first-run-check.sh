#!/usr/bin/env bash
# Proves the README's first command the way a newcomer runs it. `.ci/run` runs this before the
# test script installs anything, so a step that `scripts/infaas` forgets fails CI:
#   1. `scripts/infaas --help` in a bare environment (PATH, HOME and the Rust toolchain's
#      variables only): its own set-up (scripts/setup.sh), the release build, and the binary;
#   2. a link audit of that binary: every shared library it needs resolves, and comes from a
#      Debian package that every Debian system has (the Essential packages and what they
#      depend on) or that the set-up installs (BUILD_DEBS in scripts/lib.sh, and what those
#      depend on). This holds on a machine where other packages are already installed, too;
#   3. `scripts/infaas serve` on a free port with a fresh data directory answers
#      `GET /readyz` with 200 within 120 s.
#
# Usage: scripts/first-run-check.sh
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

T0=$SECONDS
step() { printf '\n--> [%4ss] first run: %s\n' "$((SECONDS - T0))" "$*"; }

# A bare environment: what a fresh login shell has, and where cargo is.
cargo_bin="$(command -v cargo || true)"
[[ -n "$cargo_bin" ]] || die "cargo not found: install the Rust toolchain (rustup) first"
bare=(env -i "HOME=$HOME" "PATH=$(dirname -- "$cargo_bin"):/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
  "TERM=dumb" "LANG=C.UTF-8")
for var in RUSTUP_HOME CARGO_HOME RUSTUP_TOOLCHAIN INFAAS_CACHE CARGO_TARGET_DIR; do
  [[ -n "${!var:-}" ]] && bare+=("$var=${!var}")
done

step "scripts/infaas --help (set-up and build, as a newcomer's shell runs it)"
help_out="$("${bare[@]}" "$INFAAS_ROOT/scripts/infaas" --help)" || die "scripts/infaas --help failed"
grep -q 'serve' <<<"$help_out" || die "scripts/infaas --help does not list the serve command"
echo "ok: scripts/infaas --help"

bin="${CARGO_TARGET_DIR:-$INFAAS_CACHE/target}/release/infaas"
[[ -x "$bin" ]] || die "the first command did not leave a binary at $bin"

step "link audit of $bin"
# Installed packages that a set of packages pulls in (Depends and Pre-Depends, recursively):
# allowed[pkg] = "base" (every Debian system: the Essential packages and their dependencies)
# or "set-up" (BUILD_DEBS and their dependencies).
declare -A allowed=()
closure() {
  local pkg="$1" why="$2" deps dep
  [[ -n "${allowed[$pkg]:-}" ]] && return 0
  allowed[$pkg]="$why"
  deps="$(dpkg-query -W -f='${Depends}, ${Pre-Depends}' "$pkg" 2>/dev/null || true)"
  # "a (>= 1), b | c, d:any" -> a b c d
  for dep in $(tr ',|' '\n\n' <<<"$deps" | sed -e 's/([^)]*)//g' -e 's/:any//' -e 's/^ *//' -e 's/ *$//'); do
    [[ -n "$dep" ]] && closure "$dep" "$why"
  done
}
while read -r pkg essential; do
  [[ "$essential" == yes ]] && closure "$pkg" base
done < <(dpkg-query -W -f='${Package} ${Essential}\n')
for pkg in "${BUILD_DEBS[@]}"; do closure "$pkg" set-up; done
# The package that owns a library path (dpkg records /lib or /usr/lib, whichever it shipped).
owner() {
  local path="$1" real candidates c
  real="$(readlink -f -- "$path")"
  candidates=("$path" "$real" "${path#/usr}" "${real#/usr}" "/usr$path" "/usr$real")
  for c in "${candidates[@]}"; do
    dpkg-query -S "$c" 2>/dev/null | head -n1 | cut -d: -f1 && return 0
  done
  return 1
}
bad=()
while read -r lib arrow path _; do
  [[ "$arrow" == "=>" ]] || continue
  if [[ "$path" == "not" ]]; then
    bad+=("$lib: not found")
    continue
  fi
  pkg="$(owner "$path")" || {
    bad+=("$lib ($path): owned by no Debian package")
    continue
  }
  if [[ -n "${allowed[$pkg]:-}" ]]; then
    printf '  %-28s %-24s %s\n' "$lib" "$pkg" "${allowed[$pkg]}"
  else
    bad+=("$lib from package $pkg, which scripts/setup.sh does not install and a Debian system need not have")
  fi
done < <(ldd "$bin")
if [[ ${#bad[@]} -gt 0 ]]; then
  printf '  %s\n' "${bad[@]}" >&2
  die "the binary needs libraries the first command does not install: add their packages to BUILD_DEBS in scripts/lib.sh"
fi
echo "ok: every shared library comes from a base package or from the set-up (BUILD_DEBS: ${BUILD_DEBS[*]})"

step "scripts/infaas serve answers /readyz"
port=18187
while port_open "$port"; do port=$((port + 1)); done
data="$(mktemp -d)"
log_file="$INFAAS_LOGS/first-run-serve.log"
mkdir -p "$INFAAS_LOGS"
setsid "${bare[@]}" INFAAS_LISTEN="127.0.0.1:$port" INFAAS_GRPC_LISTEN="127.0.0.1:0" INFAAS_DATA_DIR="$data" \
  "$INFAAS_ROOT/scripts/infaas" serve >"$log_file" 2>&1 &
pid=$!
stop_server() {
  kill -TERM -- "-$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  rm -rf -- "$data"
}
trap stop_server EXIT
status=""
for _ in $(seq 1 240); do
  if ! kill -0 "$pid" 2>/dev/null; then
    show_log_tail "$log_file"
    die "scripts/infaas serve exited before it was ready"
  fi
  if status="$( (exec 3<>"/dev/tcp/127.0.0.1/$port" &&
    printf 'GET /readyz HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3 &&
    head -n1 <&3) 2>/dev/null)" && [[ "$status" == *" 200 "* ]]; then
    break
  fi
  status=""
  sleep 0.5
done
if [[ -z "$status" ]]; then
  show_log_tail "$log_file"
  die "scripts/infaas serve did not answer GET /readyz with 200 within 120 s"
fi
echo "ok: GET /readyz -> ${status%$'\r'}"
printf '\nfirst run: passed in %ss\n' "$((SECONDS - T0))"
