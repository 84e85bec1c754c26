"""A plain PyTorch training loop that runs well under the wasmsched host: it resumes from the
newest checkpoint, trains at the batch size in force, saves and reports every epoch, and on
SIGTERM ends after the epoch under way with status 143. As a group (world size above 1) it
trains data-parallel with DDP over gloo, meeting at ``MASTER_ADDR:MASTER_PORT``; rank 0 saves,
every rank resumes from the same checkpoint, and all ranks stop at the same epoch.

    WASMSCHED_CHECKPOINT_DIR=/ckpt python torch_loop.py --epochs 30

The data are generated (Gaussian blobs, as the test trainer's), so it needs nothing but torch.
"""

from __future__ import annotations

import argparse
import sys
from typing import Tuple

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from wasmsched_job import (
    Env,
    checkpoint_dir,
    env,
    graceful,
    latest_checkpoint,
    report,
    request_stop,
    save_checkpoint,
)

FEATURES, CLASSES = 32, 8


def blobs(samples: int, seed: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """Samples around one random centre per class, the same for every rank."""
    g = torch.Generator().manual_seed(seed)
    centres = torch.randn(CLASSES, FEATURES, generator=g) * 2
    labels = torch.randint(0, CLASSES, (samples,), generator=g)
    return centres[labels] + torch.randn(samples, FEATURES, generator=g) * 1.5, labels


def everyone_stops(asked: bool, group: bool) -> bool:
    """Whether any rank was asked to stop: all of them then stop at this epoch, so none waits
    in a collective for ranks that have left."""
    if not group:
        return asked
    flag = torch.tensor([1 if asked else 0])
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return bool(flag.item())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--samples", type=int, default=8000)
    parser.add_argument("--lr", type=float, default=0.05)
    args = parser.parse_args()

    e: Env = env()  # an EnvError here names the variable and what to write
    if e.is_group:
        if e.master_addr is None or e.master_port is None:
            sys.exit("a group needs MASTER_ADDR and MASTER_PORT: set them to where rank 0 listens")
        url = f"tcp://{e.master_addr}:{e.master_port}"
        dist.init_process_group("gloo", init_method=url, rank=e.rank, world_size=e.world_size)

    torch.manual_seed(1)  # the same initial weights on every rank
    model: nn.Module = nn.Sequential(nn.Linear(FEATURES, 128), nn.ReLU(), nn.Linear(128, CLASSES))
    optimiser = torch.optim.SGD(model.parameters(), lr=args.lr)
    done = 0
    latest = latest_checkpoint()
    if latest is not None:
        state = torch.load(latest.path)
        model.load_state_dict(state["model"])
        optimiser.load_state_dict(state["optimiser"])
        done = latest.epoch
        print(f"resumed from {latest.path} after epoch {done}", file=sys.stderr)
    train_model = DistributedDataParallel(model) if e.is_group else model

    x, y = blobs(args.samples, seed=7)
    split = args.samples * 4 // 5
    batch = e.per_rank_batch(64)  # the host's batch size after a resize, shared by the ranks
    loss_fn = nn.CrossEntropyLoss()

    with graceful() as stop:
        try:
            for epoch in range(done + 1, args.epochs + 1):
                order = torch.randperm(split, generator=torch.Generator().manual_seed(epoch))
                mine = order[e.rank :: e.world_size]  # this rank's shard
                for start in range(0, len(mine) - batch + 1, batch):
                    rows = mine[start : start + batch]
                    optimiser.zero_grad()
                    loss_fn(train_model(x[rows]), y[rows]).backward()
                    optimiser.step()
                with torch.no_grad():
                    logits = model(x[split:])
                    loss = loss_fn(logits, y[split:]).item()
                    accuracy = (logits.argmax(1) == y[split:]).float().mean().item()
                if e.rank == 0 and checkpoint_dir() is not None:
                    state = {"model": model.state_dict(), "optimiser": optimiser.state_dict()}
                    save_checkpoint(epoch, lambda f: torch.save(state, f))
                if e.is_group:
                    dist.barrier()  # the checkpoint has landed before any rank reports the epoch
                if e.local_rank == 0:
                    report(epoch, accuracy=accuracy, loss=loss)
                if everyone_stops(bool(stop), e.is_group):
                    request_stop()  # a rank that had no SIGTERM ends with 143 too
                    break
        finally:
            if e.is_group:
                dist.destroy_process_group()


if __name__ == "__main__":
    main()
