#!/usr/bin/env bash
# Builds the qbridge image with podman (or docker) from deploy/Containerfile:
# compiles a static binary with the local Go toolchain and stages it with
# Debian's CA bundle and a nonroot user, so nothing is pulled from a registry.
#   IMAGE=qbridge            image name (tags :VERSION and :latest)
#   VERSION=$(git describe)  the version compiled in and put in the label
#   ENGINE=podman            podman or docker; extra build flags in ENGINE_FLAGS
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
IMAGE=${IMAGE:-qbridge}
VERSION=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
ENGINE=${ENGINE:-podman}
CA_BUNDLE=${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}

if [[ ! -r $CA_BUNDLE ]]; then
  echo "build-image.sh: no CA bundle at $CA_BUNDLE (apt-get install ca-certificates, or set CA_BUNDLE)" >&2
  exit 1
fi
ctx=$(mktemp -d "${TMPDIR:-/tmp}/qbridge-image.XXXXXX")
trap 'rm -rf "$ctx"' EXIT

CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=$VERSION" -o "$ctx/qbridge" ./cmd/qbridge
cp "$CA_BUNDLE" "$ctx/ca-certificates.crt"
printf 'root:x:0:0:root:/:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/var/lib/qbridge:/sbin/nologin\n' >"$ctx/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$ctx/group"
mkdir "$ctx/state"
cp deploy/Containerfile "$ctx/Containerfile"

# shellcheck disable=SC2086 # ENGINE and ENGINE_FLAGS may hold several words
$ENGINE build ${ENGINE_FLAGS:-} --build-arg "VERSION=$VERSION" -t "$IMAGE:$VERSION" -t "$IMAGE:latest" -f "$ctx/Containerfile" "$ctx"
echo "$IMAGE:$VERSION"
