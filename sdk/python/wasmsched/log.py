"""Logging from a policy: ``wasmsched.log.info("…")`` and friends. In a component the line goes
to the host's ``log`` import, which re-emits it under target ``policy`` with the policy's name;
natively (tests) it goes to Python's :mod:`logging`, logger ``wasmsched.policy``."""

from __future__ import annotations

import logging
from collections.abc import Callable

from .enums import Level

_logger = logging.getLogger("wasmsched.policy")
_PY_LEVELS = {
    Level.TRACE: 5,
    Level.DEBUG: logging.DEBUG,
    Level.INFO: logging.INFO,
    Level.WARN: logging.WARNING,
    Level.ERROR: logging.ERROR,
}


def _to_logging(level: Level, message: str) -> None:
    _logger.log(_PY_LEVELS[level], "%s", message)


_sink: Callable[[Level, str], None] = _to_logging


def set_sink(sink: Callable[[Level, str], None] | None) -> None:
    """Send log lines to ``sink`` (the component glue sends them to the host); None: back to
    Python's logging."""
    global _sink
    _sink = sink if sink is not None else _to_logging


def emit(level: Level, message: str) -> None:
    """Emit one log line."""
    _sink(level, message)


def trace(message: str) -> None:
    """Log at ``trace`` level."""
    _sink(Level.TRACE, message)


def debug(message: str) -> None:
    """Log at ``debug`` level."""
    _sink(Level.DEBUG, message)


def info(message: str) -> None:
    """Log at ``info`` level."""
    _sink(Level.INFO, message)


def warn(message: str) -> None:
    """Log at ``warn`` level."""
    _sink(Level.WARN, message)


def error(message: str) -> None:
    """Log at ``error`` level."""
    _sink(Level.ERROR, message)
