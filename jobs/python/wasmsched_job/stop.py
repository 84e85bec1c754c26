"""Stopping well: on SIGTERM, finish the step under way, let its checkpoint land, then exit.

The host stops a job with SIGTERM before it preempts, migrates or resizes it (Docker gives 30 s
before SIGKILL for a preemption, 10 s for a stop; on Kubernetes the pod's
``terminationGracePeriodSeconds``, 30 s unless set). Everything the job did after its last
checkpoint is lost, and a job killed between saving a checkpoint and reporting its epoch would
resume after an epoch it never reported. So the job checks :func:`stop_requested` where a
step (an epoch, or a batch when epochs are long) has ended and its checkpoint has landed, and
ends there, as the test trainer does (``jobs/trainer``). Its exit status is 143, a process
ended by SIGTERM as shells count it, which the trainer gives too: the training did not
finish, and a supervisor that restarts failed jobs (a Kubernetes Job, ``restartPolicy:
OnFailure``) must not take it for done.

::

    with graceful() as stop:
        for epoch in range(resume_epoch() + 1, epochs + 1):
            train_one_epoch()
            save_checkpoint(epoch, ...)
            report(epoch, accuracy=...)
            if stop:
                break
    # a stop asked for ends the process here, with status 143
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from types import FrameType, TracebackType
from typing import Any, Callable, Dict, Optional, Sequence, Type, Union

STOPPED = 128 + signal.SIGTERM
"""The exit status after a stop asked for: 143, a process ended by SIGTERM."""

_Handler = Union[Callable[[int, Optional[FrameType]], Any], int, None]


class _Asked:
    """Whether a stop was asked: a plain attribute, which a signal handler sets without a lock
    (a lock taken by the code it interrupts would never be released)."""

    def __init__(self) -> None:
        self.value = False


_asked = _Asked()


def stop_requested() -> bool:
    """Whether a stop was asked: SIGTERM (or SIGINT) caught by :func:`graceful` or an
    adapter, or :func:`request_stop`."""
    return _asked.value


def request_stop() -> None:
    """Asks for a stop as SIGTERM does (for a job that decides to end early, and for tests)."""
    _asked.value = True


def _reset() -> None:
    """Forgets a stop asked (for tests)."""
    _asked.value = False


def _on_signal(signum: int, frame: Optional[FrameType]) -> None:
    if signum == signal.SIGINT and _asked.value:
        raise KeyboardInterrupt  # a second Ctrl-C: a person wants out now
    if not _asked.value:
        # Straight to the file descriptor: the handler may run in the middle of a write to
        # sys.stderr, and a buffered stream refuses to be written from inside its own write.
        name = signal.Signals(signum).name
        with contextlib.suppress(OSError):
            os.write(2, f"wasmsched_job: asked to stop ({name}): ending after the step under way\n".encode())
    _asked.value = True


class Graceful:
    """Catches SIGTERM and SIGINT while the ``with`` block runs; true once a stop is asked.

    Leaving the block normally after a stop was asked exits the process with ``exit_code``
    (raises ``SystemExit``), stdout and stderr flushed; an error leaving the block goes on as
    it is. The signal handlers there before are put back when the block ends.
    """

    def __init__(self, exit_code: int = STOPPED, signals: Sequence[int] = (signal.SIGTERM, signal.SIGINT)) -> None:
        self.exit_code = exit_code
        self.signals = tuple(signals)
        self._before: Dict[int, _Handler] = {}

    def __bool__(self) -> bool:
        return stop_requested()

    @property
    def requested(self) -> bool:
        """Whether a stop has been asked for."""
        return stop_requested()

    def __enter__(self) -> "Graceful":
        if threading.current_thread() is not threading.main_thread():
            raise RuntimeError("graceful() catches signals, which only the main thread can: enter it there")
        for signum in self.signals:
            self._before[signum] = signal.signal(signum, _on_signal)
        return self

    def __exit__(
        self,
        kind: Optional[Type[BaseException]],
        error: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        for signum, before in self._before.items():
            signal.signal(signum, before if before is not None else signal.SIG_DFL)
        self._before.clear()
        if kind is None and stop_requested():
            sys.stdout.flush()
            sys.stderr.flush()
            raise SystemExit(self.exit_code)


def graceful(exit_code: int = STOPPED) -> Graceful:
    """A ``with`` block that catches SIGTERM and SIGINT and ends the process with
    ``exit_code`` (143) once it is left after a stop was asked (:class:`Graceful`)."""
    return Graceful(exit_code)
