#!/usr/bin/env bash
# Every image of the kind tier, built on this machine from the package registries alone (Debian's packages,
# Go modules, PyPI) — nothing is pulled from a container registry:
#   1. two Debian root filesystems (hack/kind/rootfs.sh);
#   2. the images kubeadm and kind expect, under their exact names (pause, etcd, kube-apiserver,
#      kube-controller-manager, kube-scheduler, kube-proxy, coredns), kube-router (the CNI) and Prometheus;
#   3. kind's node image: kind's own base files (from the kind Go module), Debian's containerd/runc/CNI
#      plugins, kubelet/kubeadm/kubectl, with the images of step 2 preloaded and pinned in its containerd;
#   4. rlop's images: the operator and the reference workload.
# Prints the node image's tag on stdout. Steps 1-3 are skipped when their input-keyed tags exist.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
HERE=$ROOT/hack/kind

bash "$ROOT/hack/build-binaries.sh" etcd k8s kind crictl coredns kuberouter prometheus >&2
bash "$HERE/rootfs.sh"

NODE_KEY=$(key "$BASE_IMAGE $NODE_ROOTFS_IMAGE $K8S_VERSION $(cat "$HERE"/lib.sh "$HERE"/images.sh \
  "$HERE"/pause.c "$HERE"/node-entrypoint "$HERE"/kube-router.yaml "$BIN"/.{control-plane,coredns,kube-router,crictl}.stamp \
  | sha256sum)")
