"""The checkpoint folder: one whole file per saved epoch, written atomically, the newest the one
to resume from."""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO

import pytest

from wasmsched_job import (
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


def test_an_empty_or_missing_folder_resumes_from_nothing(tmp_path: Path):
    assert latest_checkpoint(tmp_path) is None and resume_epoch(tmp_path) == 0
    assert resume_epoch(tmp_path / "not-yet") == 0


def test_a_saved_epoch_is_resumed_from_and_leaves_no_temporary(tmp_path: Path):
    path = save_checkpoint(3, b"weights after 3", tmp_path)
    assert path == tmp_path / "epoch-3.ckpt" and path.read_bytes() == b"weights after 3"
    assert latest_checkpoint(tmp_path) == Checkpoint(3, path)
    assert resume_epoch(tmp_path) == 3
    assert sorted(os.listdir(tmp_path)) == ["epoch-3.ckpt"]


def test_a_writer_function_gets_the_file_and_older_checkpoints_go(tmp_path: Path):
    def write(f: IO[bytes]) -> None:
        f.write(b"a")
        f.write(b"b")

    save_checkpoint(1, b"one", tmp_path)
    save_checkpoint(2, write, tmp_path)
    assert sorted(os.listdir(tmp_path)) == ["epoch-2.ckpt"]
    assert (tmp_path / "epoch-2.ckpt").read_bytes() == b"ab"
    save_checkpoint(3, b"three", tmp_path, keep=2)
    assert [c.epoch for c in checkpoints(tmp_path)] == [2, 3]


def test_the_newest_is_by_epoch_not_by_name(tmp_path: Path):
    for epoch in (9, 10, 2):
        (tmp_path / f"epoch-{epoch}.ckpt").write_bytes(b"x")
    assert resume_epoch(tmp_path) == 10


def test_a_write_cut_short_leaves_the_last_whole_checkpoint_and_no_temporary(tmp_path: Path):
    save_checkpoint(1, b"whole", tmp_path)

    def fails(f: IO[bytes]) -> None:
        f.write(b"half")
        raise RuntimeError("the disk is full")

    with pytest.raises(RuntimeError, match="disk is full"):
        save_checkpoint(2, fails, tmp_path)
    assert sorted(os.listdir(tmp_path)) == ["epoch-1.ckpt"]
    assert latest_checkpoint(tmp_path) == Checkpoint(1, tmp_path / "epoch-1.ckpt")


def test_a_temporary_left_by_a_kill_is_no_checkpoint(tmp_path: Path):
    save_checkpoint(4, b"whole", tmp_path)
    (tmp_path / "epoch-5.ckpt.tmp").write_bytes(b"half")  # SIGKILL mid-write
    (tmp_path / "notes.txt").write_bytes(b"")
    assert resume_epoch(tmp_path) == 4
    save_checkpoint(5, b"five", tmp_path)
    assert (tmp_path / "epoch-5.ckpt").read_bytes() == b"five"
    assert not (tmp_path / "epoch-5.ckpt.tmp").exists()


def test_atomic_file_replaces_content_whole_and_atomic_path_serves_writers_by_name(tmp_path: Path):
    target = tmp_path / "model.pt"
    target.write_bytes(b"old")
    with pytest.raises(ValueError):
        with atomic_file(target) as f:
            f.write(b"new, half")
            raise ValueError("stopped")
    assert target.read_bytes() == b"old" and not (tmp_path / "model.pt.tmp").exists()
    with atomic_file(target) as f:
        f.write(b"new")
    assert target.read_bytes() == b"new"
    with atomic_path(target) as tmp:
        assert tmp == tmp_path / "model.pt.tmp" and target.read_bytes() == b"new", "the old content until the end"
        tmp.write_bytes(b"by name")
    assert target.read_bytes() == b"by name" and not tmp.exists()


def test_a_writer_by_name_that_wrote_nothing_is_an_error_that_says_so(tmp_path: Path):
    with pytest.raises(CheckpointError, match="cannot save"):
        with atomic_path(tmp_path / "epoch-1.ckpt"):
            pass


def test_the_folder_comes_from_the_environment_and_its_absence_is_explained(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.delenv("WASMSCHED_CHECKPOINT_DIR", raising=False)
    assert checkpoint_dir() is None and resume_epoch() == 0 and latest_checkpoint() is None
    with pytest.raises(CheckpointError, match="set WASMSCHED_CHECKPOINT_DIR to the folder the job declares"):
        save_checkpoint(1, b"x")
    folder = tmp_path / "ckpt"
    monkeypatch.setenv("WASMSCHED_CHECKPOINT_DIR", str(folder))
    assert checkpoint_dir() == folder and checkpoint_path(7) == folder / "epoch-7.ckpt"
    save_checkpoint(1, b"x")  # the folder is made
    assert resume_epoch() == 1


def test_a_folder_that_cannot_be_written_says_where(tmp_path: Path):
    blocker = tmp_path / "file"
    blocker.write_bytes(b"")
    with pytest.raises(CheckpointError, match="cannot make the checkpoint folder .*file/ckpt"):
        save_checkpoint(1, b"x", blocker / "ckpt")
