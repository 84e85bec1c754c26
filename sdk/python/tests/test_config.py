"""Config from JSON with declared defaults (serde's deny_unknown_fields), state as serde JSON."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pytest

from wasmsched import U8, U32, Decision, InvalidConfig, InvalidState, Policy, Runner, decode_state, encode_state
from wasmsched.config import dumps, format_f64


@dataclass
class Config:
    interval_s: float = 30.0
    max_backoff: U32 = 16
    share: U8 | None = None
    verbose: bool = False
    name: str = "x"
    renamed: int = field(default=1, metadata={"key": "oddKey"})


class WithConfig(Policy):
    Config = Config

    def __init__(self, config: Config) -> None:
        self.config = config

    def decide(self, snapshot):
        return Decision()


class NoConfig(Policy):
    def decide(self, snapshot):
        return Decision()


def config(text: str) -> Config:
    return Runner.init(WithConfig, text).policy.config


def test_defaults_fill_what_is_missing_and_blank_means_empty():
    assert config("") == Config()
    assert config("  \n") == Config()
    assert config("{}") == Config()
    assert config('{"interval-s": 5, "max-backoff": 4, "oddKey": 2, "share": null}') == Config(5.0, 4, renamed=2)
    assert isinstance(config('{"interval-s": 5}').interval_s, float)


def test_an_unknown_key_is_refused_by_name():
    with pytest.raises(InvalidConfig) as e:
        config('{"interval_s": 5}')
    assert e.value.message.startswith("unknown field `interval_s`, expected one of `interval-s`, `max-backoff`")
    with pytest.raises(InvalidConfig, match="unknown field `alpha`, there are no fields"):
        Runner.init(NoConfig, '{"alpha": 1}')
    assert isinstance(Runner.init(NoConfig, "").policy, NoConfig)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('{"max-backoff": -1}', "invalid value: integer `-1`, expected u32 for key `max-backoff`"),
        ('{"max-backoff": 4294967296}', "expected u32"),
        ('{"max-backoff": 2.0}', "invalid type: floating point `2.0`, expected u32 for key `max-backoff`"),
        ('{"max-backoff": true}', "invalid type: boolean `true`"),
        ('{"interval-s": "5"}', 'invalid type: string "5", expected f64 for key `interval-s`'),
        ('{"share": 300}', "expected u8 for key `share`"),
        ('{"verbose": 1}', "expected a boolean for key `verbose`"),
        ('{"renamed": 1}', "unknown field `renamed`"),
        ('{"oddKey": 1.5}', "expected an integer for key `oddKey`"),
        ('{"name": 1}', "expected a string"),
        ('{"interval-s": 1, "interval-s": 2}', "duplicate field `interval-s`"),
        ("[1]", "invalid type: sequence, expected struct Config"),
        ("{", "line 1 column 2"),
    ],
)
def test_a_bad_value_is_refused_with_its_key(text, words):
    with pytest.raises(InvalidConfig) as e:
        config(text)
    assert words in e.value.message


def test_state_is_compact_json_as_serde_json_writes_it():
    state = {"flags": {"1": "Growing"}, "rounds": {"last_s": 30.0}, "backoff": 1, "jobs": [0, 1], "x": None}
    assert encode_state(state) == b'{"flags":{"1":"Growing"},"rounds":{"last_s":30.0},"backoff":1,"jobs":[0,1],"x":null}'
    assert decode_state(encode_state(state)) == state
    with pytest.raises(InvalidState):
        decode_state(b"{not json")
    assert dumps({"s": "é\n", "t": True, "n": (1, 2.5)}) == '{"s":"é\\n","t":true,"n":[1,2.5]}'


def test_floats_are_written_as_serde_json_writes_them():
    cases = {
        30.0: "30.0", 0.1: "0.1", -0.0: "-0.0", 1e15: "1000000000000000.0", 1e16: "1e+16",
        1.5e17: "1.5e+17", 1e-5: "0.00001", 1e-6: "1e-6", 7.62939453125e-06: "7.62939453125e-6",
        math.nan: "null", math.inf: "null", 123.456: "123.456",
    }
    assert {x: format_f64(x) for x in cases} == cases
