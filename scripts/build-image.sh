#!/usr/bin/env bash
# Build an image of kubemill and write it to dist/ as an OCI archive
# (dist/<name>-<version>.oci.tar); print its size and the build time. Two images:
#   operator (default)  kubemill-operator:<version>: `kubemill operator`, the [kubernetes] extra
#   mars                kubemill-mars:<version>: what a MarsCluster's pods run (Mars's pins,
#                       pymars, kubemill[kubernetes]); built offline only (see below)
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
# The mars image is built the same way, on the same base plus libstdc++ (a base image of its
# own), with the Mars environment's recipe (kubemill.substrates.local.environments: its pins,
# pyarrow==11.0.0 among them for the workers' plasma store, pymars built from its sdist with
# --no-build-isolation here, the environment's check run in the image), without the
# packages' test suites; entry point `python -m kubemill.engines.mars.pod.entrypoint`, command `supervisor`,
# user 65532.
#
# Usage: scripts/build-image.sh [operator|mars] [--builder auto|docker|podman|offline]
#                               [--rebuild-base]
# Environment: KUBEMILL_IMAGE_BUILDER (as --builder), PYTHON (the Python that makes the
# wheels: .venv/bin/python when present, else python3; same minor version as the image's).
# The offline path needs the apt packages buildah, podman and mmdebstrap, and root.
set -euo pipefail
cd "$(dirname "$0")/.."

builder=${KUBEMILL_IMAGE_BUILDER:-auto}
rebuild_base=no
target=operator
while [ $# -gt 0 ]; do
    case "$1" in
        --builder) builder=${2:?--builder needs a value}; shift 2 ;;
        --builder=*) builder=${1#*=}; shift ;;
        --rebuild-base) rebuild_base=yes; shift ;;
        -h|--help) sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        operator|mars) target=$1; shift ;;
        *) echo "build-image.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done

python=${PYTHON:-}
if [ -z "$python" ]; then
    if [ -x .venv/bin/python ]; then python=.venv/bin/python; else python=python3; fi
fi
version=$("$python" -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')
name="kubemill-${target}"
image="localhost/${name}:${version}"
archive="dist/${name}-${version}.oci.tar"
python_image="docker.io/library/python:3.11-slim-bookworm"
# The offline base: bump the suffix whenever the mmdebstrap command below changes.
base_image="localhost/kubemill-python-base:bookworm-2"
base_packages=python3,python3-venv
entrypoint='["kubemill"]'; cmd='["operator", "--all-namespaces"]'
if [ "$target" = mars ]; then
    # pandas, numexpr and pymars's own extensions are C++: the same base with libstdc++
    # (a base of its own, so the operator image's stays as it is).
    base_image="localhost/kubemill-python-base:bookworm-2-cxx"
    base_packages=$base_packages,libstdc++6
    entrypoint='["python", "-m", "kubemill.engines.mars.pod.entrypoint"]'; cmd='["supervisor"]'
fi
started=$(date +%s)
mkdir -p dist

# Run in the image after the install, by both builds (the Containerfile has the same lines):
# - a passwd entry for uid 65532 ("nonroot", home /tmp): kopf asks getpass.getuser(), which
#   fails for a uid without one;
# - no pip or setuptools at run time (the packages to remove are the script's arguments: the
#   mars image keeps setuptools, as Mars imports pkg_resources to load its extensions);
# - kubernetes>=35 ships an asyncio copy of its whole client (kubernetes/aio, ~70 MB) that
#   neither kubemill nor kopf imports;
# - the generated REST client (kubernetes/client, ~57 MB) kept as bytecode only, with its
#   docstrings (a traceback there shows file and line, not the source text).
slim='
grep -q "^nonroot:" /etc/passwd || echo "nonroot:x:65532:65532:nonroot:/tmp:/usr/sbin/nologin" >>/etc/passwd
grep -q "^nonroot:" /etc/group || echo "nonroot:x:65532:" >>/etc/group
/opt/kubemill/bin/pip uninstall --yes --quiet "$@"
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

if [ "$target" = mars ] && [ "$builder" != offline ]; then
    # No Containerfile for it: pymars must be compiled, which the slim Python base cannot.
    [ "$builder" = auto ] || die "the mars image is built offline only (--builder offline)"
    builder=offline
fi
if [ "$builder" = auto ]; then
    if docker_works; then builder=docker
    elif podman_works; then builder=podman
    else builder=offline
    fi
    say "builder: $builder"
fi

case "$builder" in
docker)
    [ "$target" = operator ] || die "only the operator image has a Containerfile"
    docker build -f Containerfile --build-arg "VERSION=$version" -t "$image" .
    docker save -o "$archive" "$image"  # OCI layout since docker 25
    size=$(docker image inspect --format '{{.Size}}' "$image")
    ;;
