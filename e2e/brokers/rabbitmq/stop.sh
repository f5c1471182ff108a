#!/usr/bin/env bash
# Stop the RabbitMQ node started by start.sh STATE_DIR, and its epmd if start.sh started one.
# Only the PIDs recorded under STATE_DIR/rabbitmq are signalled.
set -euo pipefail
DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BROKERS_DIR=$(dirname "$DIR")
. "$BROKERS_DIR/lib.sh"
STATE=${1:?usage: stop.sh STATE_DIR}
R="$STATE/rabbitmq"
[[ -f $R/env ]] || exit 0
# shellcheck disable=SC1091
. "$R/env"

spid=$(cat "$R/server.pid" 2>/dev/null || true)
bpid=$(cat "$R/beam.pid" 2>/dev/null || true)
if pid_alive "$spid" && pid_matches "$spid" rabbitmq-server; then
  # Graceful stop of this node only (addressed by name); --idempotent: fine if already down.
  timeout 30 /usr/lib/rabbitmq/bin/rabbitmqctl -q -n "$RABBITMQ_NODENAME" stop --idempotent >>"$R/log/cli.log" 2>&1 \
    || log "rabbitmqctl stop failed; signalling pid $spid"
  wait_gone "$spid" 10 || true
fi
stop_pidfile "$R/server.pid" rabbitmq-server 10
# the beam itself, should it have outlived its wrapper
if pid_alive "$bpid" && pid_matches "$bpid" "$RABBITMQ_NODENAME"; then
  kill -TERM "$bpid" 2>/dev/null || true
  wait_gone "$bpid" 10 || kill -KILL "$bpid" 2>/dev/null || true
fi
rm -f "$R/beam.pid"
# our private epmd (epmd.pid exists only if start.sh started it)
stop_pidfile "$R/epmd.pid" epmd 5
