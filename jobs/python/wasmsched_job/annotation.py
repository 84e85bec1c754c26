"""Progress through the pod's ``wasmsched.progress`` annotation, for clusters where the host
should not hold a log stream per pod (``docs/kubernetes.md``, Telemetry).

The annotation holds the job's latest progress lines, each after its time in RFC 3339 (UTC,
``Z``), the newest last::

    2026-11-26T12:00:03.120000000Z {"epoch":3,"accuracy":0.81}

The host reads it from the pod watch it holds anyway and skips lines at or before the last one
it read, so each line's time here is later than the one before, and the last few lines are
kept (a record survives a patch the host did not see). Each record is one merge patch of the
job's own pod through the apiserver, with the pod's service-account token: the account needs
``pods`` ``patch`` in its namespace. The pod is ``POD_NAME`` (the downward API's
``metadata.name``), else ``HOSTNAME``; its namespace ``POD_NAMESPACE``, else the service
account's. No dependency: ``urllib`` and ``ssl`` from the standard library.
"""

from __future__ import annotations

import collections
import json
import os
import socket
import ssl
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime, timezone
from typing import Callable, Deque, Optional, Set, TextIO

ANNOTATION = "wasmsched.progress"
"""The annotation the host reads progress from."""

KEEP = 5
"""Lines kept in the annotation."""

TIMEOUT_S = 5.0
"""How long one patch may take before it is given up (the record stays for the next)."""

SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
"""Where Kubernetes mounts a pod's service-account token, CA and namespace."""


def stamp(unix_ns: int) -> str:
    """``unix_ns`` as the host reads a line's time: RFC 3339, UTC, nanoseconds, ``Z``."""
    seconds, nanos = divmod(unix_ns, 1_000_000_000)
    whole = datetime.fromtimestamp(seconds, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{whole}.{nanos:09d}Z"


class AnnotationError(Exception):
    """A patch that did not land; the message says why and what to do."""


class Api:
    """Patches a pod through the apiserver at ``base_url`` with the token in ``token_file``
    (read at each patch: Kubernetes rotates it) and the CA in ``ca_file`` (None: the system's,
    or none for ``http``)."""

    def __init__(self, base_url: str, token_file: str, ca_file: Optional[str] = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.token_file = token_file
        self.ca_file = ca_file
        self._context: Optional[ssl.SSLContext] = None

    def _tls(self) -> Optional[ssl.SSLContext]:
        """The TLS context for an ``https`` apiserver, made at the first patch."""
        if self._context is None and self.base_url.startswith("https"):
            try:
                self._context = ssl.create_default_context(cafile=self.ca_file)
            except (OSError, ssl.SSLError) as e:
                raise AnnotationError(
                    f"cannot read the cluster's CA at {self.ca_file} ({e}): mount the pod's service account"
                ) from None
        return self._context

    def patch_annotation(self, namespace: str, pod: str, value: str) -> None:
        """Sets the pod's ``wasmsched.progress`` annotation to ``value`` (a merge patch).

        Raises:
            AnnotationError: the patch did not land; why.
        """
        context = self._tls()
        try:
            with open(self.token_file, encoding="utf-8") as f:
                token = f.read().strip()
        except OSError as e:
            raise AnnotationError(
                f"no service-account token at {self.token_file} ({e.strerror}): "
                "mount the pod's service account (automountServiceAccountToken)"
            ) from None
        url = (
            f"{self.base_url}/api/v1/namespaces/{urllib.parse.quote(namespace, safe='')}"
            f"/pods/{urllib.parse.quote(pod, safe='')}"
        )
        body = json.dumps({"metadata": {"annotations": {ANNOTATION: value}}}).encode()
        request = urllib.request.Request(
            url,
            data=body,
            method="PATCH",
            headers={
                "Authorization": f"Bearer {token}",
                "Content-Type": "application/merge-patch+json",
                "Accept": "application/json",
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S, context=context) as answer:
                answer.read()
        except urllib.error.HTTPError as e:
            remedy = {
                401: "the service-account token was refused",
                403: f"give the pod's service account pods patch in namespace {namespace}",
                404: f"no pod {pod} in namespace {namespace}: set POD_NAME and POD_NAMESPACE from the downward API",
            }.get(e.code, "the apiserver refused the patch")
            raise AnnotationError(f"HTTP {e.code} {e.reason}: {remedy}") from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise AnnotationError(f"the apiserver at {self.base_url} did not answer ({reason})") from None


class Annotation:
    """The pod's ``wasmsched.progress`` annotation, written by :meth:`add` with the last
    ``keep`` lines. A patch that fails is said once per cause on ``log`` and the lines are kept
    for the next one; nothing here raises into the training loop."""

    def __init__(
        self,
        api: Optional[Api],
        namespace: str,
        pod: str,
        *,
        keep: int = KEEP,
        clock: Callable[[], int] = time.time_ns,
        log: Optional[TextIO] = None,
        unusable: Optional[str] = None,
    ) -> None:
        if keep < 1:
            raise ValueError(f"keep is {keep}: keep at least the newest line")
        self._api = api
        self._namespace = namespace
        self._pod = pod
        self._lines: Deque[str] = collections.deque(maxlen=keep)
        self._clock = clock
        self._last_ns = 0
        self._log = log
        self._unusable = unusable
        self._said: Set[str] = set()
        self._lock = threading.Lock()

    @property
    def value(self) -> str:
        """The annotation's value as last written: the kept lines, newest last."""
        return "\n".join(self._lines)

    def add(self, record: str) -> bool:
        """Adds ``record`` (a progress line) after its time and writes the annotation; whether
        the patch landed."""
        with self._lock:
            now = max(self._clock(), self._last_ns + 1)
            self._last_ns = now
            self._lines.append(f"{stamp(now)} {record}")
            if self._unusable is not None:
                self._say(self._unusable)
                return False
            assert self._api is not None
            try:
                self._api.patch_annotation(self._namespace, self._pod, self.value)
            except AnnotationError as e:
                self._say(str(e))
                return False
            return True

    def _say(self, why: str) -> None:
        if why in self._said:
            return
        self._said.add(why)
        log = self._log if self._log is not None else sys.stderr
        log.write(
            f"wasmsched_job: cannot write pod {self._namespace}/{self._pod}'s {ANNOTATION} annotation: {why}; "
            "the record is on stdout all the same (said once per cause)\n"
        )
        log.flush()


def from_environment(service_account: str = SERVICE_ACCOUNT) -> Annotation:
    """The annotation of the pod this process runs in, found as the module says. A pod that
    cannot be found gives an annotation that says why once, at the first record."""
    pod = os.environ.get("POD_NAME") or os.environ.get("HOSTNAME") or socket.gethostname()
    namespace = os.environ.get("POD_NAMESPACE", "")
    if not namespace:
        try:
            with open(os.path.join(service_account, "namespace"), encoding="utf-8") as f:
                namespace = f.read().strip()
        except OSError:
            namespace = ""
    host = os.environ.get("KUBERNETES_SERVICE_HOST", "")
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    unusable = None
    if not host:
        unusable = "KUBERNETES_SERVICE_HOST is not set: this process does not run in a pod; unset WASMSCHED_PROGRESS"
    elif not namespace:
        unusable = "no namespace: set POD_NAMESPACE from the downward API (metadata.namespace)"
    api = None
    if unusable is None:
        address = f"[{host}]" if ":" in host else host
        ca = os.path.join(service_account, "ca.crt")
        api = Api(f"https://{address}:{port}", os.path.join(service_account, "token"), ca)
    return Annotation(api, namespace, pod, unusable=unusable)
