"""Recipes an app runs with its `Coordination`, each listed in the status by its `StatusView`.

`Coordination.run(recipe)` (and ``lifespan(recipes=[...])``) enters a recipe
and keeps it in ``Coordination.recipes`` while it runs: one registry, so the
status route asks each entry for its ``status_view()`` and needs no
knowledge of each kind.  What can be run: an object used as ``async with``
that has ``status_view()`` (`Runnable`).
"""

from __future__ import annotations

from collections.abc import Iterable
from types import TracebackType
from typing import Any, Protocol, TypeVar

from .._status_view import Reports

__all__ = ("R", "Runnable", "check_recipes")


class Runnable(Reports, Protocol):
    """A recipe the app runs: ``async with`` it, and it describes itself (``status_view()``)."""

    async def __aenter__(self) -> Any: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
        /,
    ) -> Any: ...


R = TypeVar("R", bound=Runnable)


def check_recipes(recipes: object) -> tuple[Runnable, ...]:
    """`recipes` as a tuple, else `TypeError` naming the argument and the entry at fault."""
    if isinstance(recipes, str) or not isinstance(recipes, Iterable):
        raise TypeError(f"recipes must be an iterable of recipes, not {type(recipes).__name__}")
    found = tuple(recipes)
    for i, recipe in enumerate(found):
        if not (isinstance(recipe, Reports) and hasattr(recipe, "__aenter__")):
            raise TypeError(
                f"recipes[{i}] must be a recipe to run as `async with` with a status_view() "
                f"(a cache, group_member, persistent node, service discovery, job worker), "
                f"not {type(recipe).__name__}"
            )
    if len({id(r) for r in found}) != len(found):
        raise TypeError("recipes: the same recipe object is given twice (each runs once)")
    return found
