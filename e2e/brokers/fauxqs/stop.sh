#!/usr/bin/env bash
# Stop the fauxqs started by start.sh STATE_DIR (by the PID in STATE_DIR/fauxqs.pid only).
set -euo pipefail
DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BROKERS_DIR=$(dirname "$DIR")
. "$BROKERS_DIR/lib.sh"
STATE=${1:?usage: stop.sh STATE_DIR}
stop_pidfile "$STATE/fauxqs.pid" "$DIR/server.mjs" 10
rm -f "$STATE/fauxqs.port"
