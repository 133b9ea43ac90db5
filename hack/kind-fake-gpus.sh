#!/usr/bin/env bash
# Advertise fake nvidia.com/gpu capacity on kind's GPU-labelled workers, so GPU pools can be scheduled
# (the pods run on CPU; the RL workload simulates its GPU work).
set -euo pipefail
GPUS=${GPUS:-8}
kubectl proxy --port=8011 >/dev/null 2>&1 &
proxy=$!
trap 'kill $proxy' EXIT
sleep 1
for node in $(kubectl get nodes -l rlop.dev/gpu-pool=true -o name | cut -d/ -f2); do
  curl -sf -H 'Content-Type: application/json-patch+json' -X PATCH \
    "http://127.0.0.1:8011/api/v1/nodes/$node/status" \
    -d "[{\"op\":\"add\",\"path\":\"/status/capacity/nvidia.com~1gpu\",\"value\":\"$GPUS\"}]" >/dev/null
  echo "$node: nvidia.com/gpu=$GPUS"
done
