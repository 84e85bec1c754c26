"""The adapters' own logic, driven as their framework drives them, against stand-ins for the
framework's base classes (so these run with pytest alone; test_job_frameworks.py runs them
against the frameworks themselves where those are installed)."""

from __future__ import annotations

import importlib
import json
import signal
import sys
import types
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

from wasmsched_job import request_stop
from wasmsched_job import stop as stop_module


@pytest.fixture
def fresh() -> Iterator[None]:
    stop_module._reset()
    yield
    stop_module._reset()


def stand_in(monkeypatch: pytest.MonkeyPatch, modules: Dict[str, Dict[str, Any]], adapter: str) -> Any:
    """Imports ``wasmsched_job.<adapter>`` against stand-in framework modules."""
    for name, members in modules.items():
        module = types.ModuleType(name)
        for key, value in members.items():
            setattr(module, key, value)
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.delitem(sys.modules, f"wasmsched_job.{adapter}", raising=False)
    imported = importlib.import_module(f"wasmsched_job.{adapter}")
    monkeypatch.delitem(sys.modules, f"wasmsched_job.{adapter}")
    return imported


class Tensor:
    """A tensor as the callbacks see one: ``numel`` and ``float``."""

    def __init__(self, *values: float) -> None:
        self.values = values

    def numel(self) -> int:
        return len(self.values)

    def __float__(self) -> float:
        return self.values[0]


class Strategy:
    def __init__(self) -> None:
        self.asked: List[bool] = []

    def reduce_boolean_decision(self, decision: bool, all: bool = True) -> bool:
        self.asked.append(all)
        return decision


class LightningTrainer:
    """What WasmschedCallback reads and calls on Lightning's Trainer."""

    def __init__(self, epoch: int, global_zero: bool = True, local_rank: int = 0) -> None:
        self.current_epoch = epoch
        self.is_global_zero = global_zero
        self.local_rank = local_rank
        self.callback_metrics = {"val_acc": Tensor(0.5), "histogram": Tensor(1.0, 2.0), "train_loss": 0.25}
        self.strategy = Strategy()
        self.should_stop = False
        self.saved: List[Path] = []

    def save_checkpoint(self, path: Path) -> None:
        self.saved.append(Path(path))
        if self.is_global_zero:
            Path(path).write_bytes(f"lightning epoch {self.current_epoch + 1}".encode())


@pytest.fixture
def lightning(monkeypatch: pytest.MonkeyPatch) -> Any:
    class Callback:
        pass

    return stand_in(monkeypatch, {"lightning": {}, "lightning.pytorch": {"Callback": Callback}}, "lightning")


def test_lightning_saves_then_reports_each_epoch_with_its_scalars(
    lightning: Any, tmp_path: Path, capsys: Any, fresh: None
):
    callback = lightning.WasmschedCallback(tmp_path)
    for epoch in range(3):
        callback.on_train_epoch_end(LightningTrainer(epoch), None)
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert records == [{"epoch": e, "val_acc": 0.5, "train_loss": 0.25} for e in (1, 2, 3)]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["epoch-3.ckpt"]
    assert lightning.resume_path(tmp_path) == str(tmp_path / "epoch-3.ckpt")


def test_lightning_saves_on_every_rank_commits_on_rank_0_and_reports_once_per_container(
    lightning: Any, tmp_path: Path, capsys: Any, fresh: None
):
    other = LightningTrainer(0, global_zero=False, local_rank=1)
    lightning.WasmschedCallback(tmp_path).on_train_epoch_end(other, None)
    assert other.saved == [tmp_path / "epoch-1.ckpt.tmp"], "every rank calls save_checkpoint"
    assert list(tmp_path.iterdir()) == [] and capsys.readouterr().out == ""


def test_lightning_stops_the_fit_at_the_epoch_end_once_asked(lightning: Any, tmp_path: Path, fresh: None):
    callback = lightning.WasmschedCallback(tmp_path)
    going = LightningTrainer(0)
    callback.on_train_epoch_end(going, None)
    assert not going.should_stop
    request_stop()
    stopping = LightningTrainer(1)
    callback.on_train_epoch_end(stopping, None)
    assert stopping.should_stop and stopping.strategy.asked == [False], "any rank's stop stops all"
    assert (tmp_path / "epoch-2.ckpt").exists(), "saved before stopping"


