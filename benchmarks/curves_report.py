"""The scaling curves' figures: growth fits, the markdown table and the PNG plots.

`curves` measures; this module only shapes what it measured.  A curve is one
figure (say, latch join-settle time) against one size (participants), with a
series of points per implementation.  Each series gets the slope of its
log-log fit, named in words (constant, sub-linear, linear, ...), since that is
what the curves are for: how a cost grows.

matplotlib (the ``bench`` extra) is imported only when plotting, with the Agg
backend: ``import aiocoord`` stays light, and no display is needed.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = ("Curve", "Point", "growth", "load_json", "plot", "slope", "to_markdown", "write_json")


@dataclass(frozen=True, slots=True)
class Point:
    """One measurement: `value` at `size` (None: not measured, `note` says why)."""

    size: int
    value: float | None
    requests: float | None = None  # server requests per operation
    note: str = ""


@dataclass(slots=True)
class Curve:
    """One figure against one size, a series of points per implementation."""

    key: str  # the plot's file name, without .png
    title: str
    size_name: str  # what the size counts, e.g. "participants (M)"
    unit: str
    per: str  # what one operation is, for the requests column
    lower_is_better: bool = True
    series: dict[str, list[Point]] = field(default_factory=dict)


def slope(points: list[Point]) -> float | None:
    """The least-squares slope of log(value) against log(size), or None under two points."""
    xy = [(math.log(p.size), math.log(p.value)) for p in points if p.value and p.size > 0]
    if len(xy) < 2:
        return None
    mx = sum(x for x, _ in xy) / len(xy)
    my = sum(y for _, y in xy) / len(xy)
    sxx = sum((x - mx) ** 2 for x, _ in xy)
    if sxx == 0:
        return None
    return sum((x - mx) * (y - my) for x, y in xy) / sxx


def growth(b: float | None) -> str:
    """The slope `b` of a log-log fit in words: how the figure grows with the size."""
    if b is None:
        return "-"
    if abs(b) < 0.15:
        return "constant"
    if 0.85 <= b <= 1.15:
        return "linear"
    if -1.15 <= b <= -0.85:
        return "falls as 1/n"
    if b > 1.15:
        return f"super-linear (n^{b:.1f})"
    if b > 0:
        return f"sub-linear (n^{b:.2f})"
    return f"falls slowly (n^{b:.2f})"


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.2f}" if value >= 1 else f"{value:.3f}"


def to_markdown(curves: list[Curve], header: list[str]) -> str:
    """Every curve as a markdown section: a table of sizes by implementation, then the growth."""
    out = [*header, ""]
    for curve in curves:
        names = list(curve.series)
        sizes = sorted({p.size for points in curve.series.values() for p in points})
        out.append(f"### {curve.title}")
        out.append("")
        counted = {n for n in names if any(p.requests is not None for p in curve.series[n])}
        heads: list[str] = []
        for name in names:
            heads.append(f"{name} ({curve.unit})")
            if name in counted:
                heads.append(f"{name} req/{curve.per}")
        out.append(f"| {curve.size_name} | " + " | ".join(heads) + " |")
        out.append("| ---: |" + " ---: |" * len(heads))
        notes: list[str] = []
        for size in sizes:
            cells = []
            for name in names:
                point = next((p for p in curve.series[name] if p.size == size), None)
                if point is None or point.value is None:
                    cells += ["-", "-"] if name in counted else ["-"]
                    if point is not None and point.note:
                        notes.append(f"{name} at {size:,}: {point.note}")
                else:
                    cells.append(_fmt(point.value))
                    if name in counted:
                        cells.append(_fmt(point.requests))
            out.append(f"| {size:,} | " + " | ".join(cells) + " |")
        out.append("")
        for name in names:
            b = slope(curve.series[name])
            fit = f" (log-log slope {b:+.2f})" if b is not None else ""
            out.append(f"- {name}: {growth(b)}{fit}")
        out += [f"- not measured: {note}" for note in notes]
        out.append("")
    return "\n".join(out)


def plot(curve: Curve, directory: Path) -> Path:
    """`curve` as an 800x500 PNG in `directory`, log-log, one line per implementation."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    fig, ax = plt.subplots(figsize=(8, 5), dpi=100)
    try:
        for name, points in curve.series.items():
            shown = [(p.size, p.value) for p in points if p.value]
            if not shown:
                continue
            label = f"{name}: {growth(slope(points))}"
            ax.plot([x for x, _ in shown], [y for _, y in shown], "o-", label=label)
        ax.set_xscale("log")
        ax.set_yscale("log")
        plain = FuncFormatter(lambda v, _: f"{v:,g}")
        ax.set_xticks(sorted({p.size for points in curve.series.values() for p in points}))
        ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        for axis in (ax.xaxis, ax.yaxis):
            axis.set_major_formatter(plain)
            axis.set_minor_formatter(NullFormatter())
        ax.set_xlabel(curve.size_name)
        ax.set_ylabel(f"{curve.unit} ({'lower' if curve.lower_is_better else 'higher'} is better)")
        ax.set_title(curve.title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize="small")
        fig.tight_layout()
        path = directory / f"{curve.key}.png"
        fig.savefig(path)
    finally:
        plt.close(fig)
    return path


def write_json(curves: list[Curve], header: list[str], path: Path) -> None:
    """The raw figures, so the table and plots can be made again without measuring."""
    data = {"header": header, "curves": [asdict(c) for c in curves]}
    path.write_text(json.dumps(data, indent=1) + "\n")


def load_json(path: Path) -> tuple[list[Curve], list[str]]:
    data: dict[str, Any] = json.loads(path.read_text())
    curves = []
    for raw in data["curves"]:
        series = {n: [Point(**p) for p in points] for n, points in raw.pop("series").items()}
        curves.append(Curve(**raw, series=series))
    return curves, list(data["header"])
