"""Shared values and barriers on Curator's layouts, so Java services take part.

Each module's docstring gives its node layout and its failure handling.
"""

from __future__ import annotations

__all__ = ()
