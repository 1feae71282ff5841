# shellcheck shell=bash disable=SC2034  # variables here are used by the scripts that source it
# Shared helpers for scripts/*.sh. Source it; do not run it.
#
# Everything that lives outside the repository goes under $INFAAS_CACHE
# (default: $HOME/.cache/infaas): tools, the ONNX Runtime library, the cargo
# target dir, service state and logs.

INFAAS_ROOT="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)"
INFAAS_CACHE="${INFAAS_CACHE:-$HOME/.cache/infaas}"
INFAAS_LOGS="$INFAAS_CACHE/logs"
export INFAAS_CACHE

# Pinned versions of the things we install.
ORT_VERSION="1.31.1"
GARAGE_VERSION="2.5.0"

# Debian packages the `infaas` binary needs to build (scripts/setup.sh installs
# them): the CBC MILP solver's library and headers, linked by infaas-scheduler.
BUILD_DEBS=(coinor-libcbc-dev)

ORT_DIR="$INFAAS_CACHE/ort/$ORT_VERSION"
ORT_LIB="$ORT_DIR/onnxruntime/capi/libonnxruntime.so.$ORT_VERSION"
INFAAS_TOOLS="$INFAAS_CACHE/tools"
GARAGE_BIN="$INFAAS_TOOLS/bin/garage"
SERVICES_ENV="$INFAAS_CACHE/services.env"

export PIP_DISABLE_PIP_VERSION_CHECK=1
export PIP_ROOT_USER_ACTION=ignore

# cargo may live in ~/.cargo/bin without being on PATH (e.g. a bare CI shell).
if ! command -v cargo >/dev/null 2>&1 && [[ -x "$HOME/.cargo/bin/cargo" ]]; then
  PATH="$HOME/.cargo/bin:$PATH"
  export PATH
fi

# runuser and friends live in sbin, which a bare PATH may lack.
case ":$PATH:" in
  *:/usr/sbin:*) ;;
  *) PATH="$PATH:/usr/sbin:/sbin" ;;
esac

log() { printf '%s\n' "$*" >&2; }
die() {
  log "error: $*"
  exit 1
}

# Print the last lines of a log file to stderr (used when a quiet step fails).
show_log_tail() {
  local file="$1" n="${2:-40}"
  if [[ -f "$file" ]]; then
    log "---- last $n lines of $file ----"
    tail -n "$n" "$file" >&2 || true
    log "----"
  fi
}

# Run a command as root (directly, or through sudo when not root).
as_root() {
  if [[ "$(id -u)" -eq 0 ]]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    die "need root (or sudo) to run: $*"
  fi
}

# Run a command as the postgres OS user, from a directory it can read.
as_postgres() {
  if [[ "$(id -u)" -eq 0 ]]; then
    (cd / && runuser -u postgres -- "$@")
  else
    (cd / && sudo -u postgres "$@")
  fi
}

deb_installed() {
  dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'
}

# apt_ensure PKG...: install the Debian packages that are missing, quietly.
# apt-get update runs only when something is missing (once per process).
# fds 8/9 (lock files of services.sh) are closed so that a daemon started by a
# package's postinst does not hold those locks.
_APT_UPDATED=""
apt_ensure() {
  local missing=() pkg
  for pkg in "$@"; do
    deb_installed "$pkg" || missing+=("$pkg")
  done
  [[ ${#missing[@]} -eq 0 ]] && return 0
  command -v apt-get >/dev/null 2>&1 || die "apt-get not found; install by hand: ${missing[*]}"
  mkdir -p "$INFAAS_LOGS"
  local logf="$INFAAS_LOGS/apt.log"
  log "installing Debian packages: ${missing[*]} (log: $logf)"
  if [[ -z "$_APT_UPDATED" ]]; then
    if ! as_root apt-get -o DPkg::Lock::Timeout=600 update >>"$logf" 2>&1 8>&- 9>&-; then
      show_log_tail "$logf"
      die "apt-get update failed"
    fi
    _APT_UPDATED=1
  fi
  if ! as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 \
    install -y -q --no-install-recommends "${missing[@]}" >>"$logf" 2>&1 8>&- 9>&-; then
    show_log_tail "$logf"
    die "apt-get install failed: ${missing[*]}"
  fi
}

# Random lowercase hex string of N bytes (2N characters), no openssl needed.
rand_hex() {
  od -An -tx1 -N"$1" /dev/urandom | tr -d ' \n'
}

# True when something accepts TCP connections on 127.0.0.1:PORT.
port_open() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}
