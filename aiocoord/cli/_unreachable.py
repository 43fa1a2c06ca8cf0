"""The one message of a command that could not reach ZooKeeper, with the hint that fits."""

from __future__ import annotations

from ..settings import Settings
from .zk import UserError, is_embedded_default

__all__ = ("unreachable",)


def unreachable(settings: Settings, timeout: float) -> UserError:
    """The error to raise when no server at `settings.hosts` answered within `timeout` seconds.

    Starting the embedded server helps only where the embedded server would listen.
    """
    hint = (
        "start one with 'aiocoord zk start', or set AIOCOORD_HOSTS / --hosts"
        if is_embedded_default(settings)
        else "check that it runs and that the host list is right"
    )
    return UserError(f"cannot reach ZooKeeper at {settings.hosts} within {timeout:g}s ({hint})")
