"""What ``aiocoord demo`` shows in the terminal: timestamped lines, tables, progress bars.

On a terminal, a progress bar is redrawn in place on the last line and colours
mark the verdict (``NO_COLOR`` turns them off); in a pipe or a log file, every
line is plain and a progress bar is printed once, when it completes.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping
from typing import TextIO

__all__ = ("View",)


class View:
    """The demo's terminal output."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream if stream is not None else sys.stdout
        self.started = time.monotonic()
        self.tty = self.stream.isatty()
        self.color = self.tty and not os.environ.get("NO_COLOR")
        self._status = ""
        self._done: set[str] = set()  # labels of the bars printed complete (not on a terminal)

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def _paint(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.color else text

    def green(self, text: str) -> str:
        return self._paint("32", text)

    def red(self, text: str) -> str:
        return self._paint("31", text)

    def bold(self, text: str) -> str:
        return self._paint("1", text)

    def dim(self, text: str) -> str:
        return self._paint("2", text)

    def _write(self, text: str) -> None:
        if self.tty and self._status:
            self.stream.write("\r\x1b[2K")
        self.stream.write(text + "\n")
        if self.tty and self._status:
            self.stream.write(self._status)
        self.stream.flush()

    def say(self, text: str) -> None:
        """A timestamped line."""
        self._write(f"{self.dim(f'[{self.elapsed():5.1f}s]')} {text}")

    def line(self, text: str = "") -> None:
        """A line without timestamp."""
        self._write(text)

    def progress(self, label: str, done: int, total: int, width: int = 24) -> None:
        """A progress bar: redrawn in place on a terminal, printed once complete elsewhere."""
        filled = width * done // total if total else width
        bar = f"        {label:<22} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}"
        if self.tty:
            self._status = bar
            self.stream.write("\r\x1b[2K" + bar)
            self.stream.flush()
            if done >= total:
                self._status = ""
                self.stream.write("\n")
                self.stream.flush()
        elif done >= total and label not in self._done:
            self._done.add(label)
            self._write(bar)

    def clear_progress(self) -> None:
        if self.tty and self._status:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()
        self._status = ""

    def leaders_table(
        self, leaders: Mapping[str, tuple[str, str, int] | None], workers: Mapping[str, str]
    ) -> None:
        """Who leads what: one row per live worker with its version and its tasks."""
        rows: dict[str, list[str]] = {w: [] for w in sorted(workers)}
        unled: list[str] = []
        for task in sorted(leaders):
            leader = leaders[task]
            if leader is None:
                unled.append(task)
            else:
                rows.setdefault(leader[0], []).append(task)
        for worker, tasks in rows.items():
            version = workers.get(worker, "gone")
            names = " ".join(tasks) or "-"
            self.line(f"        {worker:<4} {version:<5} {len(tasks):>2} tasks: {names}")
        if unled:
            self.line(f"        unled: {' '.join(unled)}")
