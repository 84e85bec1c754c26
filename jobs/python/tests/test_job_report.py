"""Progress lines are exactly what the host reads: each is parsed back here by a mirror of the
host's reader, ``parse`` in ``core/src/live/progress.rs``, whose rules are:

- the line, trimmed, starts with ``{`` and is one JSON object (``serde_json::from_str`` into a
  map), else "a JSON progress line does not parse" and it is skipped;
- without the key ``epoch`` and without the main (first declared) metric it is the job's own
  output, not a record;
- ``epoch``, when there, is ``as_u64`` fitting a u32: a JSON integer from 0 to 2^32 - 1 (not
  ``3.0``, not ``true``), else "not a whole number of epochs";
- every declared metric is there and ``as_f64`` (any JSON number, not ``null``, a string or a
  boolean) and finite, else the line is skipped ("lacks the declared metric", "not a number");
- other keys are ignored; a line over 64 KiB (``MAX_LINE``), its time included (the log's or the
  annotation's, 31 bytes with its space), is skipped.
"""

from __future__ import annotations

import io
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any, List, Optional, Tuple, Union

import pytest

from wasmsched_job import line, report
from wasmsched_job.progress import MAX_LINE, Reporter

PACKAGE = Path(__file__).resolve().parents[1]
U32_MAX = 2**32 - 1

Parsed = Union[Tuple[str, Optional[int], List[float]], Tuple[str, str]]


def host_parse(text: str, metrics: List[str]) -> Parsed:
    """The host's reading of a line against declared ``metrics``: ("progress", epoch, values),
    ("other", ""), or ("garbage", why)."""
    text = text.strip()
    if len(("2026-11-23T10:56:00.450091411Z " + text).encode()) > 64 * 1024:
        return ("garbage", "a line longer than the host reads")
    if not text.startswith("{"):
        return ("other", "")
    try:
        obj = json.loads(text, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    except ValueError as e:
        return ("garbage", f"a JSON progress line does not parse ({e})")
    if not isinstance(obj, dict):
        return ("garbage", "a JSON progress line does not parse (not an object)")
    main = metrics[0] if metrics else ""
    if main not in obj and "epoch" not in obj:
        return ("other", "")
    epoch = obj.get("epoch")
    if "epoch" in obj and not (type(epoch) is int and 0 <= epoch <= U32_MAX):
        return ("garbage", f'"epoch" is {epoch}, not a whole number of epochs')
    values = []
    for name in metrics:
        if name not in obj:
            return ("garbage", f"the line lacks the declared metric {name!r}")
        value = obj[name]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return ("garbage", f"{name} is {value}, not a number")
        if not math.isfinite(value):
            return ("garbage", f"{name} is {value}, not a finite number")
        values.append(float(value))
    return ("progress", epoch, values)


def test_a_line_is_a_record_with_the_declared_metrics_in_their_order():
    text = line(3, accuracy=0.8123, loss=0.4567, time_s=1.234)
    assert text == '{"epoch":3,"accuracy":0.8123,"loss":0.4567,"time_s":1.234}'
    assert host_parse(text, ["accuracy", "loss"]) == ("progress", 3, [0.8123, 0.4567])
    assert host_parse(text, ["loss", "time_s"]) == ("progress", 3, [0.4567, 1.234])


def test_the_line_is_the_trainers_shape():
    # jobs/trainer/src/lib.rs, epoch_line: {"epoch":3,"accuracy":0.8123,"loss":0.4567,"time_s":1.234}
    text = line(3, accuracy=0.8123, loss=0.4567, time_s=1.234)
    assert list(json.loads(text)) == ["epoch", "accuracy", "loss", "time_s"]
    assert " " not in text and "\n" not in text


def test_ints_numpy_like_values_and_names_that_are_not_python_words_are_read():
    class Scalar:  # a 0-d tensor or NumPy value: it converts
        def __float__(self) -> float:
            return 0.25

    text = line(1, **{"val/acc": Scalar(), "steps": 100})
    assert host_parse(text, ["val/acc", "steps"]) == ("progress", 1, [0.25, 100.0])


def test_a_value_that_is_not_finite_is_null_and_the_host_skips_it_only_when_declared():
    text = line(2, accuracy=0.5, loss=math.nan, grad=math.inf)
    assert json.loads(text) == {"epoch": 2, "accuracy": 0.5, "loss": None, "grad": None}
    assert host_parse(text, ["accuracy"]) == ("progress", 2, [0.5])
    kind, why = host_parse(text, ["accuracy", "loss"])  # type: ignore[misc]
    assert kind == "garbage" and "loss is None, not a number" in str(why)


def test_epochs_the_host_reads_are_taken_and_others_refused_before_they_are_written():
    assert host_parse(line(0), []) == ("progress", 0, [])
    assert host_parse(line(U32_MAX), []) == ("progress", U32_MAX, [])

    class Index:
        def __index__(self) -> int:
            return 7

    assert json.loads(line(Index()))["epoch"] == 7
    for bad in (-1, U32_MAX + 1):
        with pytest.raises(ValueError, match="epochs the host reads"):
            line(bad)
    for wrong in (3.0, True, "3", None):
        with pytest.raises(TypeError, match="not a whole number"):
            line(wrong)  # type: ignore[arg-type]


def test_a_metric_that_is_not_a_number_is_refused():
    for wrong in ("high", True, None, [1.0]):
        with pytest.raises(TypeError, match="metric 'accuracy'"):
            line(1, accuracy=wrong)  # type: ignore[arg-type]


def test_the_longest_line_the_host_reads_is_written_and_a_longer_one_refused():
    short = len(line(1, **{"": 0.5}))
    longest = "m" * (MAX_LINE - short)
    text = line(1, **{longest: 0.5})
    assert len(text) == MAX_LINE and host_parse(text, [longest]) == ("progress", 1, [0.5])
    with pytest.raises(ValueError, match="65505 at most"):
        line(1, **{longest + "m": 0.5})


def test_the_reporter_writes_one_whole_line_per_record():
    out = io.StringIO()
    reporter = Reporter(out=out)
    reporter.report(1, loss=2.0)
    reporter.report(2, loss=1.0)
    lines = out.getvalue().splitlines(keepends=True)
    assert lines == ['{"epoch":1,"loss":2.0}\n', '{"epoch":2,"loss":1.0}\n']
    assert [host_parse(text, ["loss"]) for text in lines] == [("progress", 1, [2.0]), ("progress", 2, [1.0])]


def test_report_reaches_a_piped_stdout_at_once(tmp_path: Path):
    # The host follows the log while the job runs: a line stuck in a pipe buffer is a record
    # the host sees late, or never. The child reports and then waits; the line must arrive first.
    script = "from wasmsched_job import report; import time; report(1, accuracy=0.5); time.sleep(30)"
    child = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        env={"PYTHONPATH": str(PACKAGE), "PATH": "/usr/bin:/bin"},
        cwd=tmp_path,
    )
    try:
        assert child.stdout is not None
        first = child.stdout.readline().decode()
    finally:
        child.kill()
        child.wait()
    assert host_parse(first, ["accuracy"]) == ("progress", 1, [0.5])


def test_report_returns_what_it_printed(capsys: Any):
    printed = report(4, accuracy=0.75)
    assert capsys.readouterr().out == printed + "\n"
    assert host_parse(printed, ["accuracy"]) == ("progress", 4, [0.75])
