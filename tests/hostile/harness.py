"""Run every CLI command on a hostile model, in process, under a time and a memory bound, and
judge the outcome: the expected exit code, one clear line naming the file per problem, no
traceback, nothing left behind."""

from __future__ import annotations

__all__ = [
    "COMMANDS",
    "MEMORY_BOUND",
    "TIME_BOUND",
    "Outcome",
    "assert_clean",
    "cli_args",
    "run_all",
    "run_command",
]

import contextlib
import os
import resource
import time
import tracemalloc
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from typer.testing import CliRunner

from onnxforge.cli import app
from onnxforge.cli._app import MAX_LINE

COMMANDS = ("info", "infer", "fold", "convert", "optimize", "check")
TIME_BOUND = 20.0
"""Seconds one command may take on one hostile model (they take 0.05-5 s)."""
MEMORY_BOUND = 256 << 20
"""Bytes one command may add to the process's peak resident memory on one hostile model."""
ADDRESS_HEADROOM = 2 << 30
"""RLIMIT_AS while a command runs: what the process may map beyond what it has, so a runaway
allocation fails at once (MemoryError, "out of memory") instead of taking the machine."""
_CLEAR_REFS = Path("/proc/self/clear_refs")
runner = CliRunner()


def cli_args(command: str, model: Path, out: Path) -> list[str]:
    """The command line of ``command`` on ``model``, writing (if it writes) ``out``."""
    return {
        "info": ["info", str(model)],
        "infer": ["infer", str(model), "-o", str(out)],
        "fold": ["fold", str(model), "-o", str(out)],
        "convert": ["convert", str(model), "--opset", "18", "-o", str(out)],
        "optimize": ["optimize", str(model), "-o", str(out)],
        "check": ["check", str(model)],
    }[command]


@dataclass
class Outcome:
    command: str
    model: Path
    exit_code: int
    stdout: str
    stderr: str
    seconds: float
    peak_bytes: int
    exception: BaseException | None

    def __str__(self) -> str:
        return (
            f"onnxforge {self.command} {self.model.name}: exit {self.exit_code} in "
            f"{self.seconds:.2f} s, +{self.peak_bytes / 2**20:.0f} MiB\n"
            f"stdout: {self.stdout[-2000:]}\nstderr: {self.stderr[-2000:]}"
        )


def _status(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    return 0


@contextlib.contextmanager
def _bounded() -> Iterator[list[int]]:
    """Measure the peak memory the block adds (VmHWM reset through clear_refs on Linux, else
    tracemalloc) and cap the address space it may map (RLIMIT_AS)."""
    peak = [0]
    exact = _CLEAR_REFS.exists() and os.access(_CLEAR_REFS, os.W_OK)
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    mapped = _status("VmSize")
    limit = mapped + ADDRESS_HEADROOM if mapped else resource.RLIM_INFINITY
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    if exact:
        _CLEAR_REFS.write_text("5")  # VmHWM := VmRSS
        before = _status("VmRSS")
    else:
        tracemalloc.start()
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        yield peak
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
        if exact:
            peak[0] = max(0, _status("VmHWM") - before)
        else:
            peak[0] = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()


def run_command(command: str, model: Path, out: Path, *, args: list[str] | None = None) -> Outcome:
    """One command on one model (``args``: another command line than cli_args), bounded and
    measured."""
    with _bounded() as peak:
        start = time.perf_counter()
        result = runner.invoke(app, args or cli_args(command, model, out))
        seconds = time.perf_counter() - start
    exception = result.exception if not isinstance(result.exception, SystemExit) else None
    return Outcome(
        command,
        model,
        result.exit_code,
        result.stdout,
        result.stderr,
        seconds,
        peak[0],
        exception,
    )


def run_all(model: Path, out_dir: Path) -> Iterator[Outcome]:
    """Every command on ``model``; what a command wrote is removed after it is judged."""
    out = out_dir / "out.onnx"
    for command in COMMANDS:
        outcome = run_command(command, model, out)
        yield outcome
        for path in out_dir.iterdir():
            path.unlink()


def assert_clean(outcome: Outcome, codes: frozenset[int] | set[int], out_dir: Path) -> None:
    """The bar of issue 7 for one command on one hostile model."""
    text = outcome.stdout + outcome.stderr
    assert outcome.exception is None, f"{outcome}\n{outcome.exception!r}"
    assert outcome.exit_code in codes, f"expected exit {sorted(codes)}\n{outcome}"
    assert "Traceback" not in text and "internal error" not in text, str(outcome)
    assert "out of memory" not in text, f"hit the address-space cap\n{outcome}"
    assert outcome.seconds < TIME_BOUND, f"over {TIME_BOUND} s\n{outcome}"
    assert outcome.peak_bytes < MEMORY_BOUND, f"over {MEMORY_BOUND >> 20} MiB\n{outcome}"
    for line in text.splitlines():
        assert len(line) <= MAX_LINE + 100, f"a line of {len(line)} characters\n{outcome}"
    if outcome.exit_code:
        _assert_names_the_file(outcome)
        leftovers = sorted(p.name for p in out_dir.iterdir())
        assert leftovers == [], f"left behind {leftovers}\n{outcome}"


def _assert_names_the_file(outcome: Outcome) -> None:
    """Each line saying what is wrong names the model file (notes and summaries aside)."""
    name = str(outcome.model)
    if outcome.command == "check":
        problems = [line for line in outcome.stdout.splitlines() if line.strip()]
        errors = [line for line in outcome.stderr.splitlines() if line.startswith("error:")]
        lines = problems + errors
    else:
        lines = [
            line
            for line in outcome.stderr.splitlines()
            if line.strip() and not line.startswith(("note:", "assumed:"))
        ]
    assert lines, f"no message\n{outcome}"
    for line in lines:
        assert name in line, f"a line that does not name the file: {line!r}\n{outcome}"
