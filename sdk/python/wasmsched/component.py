"""The component glue: what ``app.py`` binds as ``Policy`` so that componentize-py exports the
policy as the ``wasmsched:policy/policy`` interface::

    from wasmsched.component import export
    from my_policy import MyPolicy

    Policy = export(MyPolicy)

componentize-py builds a new ``Policy`` object for every exported call, so the runner lives
here, at module level, not on ``self``. The generated ``wit_world`` bindings are imported on
the first call, so this module (and the SDK) imports natively without them.
"""

from __future__ import annotations

import gc
import sys
import traceback
from typing import Any

from . import decision as d
from . import log
from .enums import Level
from .policy import Failed, InvalidConfig, InvalidState, Policy, PolicyError, Runner

_wit: Any = None


def _bindings() -> Any:
    """The generated modules, imported once: (types, host, Err)."""
    global _wit
    if _wit is None:
        from componentize_py_types import Err
        from wit_world.imports import host, types

        _wit = (types, host, Err)
    return _wit


_U8, _U32, _U64 = (1 << 8) - 1, (1 << 32) - 1, (1 << 64) - 1


def _unsigned(value: Any, top: int, what: str) -> int:
    """``value`` if it is an int in ``0..=top``; else Failed (the host could not take it, and
    lowering it would trap)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= top:
        raise Failed(f"the policy's decision holds {what} {value!r}, not an integer in 0..={top}")
    return value


def to_wit_kind(kind: d.ActionKind, types: Any) -> Any:
    """The SDK's action kind as the generated ``ActionKind_*`` case; Failed when a number does
    not fit the contract's type."""
    if isinstance(kind, (d.SetCpu, d.SetMemory)) and kind.limit is not None:
        _unsigned(kind.limit, _U64, "a limit")
    elif isinstance(kind, d.Migrate):
        _unsigned(kind.node, _U32, "a node")
    elif isinstance(kind, d.SetGpuShare):
        _unsigned(kind.gpu, _U32, "a GPU")
        _unsigned(kind.percent, _U8, "a GPU share")
    elif isinstance(kind, (d.Place, d.Resize)):
        for n, gpus in kind.nodes:
            _unsigned(n, _U32, "a node")
            for g in gpus:
                _unsigned(g, _U32, "a GPU")
        if isinstance(kind, d.Resize) and kind.batch_size is not None:
            _unsigned(kind.batch_size, _U32, "a batch size")
    if isinstance(kind, d.SetCpu):
        return types.ActionKind_SetCpu(kind.limit)
    if isinstance(kind, d.SetMemory):
        return types.ActionKind_SetMemory(kind.limit)
    if isinstance(kind, d.Migrate):
        return types.ActionKind_Migrate(kind.node)
    if isinstance(kind, d.Deliver):
        return types.ActionKind_Deliver()
    if isinstance(kind, d.Stop):
        return types.ActionKind_Stop()
    if isinstance(kind, d.SetGpuShare):
        return types.ActionKind_SetGpuShare(types.GpuShare(kind.gpu, kind.percent))
    if isinstance(kind, d.Place):
        nodes = [types.NodePlacement(n, list(gpus)) for n, gpus in kind.nodes]
        return types.ActionKind_Place(types.Placement(nodes, kind.share))
    if isinstance(kind, d.Preempt):
        return types.ActionKind_Preempt()
    if isinstance(kind, d.Resize):
        nodes = [types.NodePlacement(n, list(gpus)) for n, gpus in kind.nodes]
        return types.ActionKind_Resize(types.Resize(types.Placement(nodes, kind.share), kind.batch_size))
    raise TypeError(f"not an action kind: {kind!r}")


def to_wit_decision(decision: d.Decision, types: Any) -> Any:
    """The SDK's decision as the generated ``Decision``; the next call in whole milliseconds
    (rounded; 0 for a negative or NaN time)."""
    actions = [
        types.Action(_unsigned(a.job, _U32, "a job"), to_wit_kind(a.kind, types), str(a.reason))
        for a in decision.actions
    ]
    pending = [types.Pending(_unsigned(job, _U32, "a job"), str(reason)) for job, reason in decision.pending_reasons]
    return types.Decision(actions, decision.next_call_ms, pending)


def to_wit_error(error: PolicyError, types: Any) -> Any:
    """The SDK's error as the generated ``PolicyError_*`` case."""
    if isinstance(error, InvalidConfig):
        return types.PolicyError_InvalidConfig(error.message)
    if isinstance(error, InvalidState):
        return types.PolicyError_InvalidState(error.message)
    return types.PolicyError_Failed(error.message)


def export(policy_type: type[Policy]) -> type:
    """The class ``app.py`` binds as ``Policy``: init, decide and save-state for
    ``policy_type``, with one runner kept at module level."""
    slot: dict[str, Runner[Any]] = {}

    def host_log(level: Level, message: str) -> None:
        types, host, _ = _bindings()
        host.log(host.Level(level.value), message)

    def fail(error: PolicyError) -> Exception:
        types, _, err = _bindings()
        return err(to_wit_error(error, types))

    def bug(where: str) -> None:
        # An exception that is not a PolicyError is a bug: the host hears of it, then the call
        # traps (as a panic does in Rust) and the host restarts the instance.
        try:
            log.error(f"{where}: {traceback.format_exc(limit=8)}")
        except Exception:  # noqa: BLE001 - the trap that follows is what matters
            print(traceback.format_exc(), file=sys.stderr)

    class Exported:
        """``wit_world.exports.Policy`` for one policy type."""

        def init(self, config_json: str, saved_state: bytes | None) -> Any:
            types, _, _ = _bindings()
            log.set_sink(host_log)
            try:
                slot["runner"] = Runner.init(policy_type, config_json, saved_state)
            except PolicyError as e:
                raise fail(e) from None
            except Exception:
                bug("init")
                raise
            return types.Abilities(places=bool(policy_type.PLACES))

        def decide(self, snapshot: Any) -> Any:
            types, _, _ = _bindings()
            runner = slot.get("runner")
            if runner is None:
                raise fail(Failed("decide called before init"))
            try:
                return to_wit_decision(runner.decide(snapshot), types)
            except PolicyError as e:
                raise fail(e) from None
            except Exception:
                bug("decide")
                raise
            finally:
                # What outlives a call (the job table, the histories) is set aside from the
                # cyclic collector, which then scans only one call's garbage: a full scan of a
                # 1,000-job table paused a call for about 100 ms, past a 50 ms deadline.
                # Reference counting still frees it; only a cycle kept past a call is never
                # collected.
                gc.freeze()

        def save_state(self) -> bytes:
            runner = slot.get("runner")
            if runner is None:
                return b""
            try:
                return bytes(runner.save_state())
            except Exception:
                bug("save-state")
                raise

    Exported.__name__ = Exported.__qualname__ = "Policy"
    return Exported
