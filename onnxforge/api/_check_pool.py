"""Checking many models at once: one worker process per file, at most ``jobs`` at a time.

A worker that crashes (a segfault in a native library, an abort) or runs past ``timeout`` is a
``worker`` problem for its file, never the end of the run: the worker and everything it
started (the runtime child of ``--verify``) are killed as one process group, and the folder
its temporary files were made in (one per worker, registered with _cleanup) is removed: a
killed worker runs no cleanup of its own. Results come back in the order of the files,
whatever order the workers finish in.
"""

from __future__ import annotations

__all__ = ["FileResult", "check_files"]

import contextlib
import multiprocessing
import os
import signal
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any

from onnxforge import _cleanup
from onnxforge.api._check import Problem, check
from onnxforge.errors import OnnxForgeError

Work = Callable[[str, Mapping[str, Any]], "FileResult"]


@dataclass
class FileResult:
    """What checking one file found: its problems, or why it could not be checked
    (``exit_code`` 2: unreadable; 1: the check failed)."""

    file: str
    problems: list[Problem] = field(default_factory=list)
    error: str | None = None
    exit_code: int = 0
    seconds: float = 0.0
    ran_with: dict[str, dict[str, list[int]]] = field(default_factory=dict)
    """Per runtime of --verify, the input shapes the model ran with."""

    @property
    def status(self) -> str:
        if self.error is not None:
            return "unreadable" if self.exit_code == 2 else "failed"
        return "problems" if self.problems else "ok"


def check_one(file: str, options: Mapping[str, Any]) -> FileResult:
    """Check one file in this process (what a worker does)."""
    start = time.perf_counter()
    ran_with: dict[str, dict[str, list[int]]] = {}
    try:
        problems = check(file, **options, ran_with=ran_with)
    except OnnxForgeError as exc:
        return FileResult(file, [], str(exc), exc.exit_code, time.perf_counter() - start)
    except (RecursionError, MemoryError) as exc:
        reason = (
            "nested too deeply to check" if isinstance(exc, RecursionError) else "out of memory"
        )
        return FileResult(file, [], reason, 1, time.perf_counter() - start)
    return FileResult(file, problems, None, 0, time.perf_counter() - start, ran_with)


def _worker(
    work: Work, file: str, options: Mapping[str, Any], conn: Connection, folder: str
) -> None:
    with contextlib.suppress(OSError):
        os.setpgid(0, 0)  # one group with the runtime children it starts: killed together
    tempfile.tempdir = folder  # its temporary files, where the pool removes them
    try:
        result = work(file, options)
    except BaseException as exc:  # noqa: BLE001  (an onnxforge bug: one line, not a traceback)
        message = (
            f"the check failed inside onnxforge ({type(exc).__name__}: {exc}); please report it"
        )
        result = FileResult(file, [Problem(file, "", "worker", message)])
    conn.send(result)
    conn.close()


@dataclass
class _Running:
    index: int
    process: Any
    conn: Connection
    deadline: float
    folder: str

    def end(self) -> None:
        """Kill the worker where it still runs, and remove its temporary folder."""
        if self.process.is_alive():
            _kill(self.process)
        _cleanup.discard(self.folder)


def _context() -> Any:
    """fork where there is one: a worker starts in a millisecond with everything imported and
    computed (onnxruntime's probed limits), and no ``__main__`` is run again."""
    if "fork" in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")


def _kill(process: Any) -> None:
    with contextlib.suppress(OSError):
        os.killpg(process.pid, signal.SIGKILL)
    process.kill()
    process.join()


def _crash(file: str, process: Any) -> FileResult:
    code = process.exitcode
    if code is not None and code < 0:
        try:
            how = f"signal {signal.Signals(-code).name}"
        except ValueError:
            how = f"signal {-code}"
    else:
        how = f"exit code {code}"
    message = f"the check of this file crashed ({how}); nothing was found about the model"
    return FileResult(file, [Problem(file, "", "worker", message)])


def check_files(
    files: Sequence[str | os.PathLike[str]],
    options: Sequence[Mapping[str, Any]],
    *,
    jobs: int,
    timeout: float,
    work: Work = check_one,
    on_done: Callable[[FileResult], None] | None = None,
) -> list[FileResult]:
    """Check every file with ``check(file, **options[i])`` in worker processes, ``jobs`` at a
    time, each given ``timeout`` seconds; the results in the order of ``files``. ``on_done`` is
    called as each file finishes (progress)."""
    names = [os.fspath(f) for f in files]
    results: list[FileResult | None] = [None] * len(names)
    ctx = _context()
    pending = list(range(len(names)))
    running: list[_Running] = []
    try:
        while pending or running:
            while pending and len(running) < max(1, jobs):
                index = pending.pop(0)
                receive, send = ctx.Pipe(duplex=False)
                folder = str(_cleanup.new_folder("onnxforge-worker-"))
                process = ctx.Process(
                    target=_worker,
                    args=(work, names[index], dict(options[index]), send, folder),
                    daemon=True,
                )
                process.start()
                send.close()
                deadline = time.monotonic() + timeout
                running.append(_Running(index, process, receive, deadline, folder))
            now = time.monotonic()
            soonest = min(r.deadline for r in running)
            ready = wait(
                [r.conn for r in running] + [r.process.sentinel for r in running],
                timeout=max(0.0, soonest - now),
            )
            for run in list(running):
                result: FileResult | None = None
                done = False
                if run.conn in ready or run.process.sentinel in ready:
                    try:
                        if run.conn.poll():
                            result = run.conn.recv()
                    except (EOFError, OSError):
                        result = None
                    run.process.join(timeout=5)
                    if run.process.is_alive():
                        _kill(run.process)
                    if result is None:
                        result = _crash(names[run.index], run.process)
                    done = True
                elif time.monotonic() >= run.deadline:
                    _kill(run.process)
                    message = f"checking took longer than --timeout {timeout:g} s; stopped"
                    result = FileResult(
                        names[run.index], [Problem(names[run.index], "", "worker", message)]
                    )
                    done = True
                if done:
                    assert result is not None
                    run.conn.close()
                    run.end()
                    running.remove(run)
                    results[run.index] = result
                    if on_done is not None:
                        on_done(result)
    finally:
        for run in running:  # interrupted: leave no worker behind, nor its files
            run.end()
    return [r for r in results if r is not None]