podman)
    [ "$target" = operator ] || die "only the operator image has a Containerfile"
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
        say "base image $base_image: Debian bookworm + $base_packages (mmdebstrap)"
        # essential, not minbase: no apt; merged /usr without the usrmerge package (which
        # would bring all of perl); no documentation, manuals or translations.
        mmdebstrap --quiet --logfile="$work/mmdebstrap.log" --variant=essential --include="$base_packages" \
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

    mkdir "$work/wheels"
    # What the image's venv installs (pip's arguments), and pip constraints kept with it.
    : >"$work/wheels/constraints.txt"
    install=("kubemill[kubernetes]==$version")
    uninstall=(pip setuptools)
    if [ "$target" = mars ]; then
        # The Mars environment's own recipe, not a copy: its pins (the build-only ones are
        # used here and left out of the image), pymars, its check.
        PYTHONPATH=src "$python" - "$work" <<'RECIPE' || die "cannot read the Mars recipe from src/"
import sys
from pathlib import Path
from kubemill.substrates.local import environments as e
work = Path(sys.argv[1])
(work / "build-pins.txt").write_text("\n".join(e.MARS_PINS) + "\n")
(work / "wheels" / "constraints.txt").write_text("\n".join(e.MARS_RUNTIME_PINS) + "\n")
(work / "pymars.txt").write_text(f"pymars=={e.MARS_VERSION}\n")
(work / "check.py").write_text(e.MARS.check)
RECIPE
        say "pymars $(cat "$work/pymars.txt") built from its sdist with the Mars pins"
        "$python" -m venv "$work/build"
        pip=("$work/build/bin/python" -m pip --disable-pip-version-check)
        {
            "${pip[@]}" install --quiet -r "$work/build-pins.txt" &&
            "${pip[@]}" wheel --quiet --no-build-isolation --no-deps -c "$work/build-pins.txt" \
                --wheel-dir "$work/wheels" -r "$work/pymars.txt"
        } >"$work/pip.out" 2>&1 || { cat "$work/pip.out" >&2; die "building pymars failed"; }
        mapfile -t install < <(cat "$work/wheels/constraints.txt" "$work/pymars.txt")
        install+=("kubemill[kubernetes]==$version")
        uninstall=(pip)
    fi
    say "wheels of this tree and its [kubernetes] extra${install[1]:+, with Mars and its pins}"
    "$python" -m pip wheel --quiet --disable-pip-version-check --wheel-dir "$work/wheels" \
        --find-links "$work/wheels" -c "$work/wheels/constraints.txt" \
        ".[kubernetes]" "${install[@]:0:${#install[@]}-1}" >"$work/pip.out" 2>&1 \
        || { cat "$work/pip.out" >&2; die "pip wheel failed"; }

    say "installing into the image (buildah run --isolation chroot)"
    container=$(buildah from --pull-never --quiet "$base_image")
    run() { buildah run --isolation chroot "$container" -- "$@"; }
    buildah copy --quiet "$container" "$work/wheels" /tmp/wheels >/dev/null
    run python3 -m venv /opt/kubemill
    run /opt/kubemill/bin/pip install --quiet --disable-pip-version-check --no-cache-dir \
        --no-index --find-links /tmp/wheels -c /tmp/wheels/constraints.txt "${install[@]}"
    run /bin/sh -euc "$slim" slim "${uninstall[@]}"
    if [ "$target" = mars ]; then
        # The test suites of numpy, scipy, pandas, scikit-learn and Mars (~90 MB): no
        # running code imports them.
        run /bin/sh -euc 'site=$(/opt/kubemill/bin/python -c "import sysconfig; print(sysconfig.get_paths()[\"purelib\"])")
            find "$site" -type d -name tests -prune -exec rm -rf {} +'
    fi
    if [ -f "$work/check.py" ]; then
        say "the Mars environment's check, in the image"
        buildah copy --quiet "$container" "$work/check.py" /tmp/check.py >/dev/null
        run /opt/kubemill/bin/python -B /tmp/check.py
        run rm -f /tmp/check.py
    fi
    # ensurepip's wheels are not needed once the venv exists; glibc's iconv modules are
    # not used by Python.
    run rm -rf /tmp/wheels /usr/share/python-wheels /usr/lib/x86_64-linux-gnu/gconv \
        /usr/lib/python3.11/lib2to3 /usr/lib/python3.11/pydoc_data \
        /var/cache/debconf /var/log/dpkg.log /var/log/apt
    buildah config \
        --user 65532:65532 --workingdir /tmp \
        --env PATH=/opt/kubemill/bin:/usr/local/bin:/usr/bin:/bin \
        --env PYTHONDONTWRITEBYTECODE=1 --env PYTHONUNBUFFERED=1 --env HOME=/tmp \
        --entrypoint "$entrypoint" --cmd "$cmd" \
        --label "org.opencontainers.image.title=$name" \
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
    buildah push --quiet "$image" "oci-archive:$archive:$name:$version"
    size=$(podman image inspect --format '{{.Size}}' "$image")
    ;;
*)
    die "unknown builder $builder: auto, docker, podman or offline"
    ;;
esac

seconds=$(( $(date +%s) - started ))
megabytes=$(( size / 1000000 ))
verdict="no size goal"
if [ "$target" = operator ]; then
    goal=200
    verdict="within the goal of $goal MB"
    [ "$megabytes" -lt "$goal" ] || verdict="OVER the goal of $goal MB"
fi
echo "image $image: $megabytes MB ($verdict); archive $archive: $(( $(stat -c %s "$archive") / 1000000 )) MB; built in ${seconds}s ($builder)"
