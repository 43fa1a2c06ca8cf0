"""`network_lab_unavailable` names what is missing, without touching the machine."""

from __future__ import annotations

import pytest

from aiocoord.testing import NetworkLab, NetworkLabUnavailableError, network_lab_unavailable


def test_not_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    reason = network_lab_unavailable()
    assert reason is not None and "root" in reason
    with pytest.raises(NetworkLabUnavailableError, match="root") as caught:
        NetworkLab()
    assert caught.value.reason == reason


@pytest.mark.parametrize(("tool", "package"), [("ip", "iproute2"), ("nft", "nftables")])
def test_missing_tool(monkeypatch: pytest.MonkeyPatch, tool: str, package: str) -> None:
    monkeypatch.setattr("os.geteuid", lambda: 0)
    monkeypatch.setattr("sys.platform", "linux")
    monkeypatch.setattr("shutil.which", lambda name: None if name == tool else f"/usr/sbin/{name}")
    reason = network_lab_unavailable()
    assert reason is not None and repr(tool) in reason and package in reason


def test_not_linux(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.platform", "darwin")
    assert network_lab_unavailable() == "network namespaces need Linux"
