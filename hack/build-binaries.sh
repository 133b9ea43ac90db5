#!/usr/bin/env bash
# Build the local control plane binaries from Go modules into a version-keyed cache outside the repo.
#   kube-apiserver, kube-controller-manager, kube-scheduler, kubectl (k8s.io/kubernetes via a wrapper module)
#   etcd (go.etcd.io/etcd/server/v3 via a wrapper module), kwok (sigs.k8s.io/kwok), helm (helm.sh/helm/v4)
# Re-running is cheap: each component is skipped when its stamp matches.
set -euo pipefail
K8S_VERSION=${K8S_VERSION:-1.36.3}
ETCD_VERSION=${ETCD_VERSION:-3.6.16}
KWOK_VERSION=${KWOK_VERSION:-0.8.0}
HELM_VERSION=${HELM_VERSION:-4.3.2}
CACHE=${RLOP_CACHE:-$HOME/.cache/rlop}
BIN=$CACHE/bin
ROOT=$(cd "$(dirname "$0")/.." && pwd)
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod
export GOMODCACHE=${GOMODCACHE:-$CACHE/gomod} GOCACHE=${GOCACHE:-$CACHE/gobuild}
mkdir -p "$BIN"

stamp_ok() { [ -f "$BIN/.$1.stamp" ] && [ "$(cat "$BIN/.$1.stamp")" = "$2" ]; }

build_k8s() {
  stamp_ok k8s "$K8S_VERSION" && return
  local work=$CACHE/build/k8s minor staging ldf
  minor=$(echo "$K8S_VERSION" | cut -d. -f2); staging=v0.${K8S_VERSION#1.}
  mkdir -p "$work"; cp "$ROOT/hack/k8s/go.mod" "$ROOT/hack/k8s/go.sum" "$work/" 2>/dev/null || true
  cd "$work"
  if ! grep -q "k8s.io/kubernetes v$K8S_VERSION" go.mod 2>/dev/null; then
    rm -f go.mod go.sum; go mod init local.test/k8s-bins
    go mod edit -go=1.26.0 -require=k8s.io/kubernetes@v$K8S_VERSION
    local upstream
    upstream=$(go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" | python3 -c 'import json,sys;print(json.load(sys.stdin)["GoMod"])')
    for m in $(sed -n 's#^[[:space:]]*\(k8s\.io/[^[:space:]]*\) => \./staging/.*#\1#p' "$upstream"); do
      go mod edit -replace="$m=$m@$staging"
    done
    for c in kube-apiserver kube-controller-manager kube-scheduler kubectl; do go mod edit -tool=k8s.io/kubernetes/cmd/$c; done
    go mod tidy
  fi
  ldf="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldf+=" -X $p.gitVersion=v$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  go build -trimpath -tags=selinux,notest,grpcnotrace -ldflags="$ldf" -o "$BIN/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl
  "$BIN/kube-apiserver" --version
  echo "$K8S_VERSION" > "$BIN/.k8s.stamp"
}

build_etcd() {
  stamp_ok etcd "$ETCD_VERSION" && return
  local work=$CACHE/build/etcd
  rm -rf "$work"; mkdir -p "$work"; cd "$work"
  go mod init local.test/etcd-bin
  go mod edit -go=1.26.0 -require=go.etcd.io/etcd/server/v3@v$ETCD_VERSION -tool=go.etcd.io/etcd/server/v3
  go mod tidy
  go build -trimpath -ldflags="-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=v$ETCD_VERSION" \
    -o "$BIN/etcd" go.etcd.io/etcd/server/v3
  "$BIN/etcd" --version
  echo "$ETCD_VERSION" > "$BIN/.etcd.stamp"
}

build_kwok() {
  stamp_ok kwok "$KWOK_VERSION" && return
  GOBIN=$BIN go install -trimpath -ldflags="-s -w" "sigs.k8s.io/kwok/cmd/kwok@v$KWOK_VERSION"
  # kwok ships no built-in stages in standalone mode: keep the "fast" stage set beside the binary.
  local src=$GOMODCACHE/sigs.k8s.io/kwok@v$KWOK_VERSION/kustomize/stage
  { for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
             pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
      cat "$src/$f"; echo "---"; done; } > "$BIN/kwok-stages.yaml"
  echo "$KWOK_VERSION" > "$BIN/.kwok.stamp"
}

build_helm() {
  stamp_ok helm "$HELM_VERSION" && return
  GOBIN=$BIN go install -trimpath -ldflags="-s -w -X helm.sh/helm/v4/internal/version.version=v$HELM_VERSION" \
    "helm.sh/helm/v4/cmd/helm@v$HELM_VERSION"
  "$BIN/helm" version
  echo "$HELM_VERSION" > "$BIN/.helm.stamp"
}

for c in ${*:-etcd kwok k8s helm}; do "build_$c"; done
echo "binaries in $BIN"
