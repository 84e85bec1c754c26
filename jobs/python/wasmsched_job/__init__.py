"""wasmsched_job: what a training script needs to run well under the wasmsched host.

The host reads a job's progress from its log, one JSON line per epoch (:func:`report`); it
stops the job with SIGTERM before it preempts, migrates or resizes it (:func:`graceful`,
:func:`stop_requested`), carries its checkpoint folder to the copy, which resumes from it
(:func:`save_checkpoint`, :func:`resume_epoch`), and may give the copy another batch size
(:func:`env`, with the rank and world size of a group). ``docs/jobs.md`` has the contract;
:mod:`wasmsched_job.lightning` and :mod:`wasmsched_job.huggingface` adapt two frameworks, and
``examples/torch_loop.py`` is a plain PyTorch loop. No dependencies beyond the standard library.
"""

from .checkpoint import (
    Checkpoint,
    CheckpointError,
    atomic_file,
    atomic_path,
    checkpoint_dir,
    checkpoint_path,
    checkpoints,
    latest_checkpoint,
    resume_epoch,
    save_checkpoint,
)
from .environment import Env, EnvError, env
from .progress import line, report
from .stop import STOPPED, Graceful, graceful, request_stop, stop_requested

__all__ = [
    "STOPPED",
    "Checkpoint",
    "CheckpointError",
    "Env",
    "EnvError",
    "Graceful",
    "atomic_file",
    "atomic_path",
    "checkpoint_dir",
    "checkpoint_path",
    "checkpoints",
    "env",
    "graceful",
    "latest_checkpoint",
    "line",
    "report",
    "request_stop",
    "resume_epoch",
    "save_checkpoint",
    "stop_requested",
]

__version__ = "0.1.0"