def test_lightning_without_a_folder_reports_and_saves_nothing(
    lightning: Any, monkeypatch: pytest.MonkeyPatch, capsys: Any, fresh: None
):
    monkeypatch.delenv("WASMSCHED_CHECKPOINT_DIR", raising=False)
    trainer = LightningTrainer(0)
    lightning.WasmschedCallback().on_train_epoch_end(trainer, None)
    assert trainer.saved == [] and json.loads(capsys.readouterr().out)["epoch"] == 1
    assert lightning.resume_path() is None


def test_lightning_takes_sigterm_over_when_training_starts(lightning: Any):
    before = signal.getsignal(signal.SIGTERM)
    try:
        lightning.WasmschedCallback().on_train_start(LightningTrainer(0), None)
        assert signal.getsignal(signal.SIGTERM) is stop_module._on_signal
    finally:
        signal.signal(signal.SIGTERM, before)


@pytest.fixture
def huggingface(monkeypatch: pytest.MonkeyPatch) -> Any:
    class TrainerCallback:
        pass

    return stand_in(monkeypatch, {"transformers": {"TrainerCallback": TrainerCallback}}, "huggingface")


def state(epoch: float, history: List[Dict[str, float]]) -> Any:
    return types.SimpleNamespace(epoch=epoch, log_history=history, is_local_process_zero=True)


def control() -> Any:
    return types.SimpleNamespace(
        should_save=False, should_evaluate=False, should_training_stop=False, should_epoch_stop=False
    )


def test_huggingface_reports_each_evaluation_numbered_by_the_evaluations_done(
    huggingface: Any, capsys: Any, fresh: None
):
    metrics = {"eval_loss": 0.5, "eval_accuracy": 0.75, "eval_runtime": 0.1, "epoch": 2.0}
    history = [{"loss": 1.0, "epoch": 0.5}, {"eval_loss": 0.9, "eval_runtime": 0.1}, {**metrics}]
    huggingface.WasmschedCallback().on_evaluate(None, state(2.0, history), control(), metrics=metrics)
    record = json.loads(capsys.readouterr().out)
    assert record == {"epoch": 2, "eval_loss": 0.5, "eval_accuracy": 0.75, "eval_runtime": 0.1}


def test_huggingface_on_a_stop_mid_epoch_saves_at_the_step_and_skips_the_epochs_evaluation(
    huggingface: Any, fresh: None
):
    callback = huggingface.WasmschedCallback()
    ctl = control()
    callback.on_step_end(None, state(1.25, []), ctl)
    assert not ctl.should_training_stop
    request_stop()
    callback.on_step_end(None, state(1.5, []), ctl)
    assert ctl.should_training_stop and ctl.should_save
    ctl.should_evaluate = ctl.should_save = True  # as the trainer's own flow sets them at an epoch's end
    callback.on_epoch_end(None, state(1.5, []), ctl)
    assert not ctl.should_evaluate and not ctl.should_save


def test_huggingface_on_a_stop_at_an_epochs_last_step_evaluates_then_saves(huggingface: Any, fresh: None):
    callback = huggingface.WasmschedCallback()
    request_stop()
    ctl = control()
    callback.on_step_end(None, state(2.0, []), ctl)
    assert ctl.should_training_stop and not ctl.should_save, "the save waits for the evaluation"
    ctl.should_evaluate = True
    callback.on_epoch_end(None, state(2.0, []), ctl)
    assert ctl.should_evaluate and ctl.should_save


def test_huggingface_resumes_from_the_newest_whole_checkpoint(huggingface: Any, tmp_path: Path):
    for step, whole in ((8, True), (16, True), (20, False)):
        folder = tmp_path / f"checkpoint-{step}"
        folder.mkdir()
        if whole:
            (folder / "trainer_state.json").write_text("{}")
    assert huggingface.resume_path(tmp_path) == str(tmp_path / "checkpoint-16")
    assert huggingface.resume_path(tmp_path / "none") is None
