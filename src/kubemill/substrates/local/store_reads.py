"""What lets the store's listings cost little when little changed (:class:`~.store.Store`'s
``jobs`` and ``replicas_of``): the records decoded from rows, kept with the raw rows.

A long-lived reader (the dashboard) lists every job several times a second. Each job row
holds its manifest, status and environments as JSON, and decoding them was most of a
listing (1,000 finished jobs: 70% of ``JobClient.list``). So the store keeps what it
decoded, by row, with the raw row it came from:

- a row read again with the same raw values is handed back as the record it gave before,
  never decoded again (comparing the stored text is a ``memcmp``; decoding it is a parse);
- a whole listing is handed back again without reading any row when the database cannot
  have changed since this connection read it: no other connection committed (SQLite's
  ``PRAGMA data_version``) and this one changed no row (``total_changes``).

Both are a cache of the one reader, not a second way to read: every record still comes
from the row as :mod:`.records` decodes it, and any change to a row gives a new record.
Records are shared by whoever listed them, so no reader may change one (none does: they
are frozen, and their dicts are only read).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Hashable, Sequence
from typing import Any, Generic, TypeVar

K = TypeVar("K", bound=Hashable)
R = TypeVar("R")

Snapshot = tuple[int, int]
"""What says a connection's view of the database is unchanged: (``data_version``,
``total_changes``)."""


def snapshot(conn: sqlite3.Connection) -> Snapshot:
    """The connection's mark of the database's state: it is the same later only if no
    connection (this one included) has committed a change in between."""
    version = conn.execute("PRAGMA data_version").fetchone()[0]
    return int(version), conn.total_changes


class DecodedRows(Generic[K, R]):
    """Records decoded from the rows of one table, by key, each with the raw row it came
    from; shared by every thread of the store (a lock guards the swap of the table)."""

    def __init__(self, key: Callable[[sqlite3.Row], K], decode: Callable[[sqlite3.Row], R]) -> None:
        self._key = key
        self._decode = decode
        self._known: dict[K, tuple[tuple[Any, ...], R]] = {}
        self._lock = threading.Lock()

    def records(
        self, rows: Sequence[sqlite3.Row], *, listed: Callable[[R], bool] | None = None
    ) -> list[R]:
        """The records of ``rows`` in their order, decoding only rows not seen as they are.

        ``listed``: which known records the query would have read (those of the namespace
        asked for; None: every row of the table); such a record not among ``rows`` is of a
        row gone, and forgotten.
        """
        with self._lock:
            known = self._known
        fresh: dict[K, tuple[tuple[Any, ...], R]] = {}
        out: list[R] = []
        for row in rows:
            raw = tuple(row)
            key = self._key(row)
            seen = known.get(key)
            record = seen[1] if seen is not None and seen[0] == raw else self._decode(row)
            fresh[key] = (raw, record)
            out.append(record)
        with self._lock:
            kept = {} if listed is None else self._known
            if listed is not None:
                # A namespace's listing: the other namespaces' records stay as they were.
                kept = {k: v for k, v in kept.items() if k in fresh or not listed(v[1])}
            kept.update(fresh)
            self._known = kept
        return out


class Listings(Generic[R]):
    """Each thread's last listings (by query) with its connection's snapshot taken before
    each was read: one asked again on that connection while the snapshot is unchanged
    reads no row."""

    def __init__(self) -> None:
        self._local = threading.local()

    def _last(self, conn: sqlite3.Connection) -> dict[Hashable, tuple[Snapshot, list[R]]]:
        # A snapshot means something only on the connection it was taken on (a new
        # connection starts counting again): another connection forgets the listings.
        if getattr(self._local, "conn", None) is not conn:
            self._local.conn = conn
            self._local.last = {}
        last: dict[Hashable, tuple[Snapshot, list[R]]] = self._local.last
        return last

    def get(self, conn: sqlite3.Connection, query: Hashable) -> tuple[list[R] | None, Snapshot]:
        """The last listing of ``query`` if nothing changed since (else None), and the
        snapshot to :meth:`put` a new one with, taken before it is read."""
        now = snapshot(conn)
        found = self._last(conn).get(query)
        return (list(found[1]) if found is not None and found[0] == now else None), now

    def put(
        self, conn: sqlite3.Connection, query: Hashable, taken: Snapshot, records: list[R]
    ) -> None:
        self._last(conn)[query] = (taken, list(records))


class TableReads(Generic[K, R]):
    """The listings of one table: each query's rows as records, decoded only when changed."""

    def __init__(self, key: Callable[[sqlite3.Row], K], decode: Callable[[sqlite3.Row], R]) -> None:
        self.rows = DecodedRows(key, decode)
        self.listings: Listings[R] = Listings()

    def read(
        self,
        conn: sqlite3.Connection,
        sql: str,
        args: tuple[Any, ...] = (),
        *,
        listed: Callable[[R], bool] | None = None,
    ) -> list[R]:
        """The records of the rows ``sql`` reads (``listed``: as :meth:`DecodedRows.records`;
        None: the query reads every row of the table)."""
        found, taken = self.listings.get(conn, (sql, args))
        if found is not None:
            return found
        records = self.rows.records(conn.execute(sql, args).fetchall(), listed=listed)
        self.listings.put(conn, (sql, args), taken, records)
        return records


__all__ = ["DecodedRows", "Listings", "Snapshot", "TableReads", "snapshot"]
