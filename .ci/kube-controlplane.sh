#!/usr/bin/env bash
# CI: builds (or reuses) the Kubernetes control plane the kueue backend's tests run on: etcd,
# kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, Kueue, Kueue 0.14 (the older
# API, v1beta1 only; CHRONUS_TEST_KUEUE=0.14 runs the tests on it), the API server, controller
# manager and scheduler of Kubernetes 1.37 (CHRONUS_TEST_KUBE=1.37) and kwok, from the Go
# modules pinned in tests/kube/controlplane, into a cache outside the checkout
# (~/.cache/chronus-kube/<key of the pins>). Idempotent: a built cache is reused as it is.
# Needs Go (>= 1.26) and the Go module proxy; the first build takes a while on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v go >/dev/null 2>&1; then
    echo "kube-controlplane.sh: Go is not installed; the Kubernetes tests need it" >&2
    exit 1
fi
nice -n 10 bash tests/kube/controlplane/build.sh
