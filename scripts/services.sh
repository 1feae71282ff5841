#!/usr/bin/env bash
# Services the test suite needs: PostgreSQL and a one-node Garage S3 server.
# Installs what is missing (Debian's postgresql; garage via `cargo install`
# into the cache, ~11 min the first time), starts both idempotently and writes
# an env file for the tests.
#
# Usage: scripts/services.sh [start|stop|status|env]
#   start   (default) install if missing, start, write $INFAAS_CACHE/services.env
#   stop    stop garage (Postgres is left running)
#   status  say what is running
#   install only install garage if missing (no apt, no start)
#   env     print the env file as `export` lines: eval "$(scripts/services.sh env)"
#
# Ports (loopback only): Postgres 5432, Garage S3 3900, RPC 3901, admin 3903.
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

PG_ROLE="infaas"
PG_PASSWORD="infaas"
PG_DB="infaas"

GARAGE_STATE="$INFAAS_CACHE/garage-state"
GARAGE_CONF="$GARAGE_STATE/garage.toml"
GARAGE_PID="$GARAGE_STATE/garage.pid"
GARAGE_LOG="$GARAGE_STATE/garage.log"
GARAGE_SETUP_LOG="$GARAGE_STATE/setup.log"
GARAGE_CREDS="$GARAGE_STATE/credentials"
S3_PORT=3900
RPC_PORT=3901
ADMIN_PORT=3903
S3_REGION="us-east-1"
S3_BUCKET="infaas-test"
S3_KEY_NAME="infaas-test"

# ---------------------------------------------------------------- Postgres --

# Prints "VERSION NAME PORT STATUS" of the cluster to use (prefers "main").
pg_cluster() {
  pg_lsclusters -h 2>/dev/null | awk '
    $2 == "main" && !m { m = $1 " " $2 " " $3 " " $4 }
    !f { f = $1 " " $2 " " $3 " " $4 }
    END { if (m) print m; else if (f) print f }'
}

start_postgres() {
  apt_ensure postgresql curl
  local info ver name port status
  info="$(pg_cluster)"
  if [[ -z "$info" ]]; then
    ver="$(find /usr/lib/postgresql -mindepth 1 -maxdepth 1 -printf '%f\n' | sort -n | tail -n1)"
    [[ -n "$ver" ]] || die "postgresql is installed but /usr/lib/postgresql is empty"
    log "creating PostgreSQL $ver cluster 'main'"
    as_root pg_createcluster "$ver" main >/dev/null 8>&- 9>&-
    info="$(pg_cluster)"
  fi
  read -r ver name port status <<<"$info"
  if [[ "$status" != online* ]]; then
    as_root pg_ctlcluster "$ver" "$name" start 8>&- 9>&- ||
      die "could not start PostgreSQL $ver/$name (see /var/log/postgresql/)"
  fi
  local i
  for ((i = 0; i < 120; i++)); do
    pg_isready -q -h 127.0.0.1 -p "$port" && break
    sleep 0.25
  done
  pg_isready -q -h 127.0.0.1 -p "$port" || die "PostgreSQL $ver/$name is not accepting connections on port $port"

  PG_URL="postgres://$PG_ROLE:$PG_PASSWORD@127.0.0.1:$port/$PG_DB"
  if PGCONNECT_TIMEOUT=5 psql "$PG_URL" -qtAc 'select 1' >/dev/null 2>&1; then
    return 0 # role and database already there
  fi
  as_postgres psql -q -p "$port" -v ON_ERROR_STOP=1 -c "
    DO \$\$ BEGIN
      IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$PG_ROLE') THEN
        CREATE ROLE $PG_ROLE LOGIN PASSWORD '$PG_PASSWORD' CREATEDB;
      ELSE
        ALTER ROLE $PG_ROLE LOGIN PASSWORD '$PG_PASSWORD' CREATEDB;
      END IF;
    END \$\$;" >/dev/null || die "could not create role $PG_ROLE"
  if [[ "$(as_postgres psql -p "$port" -qtAc "SELECT 1 FROM pg_database WHERE datname = '$PG_DB'")" != 1 ]]; then
    as_postgres createdb -p "$port" -O "$PG_ROLE" "$PG_DB" || die "could not create database $PG_DB"
  fi
  PGCONNECT_TIMEOUT=5 psql "$PG_URL" -qtAc 'select 1' >/dev/null ||
    die "cannot connect to $PG_URL"
}

# ------------------------------------------------------------------ Garage --

garage() { "$GARAGE_BIN" -c "$GARAGE_CONF" "$@"; }

