#!/usr/bin/env bash
# Install (if missing) and start the real test brokers on 127.0.0.1:
#   fauxqs 2.4.1 (SQS emulator, Node 24 from npm) and two RabbitMQ 3.10 nodes
#   with AMQP 1.0: the one every test shares, and one kept for the tests that
#   restart their broker (so that no other test sees a restart).
# Writes $QBRIDGE_BROKERS_DIR/env (default /tmp/qbridge-brokers/env):
#   QBRIDGE_SQS_ENDPOINT=http://127.0.0.1:PORT
#   QBRIDGE_AMQP_URL=amqp://guest:guest@127.0.0.1:PORT
#   QBRIDGE_AMQP_RESTART_URL=amqp://guest:guest@127.0.0.1:PORT2
#   ... (see README.md)
# Use it with:  set -a; . /tmp/qbridge-brokers/env; set +a
# Idempotent: if the brokers of this state dir are already up, only prints the env file.
# Optional fixed ports: QBRIDGE_SQS_PORT, QBRIDGE_AMQP_PORT, QBRIDGE_AMQP_DIST_PORT,
# QBRIDGE_EPMD_PORT (default: free ports; they are the shared node's, the
# restart node always takes free ports). Stop with down.sh.
set -euo pipefail
BROKERS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$BROKERS_DIR/lib.sh"

STATE=${QBRIDGE_BROKERS_DIR:-/tmp/qbridge-brokers}
mkdir -p "$STATE"
STATE=$(cd "$STATE" && pwd)
ENV_FILE="$STATE/env"
# start.sh STATE_DIR keeps a node under STATE_DIR/rabbitmq: the restart node
# gets a state dir of its own.
RESTART_STATE="$STATE/rabbitmq-restart"

exec 9>"$STATE/.lock"
flock -w 180 9 || die "another up.sh/down.sh holds $STATE/.lock"

running() {
  [[ -f $ENV_FILE ]] || return 1
  local f
  for f in "$STATE/fauxqs.pid" "$STATE/rabbitmq/server.pid" "$RESTART_STATE/rabbitmq/server.pid"; do
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
"$BROKERS_DIR/rabbitmq/stop.sh" "$RESTART_STATE"
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
  wait || true # a node still starting in the background (start.sh has its own deadline)
  "$BROKERS_DIR/fauxqs/stop.sh" "$STATE" || true
  "$BROKERS_DIR/rabbitmq/stop.sh" "$STATE" || true
  "$BROKERS_DIR/rabbitmq/stop.sh" "$RESTART_STATE" || true
}
trap cleanup_failed_start EXIT

t1=$SECONDS
# Every port left to choose comes from one free_ports call, so that the two
# nodes, started at the same time, cannot pick the same one (their AMQP,
# distribution and epmd ports: 6 at most). A fixed port is never handed out
# again.
fixed=" ${QBRIDGE_AMQP_PORT:-} ${QBRIDGE_AMQP_DIST_PORT:-} ${QBRIDGE_EPMD_PORT:-} "
ports=()
for p in $(free_ports 9); do
  [[ $fixed == *" $p "* ]] || ports+=("$p")
done
((${#ports[@]} >= 6)) || die "free_ports: not enough free ports"
amqp_port=${QBRIDGE_AMQP_PORT:-${ports[0]}}
dist_port=${QBRIDGE_AMQP_DIST_PORT:-${ports[1]}}
epmd_port=${QBRIDGE_EPMD_PORT:-${ports[2]}}
# The nodes boot side by side (each has its own dirs, cookie, epmd and
# ports): RabbitMQ's boot is what up.sh waits for. Their URLs go to files.
# 9>&-: the daemons must not inherit the lock fd (they would hold the lock for life)
"$BROKERS_DIR/rabbitmq/start.sh" "$STATE" "$amqp_port" "$dist_port" "$epmd_port" >"$STATE/.amqp_url" 9>&- &
main_pid=$!
"$BROKERS_DIR/rabbitmq/start.sh" "$RESTART_STATE" "${ports[3]}" "${ports[4]}" "${ports[5]}" >"$STATE/.amqp_restart_url" 9>&- &
restart_pid=$!
sqs_url=$("$BROKERS_DIR/fauxqs/start.sh" "$STATE" "${QBRIDGE_SQS_PORT:-0}" 9>&-)
wait "$main_pid" || die "the RabbitMQ node did not start (see $STATE/rabbitmq/log)"
wait "$restart_pid" || die "the RabbitMQ restart node did not start (see $RESTART_STATE/rabbitmq/log)"
amqp_url=$(<"$STATE/.amqp_url")
amqp_restart_url=$(<"$STATE/.amqp_restart_url")
rm -f "$STATE/.amqp_url" "$STATE/.amqp_restart_url"
t_start=$((SECONDS - t1))

# shellcheck disable=SC1091
restart_node=$(. "$RESTART_STATE/rabbitmq/env" && echo "$RABBITMQ_NODENAME")
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
QBRIDGE_AMQP_RESTART_URL=$amqp_restart_url
QBRIDGE_RABBITMQ_RESTART_PID=$(<"$RESTART_STATE/rabbitmq/server.pid")
QBRIDGE_RABBITMQ_RESTART_NODENAME=$restart_node
QBRIDGE_RABBITMQ_RESTART_ENV=$RESTART_STATE/rabbitmq/env
ENV
mv "$tmp" "$ENV_FILE"
started_ok=1
log "up in $((SECONDS - t0))s (install ${t_install}s, start ${t_start}s); env: $ENV_FILE"
cat "$ENV_FILE"
