"""Enters a played pod's view of the filesystem, then execs a container's command in it.

Run by :mod:`support.pod_runtime` (the node stand-in's container runtime) as
``python pod_enter.py <spec json> <argv>...``, with the container's environment already
set. The spec: ``mounts`` (``source``, ``target``, ``readOnly``: the pod's volumes where its
container mounts them), ``scratch`` (a directory of this spawn's own), ``cwd`` and
``errfd`` (a descriptor inherited from the stand-in).

With mounts, the process gets a mount namespace of its own (as root; the stand-in runs
these tests as root), so ``/etc/mpi`` or ``/var/run/secrets/kubernetes.io/serviceaccount``
exist for this process only: each volume is bind-mounted at its ``mountPath``. A mount point
that does not exist on this machine is made in an overlay of its nearest existing parent
(an upper layer in ``scratch``): nothing on the machine's own filesystem changes.

If anything fails before the command runs (a mount, a missing executable), the reason goes
to ``errfd`` and the helper exits 127; ``errfd`` is close-on-exec otherwise, so the stand-in
reads end-of-file there once the command itself runs. Standard library only, no kubemill.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys

CLONE_NEWNS = 0x00020000
MS_RDONLY = 0x1
MS_REMOUNT = 0x20
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 0x40000

_libc = ctypes.CDLL(None, use_errno=True)


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str = "") -> None:
    encoded = [s.encode() if s is not None else None for s in (source, target, fstype)]
    if _libc.mount(*encoded, ctypes.c_ulong(flags), data.encode() or None) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {source} on {target}: {os.strerror(err)}")


def _make_mount_point(target: str, is_dir: bool, scratch: str, overlaid: set[str]) -> None:
    parent = os.path.dirname(target)
    while not os.path.isdir(parent):
        parent = os.path.dirname(parent)
    if parent == "/":
        raise OSError(f"cannot make mount point {target}: its first missing parent is in /")
    if parent not in overlaid:
        layer = os.path.join(scratch, f"overlay-{len(overlaid)}")
        os.makedirs(os.path.join(layer, "upper"))
        os.makedirs(os.path.join(layer, "work"))
        options = f"lowerdir={parent},upperdir={layer}/upper,workdir={layer}/work"
        _mount("overlay", parent, "overlay", 0, options)
        overlaid.add(parent)
    if is_dir:
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "a"):
            pass


def enter(spec: dict[str, object]) -> None:
    mounts = spec["mounts"]
    assert isinstance(mounts, list)
    if not mounts:
        return
    if _libc.unshare(CLONE_NEWNS) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"unshare(CLONE_NEWNS): {os.strerror(err)}")
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    overlaid: set[str] = set()
    for mount in mounts:
        source, target = str(mount["source"]), os.path.realpath(str(mount["target"]))
        if not os.path.lexists(target):
            _make_mount_point(target, os.path.isdir(source), str(spec["scratch"]), overlaid)
        _mount(source, target, None, MS_BIND | MS_REC)
        if mount.get("readOnly"):
            _mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY)


def main() -> None:
    spec = json.loads(sys.argv[1])
    argv = sys.argv[2:]
    errfd = int(spec["errfd"])
    try:
        enter(spec)
        os.chdir(str(spec["cwd"]))
        os.set_inheritable(errfd, False)
        os.execvp(argv[0], argv)
    except OSError as exc:
        os.write(errfd, str(exc).encode())
        os._exit(127)


if __name__ == "__main__":
    main()
