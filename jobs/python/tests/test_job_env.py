"""env(): the variables the host, the job's spec or a launcher set, read as the test trainer
reads them (jobs/trainer/src/args.rs): the WASMSCHED_ variable first, else torchrun's; unset
or empty is not given; a bad value is refused naming the variable and what to write."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from wasmsched_job import Env, EnvError, env


def test_nothing_set_is_a_lone_job_at_its_own_batch_size():
    assert env({}) == Env(
        batch_size=None,
        rank=0,
        world_size=1,
        local_rank=0,
        master_addr=None,
        master_port=None,
        checkpoint_dir=None,
        progress="log",
    )
    assert not env({}).is_group


def test_every_variable_is_read():
    e = env(
        {
            "WASMSCHED_BATCH_SIZE": "256",
            "WASMSCHED_RANK": "2",
            "WASMSCHED_WORLD_SIZE": "4",
            "LOCAL_RANK": "0",
            "MASTER_ADDR": "job-rank0.job",
            "MASTER_PORT": "29500",
            "WASMSCHED_CHECKPOINT_DIR": "/ckpt",
            "WASMSCHED_PROGRESS": "annotation",
        }
    )
    assert e == Env(256, 2, 4, 0, "job-rank0.job", 29500, Path("/ckpt"), "annotation")
    assert e.is_group and e.per_rank_batch(64) == 64


def test_the_hosts_variables_win_over_torchruns_and_empty_is_unset():
    torchrun = {"RANK": "1", "WORLD_SIZE": "3"}
    assert (env(torchrun).rank, env(torchrun).world_size) == (1, 3)
    both = {**torchrun, "WASMSCHED_RANK": "2", "WASMSCHED_WORLD_SIZE": "4"}
    assert (env(both).rank, env(both).world_size) == (2, 4)
    empty = {**torchrun, "WASMSCHED_RANK": "", "WASMSCHED_WORLD_SIZE": "", "WASMSCHED_BATCH_SIZE": ""}
    assert (env(empty).rank, env(empty).world_size, env(empty).batch_size) == (1, 3, None)


def test_the_env_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        env({}).rank = 1  # type: ignore[misc]


@pytest.mark.parametrize(
    "vars_, message",
    [
        ({"WASMSCHED_BATCH_SIZE": "0"}, 'WASMSCHED_BATCH_SIZE "0" is not valid: expected a whole number, 1 or more'),
        ({"WASMSCHED_BATCH_SIZE": "big"}, "set it to a whole number of samples, or unset it"),
        ({"WASMSCHED_BATCH_SIZE": "64.0"}, 'WASMSCHED_BATCH_SIZE "64.0" is not valid'),
        ({"WASMSCHED_BATCH_SIZE": " 64"}, 'WASMSCHED_BATCH_SIZE " 64" is not valid'),
        ({"WASMSCHED_WORLD_SIZE": "0"}, 'WASMSCHED_WORLD_SIZE "0" is not valid: expected a whole number, 1 or more'),
        ({"WORLD_SIZE": "two"}, 'WORLD_SIZE "two" is not valid'),
        ({"WASMSCHED_RANK": "-1"}, 'WASMSCHED_RANK "-1" is not valid'),
        ({"RANK": "1"}, 'RANK "1" is not valid: expected a whole number from 0 to 0 (below the world size 1)'),
        (
            {"WASMSCHED_RANK": "4", "WASMSCHED_WORLD_SIZE": "4"},
            "from 0 to 3 (below the world size 4); give a rank below the world size",
        ),
        ({"LOCAL_RANK": "x"}, 'LOCAL_RANK "x" is not valid'),
        ({"MASTER_PORT": "70000"}, 'MASTER_PORT "70000" is not valid: expected a whole number from 1 to 65535'),
        ({"WASMSCHED_CHECKPOINT_DIR": "ckpt"}, "expected an absolute folder path; give the folder the job declares"),
        ({"WASMSCHED_PROGRESS": "annotations"}, 'WASMSCHED_PROGRESS "annotations" is not valid: expected log or'),
    ],
)
def test_a_bad_value_is_refused_naming_the_variable_and_what_to_write(vars_: dict, message: str):
    with pytest.raises(EnvError) as refused:
        env(vars_)
    assert message in str(refused.value)
    variable = next(iter(vars_)) if len(vars_) == 1 else "WASMSCHED_RANK"
    assert refused.value.variable == variable
    assert refused.value.value == vars_[variable]


def test_the_per_rank_batch_divides_the_global_one_as_the_trainer_does():
    assert env({"WASMSCHED_BATCH_SIZE": "256", "WORLD_SIZE": "4"}).per_rank_batch(64) == 64
    assert env({"WORLD_SIZE": "2"}).per_rank_batch(64) == 32, "the job's own when the host set none"
    assert env({"WASMSCHED_BATCH_SIZE": "10", "WORLD_SIZE": "4"}).per_rank_batch(64) == 2
    assert env({"WASMSCHED_BATCH_SIZE": "2", "WORLD_SIZE": "4"}).per_rank_batch(64) == 1, "at least one"


def test_the_process_environment_is_the_default(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("WASMSCHED_BATCH_SIZE", "512")
    monkeypatch.delenv("WASMSCHED_RANK", raising=False)
    monkeypatch.delenv("RANK", raising=False)
    assert env().batch_size == 512 and env().rank == 0
