"""The delay relay takes a new setting before `NetworkLab.impair` returns.

The relay polls its control file; on a loaded machine a whole exchange could
pass through it before its next poll, undelayed, after `impair` had returned
(seen in `tests/netfault/test_lab.py::test_delay_relay` beside other work).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from aiocoord.testing import _netns
from aiocoord.testing._netns import NetworkLabUnavailableError

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the relay is Linux-only")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_relay(control: Path) -> subprocess.Popen[bytes]:
    _netns._write_settings(control, 0.0, 0.0, wait=None)
    argv = [
        sys.executable,
        str(_netns._RELAY),
        "--port",
        str(free_port()),
        "--mark",
        "1",
        "--control",
        str(control),
    ]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == b"listening"
    return proc


def test_a_setting_is_waited_for_until_the_relay_has_taken_it(tmp_path: Path) -> None:
    control = tmp_path / "a.relay"
    proc = start_relay(control)
    try:
        os.kill(proc.pid, signal.SIGSTOP)  # a relay that has not polled yet
        done = threading.Event()

        def impair() -> None:
            _netns._write_settings(control, 0.1, 0.05)
            done.set()

        thread = threading.Thread(target=impair)
        thread.start()
        time.sleep(0.5)
        assert not done.is_set(), "impair returned before the relay took the new delay"
        os.kill(proc.pid, signal.SIGCONT)
        assert done.wait(5.0)
        thread.join(5.0)
        assert Path(f"{control}.applied").read_text().split()[0] == control.read_text().split()[2]
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        proc.kill()
        proc.wait(10)


def test_a_relay_that_never_takes_it_is_an_error_naming_the_file(tmp_path: Path) -> None:
    control = tmp_path / "b.relay"
    proc = start_relay(control)
    try:
        os.kill(proc.pid, signal.SIGSTOP)
        with pytest.raises(
            NetworkLabUnavailableError, match=r"did not take the setting .*b\.relay"
        ):
            _netns._write_settings(control, 0.2, 0.0, wait=0.3)
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        proc.kill()
        proc.wait(10)
