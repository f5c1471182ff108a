#!/usr/bin/env bash
# Install Debian's podman and runc for the container image test
# (e2e/container_test.go). Idempotent: returns at once when both are there.
# The test itself supplies podman's configuration (cgroupfs, no default
# ulimits) and runs it with --runtime /usr/sbin/runc, so nothing system-wide
# is configured here.
set -euo pipefail

if command -v podman >/dev/null && [[ -x /usr/sbin/runc ]]; then
  exit 0
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi

export DEBIAN_FRONTEND=noninteractive
if ! apt-cache show podman >/dev/null 2>&1; then
  $SUDO apt-get update -qq
fi
apt_install() { $SUDO apt-get install -y -qq --no-install-recommends podman runc >/dev/null; }
if ! apt_install; then
  # stale package lists (404 on an outdated version): refresh once and retry
  $SUDO apt-get update -qq
  apt_install
fi
command -v podman >/dev/null && test -x /usr/sbin/runc
