"""What a build shows while it runs.

Cache hits print nothing. A build that passes about a second shows what compiles and the
elapsed time (a live line on a terminal or in Jupyter, one plain line in a log or a notebook
run by nbclient: see live()), then a summary
line; verbose=True also echoes every command. Builds running side by side (build/parallel.py)
share one BuildBoard: a live row per build in progress under a line that counts them, since a
terminal holds one live display at a time.
"""
from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self needs Python 3.11

SHOW_AFTER_SECONDS = 1.0

_console = None
_board: BuildBoard | None = None  # the display builds report to while several run at once


def console():
    """rich's Console on stderr, imported on first use: importing rich costs ~17 ms, a third of
    a warm load, which never prints."""
    global _console
    if _console is None:
        from rich.console import Console

        _console = Console(stderr=True, highlight=False, soft_wrap=True)  # log lines stay whole in pipes
    return _console


@functools.cache
def _widgets_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("ipywidgets") is not None


def live(c) -> bool:
    """Whether console `c` can hold a live display (a spinner, progress bars redrawn in place):
    a terminal, or a Jupyter frontend that draws widgets. rich's live display in Jupyter is an
    ipywidgets Output; a kernel with no frontend to draw it (nbclient: notebooks/run.py, CI)
    saves only its placeholder, the bare text "Output()", and the content is lost. There (and
    where ipywidgets is missing, when rich warns and draws nothing) each display prints plain
    lines instead. KWB_LIVE=0 or 1 decides it for a Jupyter kernel; by default a kernel is live
    where a Jupyter server (JupyterLab, Notebook 7: JPY_SESSION_NAME) or VS Code started it."""
    if c.is_terminal:
        return True
    if not c.is_jupyter or not _widgets_installed():
        return False
    setting = os.environ.get("KWB_LIVE", "").strip().lower()
    if setting:
        return setting not in ("0", "no", "false", "off")
    return bool(os.environ.get("JPY_SESSION_NAME") or os.environ.get("VSCODE_PID"))


class BuildFeedback:
    def __init__(self, what: str, verbose: bool = False):
        self.what = what
        self.verbose = verbose
        self.start = time.monotonic()
        self.steps: list[str] = []
        self.current = "starting"
        self._status = None
        self._announced = False
        self._row = None  # this build's row on the board, when a board is up
        self.pending: list[str] | None = None  # ninja's steps still to run ('CXX a.cpp'), when known

    def expect(self, steps: list[str]) -> None:
        """The steps ninja will run (its dry run's descriptions): ninja names a step when it
        finishes, so what compiles now is what is expected and not yet named."""
        self.pending = list(steps)
        self.current = self._describe()

    def _describe(self) -> str:
        assert self.pending is not None
        units = [s.split(" ", 1)[-1] for s in self.pending if not s.startswith("LINK")]
        if units:
            return "compiling " + ", ".join(units)
        return "linking" if self.pending else "finishing"

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def line(self, text: str) -> None:
        """One line of ninja's output: '[2/3] NVCC relu_scale.cu', a command, or compiler text."""
        if self.verbose:
            console().print(text, markup=False, highlight=False)
        if text.startswith("[") and "] " in text:
            step = text.split("] ", 1)[1]
            label = step.split(" ", 1)[-1]
            if label not in self.steps:
                self.steps.append(label)
            if self.pending is not None and step in self.pending:
                self.pending.remove(step)
                self.current = self._describe()
            else:
                self.current = step
        self.tick()

    def tick(self) -> None:
        if self.elapsed < SHOW_AFTER_SECONDS or self.verbose:
            return
        board = _board
        if board is not None and board.live:
            self._row = board.show(self._row, self.what, self.current, self.elapsed)
            return
        c = console()
        text = f"kwb: building {self.what}: {self.current} ({self.elapsed:.1f} s)"
        if live(c):
            if self._status is None:
                self._status = c.status(text, spinner="dots")
                self._status.start()
            else:
                self._status.update(text)
        elif not self._announced:
            self._announced = True
            c.print(f"kwb: building {self.what} ...", markup=False, highlight=False)

    def done(self, ok: bool, summary: str = "") -> None:
        if self._row is not None and _board is not None:
            _board.drop(self._row)
            self._row = None
        if self._status is not None:
            self._status.stop()
            self._status = None
        if ok and (self.elapsed >= SHOW_AFTER_SECONDS or self.verbose):
            steps = ", ".join(self.steps) if self.steps else "nothing to compile"
            console().print(f"kwb: built {self.what} in {self.elapsed:.1f} s ({steps}){summary}", markup=False, highlight=False)
        sys.stderr.flush()


class BuildBoard:
    """`with BuildBoard("kernels", total=9) as board:` -- one live display while builds run side
    by side: a first row counting finished loads, then a row per build compiling now. Each
    build's summary line prints above it, as a lone build's does. Without a terminal (a log, CI)
    nothing is live and each build prints its plain lines."""

    def __init__(self, what: str, total: int):
        self.what = what
        self.total = total
        self.finished = 0
        self.live = False
        self._progress = None
        self._overall = None
        self._lock = threading.RLock()  # an on_done under hold() may load, and a load shows a row

    def __enter__(self) -> Self:
        global _board
        c = console()
        if live(c):
            from rich.progress import (
                Progress,
                SpinnerColumn,
                TextColumn,
                TimeElapsedColumn,
            )

            self._progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                                      console=c, transient=True)
            self._progress.start()
            self._overall = self._progress.add_task(self._count_text())
            self.live = True
        _board = self
        return self

    def __exit__(self, *exc) -> None:
        global _board
        _board = None
        if self._progress is not None:
            self._progress.stop()
        self.live = False

    def _count_text(self) -> str:
        what = self.what if self.total != 1 else self.what.rstrip("s")
        return f"kwb: loading {self.total} {what}: {self.finished} done"

    def show(self, row, what: str, current: str, elapsed: float):
        """Add or update the row of the build `what`; returns its row."""
        with self._lock:
            if self._progress is None:
                return None
            text = f"  {what}: {current}"
            if row is None:
                return self._progress.add_task(text)
            self._progress.update(row, description=text)
            return row

    @contextlib.contextmanager
    def hold(self):
        """Take the live rows off the screen while the caller prints (a line printed by another
        Console would land on them), then put them back."""
        with self._lock:
            if self._progress is None:
                yield
                return
            self._progress.stop()
            try:
                yield
            finally:
                self._progress.start()

    def drop(self, row) -> None:
        with self._lock:
            if self._progress is not None and row is not None:
                self._progress.remove_task(row)

    def one_done(self) -> None:
        with self._lock:
            self.finished += 1
            if self._progress is not None:
                self._progress.update(self._overall, description=self._count_text())
