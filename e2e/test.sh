#!/usr/bin/env bash
# The project's test command: installs what the tests need (fauxqs with Node 24
# from npm, RabbitMQ 3.10 and podman from Debian, rhea and @azure/service-bus
# for the Service Bus test server), starts the real brokers on 127.0.0.1,
# and runs every test: gofmt, go vet, every fuzz target briefly, every
# benchmark once (so they keep working), then unit and e2e tests with -race.
#   FUZZTIME=3s     time per fuzz target (0 to skip fuzzing)
#   QBRIDGE_TEST_KEEP_BROKERS=1   leave the brokers running afterwards
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
FUZZTIME=${FUZZTIME:-3s}

# A private state dir per run, so a developer's own brokers are left alone.
if [[ -z ${QBRIDGE_BROKERS_DIR:-} ]]; then
  QBRIDGE_BROKERS_DIR=$(mktemp -d "${TMPDIR:-/tmp}/qbridge-test.XXXXXX")
fi
export QBRIDGE_BROKERS_DIR
stop_brokers() {
  if [[ -z ${QBRIDGE_TEST_KEEP_BROKERS:-} ]]; then
    bash e2e/brokers/down.sh || echo "test.sh: stopping the brokers failed" >&2
  fi
}
trap stop_brokers EXIT
# Each stage says how long it took (bash's SECONDS), so a slow CI run
# shows where its time went.
stage_start=$SECONDS
stage_done() { echo "== $1 done in $((SECONDS - stage_start)) s"; stage_start=$SECONDS; }

echo "== starting brokers (state in $QBRIDGE_BROKERS_DIR)"
bash e2e/brokers/up.sh >/dev/null
# The Service Bus test server and the official JS SDK (npm, pinned); the
# tests start the server themselves.
bash e2e/sbserver/install.sh >/dev/null
# podman and runc from Debian: the container image is built and run by
# e2e/container_test.go.
bash e2e/container_install.sh
set -a
# shellcheck disable=SC1091
. "$QBRIDGE_BROKERS_DIR/env"
set +a
export QBRIDGE_E2E_REQUIRED=1 # tests must not skip for lack of a broker
stage_done "brokers and installs"

echo "== gofmt, go vet"
unformatted=$(gofmt -l $(git ls-files '*.go'))
if [[ -n $unformatted ]]; then
  echo "gofmt would change: $unformatted" >&2
  exit 1
fi
go vet ./...
stage_done "gofmt, go vet"

if [[ $FUZZTIME != 0 ]]; then
  echo "== fuzz targets, $FUZZTIME each"
  for pkg in $(go list ./...); do
    dir=$(go list -f '{{.Dir}}' "$pkg")
    for target in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
      log="$QBRIDGE_BROKERS_DIR/fuzz.log"
      if ! go test -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" "$pkg" >"$log" 2>&1; then
        # A loaded machine can make the fuzzing engine itself time out
        # ("context deadline exceeded", no failing input): try that once more.
        if grep -q 'context deadline exceeded' "$log" && ! grep -q 'Failing input' "$log" &&
          go test -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" "$pkg" >"$log" 2>&1; then
          :
        else
          echo "fuzz $pkg $target failed:" >&2
          cat "$log" >&2
          exit 1
        fi
      fi
      echo "ok   fuzz $pkg $target"
    done
  done
  stage_done "fuzz targets"
fi

echo "== benchmarks, one iteration each (figures: see README, Benchmarks)"
go test -run '^$' -bench . -benchtime 1x ./... >/dev/null
stage_done "benchmarks"

# Last, so that go test's own summary closes the output: no "done in"
# line after it (its packages' times are in it; the stage started at the
# second given here).
echo "== go test -race (unit and e2e), from $SECONDS s into the run"
go test -race -count=1 -timeout 15m ./...
