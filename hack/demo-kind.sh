#!/usr/bin/env bash
# The demo on a real kind cluster (used by `rlop demo` when Docker and kind are available):
# cluster, images, chart with its bundled Prometheus, the example RLJob running the reference workload.
# Not exercised in this repository's CI (no Docker engine there): see README, "Where it was run".
set -euo pipefail
cd "$(dirname "$0")/.."
JOB=${1:-examples/rljob.yaml}
BIN=${RLOP_BIN_DIR:-$HOME/.cache/rlop/bin}
export PATH=$BIN:$PATH
kind get clusters | grep -qx rlop || kind create cluster --config kind-config.yaml
docker build -f operator/Dockerfile -t rlop:0.1.0 .
docker build -t rlop-workload:dev examples/workload
kind load docker-image --name rlop rlop:0.1.0 rlop-workload:dev
hack/kind-fake-gpus.sh
helm upgrade --install rlop charts/rlop -n rlop-system --create-namespace \
  --set prometheus.enabled=true --set interval=2 --wait
kubectl apply -f "$JOB"
name=$(kubectl create --dry-run=client -o jsonpath='{.metadata.name}' -f "$JOB")
ns=default
svc=$(kubectl get svc -n "$ns" "$name-controller" -o jsonpath='{.metadata.name}')
echo "Driving load through the controller ($svc): burst, verifier-heavy, idle"
kubectl port-forward -n "$ns" "svc/$svc" 18000:8000 >/dev/null 2>&1 &
pf=$!
trap 'kill $pf 2>/dev/null || true' EXIT
load() { curl -sf -XPOST localhost:18000/load -d "{\"prompts_per_s\": $1, \"checks_per_prompt\": $2}" >/dev/null || true; }
sleep 20
for phase in "12 1 60" "6 4 60" "0 1 90"; do
  set -- $phase
  load "$1" "$2"
  end=$((SECONDS + $3))
  while [ $SECONDS -lt $end ]; do
    clear; echo "load: $1 prompts/s, $2 checks each"; .venv/bin/kubectl-rlop top -n "$ns" || true; sleep 2
  done
done
