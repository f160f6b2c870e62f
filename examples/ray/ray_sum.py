"""A Ray client: squares 0..N-1 in remote tasks on a running Ray cluster and checks the sum.

The tasks are spread over two nodes (a placement group of one CPU on each, STRICT_SPREAD:
Ray refuses to put both bundles on one node), so on a cluster of two 1-CPU workers each
worker computes half.

    python examples/ray/ray_sum.py ray://127.0.0.1:PORT   # the address `kubemill cluster
                                                          # create ray` prints
                                                          # (with the token's environment
                                                          # it prints: RAY_AUTH_MODE=token
                                                          # RAY_AUTH_TOKEN_PATH=...)

Prints the sum, the nodes the tasks ran on and the cluster's live nodes; exits 1 if the sum
is wrong.
"""

from __future__ import annotations

import sys

import ray
from ray.util.placement_group import placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

TASKS = 20


@ray.remote(num_cpus=1)
def square(x: int) -> tuple[int, str]:
    """``x * x``, and the node that computed it."""
    return x * x, ray.get_runtime_context().get_node_id()


def main(address: str) -> int:
    ray.init(address=address, logging_level="ERROR")
    spread = placement_group([{"CPU": 1}, {"CPU": 1}], strategy="STRICT_SPREAD")
    ray.get(spread.ready(), timeout=120)
    results = ray.get(
        [
            square.options(
                scheduling_strategy=PlacementGroupSchedulingStrategy(
                    placement_group=spread, placement_group_bundle_index=i % 2
                )
            ).remote(i)
            for i in range(TASKS)
        ]
    )
    total = sum(value for value, _ in results)
    used = sorted({node for _, node in results})
    alive = sorted(node["NodeID"] for node in ray.nodes() if node["Alive"])
    expected = sum(i * i for i in range(TASKS))
    print(f"sum={total} expected={expected}")
    print(f"task nodes={','.join(used)}")
    print(f"alive nodes={','.join(alive)}")
    ray.shutdown()
    return 0 if total == expected else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
