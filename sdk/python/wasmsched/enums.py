"""The contract's enums, with the same integer values as the WIT enums so that the glue
converts a generated enum to these (and back) by ``.value``."""

from __future__ import annotations

from enum import Enum


class Direction(Enum):
    """Whether a larger metric value is better (accuracy) or worse (loss, latency)."""

    HIGHER_IS_BETTER = 0
    LOWER_IS_BETTER = 1


class JobKind(Enum):
    """What kind of work a job is."""

    #: Trains a model epoch by epoch; progress records carry validation metrics.
    TRAINING = 0
    #: Serves requests; progress records carry the request latency.
    INFERENCE = 1


class WaitReason(Enum):
    """Why a queued job waits."""

    #: It arrived and has not run yet.
    NEVER_STARTED = 0
    #: It ran, was preempted, and resumes from its checkpoint when placed again.
    PREEMPTED = 1


class Level(Enum):
    """A log line's level, as the host's ``log`` import takes it."""

    TRACE = 0
    DEBUG = 1
    INFO = 2
    WARN = 3
    ERROR = 4
