"""Every mutant of tests/mutants still finds the function it patches, and its undo restores it.

The library is restructured now and then; a patch point that moved must
fail here, by name, rather than leave a mutant that patches nothing.
"""

from __future__ import annotations

import pytest

from tests.mutants import MUTANTS, _resolve, apply


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_the_patch_point_resolves_and_the_undo_restores_it(name: str) -> None:
    module, attr = MUTANTS[name].targets[0]
    owner, last, before = _resolve(module, attr)
    undo = apply(name)
    try:
        assert getattr(owner, last) is not before, f"{name} patched nothing at {module}:{attr}"
    finally:
        undo()
    assert getattr(owner, last) is before
    assert MUTANTS[name].tests, f"{name} names no recipe test"


def test_an_unknown_mutant_is_named_in_the_error() -> None:
    with pytest.raises(KeyError, match="AIOCOORD_MUTANT='nope': no such mutant"):
        apply("nope")
