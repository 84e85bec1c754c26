"""SIGTERM: the step under way finishes, its checkpoint lands and its record is printed, then
the process exits with 143, as the test trainer does (jobs/trainer/src/main.rs, STOPPED)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Iterator

import pytest

from wasmsched_job import STOPPED, graceful, request_stop, stop_requested
from wasmsched_job import stop as stop_module

PACKAGE = Path(__file__).resolve().parents[1]

# A training loop as docs/jobs.md shows it: each epoch takes about 0.6 s, says when it starts
# (stderr), saves and reports.
LOOP = textwrap.dedent(
    """
    import sys, time
    from wasmsched_job import graceful, report, resume_epoch, save_checkpoint

    with graceful() as stop:
        for epoch in range(resume_epoch() + 1, 1000):
            print(f"epoch {epoch} starts", file=sys.stderr, flush=True)
            for _ in range(6):
                time.sleep(0.1)              # a step
            save_checkpoint(epoch, f"after {epoch}".encode())
            report(epoch, loss=1.0 / epoch)
            if stop:
                break
    print("not reached after a stop", flush=True)
    """
)


def start(folder: Path) -> "subprocess.Popen[str]":
    env = {"PYTHONPATH": str(PACKAGE), "WASMSCHED_CHECKPOINT_DIR": str(folder), "PATH": os.environ.get("PATH", "")}
    return subprocess.Popen(
        [sys.executable, "-c", LOOP], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


def wait_for(child: "subprocess.Popen[str]", text: str) -> None:
    """Reads the child's stderr until a line holds ``text``."""
    assert child.stderr is not None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        got = child.stderr.readline()
        if text in got:
            return
        if not got and child.poll() is not None:
            break
    child.kill()
    pytest.fail(f"the loop never said {text!r}")


def test_sigterm_mid_epoch_finishes_the_epoch_saves_reports_and_exits_143(tmp_path: Path):
    child = start(tmp_path)
    wait_for(child, "epoch 2 starts")
    child.send_signal(signal.SIGTERM)
    out, err = child.communicate(timeout=30)
    assert child.returncode == STOPPED == 143, err
    records = [json.loads(line) for line in out.splitlines()]
    assert [r["epoch"] for r in records] == [1, 2], "epoch 2 finished and was reported, no epoch 3"
    assert sorted(os.listdir(tmp_path)) == ["epoch-2.ckpt"]
    assert (tmp_path / "epoch-2.ckpt").read_bytes() == b"after 2"
    assert "asked to stop (SIGTERM): ending after the step under way" in err

    # Started again on the same folder, it resumes after its last reported epoch.
    again = start(tmp_path)
    wait_for(again, "epoch 3 starts")
    again.send_signal(signal.SIGTERM)
    out, err = again.communicate(timeout=30)
    assert again.returncode == 143, err
    assert [json.loads(line)["epoch"] for line in out.splitlines()] == [3]


@pytest.fixture
def fresh() -> Iterator[None]:
    """No stop asked before or after the test (the flag is the process's)."""
    stop_module._reset()
    yield
    stop_module._reset()


def test_leaving_the_block_without_a_stop_goes_on_and_puts_the_handlers_back(fresh: None):
    before = signal.getsignal(signal.SIGTERM)
    with graceful() as stop:
        assert signal.getsignal(signal.SIGTERM) is not before
        assert not stop and not stop.requested
    assert signal.getsignal(signal.SIGTERM) is before
    assert not stop_requested()


def test_a_stop_asked_ends_the_process_with_143_when_the_block_is_left(fresh: None):
    with pytest.raises(SystemExit) as ended:
        with graceful() as stop:
            os.kill(os.getpid(), signal.SIGTERM)
            assert stop and stop_requested(), "the handler ran, the process goes on"
    assert ended.value.code == 143


def test_an_error_in_the_block_goes_on_as_it_is_after_a_stop(fresh: None):
    with pytest.raises(ZeroDivisionError):
        with graceful():
            request_stop()
            1 / 0


def test_the_exit_status_can_be_chosen(fresh: None):
    with pytest.raises(SystemExit) as ended:
        with graceful(exit_code=0):
            request_stop()
    assert ended.value.code == 0


def test_a_second_ctrl_c_interrupts_at_once(fresh: None):
    with pytest.raises(KeyboardInterrupt):
        with graceful():
            os.kill(os.getpid(), signal.SIGINT)
            assert stop_requested()
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)
