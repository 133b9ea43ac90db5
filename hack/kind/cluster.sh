#!/usr/bin/env bash
# The kind cluster of rlop's e2e tier and demo, from images built on this machine (hack/kind/images.sh).
#   hack/kind/cluster.sh up     dockerd (started if installed and not running), images, cluster from
#                               kind-config.yaml, rlop's images loaded, fake GPUs; prints the kubeconfig path
#   hack/kind/cluster.sh down   delete the cluster
#   hack/kind/cluster.sh docker dockerd only (started if installed and not running)
# The kubeconfig is written to $RLOP_KIND_KUBECONFIG (default .rlop/kind/kubeconfig); the user's is untouched.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
NAME=${RLOP_KIND_NAME:-rlop}
KUBECONFIG=${RLOP_KIND_KUBECONFIG:-$ROOT/.rlop/kind/kubeconfig}
export KUBECONFIG PATH=$BIN:$PATH

ensure_docker() {
  docker info >/dev/null 2>&1 && return
  command -v dockerd >/dev/null || { echo "no Docker engine: install docker.io (Debian) or Docker" >&2; exit 1; }
  log "starting dockerd"
  mkdir -p "$CACHE"
  nohup dockerd >"$CACHE/dockerd.log" 2>&1 &
  for _ in $(seq 60); do docker info >/dev/null 2>&1 && return; sleep 0.5; done
  tail -n 20 "$CACHE/dockerd.log" >&2; exit 1
}

# kind starts nodes with --privileged; where this dockerd cannot grant it, go through hack/kind/bin/docker.
privileged_or_wrap() {
  docker run --rm --privileged "$BASE_IMAGE" true >/dev/null 2>&1 && return
  log "dockerd cannot run --privileged containers here: kind goes through hack/kind/bin/docker"
  export PATH=$ROOT/hack/kind/bin:$PATH
}

up() {
  ensure_docker
  local node_image
  node_image=$(bash "$ROOT/hack/kind/images.sh")
  privileged_or_wrap
  local config_key stamp=$CACHE/kind-$NAME.config
  config_key=$(sha256sum "$ROOT/kind-config.yaml" | cut -c1-16)
  if kind get clusters 2>/dev/null | grep -qx "$NAME"; then
    if [ "$(docker inspect -f '{{.Config.Image}} {{.State.Running}}' "$NAME-control-plane" 2>/dev/null)" \
         != "$node_image true" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$config_key" ]; then
      log "cluster $NAME is stopped, runs another node image or another kind-config.yaml: recreating"
      kind delete cluster --name "$NAME"
    fi
  fi
  if ! kind get clusters 2>/dev/null | grep -qx "$NAME"; then
    mkdir -p "$(dirname "$KUBECONFIG")"
    # the GPU workers' shared checkpoint directory (kind-config.yaml): writable by the pods' non-root user
    rm -rf /tmp/rlop-kind-weights && mkdir -p /tmp/rlop-kind-weights && chmod 1777 /tmp/rlop-kind-weights
    log "kind create cluster $NAME ($node_image)"
    kind create cluster --name "$NAME" --config "$ROOT/kind-config.yaml" --image "$node_image" \
      --kubeconfig "$KUBECONFIG" --wait 5m >&2
    echo "$config_key" >"$stamp"
  else
    kind export kubeconfig --name "$NAME" --kubeconfig "$KUBECONFIG" >&2
    # a cluster that outlived a dockerd restart comes back slowly (RBAC answers Forbidden until bootstrapped)
    for _ in $(seq 90); do kubectl get --raw /readyz >/dev/null 2>&1 && break; sleep 2; done
  fi
  # the example RLJob's trainer checkpoints (trainer.checkpoint): in the shared directory, writable by its user
  mkdir -p /tmp/rlop-kind-weights/checkpoints && chmod 1777 /tmp/rlop-kind-weights/checkpoints
  log "loading rlop's images"
  kind load docker-image --name "$NAME" "$OPERATOR_IMAGE" rlop-workload:dev "rlop.local/prometheus:v$(cat "$BIN/.prometheus.stamp")" >&2
  kubectl wait --for=condition=Ready nodes --all --timeout=180s >&2
  kubectl -n kube-system rollout status ds/kube-router --timeout=180s >&2
  kubectl -n kube-system rollout status deploy/coredns --timeout=180s >&2
  bash "$ROOT/hack/kind-fake-gpus.sh" >&2
  echo "$KUBECONFIG"
}

down() { kind delete cluster --name "$NAME" >&2; }
case ${1:-} in
  up | down) "$1" ;;
  docker) ensure_docker ;;
  *) echo "usage: cluster.sh up|down|docker" >&2; exit 2 ;;
esac
