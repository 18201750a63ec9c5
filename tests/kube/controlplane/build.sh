#!/usr/bin/env bash
# Builds the Kubernetes control plane chronus-py's Kueue tests run on, from the Go modules pinned
# in this directory (go.mod: Kubernetes, etcd, Kueue; kwok/go.mod: kwok; kueue-0.14/go.mod: the
# older Kueue 0.14, which serves only kueue.x-k8s.io/v1beta1; kube-1.37/go.mod: the API server,
# controller manager and scheduler of Kubernetes 1.37, into bin/kube-1.37/), into a cache
# directory outside the checkout, and copies each Kueue's CRDs/RBAC/webhooks and kwok's stages
# next to them: bin/kueue with kueue/, bin/kueue-0.14 with kueue-0.14/.
#
#   build.sh              build (or reuse) the cache; prints its directory last
#   build.sh --print-dir  print the cache directory only (nothing is built)
#
# The cache is ${CHRONUS_KUBE_CACHE:-$HOME/.cache/chronus-kube/<key>}, where <key> is the first
# 16 hex digits of the SHA-256 of go.mod, go.sum, kwok/go.mod, kwok/go.sum, kueue-0.14/go.mod,
# kueue-0.14/go.sum, kube-1.37/go.mod and kube-1.37/go.sum, concatenated in that order (chronus_py/backends/kueue/lab.py computes the same key to find it). A finished build
# writes the key into <cache>/STAMP; a cache whose STAMP matches is reused as it is.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
key="$(cat "$here/go.mod" "$here/go.sum" "$here/kwok/go.mod" "$here/kwok/go.sum" \
    "$here/kueue-0.14/go.mod" "$here/kueue-0.14/go.sum" \
    "$here/kube-1.37/go.mod" "$here/kube-1.37/go.sum" | sha256sum | cut -c1-16)"
cache="${CHRONUS_KUBE_CACHE:-${HOME}/.cache/chronus-kube/$key}"
if [ "${1:-}" = "--print-dir" ]; then
    echo "$cache"
    exit 0
fi
if [ -f "$cache/STAMP" ] && [ "$(cat "$cache/STAMP")" = "$key" ]; then
    echo "$cache"
    exit 0
fi
command -v go >/dev/null || { echo "build.sh: Go is not installed (need go >= 1.26)" >&2; exit 1; }

export GOFLAGS="-trimpath -mod=readonly"
export CGO_ENABLED=0
ldflags="-s -w"
rm -f "$cache/STAMP"
mkdir -p "$cache/bin"
start=$(date +%s)

cd "$here"
go mod download
echo "build.sh: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kueue" >&2
# kube-apiserver reports its version from these variables; without them it says v0.0.0 and
# clients that check the server version (Kueue does) refuse it.
# k8s_ldflags: the flags for the module in the current directory's Kubernetes release.
k8s_ldflags() {
    local k8s_version version_pkg client_pkg minor
    k8s_version="$(go list -m -f '{{.Version}}' k8s.io/kubernetes)"
    minor="$(echo "$k8s_version" | cut -d. -f2)"
    version_pkg="k8s.io/component-base/version"
    client_pkg="k8s.io/client-go/pkg/version"
    echo "$ldflags -X $version_pkg.gitVersion=$k8s_version -X $version_pkg.gitMajor=1" \
        "-X $version_pkg.gitMinor=$minor -X $version_pkg.gitTreeState=clean" \
        "-X $client_pkg.gitVersion=$k8s_version -X $client_pkg.gitMajor=1" \
        "-X $client_pkg.gitMinor=$minor"
}
go build -ldflags="$(k8s_ldflags)" -o "$cache/bin/" \
    k8s.io/kubernetes/cmd/kube-apiserver \
    k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler \
    k8s.io/kubernetes/cmd/kubectl
go build -ldflags="$ldflags" -o "$cache/bin/etcd" go.etcd.io/etcd/server/v3

# build_kueue NAME: Kueue's controller manager of the module in the current directory into
# bin/NAME, its CRDs, RBAC and webhooks into NAME/.
build_kueue() {
    go build -ldflags="$ldflags" -o "$cache/bin/$1" sigs.k8s.io/kueue/cmd/kueue
    local kueue_dir
    kueue_dir="$(go list -m -f '{{.Dir}}' sigs.k8s.io/kueue)"
    rm -rf "${cache:?}/$1"
    mkdir -p "$cache/$1"
    for part in crd/bases rbac webhook; do
        mkdir -p "$cache/$1/$part"
        cp "$kueue_dir/config/components/$part"/*.yaml "$cache/$1/$part/"
    done
    chmod -R u+w "$cache/$1"
}
build_kueue kueue

cd "$here/kwok"
go mod download
echo "build.sh: kwok" >&2
go build -ldflags="$ldflags" -o "$cache/bin/kwok" sigs.k8s.io/kwok/cmd/kwok
kwok_dir="$(go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)"
rm -rf "$cache/kwok"
mkdir -p "$cache/kwok"
cp -r "$kwok_dir/kustomize/stage" "$cache/kwok/stage"
chmod -R u+w "$cache/kwok"

cd "$here/kueue-0.14"
go mod download
echo "build.sh: kueue 0.14" >&2
build_kueue kueue-0.14

cd "$here/kube-1.37"
go mod download
echo "build.sh: kube-apiserver, kube-controller-manager, kube-scheduler 1.37" >&2
mkdir -p "$cache/bin/kube-1.37"
go build -ldflags="$(k8s_ldflags)" -o "$cache/bin/kube-1.37/" \
    k8s.io/kubernetes/cmd/kube-apiserver \
    k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler

echo "$key" > "$cache/STAMP"
echo "build.sh: built in $(( $(date +%s) - start )) s, $(du -sh "$cache" | cut -f1) in $cache" >&2
echo "$cache"
