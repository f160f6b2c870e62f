"""The supervisor's answers to a replica's ports being taken by another process.

Locally every replica listens on its own 127.0.0.1 ports, allocated at submit. Another
process may take one in between: before the first replica starts, the taken ports are
moved (no replica has been told an address yet); after that, a replica started again is
only warned about, as its peers already know its address.
"""

from __future__ import annotations

from dataclasses import replace

from kubemill.substrates.local.network import busy_ports, replica_address
from kubemill.substrates.local.prepared import Prepared, move_busy_ports
from kubemill.substrates.local.store import ReplicaRecord, Store


def reallocate_before_first_start(
    store: Store, uid: str, prepared: Prepared, records: dict[str, ReplicaRecord]
) -> Prepared | None:
    """Move the ports taken since submit: the job with its new ports (its replicas'
    records readdressed and saved, and an event), or None when none was taken."""
    moved = move_busy_ports(store, uid, prepared)
    if moved is None:
        return None
    prepared, text = moved
    ports = prepared.network.ports
    default_port = prepared.job.DEFAULT_PORT_NAME
    for rep in prepared.plan.replicas:
        address = replica_address(rep.ports, ports, replica=rep.name, preferred=default_port)
        records[rep.name] = replace(records[rep.name], address=address)
    store.save_replicas(list(records.values()))
    store.add_event(
        uid,
        type="Normal",
        reason="PortsReallocated",
        message=f"ports taken by other processes since submit were moved: {text}",
    )
    return prepared


def warn_busy_ports(store: Store, uid: str, prepared: Prepared, replica: str) -> None:
    """An event for each of ``replica``'s ports another process holds now."""
    ports = {k: v for k, v in prepared.network.ports.items() if k[0] == replica}
    busy = busy_ports(ports)
    if busy:
        listed = ", ".join(str(p) for p in sorted(busy.values()))
        store.add_event(
            uid,
            type="Warning",
            reason="PortInUse",
            message=f"{replica}: port(s) {listed} on 127.0.0.1 are in use by another process;"
            " the replica may fail to listen on them",
        )


__all__ = ["reallocate_before_first_start", "warn_busy_ports"]
