# Shared settings of the kind tier's build scripts (sourced). Versions are the cache keys.
K8S_VERSION=${K8S_VERSION:-1.36.3}
KIND_VERSION=${KIND_VERSION:-0.33.0}
SUITE=${SUITE:-bookworm}
CACHE=${RLOP_CACHE:-$HOME/.cache/rlop}
BIN=${RLOP_BIN_DIR:-$CACHE/bin}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
export GOMODCACHE=${GOMODCACHE:-$CACHE/gomod}
KIND_SRC=$GOMODCACHE/sigs.k8s.io/kind@v$KIND_VERSION
# the operator image is tagged with the chart's appVersion (the chart's default tag)
OPERATOR_IMAGE=rlop:$(sed -n 's/^appVersion: "\(.*\)"$/\1/p' "$ROOT/charts/rlop/Chart.yaml")
# Packages of the two root filesystems: kind's node, and the base of every other image.
NODE_PKGS=systemd,dbus,conntrack,iptables,nftables,iproute2,ethtool,util-linux,mount,kmod,libseccomp2,pigz,bash,ca-certificates,curl,jq,procps,e2fsprogs,containerd,runc,containernetworking-plugins,socat,ebtables,ipset
BASE_PKGS=ca-certificates,python3,python3-venv,python-is-python3,iptables,ipset,iproute2,conntrack,nftables,kmod
key() { printf '%s' "$*" | sha256sum | cut -c1-10; }
BASE_IMAGE=rlop.local/base:$SUITE-$(key "$SUITE $BASE_PKGS")
NODE_ROOTFS_IMAGE=rlop.local/node-rootfs:$SUITE-$(key "$SUITE $NODE_PKGS")
# The Debian mirror apt already uses on this machine (no host is written into the repository).
mirror() {
  { cat /etc/apt/sources.list.d/*.sources 2>/dev/null | sed -n 's/^URIs: *\([^ ]*\).*/\1/p'
    cat /etc/apt/sources.list 2>/dev/null | sed -n 's/^deb \(\[[^]]*\] \)\{0,1\}\([^ ]*\) .*/\2/p'
  } | grep -v security | head -n1
}
have_image() { docker image inspect "$1" >/dev/null 2>&1; }
log() { printf '[kind-build %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
