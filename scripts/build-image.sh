#!/usr/bin/env bash
# Build the operator image kubemill-operator:<version> and write it to dist/ as an OCI archive
# (dist/kubemill-operator-<version>.oci.tar); print its size and the build time.
#
# Where docker or podman can build (a daemon, a registry with the Python base image), the
# Containerfile is used. Otherwise -- no registry, as on the CI machine -- the same image is
# built offline:
#   1. a minimal Debian bookworm rootfs with python3 from Debian's packages (mmdebstrap),
#      imported as the base image (podman import; kept, and reused by later builds);
#   2. the wheels of this tree and of its [kubernetes] extra, made here with pip;
#   3. `buildah run --isolation chroot`: a venv in /opt/kubemill, the wheels installed from
#      the local directory only, pip removed;
#   4. user 65532, entry point `kubemill`, command `operator --all-namespaces`.
#
# Usage: scripts/build-image.sh [--builder auto|docker|podman|offline] [--rebuild-base]
# Environment: KUBEMILL_IMAGE_BUILDER (as --builder), PYTHON (the Python that makes the
# wheels: .venv/bin/python when present, else python3; same minor version as the image's).
# The offline path needs the apt packages buildah, podman and mmdebstrap, and root.
set -euo pipefail
cd "$(dirname "$0")/.."

builder=${KUBEMILL_IMAGE_BUILDER:-auto}
rebuild_base=no
while [ $# -gt 0 ]; do
    case "$1" in
        --builder) builder=${2:?--builder needs a value}; shift 2 ;;
        --builder=*) builder=${1#*=}; shift ;;
        --rebuild-base) rebuild_base=yes; shift ;;
        -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "build-image.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done

python=${PYTHON:-}
if [ -z "$python" ]; then
    if [ -x .venv/bin/python ]; then python=.venv/bin/python; else python=python3; fi
fi
version=$("$python" -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')
image="localhost/kubemill-operator:${version}"
archive="dist/kubemill-operator-${version}.oci.tar"
python_image="docker.io/library/python:3.11-slim-bookworm"
# The offline base: bump the suffix whenever the mmdebstrap command below changes.
base_image="localhost/kubemill-python-base:bookworm-2"
started=$(date +%s)
mkdir -p dist

# Run in the image after the install, by both builds (the Containerfile has the same lines):
# - a passwd entry for uid 65532 ("nonroot", home /tmp): kopf asks getpass.getuser(), which
#   fails for a uid without one;
# - no pip or setuptools at run time;
# - kubernetes>=35 ships an asyncio copy of its whole client (kubernetes/aio, ~70 MB) that
#   neither kubemill nor kopf imports;
# - the generated REST client (kubernetes/client, ~57 MB) kept as bytecode only, with its
#   docstrings (a traceback there shows file and line, not the source text).
slim='
grep -q "^nonroot:" /etc/passwd || echo "nonroot:x:65532:65532:nonroot:/tmp:/usr/sbin/nologin" >>/etc/passwd
grep -q "^nonroot:" /etc/group || echo "nonroot:x:65532:" >>/etc/group
/opt/kubemill/bin/pip uninstall --yes --quiet pip setuptools
site=$(/opt/kubemill/bin/python -c "import sysconfig; print(sysconfig.get_paths()[\"purelib\"])")
rm -rf "$site/kubernetes/aio"
/opt/kubemill/bin/python -m compileall -q -b -j 0 "$site/kubernetes/client"
find "$site/kubernetes/client" -name "*.py" -delete
find "$site/kubernetes/client" -name __pycache__ -prune -exec rm -rf {} +
'

say() { echo "build-image: $*" >&2; }
die() { say "error: $*"; exit 1; }

docker_works() { command -v docker >/dev/null && docker info >/dev/null 2>&1; }
podman_works() {
    # Containers must run (they do not where crun cannot set rlimits) and the base must come.
    command -v podman >/dev/null || return 1
    podman image exists "$python_image" || timeout 120 podman pull -q "$python_image" >/dev/null 2>&1 || return 1
    podman run --rm "$python_image" true >/dev/null 2>&1
}

if [ "$builder" = auto ]; then
    if docker_works; then builder=docker
    elif podman_works; then builder=podman
    else builder=offline
    fi
    say "builder: $builder"
fi

case "$builder" in
docker)
    docker build -f Containerfile --build-arg "VERSION=$version" -t "$image" .
    docker save -o "$archive" "$image"  # OCI layout since docker 25
    size=$(docker image inspect --format '{{.Size}}' "$image")
    ;;
podman)
    podman build -f Containerfile --build-arg "VERSION=$version" -t "$image" .
    rm -f "$archive"
    podman save --format oci-archive -o "$archive" "$image"
    size=$(podman image inspect --format '{{.Size}}' "$image")
    ;;
