"""The adapters and the PyTorch example against the frameworks themselves: each run is a
training script in a child process, stopped by SIGTERM mid-epoch and started again from its
checkpoint folder. Each test skips, saying so, where its framework is not installed (the
repository's test toolchain has none of them: ``pip install lightning transformers`` runs them)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Dict, List, Optional

import pytest

PACKAGE = Path(__file__).resolve().parents[1]
EXAMPLE = PACKAGE / "examples" / "torch_loop.py"


def run(
    script: List[str], folder: Path, stop_at: Optional[str] = None, extra: Optional[Dict[str, str]] = None
) -> "subprocess.Popen[str]":
    """Starts ``script`` with the checkpoint folder set; with ``stop_at``, sends SIGTERM once
    its stderr says that."""
    env = {
        **os.environ,
        "PYTHONPATH": str(PACKAGE),
        "WASMSCHED_CHECKPOINT_DIR": str(folder),
        "PYTHONUNBUFFERED": "1",
        **(extra or {}),
    }
    for torchrun in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "WASMSCHED_BATCH_SIZE"):
        if extra is None or torchrun not in extra:
            env.pop(torchrun, None)
    child = subprocess.Popen(
        [sys.executable, *script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    if stop_at is not None:
        assert child.stderr is not None
        deadline, seen = time.monotonic() + 180, []
        while time.monotonic() < deadline:
            got = child.stderr.readline()
            seen.append(got)
            if stop_at in got:
                child.send_signal(signal.SIGTERM)
                break
            if not got and child.poll() is not None:
                pytest.fail(f"the script ended before {stop_at!r}:\n{''.join(seen)}")
    return child


def records(child: "subprocess.Popen[str]") -> List[Dict[str, float]]:
    """The child's progress records once it has ended. A framework's own output may start
    with ``{`` too (the Hugging Face trainer prints its logs as Python dicts, which the host
    skips as lines that do not parse); records start as ``report`` writes them."""
    out, err = child.communicate(timeout=300)
    assert child.returncode in (0, 143), err
    return [json.loads(line) for line in out.splitlines() if line.startswith('{"epoch":')]


LIGHTNING_SCRIPT = textwrap.dedent(
    """
    import sys, time, torch
    from torch.utils.data import DataLoader, TensorDataset
    import lightning.pytorch as L
    from wasmsched_job import graceful
    from wasmsched_job.lightning import WasmschedCallback, resume_path

    class Model(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(4, 2)

        def on_train_epoch_start(self):
            print(f"epoch {self.current_epoch + 1} starts", file=sys.stderr, flush=True)

        def training_step(self, batch, index):
            time.sleep(0.05)
            x, y = batch
            return torch.nn.functional.cross_entropy(self.layer(x), y)

        def validation_step(self, batch, index):
            x, y = batch
            logits = self.layer(x)
            self.log("val_acc", (logits.argmax(1) == y).float().mean())
            self.log("val_loss", torch.nn.functional.cross_entropy(logits, y))

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 4, generator=g)
    data = DataLoader(TensorDataset(x, (x[:, 0] > 0).long()), batch_size=8)
    with graceful():
        trainer = L.Trainer(
            max_epochs=int(sys.argv[1]), callbacks=[WasmschedCallback()], logger=False,
            enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
            accelerator="cpu", devices=1,
        )
        trainer.fit(Model(), data, data, ckpt_path=resume_path())
    """
)


def test_lightning_finishes_the_epoch_on_sigterm_and_resumes_after_it(tmp_path: Path):
    pytest.importorskip("lightning", reason="lightning is not installed (pip install lightning)")
    script = tmp_path / "fit.py"
    script.write_text(LIGHTNING_SCRIPT)
    folder = tmp_path / "ckpt"
    stopped = run([str(script), "50"], folder, stop_at="epoch 2 starts")
    first = records(stopped)
    assert stopped.returncode == 143
    assert [r["epoch"] for r in first] == [1, 2], "epoch 2 finished, saved and reported"
    assert {"val_acc", "val_loss"} <= set(first[0])
    assert sorted(os.listdir(folder)) == ["epoch-2.ckpt"]
    resumed = run([str(script), "4"], folder)
    assert [r["epoch"] for r in records(resumed)] == [3, 4], "no epoch lost or run twice"
    assert resumed.returncode == 0
    assert sorted(os.listdir(folder)) == ["epoch-4.ckpt"]


HUGGINGFACE_SCRIPT = textwrap.dedent(
    """
    import sys, time, torch
    from transformers import Trainer, TrainerCallback, TrainingArguments
    from wasmsched_job import checkpoint_dir, graceful
    from wasmsched_job.huggingface import WasmschedCallback, resume_path

    class Tiny(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(4, 2)

        def forward(self, x, labels=None):
            time.sleep(0.05)
            logits = self.layer(x)
            return {"loss": torch.nn.functional.cross_entropy(logits, labels), "logits": logits}

    class Says(TrainerCallback):
        def on_epoch_begin(self, args, state, control, **kwargs):
            print(f"epoch {round(state.epoch or 0) + 1} starts", file=sys.stderr, flush=True)

    g = torch.Generator().manual_seed(0)
    xs = torch.randn(64, 4, generator=g)
    data = [{"x": x, "labels": int(x[0] > 0)} for x in xs]
    args = TrainingArguments(
        output_dir=str(checkpoint_dir()), num_train_epochs=int(sys.argv[1]), per_device_train_batch_size=8,
        eval_strategy="epoch", save_strategy="epoch", report_to=[], use_cpu=True, disable_tqdm=True,
        save_total_limit=1,
    )
    trainer = Trainer(Tiny(), args, train_dataset=data, eval_dataset=data, callbacks=[WasmschedCallback(), Says()])
    with graceful():
        trainer.train(resume_from_checkpoint=resume_path())
    """
)


def test_huggingface_saves_at_the_step_on_sigterm_and_resumes_from_it(tmp_path: Path):
    for module in ("transformers", "accelerate", "torch"):  # the Trainer needs all three
        pytest.importorskip(module, reason=f"{module} is not installed (pip install 'transformers[torch]')")
    script = tmp_path / "train.py"
    script.write_text(HUGGINGFACE_SCRIPT)
    folder = tmp_path / "ckpt"
    stopped = run([str(script), "50"], folder, stop_at="epoch 2 starts")
    first = records(stopped)
    assert stopped.returncode == 143
    assert [r["epoch"] for r in first] == [1], "epoch 2 was cut at a step: saved, not reported"
    assert "eval_loss" in first[0] and "step" not in first[0]
    saved = [name for name in os.listdir(folder) if name.startswith("checkpoint-")]
    assert saved and all(int(name.split("-")[1]) > 8 for name in saved), f"saved mid-epoch 2: {saved}"
    resumed = run([str(script), "3"], folder)
    assert [r["epoch"] for r in records(resumed)] == [2, 3], "evaluations counted on from the checkpoint"
    assert resumed.returncode == 0


def test_the_torch_example_resumes_and_stops_alone(tmp_path: Path):
    pytest.importorskip("torch", reason="torch is not installed (pip install torch)")
    folder = tmp_path / "ckpt"
    first = run([str(EXAMPLE), "--epochs", "2", "--samples", "2000"], folder)
    assert [r["epoch"] for r in records(first)] == [1, 2] and first.returncode == 0
    again = run([str(EXAMPLE), "--epochs", "3", "--samples", "2000"], folder, extra={"WASMSCHED_BATCH_SIZE": "128"})
    assert [r["epoch"] for r in records(again)] == [3]
    assert sorted(os.listdir(folder)) == ["epoch-3.ckpt"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_torch_example_as_a_group_of_two_stops_both_at_one_epoch(tmp_path: Path):
    pytest.importorskip("torch", reason="torch is not installed (pip install torch)")
    folder = tmp_path / "ckpt"
    group = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "WASMSCHED_WORLD_SIZE": "2"}
    script = [str(EXAMPLE), "--epochs", "1000", "--samples", "40000"]
    ranks = [run(script, folder, extra={**group, "WASMSCHED_RANK": str(rank)}) for rank in (0, 1)]
    # Only rank 1 is told to stop, once rank 0 has reported twice: both end at the same epoch.
    assert ranks[0].stdout is not None
    seen = [ranks[0].stdout.readline(), ranks[0].stdout.readline()]
    ranks[1].send_signal(signal.SIGTERM)
    lines = [seen + ranks[0].communicate(timeout=120)[0].splitlines(keepends=True), records(ranks[1])]
    zero = [json.loads(line) for line in lines[0] if line.startswith('{"epoch":')]
    one = lines[1]
    assert (ranks[0].returncode, ranks[1].returncode) == (143, 143)
    assert [r["epoch"] for r in zero] == [r["epoch"] for r in one], "the same epochs on both ranks"
    assert zero == one, "the same model on both ranks"
    assert sorted(os.listdir(folder)) == [f"epoch-{zero[-1]['epoch']}.ckpt"], "rank 0 saved the last one"
