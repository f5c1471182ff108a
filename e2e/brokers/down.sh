#!/usr/bin/env bash
# Stop the brokers started by up.sh for $QBRIDGE_BROKERS_DIR (default /tmp/qbridge-brokers):
# fauxqs and both RabbitMQ nodes.
# Only the PIDs recorded in that state dir are signalled. Logs are kept.
set -euo pipefail
BROKERS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$BROKERS_DIR/lib.sh"

STATE=${QBRIDGE_BROKERS_DIR:-/tmp/qbridge-brokers}
[[ -d $STATE ]] || exit 0
STATE=$(cd "$STATE" && pwd)
exec 9>"$STATE/.lock"
flock -w 180 9 || die "another up.sh/down.sh holds $STATE/.lock"

rc=0
# The restart node (up.sh keeps it under rabbitmq-restart) stops alongside
# the shared one: each stop waits for its node's graceful shutdown.
"$BROKERS_DIR/rabbitmq/stop.sh" "$STATE/rabbitmq-restart" 9>&- &
restart_pid=$!
"$BROKERS_DIR/fauxqs/stop.sh" "$STATE" || rc=1
"$BROKERS_DIR/rabbitmq/stop.sh" "$STATE" || rc=1
wait "$restart_pid" || rc=1
rm -f "$STATE/env"
exit "$rc"
