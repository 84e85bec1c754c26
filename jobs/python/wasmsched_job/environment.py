"""What the job is told through its environment, read once into a frozen :class:`Env`.

The host sets one variable itself: ``WASMSCHED_BATCH_SIZE``, on the copy of a job it resizes
(the global batch size in force). The others come from the job's own spec (a pod's ``env``,
``docker run -e``) or from a launcher: the rank and world size of a group
(``WASMSCHED_RANK`` and ``WASMSCHED_WORLD_SIZE``, else torchrun's ``RANK`` and ``WORLD_SIZE``,
as the test trainer reads them), torchrun's ``LOCAL_RANK``, the address where the ranks meet
(``MASTER_ADDR``, ``MASTER_PORT``), the checkpoint folder (``WASMSCHED_CHECKPOINT_DIR``, the
same folder as the job's ``wasmsched.checkpoint`` declaration) and where progress goes
(``WASMSCHED_PROGRESS``). An unset or empty variable is not given; a value that is not what
the variable takes is refused with :class:`EnvError`, which names it and says what to write.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Optional, Tuple

BATCH_SIZE_VAR = "WASMSCHED_BATCH_SIZE"
"""The global batch size in force: the host sets it on a job it resizes."""

RANK_VAR = "WASMSCHED_RANK"
"""This process's rank in its group, 0 to the world size less one."""

WORLD_SIZE_VAR = "WASMSCHED_WORLD_SIZE"
"""Ranks in the group."""

TORCHRUN_RANK_VAR = "RANK"
"""torchrun's rank, read when :data:`RANK_VAR` is not given."""

TORCHRUN_WORLD_SIZE_VAR = "WORLD_SIZE"
"""torchrun's world size, read when :data:`WORLD_SIZE_VAR` is not given."""

LOCAL_RANK_VAR = "LOCAL_RANK"
"""torchrun's rank of this process among those of its container."""

MASTER_ADDR_VAR = "MASTER_ADDR"
"""Where the group's ranks meet (``torch.distributed``'s ``env://``): a host name or address."""

MASTER_PORT_VAR = "MASTER_PORT"
"""The port at :data:`MASTER_ADDR_VAR`."""

CHECKPOINT_DIR_VAR = "WASMSCHED_CHECKPOINT_DIR"
"""The checkpoint folder: the one the job declares as ``wasmsched.checkpoint``."""

PROGRESS_VAR = "WASMSCHED_PROGRESS"
"""Where progress records go besides stdout: ``log`` (nowhere else) or ``annotation``."""

PROGRESS_LOG = "log"
PROGRESS_ANNOTATION = "annotation"

_WHOLE = re.compile(r"[0-9]+")


class EnvError(ValueError):
    """A variable whose value is not what it takes; the message says which and what to write.

    Attributes:
        variable: the variable's name.
        value: its value, as given.
    """

    def __init__(self, variable: str, value: str, expected: str, remedy: str) -> None:
        super().__init__(f"{variable} {json.dumps(value)} is not valid: expected {expected}; {remedy}")
        self.variable = variable
        self.value = value


