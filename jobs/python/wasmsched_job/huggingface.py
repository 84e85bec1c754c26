"""Hugging Face ``transformers``: a ``TrainerCallback`` that makes a ``Trainer.train`` a good
citizen.

::

    from wasmsched_job import checkpoint_dir, graceful
    from wasmsched_job.huggingface import WasmschedCallback, resume_path

    args = TrainingArguments(output_dir=str(checkpoint_dir()), eval_strategy="epoch", save_strategy="epoch", ...)
    trainer = Trainer(model, args, ..., callbacks=[WasmschedCallback()])
    with graceful():
        trainer.train(resume_from_checkpoint=resume_path())

Each evaluation is one progress record, numbered by the evaluations done (with
``eval_strategy="epoch"``, the epoch), with the evaluation's metrics (``eval_loss``, and those
``compute_metrics`` gives, prefixed ``eval_``), from local process 0 of each container. The
count comes from the trainer's log history, which its checkpoints keep, so it carries on
across a resume. On SIGTERM the step under way finishes, the trainer saves a checkpoint
(``checkpoint-<step>`` in ``output_dir``, which should be the checkpoint folder) and stops; an
epoch cut short is not evaluated (the resumed run finishes it), and at an epoch's last step the
epoch is evaluated and reported first. ``graceful()`` then ends the process with status 143,
and :func:`resume_path` finds that checkpoint for the next run. All ranks stop at the same step.

The trainer prints its own logs as Python dicts (``{'eval_loss': '0.73', ...}``); the host
takes a line that starts with ``{`` for a record, finds it does not parse, and skips it,
saying so once per job.

Importing this module imports ``transformers``.
"""

from __future__ import annotations

import math
import os
import re
from typing import Any, Dict, Optional

from transformers import TrainerCallback

from .checkpoint import Folder, checkpoint_dir
from .progress import report
from .stop import stop_requested

_CHECKPOINT = re.compile(r"checkpoint-([0-9]+)")
STATE_FILE = "trainer_state.json"
"""The file the trainer writes last into a checkpoint folder: its presence says the folder is
whole."""


def resume_path(folder: Folder = None) -> Optional[str]:
    """The newest whole ``checkpoint-<step>`` folder in the checkpoint folder (``output_dir``),
    for ``train(resume_from_checkpoint=…)``; None to start afresh. A folder without
    ``trainer_state.json`` was cut short by a kill and is passed over."""
    found = str(folder) if folder is not None else checkpoint_dir()
    if found is None:
        return None
    try:
        names = os.listdir(found)
    except FileNotFoundError:
        return None
    whole = []
    for name in names:
        match = _CHECKPOINT.fullmatch(name)
        if match is not None and os.path.isfile(os.path.join(found, name, STATE_FILE)):
            whole.append((int(match.group(1)), name))
    return os.path.join(found, max(whole)[1]) if whole else None


def evaluations_done(log_history: Any, metrics: Dict[str, Any]) -> int:
    """How many evaluations like this one the log history holds (this one included): entries
    with this evaluation's ``*_runtime`` key, else its first metric's key."""
    keys = [k for k in metrics if k not in ("epoch", "step")]
    marker = next((k for k in keys if k.endswith("_runtime")), keys[0] if keys else None)
    if marker is None:
        return 0
    return sum(1 for entry in log_history if marker in entry)


def _agreed(stop: bool, device: Any) -> bool:
    """Whether any rank asks to stop, when the trainer runs as a group (else ``stop``)."""
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        return stop
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return stop
    flag = torch.tensor([1 if stop else 0], device=device)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return bool(flag.item())


class WasmschedCallback(TrainerCallback):  # type: ignore[misc, unused-ignore]  # Any where transformers is absent
    """Reports each evaluation and stops at a step's end on SIGTERM, as the module says."""

    def __init__(self) -> None:
        super().__init__()
        self.stopping = False

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """On a stop asked for: end training after this step, saving a checkpoint. At the
        epoch's last step the save waits for the epoch's end, after its evaluation, so the
        checkpoint's log history counts that evaluation."""
        if self.stopping or not _agreed(stop_requested(), getattr(args, "device", None)):
            return
        self.stopping = True
        control.should_training_stop = True
        if not _epoch_whole(state):
            control.should_save = True

    def on_epoch_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """After a stop: an epoch cut short is neither evaluated nor reported (the resumed run
        finishes it); a whole one is evaluated as usual, then saved."""
        if not self.stopping:
            return
        if _epoch_whole(state):
            control.should_save = True
        else:
            control.should_evaluate = False
            control.should_save = False

    def on_evaluate(
        self, args: Any, state: Any, control: Any, metrics: Optional[Dict[str, Any]] = None, **kwargs: Any
    ) -> None:
        """Reports the evaluation as the next progress record."""
        if not state.is_local_process_zero or not metrics:
            return
        numbers: Dict[str, float] = {}
        for name, value in metrics.items():
            if name in ("epoch", "step") or isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            numbers[name] = float(value) if math.isfinite(value) else math.nan
        report(evaluations_done(state.log_history, metrics), **numbers)


def _epoch_whole(state: Any) -> bool:
    """Whether the trainer stands at an epoch's end (its fractional epoch count is whole)."""
    epoch = getattr(state, "epoch", None)
    return epoch is not None and float(epoch).is_integer()
