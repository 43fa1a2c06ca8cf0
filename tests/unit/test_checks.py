"""The shared argument checks: seconds, ints, node names, coordinators; each error names the argument."""

from __future__ import annotations

import math
import re
from typing import Any

import pytest

from aiocoord import ConfigError, Coordinator, InvalidPathError, Settings
from aiocoord._checks import (
    check_blocking,
    check_coordinator,
    check_int,
    check_node_name,
    check_root,
    check_seconds,
    check_timeout,
)


@pytest.mark.parametrize("value", [0, 0.0, 1, 2.5, 10**6])
def test_seconds_in_range_come_back_as_floats(value: float) -> None:
    assert check_seconds("delay", value) == float(value)
    assert type(check_seconds("delay", value)) is float


@pytest.mark.parametrize("value", ["1", None, True, False, [1], 1j])
def test_seconds_of_the_wrong_type_are_type_errors_naming_the_argument(value: Any) -> None:
    with pytest.raises(TypeError, match=r"^grace must be a number of seconds, not "):
        check_seconds("grace", value)


@pytest.mark.parametrize(
    ("value", "options"),
    [
        (-1, {}),
        (-0.001, {}),
        (math.nan, {}),
        (math.inf, {}),
        (10**400, {}),  # compared, never converted (float() would overflow)
        (0, {"positive": True}),
        (0.0, {"positive": True}),
        (61, {"most": 60.0}),
        (math.nan, {"most": math.inf}),
        (-1, {"most": math.inf}),
    ],
)
def test_seconds_out_of_range_are_config_errors_naming_the_argument(
    value: float, options: dict[str, Any]
) -> None:
    with pytest.raises(ConfigError, match=r"^lease: must be a ") as caught:
        check_seconds("lease", value, **options)
    assert caught.value.field == "lease"
    assert len(str(caught.value)) < 120  # a huge int is shown short


def test_the_message_says_the_bounds() -> None:
    with pytest.raises(ConfigError, match=r"finite number of seconds > 0 up to 60, not 0"):
        check_seconds("lease", 0, positive=True, most=60.0)
    with pytest.raises(ConfigError, match=r"must be a number of seconds >= 0, not -1"):
        check_seconds("timeout", -1, most=math.inf)


def test_infinity_passes_only_when_allowed() -> None:
    assert check_seconds("timeout", math.inf, most=math.inf) == math.inf
    assert check_seconds("timeout", 10**400, most=math.inf) == math.inf
    assert check_seconds("lease", 60, most=60.0) == 60.0


def test_a_timeout_may_be_none() -> None:
    assert check_timeout(None) is None
    assert check_timeout(1) == 1.0
    assert check_timeout(math.inf) == math.inf
    with pytest.raises(TypeError, match=r"^timeout must be a number of seconds or None, not str"):
        check_timeout("1")
    with pytest.raises(ConfigError, match=r"^wait: "):
        check_timeout(-1, "wait")


def test_blocking_false_is_a_zero_timeout_and_takes_no_other() -> None:
    assert check_blocking(True, None) is None
    assert check_blocking(True, 2) == 2.0
    assert check_blocking(False, None) == 0.0
    assert check_blocking(False, 0) == 0.0
    with pytest.raises(TypeError, match=r"^blocking must be a bool, not int"):
        check_blocking(1, None)
    with pytest.raises(ConfigError, match=r"^timeout: blocking=False never waits"):
        check_blocking(False, 5)


def test_only_a_coordinator_is_a_coordinator() -> None:
    coord = Coordinator(Settings(hosts="127.0.0.1:1"))  # never entered: nothing is sent
    assert check_coordinator(coord) is coord
    with pytest.raises(TypeError, match=r"^coord must be an aiocoord\.Coordinator, not str$"):
        check_coordinator("x")
    with pytest.raises(TypeError, match=r"^target must be an aiocoord\.Coordinator, not int$"):
        check_coordinator(5, "target")


def test_a_root_names_itself_in_the_reason() -> None:
    assert check_root("/jobs") == "/jobs"
    with pytest.raises(InvalidPathError, match="root must start with '/'") as caught:
        check_root("rel")
    assert caught.value.path == "rel"
    with pytest.raises(InvalidPathError, match="base must be a str"):
        check_root(5, "base")