# Run a garage CLI command, logging its output; die with the log on failure.
garage_step() {
  if ! garage "$@" >>"$GARAGE_SETUP_LOG" 2>&1; then
    show_log_tail "$GARAGE_SETUP_LOG" 20
    show_log_tail "$GARAGE_LOG" 20
    die "garage $* failed"
  fi
}

install_garage() {
  [[ -x "$GARAGE_BIN" ]] && return 0
  command -v cargo >/dev/null 2>&1 || die "cargo not found (needed to install garage)"
  # Someone (another script run, or a person) may be installing it right now:
  # wait for that rather than building it twice.
  local waited=0
  while pgrep -f '^[^ ]*cargo install .*garage' >/dev/null 2>&1; do
    ((waited == 0)) && log "waiting for a running 'cargo install garage' to finish..."
    sleep 5
    waited=$((waited + 5))
    ((waited < 3600)) || break
  done
  [[ -x "$GARAGE_BIN" ]] && return 0

  mkdir -p "$INFAAS_CACHE/locks" "$INFAAS_LOGS" "$INFAAS_TOOLS"
  exec 8>"$INFAAS_CACHE/locks/garage-install.lock"
  flock 8
  if [[ ! -x "$GARAGE_BIN" ]]; then
    local logf="$INFAAS_LOGS/garage-install.log" t0=$SECONDS
    # A target dir of our own (not $CARGO_TARGET_DIR): an interrupted build
    # resumes next time; removed once the binary is installed.
    local tdir="$INFAAS_CACHE/build/garage-$GARAGE_VERSION"
    log "installing garage $GARAGE_VERSION with cargo (about 11 min the first time; log: $logf)"
    if ! cargo install garage --version "$GARAGE_VERSION" --locked --force \
      --root "$INFAAS_TOOLS" --target-dir "$tdir" >"$logf" 2>&1; then
      show_log_tail "$logf"
      die "cargo install garage failed"
    fi
    rm -rf -- "$tdir"
    log "garage installed in $((SECONDS - t0))s"
  fi
  flock -u 8
  exec 8>&-
}

garage_pid() {
  local pid
  [[ -f "$GARAGE_PID" ]] || return 1
  pid="$(cat -- "$GARAGE_PID")"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  # Only a live garage started with our config counts.
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$GARAGE_CONF server" || return 1
  echo "$pid"
}

load_credentials() {
  if [[ ! -s "$GARAGE_CREDS" ]]; then
    mkdir -p "$GARAGE_STATE"
    (
      umask 077
      printf 'GARAGE_KEY_ID=GK%s\nGARAGE_SECRET=%s\n' "$(rand_hex 12)" "$(rand_hex 32)" >"$GARAGE_CREDS.tmp"
    )
    mv -- "$GARAGE_CREDS.tmp" "$GARAGE_CREDS"
  fi
  # shellcheck source=/dev/null
  source "$GARAGE_CREDS"
  [[ "${GARAGE_KEY_ID:-}" =~ ^GK[0-9a-f]{24}$ && "${GARAGE_SECRET:-}" =~ ^[0-9a-f]{64}$ ]] ||
    die "bad credentials in $GARAGE_CREDS (delete it to regenerate)"
}

# A real signed S3 request: list the test bucket with the test key.
s3_probe() {
  curl -sf -m 5 -o /dev/null --aws-sigv4 "aws:amz:$S3_REGION:s3" \
    -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" \
    --user "$GARAGE_KEY_ID:$GARAGE_SECRET" \
    "http://127.0.0.1:$S3_PORT/$S3_BUCKET?list-type=2&max-keys=1"
}

