"""The :class:`Policy` base class an author subclasses, and the :class:`Runner` that drives
one: it folds the contract's deltas into a complete :class:`~wasmsched.view.Snapshot`, calls
the policy, and hands back its :class:`~wasmsched.decision.Decision`. The component glue
(:mod:`wasmsched.component`) and the native harness (:mod:`wasmsched.testing`) use the same
runner."""

from __future__ import annotations

import json
from typing import Any, ClassVar, Generic, TypeVar

from .config import ConfigError, dumps, parse_config
from .decision import Decision
from .table import JobTable, MalformedSnapshot, NodeTable
from .view import Snapshot


class PolicyError(Exception):
    """A policy's own failure, as opposed to a bug: it crosses to the host as the contract's
    ``policy-error``. Raise one of the subclasses."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self.message == other.message  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self), self.message))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r})"


class InvalidConfig(PolicyError):
    """The config JSON was refused; the message says which key and why."""


class InvalidState(PolicyError):
    """The saved state from a previous version could not be used."""


class Failed(PolicyError):
    """Anything else the policy wants to report."""


class Policy:
    """A scheduling policy. Subclass it, set :attr:`Config` to a dataclass of your constants
    (or leave it None for no config), and implement :meth:`decide`.

    The runner builds it with :meth:`new` (by default ``cls(config)``; override ``new`` to
    validate and raise :class:`InvalidConfig`), then calls :meth:`restore_state` with the
    state an older version saved, if any, and :meth:`decide` once per tick.
    """

    #: The config dataclass (:mod:`wasmsched.config`); None: the policy takes none.
    Config: ClassVar[type | None] = None
    #: Whether it places queued jobs itself (``Action.place``). When false, the host's
    #: default placement starts them and the policy tunes what runs.
    PLACES: ClassVar[bool] = False

    @classmethod
    def new(cls, config: Any) -> Policy:
        """Build the policy from its config (None when it has no ``Config``)."""
        return cls() if config is None else cls(config)  # type: ignore[call-arg]

    def decide(self, snapshot: Snapshot) -> Decision:
        """Decide what to do on this tick."""
        raise NotImplementedError

    def save_state(self) -> bytes:
        """What a newer version should start from after a hot swap (:func:`encode_state`)."""
        return b""

    def restore_state(self, saved: bytes) -> None:
        """Take over the state an older version saved (:func:`decode_state`). Called only
        with a non-empty state; raise :class:`InvalidState` to refuse it."""


def encode_state(value: Any) -> bytes:
    """Encode a policy's state (dicts, lists, numbers, strings, None) as compact JSON, the
    way serde_json would, for :meth:`Policy.save_state`."""
    return dumps(value).encode()


def decode_state(saved: bytes) -> Any:
    """Decode a state saved by :func:`encode_state` (or by serde_json in a Rust version);
    raises :class:`InvalidState`."""
    try:
        return json.loads(saved)
    except (ValueError, UnicodeDecodeError) as e:
        raise InvalidState(str(e)) from None


P = TypeVar("P", bound=Policy)


class Runner(Generic[P]):
    """Drives one policy: keeps the job and node tables and folds each tick's delta in."""

    def __init__(self, policy: P) -> None:
        self.policy = policy
        self._table = JobTable()
        self._nodes = NodeTable()
        self._time = 0.0
        self._interval = 0.0

    @classmethod
    def init(cls, policy_type: type[P], config_json: str, saved_state: bytes | None = None) -> Runner[P]:
        """What ``init`` does: parse the config JSON (empty means ``{}``), build the policy,
        hand it the saved state."""
        try:
            config = parse_config(policy_type.Config, config_json)
        except ConfigError as e:
            raise InvalidConfig(str(e)) from None
        policy = policy_type.new(config)
        if saved_state:
            policy.restore_state(bytes(saved_state))
        return cls(policy)  # type: ignore[arg-type]

    def decide(self, raw: Any) -> Decision:
        """Fold the tick's delta (a generated ``Snapshot`` or :class:`wasmsched.raw.Snapshot`)
        into the tables and ask the policy."""
        try:
            self._nodes.apply(raw)
            self._time, self._interval = self._table.apply(raw)
        except MalformedSnapshot as e:
            raise Failed(f"the host sent a malformed snapshot: {e}") from None
        return self.policy.decide(self.view())

    def view(self) -> Snapshot:
        """The world as the policy saw it on the last call."""
        return Snapshot(self._time, self._interval, self._nodes, self._table)

    def save_state(self) -> bytes:
        """What ``save-state`` does."""
        return self.policy.save_state()