def test_a_config_error_is_both_a_value_error_and_a_type_error() -> None:
    """One error type for every bad argument of `check_int` and `check_node_name`."""
    assert issubclass(ConfigError, ValueError) and issubclass(ConfigError, TypeError)


@pytest.mark.parametrize("value", [True, False, 1.0, "1", None])
def test_an_int_is_an_int_and_never_a_bool(value: Any) -> None:
    with pytest.raises(ConfigError, match=r"^count: must be an int, not ") as caught:
        check_int("count", value)
    assert caught.value.field == "count"


def test_an_int_out_of_its_bounds_names_them() -> None:
    assert check_int("count", 5) == 5
    assert check_int("count", 1, least=1, most=3) == 1
    with pytest.raises(ConfigError, match=r"^count: must be at least 1, not 0$"):
        check_int("count", 0, least=1)
    with pytest.raises(ConfigError, match=r"^count: must be at most 3, not 4$"):
        check_int("count", 4, most=3)
    with pytest.raises(ConfigError, match=r"^count: must be from 1 to 3, not -2$"):
        check_int("count", -2, least=1, most=3)


@pytest.mark.parametrize("value", ["a", "job-1", "zookeeper", "_c_x", "ü", "a.b"])
def test_a_node_name_is_one_valid_segment(value: str) -> None:
    assert check_node_name("task", value) == value


@pytest.mark.parametrize(
    ("value", "says"),
    [
        (5, "must be a str, not int"),
        (None, "must be a str, not NoneType"),
        ("", "must be a non-empty node name"),
        ("a/b", "without '/'"),
        (".", "cannot name a ZooKeeper node"),
        ("..", "cannot name a ZooKeeper node"),
        ("a\x00b", "cannot name a ZooKeeper node"),
        ("a\x01", "cannot name a ZooKeeper node"),
    ],
)
def test_a_bad_node_name_is_a_config_error_naming_the_argument(value: Any, says: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(says)) as caught:
        check_node_name("task", value)
    assert caught.value.field == "task" and str(caught.value).startswith("task: ")


def test_the_protected_prefix_is_refused_where_asked() -> None:
    assert check_node_name("member_id", "_c_x") == "_c_x"
    with pytest.raises(ConfigError, match=r"^member_id: '_c_x' must not start with '_c_'$"):
        check_node_name("member_id", "_c_x", protected=False)


def test_a_pattern_narrows_the_names() -> None:
    pattern = re.compile(r"[a-z]+")
    assert check_node_name("job_id", "abc", pattern=pattern, rule="letters") == "abc"
    with pytest.raises(ConfigError, match=r"^job_id: 'a1' is not valid: letters$"):
        check_node_name("job_id", "a1", pattern=pattern, rule="letters")
    with pytest.raises(ConfigError, match=r"^job_id: 'a/b' is not valid: letters$"):
        check_node_name("job_id", "a/b", pattern=pattern, rule="letters")  # the rule says why


def test_a_group_member_id_with_a_control_character_is_refused_by_name() -> None:
    """Was accepted by the group's own checker and failed later as a path, naming no argument."""
    from aiocoord.recipes.membership import GroupMember

    coord = Coordinator(Settings(hosts="127.0.0.1:1"))  # never entered: nothing is sent
    with pytest.raises(ConfigError, match=r"^member_id: "):
        GroupMember(coord, "/group", member_id="pod\x01")


def test_a_cron_job_may_be_named_zookeeper() -> None:
    """Only the root's own child /zookeeper is reserved; a job's node below a root is not."""
    from aiocoord import Cron, Worker

    coord = Coordinator(Settings(hosts="127.0.0.1:1"))  # never entered: nothing is sent
    cron = Cron(coord, "/cron", worker=Worker(version="1.0"))

    @cron.job("* * * * *", name="zookeeper")
    async def tick(firing: object) -> None:
        pass

    with pytest.raises(ConfigError, match="already registered"):
        cron.job("* * * * *", name="zookeeper")(tick)
