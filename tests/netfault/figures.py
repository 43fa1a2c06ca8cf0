"""Each scenario's key figures, printed on one line that `tests.netfault.repeat` collects."""

from __future__ import annotations

import json

__all__ = ("MARK", "report")

MARK = "NETFAULT-FIGURES "


def report(scenario: str, **figures: float | int | str | None) -> None:
    """Print ``figures`` of one run of ``scenario`` (seconds rounded to ms) for the repeat loop."""
    rounded = {k: round(v, 3) if isinstance(v, float) else v for k, v in figures.items()}
    print(MARK + json.dumps({"scenario": scenario, **rounded}), flush=True)
