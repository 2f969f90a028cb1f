#!/usr/bin/env bash
# Smoke check of the portal's Kubernetes backend on your cluster (kind, k3d or real): a 2-pod
# gang created unbound, bound whole through pods/binding, Running, one pod evicted, all
# cleaned up. Uses KUBECONFIG (or ~/.kube/config) and the portal's code, no database.
#   deploy/smoke.sh [--namespace gpu-jobs | --tenant NAME] [--gpus 1] [--image registry.k8s.io/pause:3.10]
# Exit status 0 when every step passed. The test pods carry their own instance label, so the
# portal's pods and other workloads are never touched.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
[ -x "$PY" ] || PY=python3
exec "$PY" -m scheduler.adapters.cluster.smoke "$@"
