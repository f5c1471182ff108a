#!/usr/bin/env bash
# Install the Service Bus test server's pinned npm dependencies (rhea), the
# pinned official JS SDK (@azure/service-bus) used by the conformance suite,
# and the official SQS and Service Bus JS SDKs (@aws-sdk/client-sqs,
# @azure/service-bus) of the native-consumer e2e test (e2e/consumers), from
# the package-lock.json files, into each directory's node_modules.
# Idempotent: a stamp holding the lock files' hash skips an unchanged install.
# Runs on the machine's Node 20 (both packages support Node >= 20).
set -euo pipefail
DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
JSDIR=$(cd "$DIR/../sbconformance/js" && pwd)
CONSUMERSDIR=$(cd "$DIR/../consumers" && pwd)

install_one() {
  local dir=$1 probe=$2
  local stamp="$dir/node_modules/.qbridge-lock-sha256"
  local want
  want=$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)
  if [[ -f $stamp && $(<"$stamp") == "$want" && -f $dir/node_modules/$probe/package.json ]]; then
    return 0
  fi
  command -v npm >/dev/null || { echo "install.sh: npm is required (apt-get install npm)" >&2; exit 1; }
  echo "install.sh: npm ci in $dir" >&2
  (cd "$dir" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error) >&2
  echo "$want" >"$stamp"
}

install_one "$DIR" rhea
install_one "$JSDIR" @azure/service-bus
install_one "$CONSUMERSDIR" @aws-sdk/client-sqs