NODE_IMAGE=rlop.local/kind-node:v$K8S_VERSION-$NODE_KEY
PROMETHEUS_IMAGE=rlop.local/prometheus:v$(cat "$BIN/.prometheus.stamp")   # named in hack/kind/values.yaml
EXTRA_CA=$(cat /usr/local/share/ca-certificates/*.crt 2>/dev/null || true)

# build ARGS...: `docker build`, quiet unless it fails
build() {
  local out
  out=$(docker build -q "$@" 2>&1) || { printf '%s\n' "$out" >&2; return 1; }
}
# image TAG... : build the Dockerfile on stdin in the context dir $ctx, FROM the base image
ctx=
image() {
  local tags=() t
  for t in "$@"; do tags+=(-t "$t"); done
  build --build-arg "BASE=$BASE_IMAGE" "${tags[@]}" -f - "$ctx"
}

component_images() {
  ctx=$CACHE/build/kind-images
  rm -rf "$ctx"; mkdir -p "$ctx"
  cp "$BIN"/{etcd,kube-apiserver,kube-controller-manager,kube-scheduler,kube-proxy,coredns,kube-router,prometheus} "$ctx/"
  gcc -Os -static -o "$ctx/pause" "$HERE/pause.c"
  local want pause etcd coredns
  want=$("$BIN/kubeadm" config images list --kubernetes-version "v$K8S_VERSION")
  pause=$(grep /pause: <<<"$want"); etcd=$(grep /etcd: <<<"$want"); coredns=$(grep /coredns: <<<"$want")
  log "component images: $(tr '\n' ' ' <<<"$want")"
  image "$pause" registry.k8s.io/pause:3.10 <<'DF'
FROM scratch
COPY pause /pause
USER 65535:65535
ENTRYPOINT ["/pause"]
DF
  for c in kube-apiserver kube-controller-manager kube-scheduler kube-proxy; do
    image "registry.k8s.io/$c:v$K8S_VERSION" <<DF
ARG BASE
FROM \${BASE}
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
COPY $c /usr/local/bin/$c
ENTRYPOINT ["/usr/local/bin/$c"]
DF
  done
  image "$etcd" <<'DF'
ARG BASE
FROM ${BASE}
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
COPY etcd /usr/local/bin/etcd
ENTRYPOINT ["/usr/local/bin/etcd"]
DF
  image "$coredns" <<'DF'
ARG BASE
FROM ${BASE}
COPY coredns /coredns
# root, as kubeadm's Deployment drops every capability but NET_BIND_SERVICE (the upstream image runs as
# 65532 with a file capability instead, which needs libcap's setcap)
ENTRYPOINT ["/coredns"]
DF
  image rlop.local/kube-router:v2.1.0 <<'DF'
ARG BASE
FROM ${BASE}
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
COPY kube-router /usr/local/bin/kube-router
ENTRYPOINT ["/usr/local/bin/kube-router"]
DF
  image "$PROMETHEUS_IMAGE" <<'DF'
ARG BASE
FROM ${BASE}
COPY prometheus /usr/local/bin/prometheus
USER 65534:65534
ENTRYPOINT ["/usr/local/bin/prometheus"]
DF
  PRELOAD=("$pause" registry.k8s.io/pause:3.10 "$etcd" "$coredns" rlop.local/kube-router:v2.1.0
    $(printf "registry.k8s.io/%s:v$K8S_VERSION " kube-apiserver kube-controller-manager kube-scheduler kube-proxy))
}

node_image() {
  have_image "$NODE_IMAGE" && return
  component_images
  ctx=$CACHE/build/kind-node
  rm -rf "$ctx"; mkdir -p "$ctx/bin"
  cp -r "$KIND_SRC/images/base/files" "$ctx/files"; chmod -R u+w "$ctx/files"
  cp "$BIN"/{kubelet,kubeadm,kubectl,crictl} "$ctx/bin/"
  cp "$HERE/node-entrypoint" "$HERE/kube-router.yaml" "$ctx/"
  log "node image base"
  build -t "$NODE_IMAGE-base" -f - "$ctx" <<DF
FROM $NODE_ROOTFS_IMAGE
COPY files/usr/local/bin/ /usr/local/bin/
COPY files/kind/ /kind/
COPY files/etc/ /etc/
COPY bin/kubelet bin/kubeadm bin/kubectl /usr/bin/
COPY bin/crictl /usr/local/bin/
COPY node-entrypoint /usr/local/bin/rlop-node-entrypoint
COPY kube-router.yaml /kind/manifests/default-cni.yaml
RUN chmod 755 /kind /kind/bin /kind/bin/* /usr/local/bin/* /usr/bin/kube* \\
 && ln -sf /usr/bin/containerd /usr/local/bin/containerd && ln -sf /usr/sbin/runc /usr/local/sbin/runc \\
 && mkdir -p /opt/cni/bin && ln -sf /usr/lib/cni/* /opt/cni/bin/ \\
 && find /lib/systemd/system/sysinit.target.wants/ -name systemd-tmpfiles-setup.service -delete \\
 && rm -f /lib/systemd/system/multi-user.target.wants/* /etc/systemd/system/*.wants/* \\
      /lib/systemd/system/local-fs.target.wants/* /lib/systemd/system/sockets.target.wants/*udev* \\
      /lib/systemd/system/sockets.target.wants/*initctl* /lib/systemd/system/basic.target.wants/* \\
 && echo "ReadKMsg=no" >> /etc/systemd/journald.conf && ln -sf /usr/lib/systemd/systemd /sbin/init \\
 && systemctl enable kubelet.service containerd.service undo-mount-hacks.service \\
 && systemctl mask systemd-binfmt.service && mkdir -p /etc/kubernetes/manifests \\
 && ctr oci spec | jq '.hooks.createContainer[.hooks.createContainer|length] |= . + {"path": "/kind/bin/mount-product-files.sh"}' \\
      | jq 'del(.process.rlimits)' > /etc/containerd/cri-base.json \\
 && sed -i 's/restrict_oom_score_adj = false/restrict_oom_score_adj = true/' /etc/containerd/config.toml \\
 && echo "v$K8S_VERSION" > /kind/version
ENV container=docker
STOPSIGNAL SIGRTMIN+3
ENTRYPOINT ["/usr/local/bin/rlop-node-entrypoint", "/sbin/init"]
DF
  log "preloading ${#PRELOAD[@]} images into the node's containerd"
  local cid
  cid=$(docker run -d --entrypoint=sleep "$NODE_IMAGE-base" infinity)
  trap 'docker rm -f "$cid" >/dev/null 2>&1 || true' RETURN
  docker exec "$cid" bash -c 'nohup containerd >/tmp/containerd.log 2>&1 &
    for i in $(seq 50); do ctr version >/dev/null 2>&1 && exit 0; sleep 0.2; done; cat /tmp/containerd.log; exit 1'
  docker save "${PRELOAD[@]}" | docker exec -i "$cid" ctr -n k8s.io images import --all-platforms --no-unpack --digests -
  for i in "${PRELOAD[@]}"; do
    [[ $i == */* && $i != *.*/* ]] && i=docker.io/$i
    docker exec "$cid" ctr -n k8s.io images label "$i" io.cri-containerd.pinned=pinned >/dev/null
  done
  docker exec "$cid" bash -c 'pkill containerd; while pgrep -r R,S,D containerd >/dev/null; do sleep 0.2; done
    rm -f /tmp/containerd.log'  # (it stays a zombie: `sleep` as PID 1 reaps nothing)
  docker commit -c 'ENTRYPOINT ["/usr/local/bin/rlop-node-entrypoint", "/sbin/init"]' -c 'CMD []' \
    "$cid" "$NODE_IMAGE" >/dev/null
  docker rm -f "$cid" >/dev/null
  docker rmi "$NODE_IMAGE-base" >/dev/null
  log "built $NODE_IMAGE"
}

project_images() {
  log "rlop images"
  build --build-arg "BASE=$BASE_IMAGE" --build-arg "EXTRA_CA=$EXTRA_CA" -t "$OPERATOR_IMAGE" \
    -f "$ROOT/operator/Dockerfile" "$ROOT"
  build --build-arg "BASE=$BASE_IMAGE" --build-arg "EXTRA_CA=$EXTRA_CA" -t rlop-workload:dev "$ROOT/examples/workload"
  have_image "$PROMETHEUS_IMAGE" || component_images
}

node_image
project_images
echo "$NODE_IMAGE"
