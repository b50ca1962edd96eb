#!/usr/bin/env bash
# Build the local base images without a container registry:
#   aes-rootfs:bookworm  debootstrap minbase, imported with `docker import`
#   aes-base:latest      + python3, pytest and the small tools tasks rely on
# A task whose FROM image is absent (no registry) builds on aes-base:latest instead: see
# AES_BASE_IMAGE_FALLBACK and libs/aes_lib/sandbox/images.py.
# Cached by the content hash of this script: a rebuild happens only when it changes.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# Content only (not paths), so every checkout shares one cached image.
HASH=$(cat "$0" "$HERE/base.Dockerfile" | sha256sum | cut -c1-16)
if [ "$(docker image inspect -f '{{index .Config.Labels "aes.base.hash"}}' aes-base:latest 2>/dev/null)" = "$HASH" ]; then
  echo "base image: aes-base:latest up to date ($HASH)"; exit 0
fi
if ! docker image inspect aes-rootfs:bookworm >/dev/null 2>&1; then
  command -v debootstrap >/dev/null || { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; }
  MIRROR=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
  MIRROR=${MIRROR:-http://deb.debian.org/debian}
  ROOTFS=$(mktemp -d)
  trap 'rm -rf "$ROOTFS"' EXIT
  debootstrap --variant=minbase bookworm "$ROOTFS" "$MIRROR" >/dev/null
  rm -rf "$ROOTFS"/var/lib/apt/lists/* "$ROOTFS"/var/cache/apt/archives/*.deb
  # Containers reach the mirror over plain HTTP; keep the same one inside.
  echo "deb $MIRROR bookworm main" > "$ROOTFS/etc/apt/sources.list"
  tar -C "$ROOTFS" -c . | docker import - aes-rootfs:bookworm >/dev/null
fi
# Earlier versions tagged the base debian:bookworm(-slim), shadowing the official images: untag those.
OLD=$(docker image inspect -f '{{.Id}}' aes-base:latest 2>/dev/null || true)
for tag in debian:bookworm debian:bookworm-slim; do
  if [ -n "$OLD" ] && [ "$(docker image inspect -f '{{.Id}}' "$tag" 2>/dev/null)" = "$OLD" ]; then
    docker image rm "$tag" >/dev/null
  fi
done
docker build -q --label "aes.base.hash=$HASH" -t aes-base:latest -f "$HERE/base.Dockerfile" "$HERE" >/dev/null
echo "base image: built aes-base:latest ($HASH)"
