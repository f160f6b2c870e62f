"""A Python function as a 2-node TrainJob, as the Kubeflow SDK's
``TrainerClient().train(trainer=CustomTrainer(func=..., num_nodes=2))`` runs one:

    python examples/trainjob/train_function.py               # locally: two torchrun nodes
    python examples/trainjob/train_function.py kubernetes    # on the cluster of kubeconfig

The function's source travels in the TrainJob's command (upstream's ``torch-distributed``
runtime starts it under torchrun on each node), so it holds its own imports. Locally nothing
is installed: ``packages`` must already be importable (torch here, kubemill[torch]).
"""

from __future__ import annotations

import sys

from kubemill.sdk import JobClient


def allreduce(base: int = 1) -> None:
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    total = torch.tensor([base + rank])
    dist.all_reduce(total)
    expected = sum(base + r for r in range(world))
    print(f"rank={rank} world={world} sum={int(total)} ok={int(total) == expected}", flush=True)
    dist.destroy_process_group()


def main(substrate: str = "local") -> int:
    client = JobClient(substrate)
    job = client.train(
        allreduce, num_nodes=2, num_proc_per_node=1, func_args={"base": 1}, packages=["torch"]
    )
    final = client.wait(job.name, timeout=600)
    for line in client.logs(job.name):
        if line.text.startswith("rank="):
            print(line.replica, line.text)
    print(final.kind, final.name, final.phase)
    client.delete(job.name)
    return 0 if final.phase == "Succeeded" else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
