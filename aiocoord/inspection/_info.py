"""The shape every inspection result shares: a plain, JSON-ready dict."""

from __future__ import annotations

from typing import Any

__all__ = ("Info",)

Info = dict[str, Any]
