"""Where a process's resident memory is, by kind of mapping (``/proc/PID/smaps``).

    python bench/operator_smaps.py PID

``bench/operator_throughput.py`` prints the same for the operator at the end of a run. The
kinds, as glibc's malloc and CPython lay memory out on Linux x86-64:

- ``main arena``: ``[heap]``, the brk area of glibc's main malloc arena (the blocks over
  512 bytes the main thread allocates: dicts' tables, long strings, lists);
- ``thread arenas``: the heaps of glibc's other arenas, which threads get when the main one
  is busy (up to 8 per core): anonymous mappings at multiples of 64 MiB (glibc's
  ``HEAP_MAX_SIZE``) followed by their unused reserve (``---p``);
- ``other anonymous``: CPython's small-object arenas (1 MiB mappings, which the kernel
  merges when adjacent), blocks glibc maps alone (over its mmap threshold) and thread stacks;
- ``files``: the interpreter, its extension modules and shared libraries.

A thread arena's free blocks stay resident until its top is free (glibc trims only there):
memory a burst of API answers parsed on a pool of threads can leave behind.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

HEAP_ALIGNMENT = 64 * 2**20
"""glibc's HEAP_MAX_SIZE on 64-bit: every non-main arena heap starts at a multiple of it."""


def breakdown(pid: int) -> tuple[Counter[str], int]:
    """Resident KiB of ``pid`` by kind of mapping, and the number of thread arena heaps."""
    resident: Counter[str] = Counter()
    arenas = 0
    kind = ""
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        first = line.split(maxsplit=5)
        if "-" in first[0] and not first[0].endswith(":"):
            start = int(first[0].split("-")[0], 16)
            perms = first[1]
            name = first[5] if len(first) > 5 else ""
            if name == "[heap]":
                kind = "main arena"
            elif name.startswith("/"):
                kind = "files"
            elif name:
                kind = "other anonymous"  # [stack], [vdso], ...
            elif start % HEAP_ALIGNMENT == 0 and perms.startswith("rw"):
                kind = "thread arenas"
                arenas += 1
            else:
                kind = "other anonymous"
        elif first[0] == "Rss:":
            resident[kind] += int(first[1])
    return resident, arenas


def describe(pid: int) -> str:
    """One line: MiB by kind, the thread arenas counted."""
    resident, arenas = breakdown(pid)
    order = ("main arena", "thread arenas", "other anonymous", "files")
    parts = [f"{kind} {resident[kind] / 1024:.0f}" for kind in order]
    return ", ".join(parts) + f" MiB ({arenas} thread arenas)"


def main() -> None:
    print(describe(int(sys.argv[1])))


if __name__ == "__main__":
    main()
