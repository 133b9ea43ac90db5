#!/usr/bin/env bash
# Build the local control plane binaries from Go modules into a version-keyed cache outside the repo.
#   kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, and for kind's node image kubelet,
#   kubeadm, kube-proxy (k8s.io/kubernetes), etcd, kwok and helm: one wrapper module (hack/control-plane/)
#   and for the kind tier: kind, crictl, coredns, kube-router (plain `go install` of their modules)
# Re-running is cheap: each component is skipped when its stamp matches.
set -euo pipefail
K8S_VERSION=${K8S_VERSION:-1.36.3}
ETCD_VERSION=${ETCD_VERSION:-3.6.16}
KWOK_VERSION=${KWOK_VERSION:-0.8.0}
HELM_VERSION=${HELM_VERSION:-4.2.4}   # the 4.2 line builds on k8s.io v0.36, as the control plane does
KIND_VERSION=${KIND_VERSION:-0.33.0}
CRICTL_VERSION=${CRICTL_VERSION:-1.36.0}
COREDNS_VERSION=${COREDNS_VERSION:-1.14.2}
KUBE_ROUTER_VERSION=${KUBE_ROUTER_VERSION:-2.1.0}
PROMETHEUS_VERSION=${PROMETHEUS_VERSION:-2.53.2}   # the kind image's (Debian's package lacks Kubernetes SD)
KEDA_VERSION=${KEDA_VERSION:-2.21.0}   # bench/peers.py only (2.21.1 needs Go 1.27)
K8S_CMDS="kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kubeadm kube-proxy"
CACHE=${RLOP_CACHE:-$HOME/.cache/rlop}
BIN=$CACHE/bin
ROOT=$(cd "$(dirname "$0")/.." && pwd)
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod
export GOMODCACHE=${GOMODCACHE:-$CACHE/gomod} GOCACHE=${GOCACHE:-$CACHE/gobuild}
mkdir -p "$BIN"

stamp_ok() { [ -f "$BIN/.$1.stamp" ] && [ "$(cat "$BIN/.$1.stamp")" = "$2" ]; }

