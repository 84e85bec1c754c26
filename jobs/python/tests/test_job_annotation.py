"""The pod's wasmsched.progress annotation, as the host reads it (kubernetes/src/follow.rs,
read_progress, and core/src/live/progress.rs, Reader): the value is fed as one chunk of lines;
each line is split at its first space into a time and a text; the time must be RFC 3339 as
humantime's ``parse_rfc3339`` takes it (``YYYY-MM-DDTHH:MM:SS[.frac]Z``), else the line is
dropped; a line at or before the last one read is skipped. The patches go to a local server
standing in for the apiserver."""

from __future__ import annotations

import http.server
import io
import json
import re
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pytest

from wasmsched_job import annotation as annotation_module
from wasmsched_job.annotation import Annotation, Api, from_environment, stamp
from wasmsched_job.progress import Reporter

# humantime::parse_rfc3339: 'T' at byte 10, ends in 'Z' (or +00:00), fixed-width fields.
RFC3339 = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?Z")


def host_lines(value: str) -> List[Tuple[int, str]]:
    """What the host's reader takes from an annotation value: (time ns, text) per line, in
    order, each later than the one before."""
    taken: List[Tuple[int, str]] = []
    last = 0
    for text in value.split("\n"):
        stamp_text, _, rest = text.partition(" ")
        if not RFC3339.fullmatch(stamp_text):
            continue
        whole, _, frac = stamp_text[:-1].partition(".")
        seconds = int(datetime.strptime(whole, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc).timestamp())
        ns = seconds * 1_000_000_000 + int((frac + "000000000")[:9])
        if ns <= last:
            continue
        last = ns
        taken.append((ns, rest))
    return taken


def test_a_stamp_is_rfc3339_utc_to_the_nanosecond():
    assert stamp(1_795_860_010_750_000_123) == "2026-11-28T10:00:10.750000123Z"
    assert stamp(0) == "1970-01-01T00:00:00.000000000Z"
    assert host_lines(stamp(1_795_860_010_750_000_123) + " x") == [(1_795_860_010_750_000_123, "x")]


class Recorder(http.server.BaseHTTPRequestHandler):
    """Answers every PATCH with the status the test sets, keeping what it got."""

    status = 200
    got: List[Dict[str, Any]] = []

    def do_PATCH(self) -> None:  # noqa: N802 (the standard library's name)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        Recorder.got.append({"path": self.path, "headers": dict(self.headers), "body": json.loads(body)})
        self.send_response(Recorder.status)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def apiserver() -> Iterator[str]:
    Recorder.status, Recorder.got = 200, []
    server = http.server.HTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def annotation(apiserver: str, tmp_path: Path, clock: Any, log: io.StringIO, keep: int = 3) -> Annotation:
    token = tmp_path / "token"
    token.write_text("sa-token\n")
    return Annotation(Api(apiserver, str(token)), "team-a", "trainer-0", keep=keep, clock=clock, log=log)


def test_each_record_patches_the_pod_with_the_last_lines_newest_last(apiserver: str, tmp_path: Path):
    log = io.StringIO()
    frozen = iter([5_000_000_000] * 10)  # a clock that does not move: the times still rise
    noted = annotation(apiserver, tmp_path, lambda: next(frozen), log)
    reporter = Reporter(out=io.StringIO(), annotation=noted)
    for epoch in range(1, 5):
        reporter.report(epoch, accuracy=epoch / 10)
    assert len(Recorder.got) == 4
    last = Recorder.got[-1]
    assert last["path"] == "/api/v1/namespaces/team-a/pods/trainer-0"
    assert last["headers"]["Content-Type"] == "application/merge-patch+json"
    assert last["headers"]["Authorization"] == "Bearer sa-token"
    value = last["body"]["metadata"]["annotations"]["wasmsched.progress"]
    lines = host_lines(value)
    assert [text for _, text in lines] == [
        '{"epoch":2,"accuracy":0.2}',
        '{"epoch":3,"accuracy":0.3}',
        '{"epoch":4,"accuracy":0.4}',
    ], "the last three kept, each read by the host"
    assert [ns for ns, _ in lines] == [5_000_000_001, 5_000_000_002, 5_000_000_003]
    assert log.getvalue() == ""


def test_a_refused_patch_is_said_once_and_its_record_travels_with_the_next(apiserver: str, tmp_path: Path):
    log = io.StringIO()
    clock = iter(range(1_000_000_000, 2_000_000_000, 1_000_000))
    noted = annotation(apiserver, tmp_path, lambda: next(clock), log)
    Recorder.status = 403
    assert not noted.add('{"epoch":1}') and not noted.add('{"epoch":2}')
    said = log.getvalue().splitlines()
    assert len(said) == 1, said
    assert "HTTP 403" in said[0] and "give the pod's service account pods patch in namespace team-a" in said[0]
    assert "the record is on stdout all the same" in said[0]
    Recorder.status = 200
    assert noted.add('{"epoch":3}')
    value = Recorder.got[-1]["body"]["metadata"]["annotations"]["wasmsched.progress"]
    assert [text for _, text in host_lines(value)] == ['{"epoch":1}', '{"epoch":2}', '{"epoch":3}']


def test_an_apiserver_that_does_not_answer_does_not_stop_training(tmp_path: Path):
    log = io.StringIO()
    noted = annotation("http://127.0.0.1:9", tmp_path, lambda: 1, log)  # nothing listens on port 9
    out = io.StringIO()
    Reporter(out=out, annotation=noted).report(1, loss=0.5)
    assert out.getvalue() == '{"epoch":1,"loss":0.5}\n'
    assert "did not answer" in log.getvalue()


def test_outside_a_pod_the_annotation_says_why_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    noted = from_environment(str(tmp_path))
    log = io.StringIO()
    noted._log = log
    assert not noted.add("{}") and not noted.add("{}")
    assert log.getvalue().count("KUBERNETES_SERVICE_HOST is not set") == 1


def test_in_a_pod_the_apiserver_pod_and_namespace_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    (tmp_path / "namespace").write_text("team-b")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "fd00::1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "6443")
    monkeypatch.setenv("POD_NAME", "trainer-7")
    monkeypatch.delenv("POD_NAMESPACE", raising=False)
    noted = from_environment(str(tmp_path))
    assert noted._api is not None and noted._api.base_url == "https://[fd00::1]:6443"
    assert (noted._namespace, noted._pod) == ("team-b", "trainer-7")
    monkeypatch.setenv("POD_NAMESPACE", "team-c")
    assert from_environment(str(tmp_path))._namespace == "team-c"


def test_the_annotation_is_the_one_the_host_reads():
    assert annotation_module.ANNOTATION == "wasmsched.progress"  # kubernetes/src/follow.rs, PROGRESS
