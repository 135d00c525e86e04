"""What the guard on every write costs: onnx's full check of each result, against the time of
the command that wrote it.

    python benchmarks/guard.py MODEL... [--out benchmarks/results/guard.md] [--repeat 3]

Each command (infer, fold, convert --opset 18, optimize) runs in this process through the CLI
on every model, ``--repeat`` times; the time spent in ``io.Guard`` (the check of the written
file, and of the input where the result fails) is measured inside the same runs, so the
ratio is of the same work. Best of the repeats for both. Models are any .onnx files: the wild
corpus (``wild.py fetch``) and the synthetic graphs of ``scale_graphs.py``.
"""

from __future__ import annotations

__all__ = ["main", "measure"]

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMANDS: dict[str, list[str]] = {
    "infer": ["infer"],
    "fold": ["fold"],
    "convert": ["convert", "--opset", "18"],
    "optimize": ["optimize"],
}


@contextmanager
def _timed_guard(spent: list[float]) -> Iterator[None]:
    """Adds the seconds of every Guard.check and Guard.check_file call to ``spent``."""
    from onnxforge.io import _guard

    originals = _guard.Guard.check, _guard.Guard.check_file

    def wrap(fn):  # type: ignore[no-untyped-def]
        def timed(*args, **kwargs):  # type: ignore[no-untyped-def]
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent.append(time.perf_counter() - start)

        return timed

    _guard.Guard.check, _guard.Guard.check_file = wrap(originals[0]), wrap(originals[1])
    try:
        yield
    finally:
        _guard.Guard.check, _guard.Guard.check_file = originals


def measure(model: Path, repeat: int) -> dict[str, tuple[float, float, int]]:
    """Per command: (best total seconds, best guard seconds, exit code)."""
    from typer.testing import CliRunner

    from onnxforge.cli import app

    found: dict[str, tuple[float, float, int]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, args in COMMANDS.items():
            totals, guards, code = [], [], 0
            for _ in range(repeat):
                spent: list[float] = []
                with _timed_guard(spent):
                    start = time.perf_counter()
                    result = CliRunner().invoke(
                        app, [*args, str(model), "-o", str(Path(tmp) / "out.onnx"), "-q"]
                    )
                    totals.append(time.perf_counter() - start)
                guards.append(sum(spent))
                code = result.exit_code
            found[name] = (min(totals), min(guards), code)
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/guard.md")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    rows, ratios = [], {name: [] for name in COMMANDS}  # type: ignore[var-annotated]
    for model in args.models:
        found = measure(model, args.repeat)
        cells = []
        for name, (total, guard, code) in found.items():
            share = guard / total if total else 0.0
            ratios[name].append(share)
            cells.append(
                f"{total:.3f} / {guard:.3f} ({100 * share:.1f}%)"
                + ("" if code == 0 else f" exit {code}")
            )
        rows.append(
            f"| {model.parent.name}/{model.name} | {model.stat().st_size / 2**20:.1f} | "
            + " | ".join(cells)
            + " |"
        )
        print(rows[-1], flush=True)
    summary = " | ".join(
        f"{statistics.median(r) * 100:.1f}% / {max(r) * 100:.1f}%" for r in ratios.values()
    )
    lines = [
        "# The guard on every write: its share of each command's time",
        "",
        "`python benchmarks/guard.py` (see its docstring): seconds of the whole command / of "
        "the guard (onnx's full check of the written result), best of "
        f"{args.repeat}, in one process.",
        "",
        "| | " + " | ".join(COMMANDS) + " |",
        "| --- | " + " | ".join("---" for _ in COMMANDS) + " |",
        f"| median / largest share over {len(args.models)} models | {summary} |",
        "",
        "| model | MiB | " + " | ".join(COMMANDS) + " |",
        "| --- | --- | " + " | ".join("---" for _ in COMMANDS) + " |",
        *rows,
        "",
    ]
    args.out.write_text("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
