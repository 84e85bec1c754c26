"""PyTorch Lightning: a ``Callback`` that makes a ``Trainer.fit`` a good citizen.

::

    from wasmsched_job import graceful
    from wasmsched_job.lightning import WasmschedCallback, resume_path

    with graceful():
        trainer = Trainer(max_epochs=30, callbacks=[WasmschedCallback()])
        trainer.fit(model, data, ckpt_path=resume_path())

At the end of each training epoch (after its validation) it saves the checkpoint
``epoch-<N>.ckpt`` atomically in the checkpoint folder (``WASMSCHED_CHECKPOINT_DIR``, or the
folder given), then reports the epoch with every scalar in ``trainer.callback_metrics``, from
local rank 0 of each container. On SIGTERM the epoch under way finishes, saves and reports,
and the fit stops; ``graceful()`` then ends the process with status 143. Left alone, Lightning
would end the fit at the next batch, saving nothing of the epoch under way, with status 0, so
the callback takes SIGTERM over from Lightning while training runs (Lightning puts its
handlers back at the end). All ranks stop
at the same epoch: a stop asked of any rank stops them all.

Importing this module imports Lightning (``lightning``, else ``pytorch_lightning``).
"""

from __future__ import annotations

import math
import signal
from pathlib import Path
from typing import Any, Dict, Optional

try:
    from lightning.pytorch import Callback
except ImportError:  # the older package name
    from pytorch_lightning import Callback  # type: ignore[no-redef, assignment, unused-ignore]

from .checkpoint import Folder, checkpoint_dir, checkpoint_path, commit, latest_checkpoint, prune
from .progress import report
from .stop import _on_signal, stop_requested


def resume_path(folder: Folder = None) -> Optional[str]:
    """The newest checkpoint to pass as ``fit(ckpt_path=…)``; None to start afresh."""
    latest = latest_checkpoint(folder)
    return str(latest.path) if latest is not None else None


def scalars(metrics: Dict[str, Any]) -> Dict[str, float]:
    """The values of ``metrics`` that are one number (a float, or a tensor of one element)."""
    found: Dict[str, float] = {}
    for name, value in metrics.items():
        if isinstance(value, bool):
            continue
        numel = getattr(value, "numel", None)
        if numel is not None and numel() != 1:
            continue
        try:
            number = float(value)
        except (TypeError, ValueError):
            continue
        found[name] = number if math.isfinite(number) else math.nan
    return found


class WasmschedCallback(Callback):  # type: ignore[misc, unused-ignore]  # Any where Lightning is absent
    """Saves, reports and stops at each epoch's end as the module says.

    Args:
        folder: the checkpoint folder; None: ``WASMSCHED_CHECKPOINT_DIR``, and without it no
            checkpoint is saved (the job cannot be preempted without losing its training).
        keep: checkpoints kept, the newest.
    """

    def __init__(self, folder: Folder = None, keep: int = 1) -> None:
        super().__init__()
        self.folder: Optional[Path] = Path(folder) if folder is not None else checkpoint_dir()
        self.keep = keep

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        """Takes SIGTERM over from Lightning, which registered its handler just before."""
        signal.signal(signal.SIGTERM, _on_signal)

    def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        """Saves the epoch's checkpoint, reports the epoch, and stops the fit if asked to."""
        epoch = trainer.current_epoch + 1
        if self.folder is not None:
            path = checkpoint_path(epoch, self.folder)
            tmp = path.with_name(path.name + ".tmp")
            if trainer.is_global_zero:
                self.folder.mkdir(parents=True, exist_ok=True)
            trainer.save_checkpoint(tmp)  # every rank calls it; rank 0 writes
            if trainer.is_global_zero:
                commit(tmp, path)
                prune(self.folder, self.keep)
        if trainer.local_rank == 0:
            report(epoch, **scalars(dict(trainer.callback_metrics)))
        if trainer.strategy.reduce_boolean_decision(stop_requested(), all=False):
            trainer.should_stop = True
