#!/usr/bin/env bash
# Builds the local control plane the real-cluster tests run against: kube-apiserver and
# kube-controller-manager from k8s.io/kubernetes, and etcd from go.etcd.io/etcd/server/v3, all
# from the Go module proxy through the wrapper modules beside this script (their go.mod/go.sum
# pin every version; nothing else is downloaded). The binaries are cached outside the checkout,
# keyed by version, so a second run (or a second clone) skips the build:
#   ${GPUPORTAL_CACHE:-~/.cache/gpu-portal}/realcluster/kube-<version>-etcd-<version>/
# Prints that directory on its last line. Needs Go >= the go lines of the wrappers (1.26).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

KUBE_VERSION=v1.37.2
ETCD_VERSION=$(awk '$1 == "require" && $2 == "go.etcd.io/etcd/server/v3" { print $3 }' "$here/etcd/go.mod")
cache=${GPUPORTAL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpu-portal}
bin="$cache/realcluster/kube-$KUBE_VERSION-etcd-$ETCD_VERSION"

grep -qE "^[[:space:]]*k8s.io/kubernetes $KUBE_VERSION( |\$)" "$here/kube/go.mod" ||
  { echo "build.sh: KUBE_VERSION $KUBE_VERSION is not the version kube/go.mod requires" >&2; exit 1; }

say() { echo "realcluster build: $*" >&2; }

# The machine's own Go, never one fetched because a go.mod asks for a newer toolchain.
export GOTOOLCHAIN=local GOFLAGS=-mod=readonly

if [ -x "$bin/kube-apiserver" ] && [ -x "$bin/kube-controller-manager" ] && [ -x "$bin/etcd" ]; then
  say "cached in $bin"
  echo "$bin"
  exit 0
fi
command -v go >/dev/null || PATH=$PATH:/usr/local/go/bin
command -v go >/dev/null || { echo "build.sh: needs Go (go.dev/dl, or the machine's /usr/local/go)" >&2; exit 1; }
mkdir -p "$bin.partial"
started=$(date +%s)

minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
# Without these the servers report v0.0.0-master, and clients and version skew checks see that.
version_flags="-X k8s.io/component-base/version.gitVersion=$KUBE_VERSION"
version_flags+=" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
version_flags+=" -X k8s.io/component-base/version.gitTreeState=clean"

say "building kube-apiserver and kube-controller-manager $KUBE_VERSION (first time: 10-20 minutes on 2 cores)"
(cd "$here/kube" && go build -trimpath -ldflags "-s -w $version_flags" -o "$bin.partial/" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager)
say "building etcd $ETCD_VERSION"
(cd "$here/etcd" && go build -trimpath -ldflags "-s -w" -o "$bin.partial/etcd" .)

rm -rf "$bin"
mv "$bin.partial" "$bin"
say "built in $(($(date +%s) - started)) s into $bin"
echo "$bin"
