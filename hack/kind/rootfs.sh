#!/usr/bin/env bash
# Debian root filesystems as Docker images, with no registry: debootstrap, then `docker import`.
#   hack/kind/rootfs.sh            both images (skipped when the keyed tag exists)
set -euo pipefail
source "$(dirname "$0")/lib.sh"

rootfs() {  # rootfs TAG PACKAGES
  local tag=$1 pkgs=$2 dir
  have_image "$tag" && return
  dir=$CACHE/build/rootfs-${tag##*:}
  rm -rf "$dir"; mkdir -p "$dir"
  log "debootstrap $SUITE for $tag"
  debootstrap --variant=minbase --include="$pkgs" "$SUITE" "$dir" "$(mirror)" > "$dir.log" 2>&1 \
    || { tail -n 20 "$dir.log" >&2; exit 1; }
  rm -rf "$dir"/var/lib/apt/lists/* "$dir"/var/cache/apt/*.bin "$dir"/var/cache/apt/archives/*.deb
  tar -C "$dir" --numeric-owner -c . | docker import -c 'CMD ["/bin/bash"]' - "$tag" >/dev/null
  rm -rf "$dir"
  log "imported $tag"
}

rootfs "$BASE_IMAGE" "$BASE_PKGS" &
rootfs "$NODE_ROOTFS_IMAGE" "$NODE_PKGS" &
wait -n && wait -n
