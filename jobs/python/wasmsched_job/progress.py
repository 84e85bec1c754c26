"""Progress records: one JSON line per epoch on stdout, which the host reads from the job's log.

The host's reader (``core/src/live/progress.rs``, shared by the Docker and Kubernetes
backends) takes a line that starts with ``{`` and is one JSON object as a record when it has
the key ``epoch`` or the job's main metric. ``epoch`` must be a whole number (0 to 2^32 - 1);
every metric the job declares (``wasmsched.metric``, ``wasmsched.metrics``) must be there as a
finite number; other keys are ignored; a line over 64 KiB is skipped. This module writes
exactly such lines: ``{"epoch":3,"accuracy":0.8123,"loss":0.4567}``, the epoch first, the
metrics in the order given, a value that is not finite written ``null`` (JSON has no NaN),
which the host skips with a log line when that metric is declared.

On Kubernetes a job may report through its pod's ``wasmsched.progress`` annotation instead
(``WASMSCHED_PROGRESS=annotation``, :mod:`wasmsched_job.annotation`); the line goes to stdout
all the same.
"""

from __future__ import annotations

import json
import math
import sys
import threading
from typing import Dict, Optional, SupportsFloat, SupportsIndex, TextIO, Union

from .annotation import Annotation, from_environment
from .environment import PROGRESS_ANNOTATION, progress_target

MAX_LINE = 64 * 1024 - len("2026-11-23T10:56:00.450091411Z ")
"""The longest record the host reads, in bytes: its 64 KiB lines (``MAX_LINE`` in
``core/src/live/progress.rs``) hold the time the log or the annotation puts before the text."""

MAX_EPOCH = 2**32 - 1
"""The largest epoch the host reads (a u32)."""

Metric = Union[SupportsFloat, SupportsIndex]
"""A metric's value: a float, an int, or anything that converts (a NumPy or 0-d tensor value)."""


def line(epoch: SupportsIndex, **metrics: Metric) -> str:
    """The progress line for ``epoch`` (epochs done, from 1) with ``metrics``, no newline.

    Raises:
        TypeError: an epoch that is not a whole number, or a metric that is not a number.
        ValueError: an epoch outside 0 to 2^32 - 1, or a line longer than the host reads.
    """
    if isinstance(epoch, bool) or not hasattr(epoch, "__index__"):
        raise TypeError(f"epoch {epoch!r} is not a whole number: pass the count of epochs done, e.g. 3")
    done = epoch.__index__()
    if not 0 <= done <= MAX_EPOCH:
        raise ValueError(f"epoch {done} is outside 0 to {MAX_EPOCH}, the epochs the host reads")
    record: Dict[str, Union[int, float, None]] = {"epoch": done}
    for name, value in metrics.items():
        record[name] = _number(name, value)
    text = json.dumps(record, separators=(",", ":"), allow_nan=False)
    if len(text.encode()) > MAX_LINE:
        raise ValueError(f"the progress line is {len(text.encode())} bytes; the host reads records of {MAX_LINE} at most")
    return text


def _number(name: str, value: Metric) -> Optional[float]:
    """``value`` as a finite float, or None (``null``) when it is not finite."""
    if isinstance(value, (bool, str, bytes)):
        raise TypeError(f"metric {name!r} is {value!r}, not a number")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"metric {name!r} is {value!r}, not a number") from None
    return number if math.isfinite(number) else None


class Reporter:
    """Writes progress lines to a stream (flushed at once) and, where configured, to the pod's
    annotation. A failure of the annotation is said once per cause on stderr and never stops
    training; the line on the stream is written first, whatever happens after."""

    def __init__(self, out: Optional[TextIO] = None, annotation: Optional[Annotation] = None) -> None:
        self._out = out
        self._annotation = annotation
        self._lock = threading.Lock()

    def report(self, epoch: SupportsIndex, **metrics: Metric) -> str:
        """Writes the record; returns its line."""
        text = line(epoch, **metrics)
        with self._lock:
            out = self._out if self._out is not None else sys.stdout
            out.write(text + "\n")
            out.flush()
            if self._annotation is not None:
                self._annotation.add(text)
        return text


_reporter: Optional[Reporter] = None
_reporter_lock = threading.Lock()


def _default() -> Reporter:
    """The process's reporter, made at the first report from the environment."""
    global _reporter
    with _reporter_lock:
        if _reporter is None:
            annotation = from_environment() if progress_target() == PROGRESS_ANNOTATION else None
            _reporter = Reporter(annotation=annotation)
        return _reporter


def report(epoch: SupportsIndex, **metrics: Metric) -> str:
    """Reports epoch ``epoch`` done, with its metrics: one JSON line on stdout, flushed.

    Call it after the epoch's checkpoint has landed, from one process per container (the
    host reads a group's progress from one pod's log, its first by name, so every pod
    reports): ``report(3, accuracy=0.81, loss=0.45)``. A metric whose name is not a Python
    word goes in as ``**{"val/acc": 0.8}``. With ``WASMSCHED_PROGRESS=annotation`` the record
    also goes to the pod's ``wasmsched.progress`` annotation.

    Returns:
        the line written, without its newline.
    """
    return _default().report(epoch, **metrics)
