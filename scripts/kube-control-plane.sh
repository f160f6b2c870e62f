#!/usr/bin/env bash
# A real Kubernetes control plane for kubemill's tests, built from Go modules (tools/kube).
#
#   scripts/kube-control-plane.sh build      build etcd, kube-apiserver, kube-controller-manager,
#                                            kube-scheduler and kubectl once per machine into a
#                                            cache keyed by tools/kube's go.mod and go.sum; prints
#                                            the directory holding them
#   scripts/kube-control-plane.sh up DIR     build (or reuse), then start etcd, the API server
#                                            (127.0.0.1, certificates made for the run, RBAC), the
#                                            controller manager and the scheduler, register a Node
#                                            for this machine, write DIR/admin.kubeconfig, and
#                                            return once /readyz says ok
#   scripts/kube-control-plane.sh down DIR   stop every process `up DIR` started, by PID
#
# The cache is $KUBEMILL_KUBE_CACHE, else ${XDG_CACHE_HOME:-~/.cache}/kubemill/kube. The
# Python side (tests/support/control_plane.py) is the same code the tests' fixture runs.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
module="$root/tools/kube"

kube_version() { sed -n 's/^\tk8s.io\/kubernetes \(v[0-9.]*\)$/\1/p' "$module/go.mod"; }

build() {
    command -v go >/dev/null || { echo "kube-control-plane: needs Go (1.26 or later) on PATH" >&2; exit 1; }
    local version key cache ldflags major minor date
    version=$(kube_version)
    # What the binaries are made of: the pinned modules, our mains, the toolchain.
    key=$( { cat "$module/go.mod" "$module/go.sum" "$module"/cmd/*/main.go; go version; } | sha256sum | cut -c1-16)
    cache="${KUBEMILL_KUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubemill/kube}/$version-$key"
    if [[ -x "$cache/bin/kube-apiserver" && -x "$cache/bin/etcd" && -x "$cache/bin/kubectl" \
          && -x "$cache/bin/kube-controller-manager" && -x "$cache/bin/kube-scheduler" ]]; then
        echo "$cache/bin"
        return
    fi
    major=${version#v}; major=${major%%.*}
    minor=${version#v"$major".}; minor=${minor%%.*}
    # The release's own commit time, as its .info on the module proxy gives it, so that a
    # rebuild is byte-for-byte the same and /version says when the release was cut.
    date=$(cd "$module" && go list -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' k8s.io/kubernetes)
    ldflags="-s -w"
    for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
        ldflags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
        ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.gitCommit= -X $pkg.buildDate=$date"
    done
    echo "kube-control-plane: building Kubernetes $version and etcd into $cache (first time on this machine: several minutes)" >&2
    rm -rf "$cache.tmp" && mkdir -p "$cache.tmp/bin"
    local started=$SECONDS
    (cd "$module" && GOFLAGS=-mod=mod go build -trimpath -ldflags "$ldflags" -o "$cache.tmp/bin/" ./cmd/...)
    rm -rf "$cache" && mv "$cache.tmp" "$cache"
    # Builds of other pins (or interrupted ones) are no longer wanted: ~360 MB each.
    find "$(dirname "$cache")" -mindepth 1 -maxdepth 1 ! -path "$cache" -exec rm -rf {} +
    echo "kube-control-plane: built in $((SECONDS - started)) s ($(du -sh "$cache/bin" | cut -f1))" >&2
    echo "$cache/bin"
}

case "${1:-}" in
    build)
        build
        ;;
    up)
        [[ -n "${2:-}" ]] || { echo "usage: $0 up DIR" >&2; exit 2; }
        bin=$(build)
        exec "${PYTHON:-python3}" "$root/tests/support/control_plane.py" up "$2" --bin "$bin"
        ;;
    down)
        [[ -n "${2:-}" ]] || { echo "usage: $0 down DIR" >&2; exit 2; }
        exec "${PYTHON:-python3}" "$root/tests/support/control_plane.py" down "$2"
        ;;
    *)
        echo "usage: $0 build | up DIR | down DIR" >&2
        exit 2
        ;;
esac
