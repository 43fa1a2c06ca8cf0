"""The pytest plugin that installing aiocoord registers adds; it changes a project's tests only on request.

Each case runs a throwaway project in an inner pytest session (pytester, in
this process, so the plugin is the one of this tree) with two plain
``@pytest.mark.anyio`` tests.
"""

from __future__ import annotations

import anyio
import pytest

TWO_TESTS = """
import pytest

@pytest.mark.anyio
async def test_one():
    pass

@pytest.mark.anyio
async def test_two(request):
    marker = request.node.get_closest_marker("timeout")
    print("TIMEOUT", None if marker is None else marker.args)
"""


def _run(pytester: pytest.Pytester, ini: str = "", *args: str) -> pytest.RunResult:
    pytester.makepyfile(test_project=TWO_TESTS)
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n" + ini)
    return pytester.runpytest_inprocess("-p", "no:xdist", "-s", *args)


def _collected(result: pytest.RunResult) -> list[str]:
    return sorted(line for line in result.outlines if line.startswith("test_project.py::"))


def test_a_project_that_asks_nothing_runs_as_without_aiocoord(pytester: pytest.Pytester) -> None:
    """The same tests as with the plugin blocked: anyio's own backends, and no ceiling of ours.

    anyio runs a plain test once per backend it finds (asyncio here, and
    trio where it is installed): two tests stay two per backend.
    """
    alone = _collected(_run(pytester, "", "--collect-only", "-q", "-p", "no:aiocoord"))
    result = _run(pytester, "", "-v")
    backends = anyio.get_available_backends()
    result.assert_outcomes(passed=2 * len(backends))
    assert _collected(_run(pytester, "", "--collect-only", "-q")) == alone
    assert len(alone) == 2 * len(backends)
    result.stdout.fnmatch_lines(["*TIMEOUT None*"])
    result.stdout.no_fnmatch_line("*uvloop*")


def test_the_fixtures_and_markers_are_there_all_the_same(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\n")
    fixtures = pytester.runpytest_inprocess("-p", "no:xdist", "--fixtures")
    fixtures.stdout.fnmatch_lines(["*zk_server*", "*coordinator*"])
    markers = pytester.runpytest_inprocess("-p", "no:xdist", "--markers")
    markers.stdout.fnmatch_lines(["*ensemble: needs the 3-member ZooKeeper ensemble*"])


def test_a_project_that_opts_in_runs_each_test_on_both_loops(pytester: pytest.Pytester) -> None:
    result = _run(pytester, "aiocoord_loops = asyncio uvloop\n", "-v")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["*test_one?asyncio? PASSED*", "*test_one?uvloop? PASSED*"])


def test_a_project_may_ask_for_one_loop_and_a_ceiling(pytester: pytest.Pytester) -> None:
    pytest.importorskip("pytest_timeout")
    result = _run(pytester, "aiocoord_loops = uvloop\naiocoord_timeout = 7.5\n", "-v")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*test_one?uvloop? PASSED*", "*TIMEOUT (7.5,)*"])


@pytest.mark.parametrize(
    ("ini", "says"),
    [
        ("aiocoord_loops = asyncio trio\n", "*aiocoord_loops: unknown event loop 'trio'*"),
        ("aiocoord_timeout = soon\n", "*aiocoord_timeout: must be a number of seconds > 0*"),
        ("aiocoord_timeout = -1\n", "*aiocoord_timeout: must be a number of seconds > 0*"),
    ],
)
def test_a_bad_setting_is_a_usage_error_naming_it(
    pytester: pytest.Pytester, ini: str, says: str
) -> None:
    result = _run(pytester, ini)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([says])
