#!/usr/bin/env bash
# Build the sandbox image `veracity-sandbox:ci` locally, WITHOUT a container registry:
# a Debian bookworm rootfs made by debootstrap (apt mirror only), with python3, numpy, pandas
# and sympy, imported into the local Docker engine with `docker import`.
#
#   DOCKER_HOST=unix:///var/run/veracity-docker.sock deploy/sandbox/build-ci-image.sh [TAG]
#
# With ROOTFS_DIR=/some/dir the same tree is also kept there, for the bwrap backend
# (VERACITY_SANDBOX_ROOTFS=/some/dir), so both backends run the same Python and libraries.
#
# Needs root, `debootstrap` and a reachable Debian mirror (env DEBIAN_MIRROR, default
# http://deb.debian.org/debian). Users with a registry should build deploy/sandbox/Dockerfile.
set -euo pipefail
TAG="${1:-veracity-sandbox:ci}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
SUITE="${DEBIAN_SUITE:-bookworm}"
ROOTFS_DIR="${ROOTFS_DIR:-}"
if docker image inspect "$TAG" >/dev/null 2>&1 && [ -z "${FORCE:-}" ]; then
  echo "$TAG already present (FORCE=1 to rebuild)"
  if [ -n "$ROOTFS_DIR" ] && [ ! -x "$ROOTFS_DIR/usr/bin/python3" ]; then
    mkdir -p "$ROOTFS_DIR"
    cid=$(docker create "$TAG" true)
    docker export "$cid" | tar -C "$ROOTFS_DIR" -x
    chmod 0755 "$ROOTFS_DIR"
    docker rm "$cid" >/dev/null
    echo "exported $TAG to $ROOTFS_DIR"
  fi
  exit 0
fi
DIR="$(mktemp -d /tmp/veracity-rootfs.XXXXXX)"
# mktemp makes it 0700: the root of the tree must be traversable by the sandbox user (65534)
chmod 0755 "$DIR"
trap 'rm -rf "$DIR"' EXIT
start=$(date +%s)
debootstrap --variant=minbase \
  --include=python3,python3-numpy,python3-pandas,python3-sympy \
  "$SUITE" "$DIR" "$MIRROR" >"$DIR.log" 2>&1 || { tail -30 "$DIR.log" >&2; exit 1; }
rm -f "$DIR.log"
# Trim what a sandbox never needs (apt caches, docs, man pages, locales).
rm -rf "$DIR"/var/cache/apt/* "$DIR"/var/lib/apt/lists/* "$DIR"/usr/share/doc/* \
       "$DIR"/usr/share/man/* "$DIR"/usr/share/info/* "$DIR"/usr/share/locale/* \
       "$DIR"/var/log/* "$DIR"/tmp/* 2>/dev/null || true
# Pre-compile bytecode so a read-only root does not recompile on every run.
chroot "$DIR" python3 -c "import numpy, pandas, sympy" >/dev/null 2>&1 || true
tar -C "$DIR" -c . | docker import \
  --change 'ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 LANG=C.UTF-8 HOME=/tmp' \
  --change 'USER 65534:65534' --change 'WORKDIR /tmp' --change 'CMD ["python3"]' \
  --message "veracity sandbox (debootstrap $SUITE minbase + python3 numpy pandas sympy)" \
  - "$TAG" >/dev/null
if [ -n "$ROOTFS_DIR" ]; then
  rm -rf "$ROOTFS_DIR"; mkdir -p "$(dirname "$ROOTFS_DIR")"; cp -a "$DIR" "$ROOTFS_DIR"
fi
echo "built $TAG in $(( $(date +%s) - start )) s; size: $(docker image inspect -f '{{.Size}}' "$TAG") bytes"
