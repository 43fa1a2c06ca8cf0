"""Running a command's coroutine: anyio's asyncio backend, with uvloop unless asked otherwise."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

__all__ = ("run_async",)

T = TypeVar("T")


def run_async(func: Callable[[], Awaitable[T]], loop: str = "uvloop") -> T:
    """Run `func` on anyio's asyncio backend, with uvloop unless `loop` is 'asyncio'."""
    return anyio.run(func, backend="asyncio", backend_options={"use_uvloop": loop == "uvloop"})