# go_install NAME VERSION PACKAGE [LDFLAGS]: a binary from a module the Go proxy serves, stamped by version
go_install() {
  stamp_ok "$1" "$2" && return
  GOBIN=$BIN go install -trimpath -ldflags="-s -w ${4:-}" "$3@v$2"
  echo "$2" > "$BIN/.$1.stamp"
}
# The control plane, etcd, kwok and helm in one wrapper module: one module graph, so the k8s.io libraries,
# grpc and the rest they share compile once (helm and kwok are pinned to releases on the same k8s.io minor).
build_control_plane() {
  local key="k8s $K8S_VERSION etcd $ETCD_VERSION kwok $KWOK_VERSION helm $HELM_VERSION"
  stamp_ok control-plane "$key" && return
  local work=$CACHE/build/control-plane minor staging ldf
  minor=$(echo "$K8S_VERSION" | cut -d. -f2); staging=v0.${K8S_VERSION#1.}
  mkdir -p "$work"; cp "$ROOT/hack/control-plane/go.mod" "$ROOT/hack/control-plane/go.sum" "$work/" 2>/dev/null || true
  cd "$work"
  if ! grep -q "^// $key\$" go.mod 2>/dev/null; then
    rm -f go.mod go.sum; go mod init local.test/rlop-control-plane
    go mod edit -go=1.26.0 -require=k8s.io/kubernetes@v$K8S_VERSION
    local upstream
    upstream=$(go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" | python3 -c 'import json,sys;print(json.load(sys.stdin)["GoMod"])')
    for m in $(sed -n 's#^[[:space:]]*\(k8s\.io/[^[:space:]]*\) => \./staging/.*#\1#p' "$upstream"); do
      go mod edit -replace="$m=$m@$staging"
    done
    for c in $K8S_CMDS; do go mod edit -tool=k8s.io/kubernetes/cmd/$c; done
    go mod edit -require=go.etcd.io/etcd/server/v3@v$ETCD_VERSION -tool=go.etcd.io/etcd/server/v3 \
      -require=sigs.k8s.io/kwok@v$KWOK_VERSION -tool=sigs.k8s.io/kwok/cmd/kwok \
      -require=helm.sh/helm/v4@v$HELM_VERSION -tool=helm.sh/helm/v4/cmd/helm
    go mod tidy
    { echo "// $key"; cat go.mod; } > go.mod.new && mv go.mod.new go.mod
    mkdir -p "$ROOT/hack/control-plane"; cp go.mod go.sum "$ROOT/hack/control-plane/"
  fi
  ldf="-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=v$ETCD_VERSION"
  ldf+=" -X helm.sh/helm/v4/internal/version.version=v$HELM_VERSION"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldf+=" -X $p.gitVersion=v$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  # shellcheck disable=SC2046
  go build -trimpath -tags=selinux,notest,grpcnotrace -ldflags="$ldf" -o "$BIN/" \
    $(printf 'k8s.io/kubernetes/cmd/%s ' $K8S_CMDS) go.etcd.io/etcd/server/v3 sigs.k8s.io/kwok/cmd/kwok helm.sh/helm/v4/cmd/helm
  mv "$BIN/server" "$BIN/etcd"
  "$BIN/kube-apiserver" --version; "$BIN/etcd" --version | sed -n 1p; "$BIN/helm" version --short
  # kwok ships no built-in stages in standalone mode: keep the "fast" stage set beside the binary.
  local src=$GOMODCACHE/sigs.k8s.io/kwok@v$KWOK_VERSION/kustomize/stage
  { for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
             pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
      cat "$src/$f"; echo "---"; done; } > "$BIN/kwok-stages.yaml"
  echo "$key" > "$BIN/.control-plane.stamp"
}

build_prometheus() {
  stamp_ok prometheus "$PROMETHEUS_VERSION" && return
  local work=$CACHE/build/prometheus mod=github.com/prometheus/prometheus@v0.${PROMETHEUS_VERSION#2.}
  rm -rf "$work"; mkdir -p "$work"; cd "$work"
  go mod init local.test/prometheus-bin
  # its go.mod replaces klog: a wrapper module must carry the same replaces
  go mod edit -go=1.26.0 -require="$mod" -tool=github.com/prometheus/prometheus/cmd/prometheus \
    -replace=k8s.io/klog=github.com/simonpasquier/klog-gokit@v0.3.0 \
    -replace=k8s.io/klog/v2=github.com/simonpasquier/klog-gokit/v3@v3.3.0
  go mod tidy
  go build -trimpath -ldflags="-s -w -X github.com/prometheus/common/version.Version=$PROMETHEUS_VERSION" \
    -o "$BIN/prometheus" github.com/prometheus/prometheus/cmd/prometheus
  echo "$PROMETHEUS_VERSION" > "$BIN/.prometheus.stamp"
}

# KEDA's operator and metrics adapter, for bench/peers.py (`build-binaries.sh keda`): its go.mod has a replace
# (so no `go install pkg@version`) and its k8s.io and etcd client versions differ from the control plane's:
# a wrapper module of its own, with KEDA's replace and exclude
build_keda() {
  stamp_ok keda "$KEDA_VERSION" && return
  local work=$CACHE/build/keda mod=github.com/kedacore/keda/v2
  rm -rf "$work"; mkdir -p "$work"; cd "$work"
  go mod init local.test/rlop-keda
  go mod edit -go=1.26.0 -require="$mod@v$KEDA_VERSION" -tool=$mod/cmd/operator -tool=$mod/cmd/adapter \
    -replace=github.com/nexus-rpc/nexus-proto-annotations@v0.1.0=github.com/nexus-rpc/nexus-proto-annotations@v0.1.1-0.20260629224316-835bd8d49cb4 \
    -exclude=github.com/go-chi/chi/v5@v5.2.3
  go mod tidy
  go build -trimpath -ldflags="-s -w -X $mod/version.Version=$KEDA_VERSION -X $mod/version.GitCommit=v$KEDA_VERSION" \
    -o "$work/bin/" $mod/cmd/operator $mod/cmd/adapter
  mv "$work/bin/operator" "$BIN/keda"; mv "$work/bin/adapter" "$BIN/keda-adapter"
  cp -r "$GOMODCACHE/$mod@v$KEDA_VERSION/config/crd/bases" "$BIN/keda-crds"; chmod -R u+w "$BIN/keda-crds"
  echo "$KEDA_VERSION" > "$BIN/.keda.stamp"
}

build_kind() { go_install kind "$KIND_VERSION" sigs.k8s.io/kind; }
build_crictl() {
  go_install crictl "$CRICTL_VERSION" sigs.k8s.io/cri-tools/cmd/crictl \
    "-X sigs.k8s.io/cri-tools/pkg/version.Version=v$CRICTL_VERSION"
}
build_coredns() { go_install coredns "$COREDNS_VERSION" github.com/coredns/coredns; }
build_kuberouter() {
  go_install kube-router "$KUBE_ROUTER_VERSION" github.com/cloudnativelabs/kube-router/v2/cmd/kube-router \
    "-X github.com/cloudnativelabs/kube-router/v2/pkg/version.Version=v$KUBE_ROUTER_VERSION"
}

for c in ${*:-control_plane}; do
  case $c in etcd | k8s | kwok | helm) c=control_plane ;; esac  # built together
  "build_$c"
done
echo "binaries in $BIN"