stop_garage() {
  local pid i
  pid="$(garage_pid)" || {
    rm -f -- "$GARAGE_PID"
    return 1
  }
  kill "$pid" 2>/dev/null || true
  for ((i = 0; i < 100; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f -- "$GARAGE_PID"
  return 0
}

start_garage() {
  install_garage
  load_credentials

  if garage_pid >/dev/null; then
    s3_probe && return 0
    log "garage is running but does not answer; restarting it"
    stop_garage || true
  fi
  local port
  for port in "$S3_PORT" "$RPC_PORT" "$ADMIN_PORT"; do
    if port_open "$port"; then
      die "port $port is in use by a process this script did not start; stop it (garage from elsewhere?) and retry"
    fi
  done

  # A fresh, empty cluster every time it is (re)started.
  rm -rf -- "$GARAGE_STATE/meta" "$GARAGE_STATE/data"
  mkdir -p "$GARAGE_STATE/meta" "$GARAGE_STATE/data"
  (
    umask 077
    cat >"$GARAGE_CONF" <<EOF
# Written by scripts/services.sh: a throwaway one-node cluster for tests.
metadata_dir = "$GARAGE_STATE/meta"
data_dir = "$GARAGE_STATE/data"
db_engine = "sqlite"

replication_factor = 1

rpc_bind_addr = "127.0.0.1:$RPC_PORT"
rpc_public_addr = "127.0.0.1:$RPC_PORT"
rpc_secret = "$(rand_hex 32)"

[s3_api]
s3_region = "$S3_REGION"
api_bind_addr = "127.0.0.1:$S3_PORT"
root_domain = ".s3.garage.localhost"

[admin]
api_bind_addr = "127.0.0.1:$ADMIN_PORT"
admin_token = "$(rand_hex 32)"
EOF
  )
  : >"$GARAGE_SETUP_LOG"

  # setsid: the server outlives this script and the caller's process group.
  # Close fds 8/9 (our lock files) so the server does not hold the locks.
  NO_COLOR=1 setsid "$GARAGE_BIN" -c "$GARAGE_CONF" server >"$GARAGE_LOG" 2>&1 </dev/null 8>&- 9>&- &
  local pid=$! i
  echo "$pid" >"$GARAGE_PID"
  for ((i = 0; i < 300; i++)); do
    kill -0 "$pid" 2>/dev/null || {
      show_log_tail "$GARAGE_LOG"
      die "garage server exited at startup"
    }
    garage status >/dev/null 2>&1 && break
    sleep 0.2
  done
  garage_step status

  local node_id
  node_id="$(garage node id -q 2>>"$GARAGE_SETUP_LOG" | cut -d@ -f1)"
  [[ -n "$node_id" ]] || die "could not read the garage node id"
  garage_step layout assign -z dc1 -c 1G "$node_id"
  garage_step layout apply --version 1
  garage_step key import --yes -n "$S3_KEY_NAME" "$GARAGE_KEY_ID" "$GARAGE_SECRET"
  garage_step key allow --create-bucket "$S3_KEY_NAME"
  garage_step bucket create "$S3_BUCKET"
  garage_step bucket allow --read --write --owner "$S3_BUCKET" --key "$S3_KEY_NAME"

  for ((i = 0; i < 150; i++)); do
    s3_probe && return 0
    sleep 0.2
  done
  show_log_tail "$GARAGE_LOG" 20
  die "garage started but a signed S3 request to http://127.0.0.1:$S3_PORT/$S3_BUCKET fails"
}

# ----------------------------------------------------------------- main --

write_env() {
  mkdir -p "$INFAAS_CACHE"
  (
    umask 077
    cat >"$SERVICES_ENV.tmp" <<EOF
INFAAS_TEST_DATABASE_URL=$PG_URL
INFAAS_TEST_S3_URL=s3://$S3_BUCKET/ci
INFAAS_TEST_S3_ENDPOINT=http://127.0.0.1:$S3_PORT
AWS_ACCESS_KEY_ID=$GARAGE_KEY_ID
AWS_SECRET_ACCESS_KEY=$GARAGE_SECRET
AWS_REGION=$S3_REGION
EOF
  )
  mv -- "$SERVICES_ENV.tmp" "$SERVICES_ENV"
}

cmd_start() {
  mkdir -p "$GARAGE_STATE"
  # One start at a time (two test runs may start together). Daemons started
  # under this lock must not inherit fd 9 (nor fd 8, the install lock): see
  # the `8>&- 9>&-` on the commands that start them (and in lib.sh's apt_ensure).
  exec 9>"$GARAGE_STATE/start.lock"
  flock 9
  start_postgres
  start_garage
  write_env
  log "services up: postgres $PG_URL, garage s3 http://127.0.0.1:$S3_PORT (env: $SERVICES_ENV)"
}

cmd_stop() {
  if stop_garage; then
    log "garage stopped"
  else
    log "garage was not running"
  fi
  rm -rf -- "$GARAGE_STATE/meta" "$GARAGE_STATE/data"
}

cmd_status() {
  local rc=0 pid
  if pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then
    echo "postgres: up (127.0.0.1:5432)"
  else
    echo "postgres: down"
    rc=1
  fi
  if pid="$(garage_pid)"; then
    echo "garage: running (pid $pid, s3 http://127.0.0.1:$S3_PORT)"
  else
    echo "garage: not running"
    rc=1
  fi
  [[ -f "$SERVICES_ENV" ]] && echo "env file: $SERVICES_ENV"
  return "$rc"
}

cmd_env() {
  [[ -f "$SERVICES_ENV" ]] || die "no $SERVICES_ENV yet: run scripts/services.sh first"
  sed 's/^/export /' "$SERVICES_ENV"
}

case "${1:-start}" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  env) cmd_env ;;
  install) install_garage ;;
  -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}" ;;
  *) die "unknown command: $1 (try --help)" ;;
esac