@dataclass(frozen=True)
class Env:
    """What the job was told; the defaults are those of a lone job.

    Attributes:
        batch_size: the global batch size in force (``WASMSCHED_BATCH_SIZE``); None when the
            host has set none, and the job trains at its own.
        rank: this process's rank in its group, from 0.
        world_size: ranks in the group; 1 for a lone job.
        local_rank: this process's rank among those of its container (torchrun's
            ``LOCAL_RANK``); 0 where one process trains per container.
        master_addr: where a group's ranks meet (``MASTER_ADDR``); None when unset.
        master_port: the port there (``MASTER_PORT``); None when unset.
        checkpoint_dir: the checkpoint folder (``WASMSCHED_CHECKPOINT_DIR``); None when unset.
        progress: ``"log"``, or ``"annotation"`` when records also go to the pod's
            ``wasmsched.progress`` annotation (``WASMSCHED_PROGRESS``).
    """

    batch_size: Optional[int] = None
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    master_addr: Optional[str] = None
    master_port: Optional[int] = None
    checkpoint_dir: Optional[Path] = None
    progress: str = PROGRESS_LOG

    @property
    def is_group(self) -> bool:
        """Whether the job trains as a group of more than one rank."""
        return self.world_size > 1

    def per_rank_batch(self, default: int) -> int:
        """This rank's share of the global batch size (the one in force, else ``default``):
        divided among the ranks, at least 1, as the test trainer shares it."""
        batch = self.batch_size if self.batch_size is not None else default
        return max(1, batch // self.world_size)


def env(environ: Optional[Mapping[str, str]] = None) -> Env:
    """Reads :class:`Env` from ``environ`` (default: the process's environment).

    Raises:
        EnvError: a variable whose value is not what it takes, naming it.
    """
    vars_ = os.environ if environ is None else environ

    def given(name: str) -> Optional[str]:
        value = vars_.get(name)
        return value if value else None

    batch = given(BATCH_SIZE_VAR)
    batch_size = None
    if batch is not None:
        batch_size = _whole(
            BATCH_SIZE_VAR, batch, 1, None, "set it to a whole number of samples, or unset it for the job's own"
        )

    world_source = _first(given, WORLD_SIZE_VAR, TORCHRUN_WORLD_SIZE_VAR)
    world_size = 1
    if world_source is not None:
        name, value = world_source
        world_size = _whole(name, value, 1, None, "give the number of ranks, or unset it for a lone job")
    rank_source = _first(given, RANK_VAR, TORCHRUN_RANK_VAR)
    rank = 0
    if rank_source is not None:
        name, value = rank_source
        rank = _whole(name, value, 0, None, "give this process's rank from 0, or unset it for a lone job")
        if rank >= world_size:
            raise EnvError(
                name,
                value,
                f"a whole number from 0 to {world_size - 1} (below the world size {world_size})",
                "give a rank below the world size, or set the world size too",
            )

    local = given(LOCAL_RANK_VAR)
    local_rank = 0
    if local is not None:
        local_rank = _whole(LOCAL_RANK_VAR, local, 0, None, "give this process's rank in its container, or unset it")

    port = given(MASTER_PORT_VAR)
    master_port = None
    if port is not None:
        master_port = _whole(MASTER_PORT_VAR, port, 1, 65535, "give the port where rank 0 listens, or unset it")

    progress = progress_target(vars_)

    return Env(
        batch_size=batch_size,
        rank=rank,
        world_size=world_size,
        local_rank=local_rank,
        master_addr=given(MASTER_ADDR_VAR),
        master_port=master_port,
        checkpoint_dir=checkpoint_folder(vars_),
        progress=progress,
    )


def checkpoint_folder(environ: Optional[Mapping[str, str]] = None) -> Optional[Path]:
    """The checkpoint folder (``WASMSCHED_CHECKPOINT_DIR``); None when unset.

    Raises:
        EnvError: a value that is not an absolute path.
    """
    value = (os.environ if environ is None else environ).get(CHECKPOINT_DIR_VAR)
    if not value:
        return None
    if not os.path.isabs(value):
        raise EnvError(
            CHECKPOINT_DIR_VAR,
            value,
            "an absolute folder path",
            "give the folder the job declares as wasmsched.checkpoint, e.g. /ckpt",
        )
    return Path(value)


def progress_target(environ: Optional[Mapping[str, str]] = None) -> str:
    """Where progress records go besides stdout (``WASMSCHED_PROGRESS``): ``"log"`` (the
    default: nowhere else) or ``"annotation"``.

    Raises:
        EnvError: any other value.
    """
    value = (os.environ if environ is None else environ).get(PROGRESS_VAR) or PROGRESS_LOG
    if value not in (PROGRESS_LOG, PROGRESS_ANNOTATION):
        raise EnvError(
            PROGRESS_VAR,
            value,
            f"{PROGRESS_LOG} or {PROGRESS_ANNOTATION}",
            "write annotation to report through the pod's wasmsched.progress annotation, or unset it for the log",
        )
    return value


def _first(given: Callable[[str], Optional[str]], *names: str) -> Optional[Tuple[str, str]]:
    """The first of ``names`` that is given, with its value."""
    for name in names:
        value = given(name)
        if value is not None:
            return name, value
    return None


def _whole(name: str, value: str, low: int, high: Optional[int], remedy: str) -> int:
    """``value`` as a whole number in ``low ..= high`` (no upper bound for None)."""
    number = int(value) if _WHOLE.fullmatch(value) else None
    if number is None or number < low or (high is not None and number > high):
        expected = f"a whole number from {low} to {high}" if high is not None else f"a whole number, {low} or more"
        raise EnvError(name, value, expected, remedy)
    return number

