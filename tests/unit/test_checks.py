"""The shared argument checks: seconds and coordinators, each error naming the argument."""

from __future__ import annotations

import math
from typing import Any

import pytest

from aiocoord import ConfigError, Coordinator, InvalidPathError, Settings
from aiocoord._checks import check_coordinator, check_root, check_seconds, check_timeout


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
