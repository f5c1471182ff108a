#!/usr/bin/env bash
# Install (if missing) and start the real test brokers on 127.0.0.1:
#   fauxqs 2.4.1 (SQS emulator, Node 24 from npm) and RabbitMQ 3.10 with AMQP 1.0.
# Writes $QBRIDGE_BROKERS_DIR/env (default /tmp/qbridge-brokers/env):
#   QBRIDGE_SQS_ENDPOINT=http://127.0.0.1:PORT
#   QBRIDGE_AMQP_URL=amqp://guest:guest@127.0.0.1:PORT
#   ... (see README.md)
# Use it with:  set -a; . /tmp/qbridge-brokers/env; set +a
# Idempotent: if the brokers of this state dir are already up, only prints the env file.
# Optional fixed ports: QBRIDGE_SQS_PORT, QBRIDGE_AMQP_PORT, QBRIDGE_AMQP_DIST_PORT,
# QBRIDGE_EPMD_PORT (default: free ports). Stop with down.sh.
set -euo pipefail
BROKERS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$BROKERS_DIR/lib.sh"

STATE=${QBRIDGE_BROKERS_DIR:-/tmp/qbridge-brokers}
mkdir -p "$STATE"
STATE=$(cd "$STATE" && pwd)
ENV_FILE="$STATE/env"

exec 9>"$STATE/.lock"
flock -w 180 9 || die "another up.sh/down.sh holds $STATE/.lock"

running() {
  [[ -f $ENV_FILE ]] || return 1
  local f
  for f in "$STATE/fauxqs.pid" "$STATE/rabbitmq/server.pid"; do
    [[ -f $f ]] && pid_alive "$(<"$f")" || return 1
  done
}
if running; then
  log "brokers already up ($ENV_FILE)"
  cat "$ENV_FILE"
  exit 0
fi
# leftovers of a half-started or crashed run
"$BROKERS_DIR/fauxqs/stop.sh" "$STATE"
"$BROKERS_DIR/rabbitmq/stop.sh" "$STATE"
rm -f "$ENV_FILE"

# --- install (both in parallel; each is a no-op when already installed) ---
t0=$SECONDS
(
  flock -w 600 8 || die "install lock busy"
  "$BROKERS_DIR/fauxqs/install.sh" &
  fpid=$!
  "$BROKERS_DIR/rabbitmq/install.sh" &
  rpid=$!
  rc=0
  wait "$fpid" || { log "fauxqs install failed"; rc=1; }
  wait "$rpid" || { log "rabbitmq install failed"; rc=1; }
  exit "$rc"
) 8>"${TMPDIR:-/tmp}/qbridge-brokers-install.lock"
t_install=$((SECONDS - t0))

# --- start ---
started_ok=0
cleanup_failed_start() {
  [[ $started_ok -eq 1 ]] && return 0
  log "start failed: stopping what was started"
  "$BROKERS_DIR/fauxqs/stop.sh" "$STATE" || true
  "$BROKERS_DIR/rabbitmq/stop.sh" "$STATE" || true
}
trap cleanup_failed_start EXIT

t1=$SECONDS
amqp_port=${QBRIDGE_AMQP_PORT:-}
if [[ -z $amqp_port ]]; then amqp_port=$(free_ports 1); fi
# 9>&-: the daemons must not inherit the lock fd (they would hold the lock for life)
sqs_url=$("$BROKERS_DIR/fauxqs/start.sh" "$STATE" "${QBRIDGE_SQS_PORT:-0}" 9>&-)
amqp_url=$("$BROKERS_DIR/rabbitmq/start.sh" "$STATE" "$amqp_port" "${QBRIDGE_AMQP_DIST_PORT:-}" "${QBRIDGE_EPMD_PORT:-}" 9>&-)
t_start=$((SECONDS - t1))

# shellcheck disable=SC1091
. "$STATE/rabbitmq/env"
tmp="$ENV_FILE.tmp"
cat >"$tmp" <<ENV
# written by e2e/brokers/up.sh at $(date -u +%Y-%m-%dT%H:%M:%SZ); stop with e2e/brokers/down.sh
QBRIDGE_BROKERS_DIR=$STATE
QBRIDGE_SQS_ENDPOINT=$sqs_url
QBRIDGE_SQS_REGION=us-east-1
QBRIDGE_AMQP_URL=$amqp_url
QBRIDGE_FAUXQS_PID=$(<"$STATE/fauxqs.pid")
QBRIDGE_RABBITMQ_PID=$(<"$STATE/rabbitmq/server.pid")
QBRIDGE_RABBITMQ_NODENAME=$RABBITMQ_NODENAME
QBRIDGE_RABBITMQ_ENV=$STATE/rabbitmq/env
ENV
mv "$tmp" "$ENV_FILE"
started_ok=1
log "up in $((SECONDS - t0))s (install ${t_install}s, start ${t_start}s); env: $ENV_FILE"
cat "$ENV_FILE"
