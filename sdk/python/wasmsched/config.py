"""A policy's config from JSON, and its saved state as JSON, the way the Rust SDK's serde
derive does it: declared defaults, kebab-case keys, unknown keys refused by name, numbers
checked against their declared type.

A config is a dataclass whose every field has a default::

    @dataclass
    class Config:
        interval_s: float = 30.0        # key "interval-s"
        max_backoff: U32 = 16           # an integer in 0 ..= 2^32 - 1

Field types: ``bool``, ``int`` (any integer), ``U8``/``U32``/``U64`` (unsigned, bounded),
``float`` (an integer is taken too), ``str``, and ``X | None`` of those (``null`` is None). A
field's key is its name with ``-`` for ``_``, or ``field(metadata={"key": "…"})``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import typing
from typing import Annotated, Any, TypeVar

from .numeric import U32_MAX, U64_MAX


@dataclasses.dataclass(frozen=True)
class Bounds:
    """An integer's range, for ``Annotated[int, Bounds(lo, hi, "u32")]``."""

    lo: int
    hi: int
    name: str


U8 = Annotated[int, Bounds(0, 255, "u8")]
U32 = Annotated[int, Bounds(0, U32_MAX, "u32")]
U64 = Annotated[int, Bounds(0, U64_MAX, "u64")]

C = TypeVar("C")


class ConfigError(ValueError):
    """A config the policy refuses; the message says which key and why."""


def json_kind(value: Any) -> str:
    """How serde names a JSON value it did not expect, in an error."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean `{'true' if value else 'false'}`"
    if isinstance(value, int):
        return f"integer `{value}`"
    if isinstance(value, float):
        return f"floating point `{format_f64(value)}`"
    if isinstance(value, str):
        return f"string {json.dumps(value)}"
    if isinstance(value, list):
        return "sequence"
    return "map"


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ConfigError(f"duplicate field `{k}`")
        out[k] = v
    return out


def _check(value: Any, hint: Any, key: str) -> Any:
    """``value`` as ``hint`` (a field's type), or ConfigError naming ``key``."""
    origin = typing.get_origin(hint)
    if origin is Annotated:
        base, *extras = typing.get_args(hint)
        for b in extras:
            if not isinstance(b, Bounds):
                continue
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(f"invalid type: {json_kind(value)}, expected {b.name} for key `{key}`")
            if not b.lo <= value <= b.hi:
                raise ConfigError(f"invalid value: integer `{value}`, expected {b.name} for key `{key}`")
        return _check(value, base, key)
    args = typing.get_args(hint)
    if type(None) in args:
        if value is None:
            return None
        rest = [a for a in args if a is not type(None)]
        return _check(value, rest[0], key)
    if hint is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"invalid type: {json_kind(value)}, expected a boolean for key `{key}`")
    if hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise ConfigError(f"invalid type: {json_kind(value)}, expected an integer for key `{key}`")
    if hint is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise ConfigError(f"invalid type: {json_kind(value)}, expected f64 for key `{key}`")
    if hint is str:
        if isinstance(value, str):
            return value
        raise ConfigError(f"invalid type: {json_kind(value)}, expected a string for key `{key}`")
    return value


def parse_config(config_type: type[C] | None, text: str) -> C | None:
    """Parse a policy's config JSON (empty or blank means ``{}``) into ``config_type``, a
    dataclass with a default for every field; None means the policy takes no config, and any
    key is refused. Raises ConfigError with a message that names the key."""
    text = text if text.strip() else "{}"
    try:
        raw = json.loads(text, object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as e:
        raise ConfigError(f"{e.msg} at line {e.lineno} column {e.colno}") from None
    name = "NoConfig" if config_type is None else config_type.__name__
    if not isinstance(raw, dict):
        raise ConfigError(f"invalid type: {json_kind(raw)}, expected struct {name}")
    if config_type is None:
        for key in raw:
            raise ConfigError(f"unknown field `{key}`, there are no fields")
        return None
    hints = typing.get_type_hints(config_type, include_extras=True)
    fields = {f.metadata.get("key", f.name.replace("_", "-")): f for f in dataclasses.fields(config_type)}
    values = {}
    for key, value in raw.items():
        f = fields.get(key)
        if f is None:
            expected = ", ".join(f"`{k}`" for k in fields)
            raise ConfigError(f"unknown field `{key}`, expected one of {expected}")
        values[f.name] = _check(value, hints[f.name], key)
    return config_type(**values)


def format_f64(x: float) -> str:
    """A float as serde_json writes it: shortest round-trip digits; ``1e+16``, ``1.5e-7`` from
    1e16 and below 1e-5; ``.0`` on whole numbers; NaN and infinities as ``null``."""
    if not math.isfinite(x):
        return "null"
    r = repr(x)
    sign = "-" if r.startswith("-") else ""
    r = r.lstrip("-")
    mantissa, _, exp = r.partition("e")
    digits = mantissa.replace(".", "")
    point = mantissa.index(".") if "." in mantissa else len(mantissa)
    point += int(exp) if exp else 0
    lead = len(digits) - len(digits.lstrip("0"))
    digits = digits.strip("0") or "0"
    if digits == "0":
        return sign + "0.0"
    kk = point - lead  # the decimal point's place after the first significant digit's
    n = len(digits)
    if 0 <= n <= kk <= 16:
        return sign + digits + "0" * (kk - n) + ".0"
    if 0 < kk <= 16:
        return sign + digits[:kk] + "." + digits[kk:]
    if -5 < kk <= 0:
        return sign + "0." + "0" * (-kk) + digits
    e = kk - 1
    body = digits[0] + ("." + digits[1:] if n > 1 else "")
    return f"{sign}{body}e{'+' if e > 0 else ''}{e}"


def dumps(value: Any) -> str:
    """JSON as serde_json writes it, compact: no spaces, floats as :func:`format_f64`, keys in
    the order given."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return format_f64(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(str(k), ensure_ascii=False)}:{dumps(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(dumps(v) for v in value) + "]"
    raise TypeError(f"cannot encode {type(value).__name__} as JSON")
