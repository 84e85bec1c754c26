"""The checkpoint folder: where the job saves after each epoch and what it resumes from.

The host carries the folder a job declares as ``wasmsched.checkpoint`` when it preempts,
migrates or resizes the job (Docker copies it out and in; on Kubernetes it must be on a volume
that outlives the pod), and starts the copy from scratch: the job resumes from what the
folder holds. The job learns the folder from ``WASMSCHED_CHECKPOINT_DIR`` (set it to the same
folder) or is given it.

Layout: one file per saved epoch, ``epoch-<N>.ckpt``, N the epochs done, each written whole
to ``epoch-<N>.ckpt.tmp``, flushed to disk and renamed, so a file with that name is always
whole, whatever moment the job was stopped at; the older ones are removed after the newer one
has landed. What a file holds is the job's business (``torch.save``, a framework's own
checkpoint, bytes). Save before reporting the epoch: stopped between the two, the job resumes
after an epoch it has not reported, never before one it has. In a group, rank 0 alone saves,
and every rank resumes from that file.
"""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Callable, Iterator, List, Optional, SupportsIndex, Union

from .environment import CHECKPOINT_DIR_VAR, checkpoint_folder

_NAME = re.compile(r"epoch-([0-9]+)\.ckpt")
TMP_SUFFIX = ".tmp"
"""What a file being written carries after its name until it is renamed."""

Folder = Union[str, "os.PathLike[str]", None]
"""A checkpoint folder, or None for ``WASMSCHED_CHECKPOINT_DIR``."""


class CheckpointError(Exception):
    """A checkpoint that cannot be saved: no folder, or the file system refused."""


@dataclass(frozen=True)
class Checkpoint:
    """A whole checkpoint in the folder.

    Attributes:
        epoch: the epochs done when it was saved.
        path: its file.
    """

    epoch: int
    path: Path


def checkpoint_dir() -> Optional[Path]:
    """The checkpoint folder from ``WASMSCHED_CHECKPOINT_DIR``; None when unset.

    Raises:
        EnvError: a value that is not an absolute path.
    """
    return checkpoint_folder()


def _folder(folder: Folder) -> Optional[Path]:
    return Path(folder) if folder is not None else checkpoint_dir()


def _required(folder: Folder) -> Path:
    found = _folder(folder)
    if found is None:
        raise CheckpointError(
            f"no checkpoint folder: set {CHECKPOINT_DIR_VAR} to the folder the job declares as "
            "wasmsched.checkpoint, or pass the folder"
        )
    return found


def checkpoint_path(epoch: SupportsIndex, folder: Folder = None) -> Path:
    """Where the checkpoint after ``epoch`` epochs goes: ``<folder>/epoch-<N>.ckpt``.

    Raises:
        CheckpointError: no folder is given or set.
    """
    return _required(folder) / f"epoch-{epoch.__index__()}.ckpt"


def checkpoints(folder: Folder = None) -> List[Checkpoint]:
    """The whole checkpoints in the folder, oldest first; none when there is no folder."""
    found = _folder(folder)
    if found is None:
        return []
    try:
        names = os.listdir(found)
    except FileNotFoundError:
        return []
    saved = []
    for name in names:
        match = _NAME.fullmatch(name)
        if match is not None:
            saved.append(Checkpoint(int(match.group(1)), found / name))
    return sorted(saved, key=lambda c: c.epoch)


def latest_checkpoint(folder: Folder = None) -> Optional[Checkpoint]:
    """The newest whole checkpoint, to resume from; None when there is none (start afresh)."""
    saved = checkpoints(folder)
    return saved[-1] if saved else None


def resume_epoch(folder: Folder = None) -> int:
    """The epochs done according to the newest checkpoint: 0 when there is none. Train on from
    the epoch after it."""
    latest = latest_checkpoint(folder)
    return latest.epoch if latest is not None else 0


@contextlib.contextmanager
def atomic_path(path: Union[str, "os.PathLike[str]"]) -> Iterator[Path]:
    """A temporary path beside ``path`` for a writer that takes a file name (a framework's
    ``save_checkpoint``); once the block ends without an error the file there is flushed to
    disk and renamed over ``path``. After an error the temporary file is removed and ``path``
    keeps what it held."""
    final = Path(path)
    tmp = final.with_name(final.name + TMP_SUFFIX)
    try:
        yield tmp
        commit(tmp, final)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


@contextlib.contextmanager
def atomic_file(path: Union[str, "os.PathLike[str]"]) -> Iterator[IO[bytes]]:
    """A binary file to write ``path``'s new content into (``torch.save(state, f)``); renamed
    over ``path`` once the block ends without an error, as :func:`atomic_path` does."""
    with atomic_path(path) as tmp:
        try:
            f = open(tmp, "wb")
        except OSError as e:
            raise CheckpointError(f"cannot write {tmp}: {e.strerror}; check that its folder exists and is writable") from None
        with f:
            yield f


def commit(tmp: Union[str, "os.PathLike[str]"], path: Union[str, "os.PathLike[str]"]) -> None:
    """Flushes the file ``tmp`` to disk and renames it over ``path``, then flushes the folder,
    so ``path`` holds the previous content or the new one, never a part.

    Raises:
        CheckpointError: the file is not there or cannot be renamed.
    """
    try:
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        raise CheckpointError(f"cannot save {path}: {e.strerror} ({e.filename})") from None
    _sync_folder(Path(path).parent)


def _sync_folder(folder: Path) -> None:
    """Flushes a folder's entries (the rename) to disk, where the system allows it."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def prune(folder: Folder = None, keep: int = 1) -> None:
    """Removes all but the newest ``keep`` checkpoints (best effort: one that cannot be
    removed is left)."""
    if keep < 1:
        raise ValueError(f"keep is {keep}: keep at least the newest checkpoint")
    for old in checkpoints(folder)[:-keep]:
        with contextlib.suppress(OSError):
            old.path.unlink()


def save_checkpoint(
    epoch: SupportsIndex,
    data: Union[bytes, Callable[[IO[bytes]], object]],
    folder: Folder = None,
    *,
    keep: int = 1,
) -> Path:
    """Saves the checkpoint after ``epoch`` epochs atomically and removes all but the newest
    ``keep``; its path.

    ``data`` is the content, or a function that writes it to the file it is given
    (``lambda f: torch.save(state, f)``). Call it before :func:`wasmsched_job.report` for the
    same epoch, and from rank 0 alone in a group.

    Raises:
        CheckpointError: no folder is given or set, or the file cannot be written.
    """
    if keep < 1:
        raise ValueError(f"keep is {keep}: keep at least the newest checkpoint")
    path = checkpoint_path(epoch, folder)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise CheckpointError(f"cannot make the checkpoint folder {path.parent}: {e.strerror}") from None
    with atomic_file(path) as f:
        if isinstance(data, (bytes, bytearray, memoryview)):
            f.write(data)
        else:
            data(f)
    prune(path.parent, keep)
    return path