offline)
    for tool in buildah podman mmdebstrap; do
        command -v "$tool" >/dev/null || die "$tool is missing: apt-get install buildah podman mmdebstrap"
    done
    "$python" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' \
        || die "$python is not Python 3.11 (Debian bookworm's): its wheels would not fit the image; set PYTHON"
    work=$(mktemp -d)
    container=""
    cleanup() {
        if [ -n "$container" ]; then buildah rm "$container" >/dev/null 2>&1 || true; fi
        rm -rf "$work"
    }
    trap cleanup EXIT

    if [ "$rebuild_base" = yes ] || ! podman image exists "$base_image"; then
        say "base image $base_image: Debian bookworm + python3 (mmdebstrap)"
        # essential, not minbase: no apt; merged /usr without the usrmerge package (which
        # would bring all of perl); no documentation, manuals or translations.
        mmdebstrap --quiet --logfile="$work/mmdebstrap.log" --variant=essential --include=python3,python3-venv \
            --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
            --dpkgopt='path-exclude=/usr/share/doc/*' \
            --dpkgopt='path-include=/usr/share/doc/*/copyright' \
            --dpkgopt='path-exclude=/usr/share/man/*' \
            --dpkgopt='path-exclude=/usr/share/info/*' \
            --dpkgopt='path-exclude=/usr/share/locale/*' \
            bookworm "$work/rootfs.tar" >"$work/mmdebstrap.out" 2>&1 \
            || { cat "$work/mmdebstrap.out" >&2; die "mmdebstrap failed (is deb.debian.org reachable?)"; }
        old_base=$(podman image inspect --format '{{.Id}}' "$base_image" 2>/dev/null || true)
        podman import --quiet "$work/rootfs.tar" "$base_image" >/dev/null
        if [ -n "$old_base" ]; then podman rmi "$old_base" >/dev/null 2>&1 || true; fi
        rm -f "$work/rootfs.tar"
    else
        say "base image $base_image: reused (--rebuild-base makes it again)"
    fi

    say "wheels of this tree and its [kubernetes] extra"
    "$python" -m pip wheel --quiet --disable-pip-version-check --wheel-dir "$work/wheels" \
        ".[kubernetes]" >"$work/pip.out" 2>&1 || { cat "$work/pip.out" >&2; die "pip wheel failed"; }

    say "installing into the image (buildah run --isolation chroot)"
    container=$(buildah from --pull-never --quiet "$base_image")
    run() { buildah run --isolation chroot "$container" -- "$@"; }
    buildah copy --quiet "$container" "$work/wheels" /tmp/wheels >/dev/null
    run python3 -m venv /opt/kubemill
    run /opt/kubemill/bin/pip install --quiet --disable-pip-version-check --no-cache-dir \
        --no-index --find-links /tmp/wheels "kubemill[kubernetes]==$version"
    run /bin/sh -euc "$slim"
    # ensurepip's wheels are not needed once the venv exists; glibc's iconv modules are
    # not used by Python.
    run rm -rf /tmp/wheels /usr/share/python-wheels /usr/lib/x86_64-linux-gnu/gconv \
        /usr/lib/python3.11/lib2to3 /usr/lib/python3.11/pydoc_data \
        /var/cache/debconf /var/log/dpkg.log /var/log/apt
    buildah config \
        --user 65532:65532 --workingdir /tmp \
        --env PATH=/opt/kubemill/bin:/usr/local/bin:/usr/bin:/bin \
        --env PYTHONDONTWRITEBYTECODE=1 --env PYTHONUNBUFFERED=1 --env HOME=/tmp \
        --entrypoint '["kubemill"]' --cmd '["operator", "--all-namespaces"]' \
        --label org.opencontainers.image.title=kubemill-operator \
        --label "org.opencontainers.image.version=$version" \
        "$container"
    previous=$(podman image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)
    # One layer: what the steps above removed from the base is then not in the image.
    buildah commit --quiet --squash --rm "$container" "$image" >/dev/null
    # The image this one replaces, now untagged, would pile up build after build.
    if [ -n "$previous" ] && [ "$previous" != "$(podman image inspect --format '{{.Id}}' "$image")" ]; then
        podman rmi "$previous" >/dev/null 2>&1 || true
    fi
    container=""
    rm -f "$archive"
    buildah push --quiet "$image" "oci-archive:$archive:kubemill-operator:$version"
    size=$(podman image inspect --format '{{.Size}}' "$image")
    ;;
*)
    die "unknown builder $builder: auto, docker, podman or offline"
    ;;
esac

seconds=$(( $(date +%s) - started ))
megabytes=$(( size / 1000000 ))
goal=200
verdict="within the goal of $goal MB"
[ "$megabytes" -lt "$goal" ] || verdict="OVER the goal of $goal MB"
echo "image $image: $megabytes MB ($verdict); archive $archive: $(( $(stat -c %s "$archive") / 1000000 )) MB; built in ${seconds}s ($builder)"
