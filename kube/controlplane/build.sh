#!/bin/sh
# Builds the control plane the kube module's tests run against into a
# cache directory outside the repository, keyed by version, and prints
# that directory. A directory already holding every binary is reused.
#
#   kube-apiserver, kube-controller-manager  k8s.io/kubernetes $KUBE_VERSION
#                                            (this module: go.mod + tools.go)
#   etcd                                     go.etcd.io/etcd/server/v3 $ETCD_VERSION
#                                            (the version probed's own go.mod requires)
#
# PROBED_KUBE_BIN overrides the directory. A cold build takes ~10 min on two
# cores (800 s of CPU, 2.8 GB of memory); a warm one (GOCACHE) ~1 min.
set -eu

KUBE_VERSION=v1.37.2
ETCD_VERSION=v3.7.3
GO=${GO:-go}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
dir=${PROBED_KUBE_BIN:-${XDG_CACHE_HOME:-$HOME/.cache}/probed/kube-$KUBE_VERSION}

complete() {
	[ -x "$dir/kube-apiserver" ] && [ -x "$dir/kube-controller-manager" ] && [ -x "$dir/etcd" ]
}
if complete; then
	echo "$dir"
	exit 0
fi
mkdir -p "$dir"
# One build at a time per directory (two test runs starting together).
exec 9>"$dir/.lock"
flock 9
if complete; then
	echo "$dir"
	exit 0
fi

tmp=$(mktemp -d "$dir/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "building kube-apiserver and kube-controller-manager $KUBE_VERSION into $dir (cold: ~10 min)" >&2
v=k8s.io/component-base/version
# Without the version, discovery (kubectl, client-go) cannot parse the
# server's "v0.0.0-master+$Format:%H$".
(cd "$here" && "$GO" build -tags tools -trimpath \
	-ldflags "-s -w -X $v.gitVersion=$KUBE_VERSION -X $v.gitMajor=1 -X $v.gitMinor=37" \
	-o "$tmp/" k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager)
echo "building etcd $ETCD_VERSION" >&2
# etcd's own go.mod has replace directives (go install fails); built from
# probed's module, which requires go.etcd.io/etcd/server/v3 $ETCD_VERSION.
(cd "$root" && "$GO" list -m go.etcd.io/etcd/server/v3 | grep -q " $ETCD_VERSION\$") || {
	echo "probed's go.mod does not require go.etcd.io/etcd/server/v3 $ETCD_VERSION" >&2
	exit 1
}
(cd "$root" && "$GO" build -trimpath -ldflags "-s -w" -o "$tmp/etcd" go.etcd.io/etcd/server/v3)
mv "$tmp/kube-apiserver" "$tmp/kube-controller-manager" "$tmp/etcd" "$dir/"
echo "$dir"
