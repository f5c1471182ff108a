#!/usr/bin/env bash
# Install Debian's rabbitmq-server (3.10.x) without starting the system service.
# Idempotent: returns at once when the package is already installed.
set -euo pipefail

if [[ -x /usr/lib/rabbitmq/bin/rabbitmq-server ]] && dpkg-query -W -f='${Status}' rabbitmq-server 2>/dev/null | grep -q '^install ok installed$'; then
  exit 0
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi

# Never let the package's maintainer scripts start a system-wide node (it would
# listen on 0.0.0.0:5672 and start epmd on 0.0.0.0:4369). Debian honours
# /usr/sbin/policy-rc.d (exit 101 = "do not start"); add one only for this install.
policy=/usr/sbin/policy-rc.d
added_policy=0
if [[ ! -e $policy ]]; then
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null
  $SUDO chmod 755 "$policy"
  added_policy=1
fi
cleanup() { if [[ $added_policy -eq 1 ]]; then $SUDO rm -f "$policy"; fi; }
trap cleanup EXIT

export DEBIAN_FRONTEND=noninteractive
if ! apt-cache show rabbitmq-server >/dev/null 2>&1; then
  $SUDO apt-get update -qq
fi
apt_install() { $SUDO apt-get install -y -qq --no-install-recommends rabbitmq-server >/dev/null; }
if ! apt_install; then
  # stale package lists (404 on an outdated version): refresh once and retry
  $SUDO apt-get update -qq
  apt_install
fi
test -x /usr/lib/rabbitmq/bin/rabbitmq-server
