"""Progress on stderr for work that takes a while: shown only on a terminal, only when the work
is expected to last more than about a second, never with --quiet or a --json report on stdout.
The display is transient: it leaves nothing behind on the terminal once the work ends."""

from __future__ import annotations

__all__ = ["LONG_GRAPH", "LONG_WRITE", "PassProgress", "Step", "long_graph", "progress"]

import contextlib
from collections import Counter
from collections.abc import Iterator
from typing import Any

from rich.progress import (
    BarColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
)

from onnxforge.cli._app import session, stderr
from onnxforge.ir import Model

LONG_GRAPH = 10_000
"""Nodes (subgraphs included) from which a command's passes are expected to take a second or
more: optimize runs the 1,746 nodes of densenet121 in 0.17 s."""
LONG_WRITE = 256 << 20
"""Weight bytes from which writing a model (its external data) is expected to take a second."""


def long_graph(model: Model) -> bool:
    """Whether work on every node of ``model`` is expected to take a second or more."""
    return sum(len(graph.ops) for graph in model.graphs()) >= LONG_GRAPH


class Step:
    """The display's one line: what is being done, and how far when the total is known. Does
    nothing when the display is off."""

    def __init__(self, display: Progress | None = None, task: TaskID | None = None) -> None:
        self.display = display
        self.task = task

    @property
    def shown(self) -> bool:
        return self.display is not None

    def update(
        self,
        description: str | None = None,
        *,
        completed: float | None = None,
        total: float | None = None,
    ) -> None:
        if self.display is None or self.task is None:
            return
        self.display.update(self.task, description=description, completed=completed, total=total)

    def advance(self, amount: float = 1) -> None:
        if self.display is not None and self.task is not None:
            self.display.advance(self.task, amount)

    def bytes_written(self, done: int, total: int) -> None:
        """An io.save progress callback."""
        self.update(completed=done, total=total)


@contextlib.contextmanager
def progress(
    description: str, *, expected_long: bool, total: float | None = None
) -> Iterator[Step]:
    """A progress display for the block when ``expected_long`` and the session allows one
    (stderr a terminal, not --quiet, no --json on stdout): a spinner, ``description``, a bar
    when ``total`` is known, the time elapsed."""
    if not (expected_long and session.progress):
        yield Step()
        return
    display = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        TaskProgressColumn(),
        TimeElapsedColumn(),
        console=stderr,
        transient=True,
    )
    with display:
        yield Step(display, display.add_task(description, total=total))


class PassProgress:
    """A pass Instrument: shows the pass running, and how many times it ran (a fixed point
    repeats its passes)."""

    def __init__(self, step: Step, label: str) -> None:
        self.step = step
        self.label = label
        self.runs: Counter[str] = Counter()

    def before_pass(self, pass_: Any, model: Model) -> None:
        self.runs[pass_.name] += 1
        runs = self.runs[pass_.name]
        again = f" (run {runs})" if runs > 1 else ""
        self.step.update(f"{self.label}: {pass_.name}{again}")

    def after_pass(self, pass_: Any, model: Model, result: Any) -> None:
        return None
