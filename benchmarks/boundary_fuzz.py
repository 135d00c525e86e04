"""The boundary fuzz of shape inference, run for a while: every distinct failure, shrunk.

    python benchmarks/boundary_fuzz.py [--minutes 30] [--families Slice,Pad] [--batch 400]
                                       [--out benchmarks/results/boundary_fuzz]

Runs the strategies of ``tests/boundary_cases.py`` (the CI test is
``tests/property/test_boundary_fuzz.py``) in batches of ``--batch`` random examples until the
time is up. A failure whose signature (op and version, kind, how the wrong dim was written) is
new stops the batch; hypothesis shrinks it, and its smallest case is written to
``OUT/<op>-<kind>-<written>.txt`` as ONNX text (``onnx.parser.parse_model`` reads it) with the
bindings, what inference wrote and what onnxruntime computed. Later batches count that
signature without stopping. The summary (printed, and written to ``OUT/summary.md``) lists
every signature, how often it came up, and the file of its smallest case; onnxruntime's
departures from the spec that onnxforge follows on purpose (``boundary_cases.departure``) and
dims written under a stated assumption (``assumed: N == M``) that a run breaks are counted
apart.
"""

from __future__ import annotations

__all__ = ["main"]

import argparse
import random
import re
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "tests") not in sys.path:
    sys.path.insert(0, str(ROOT / "tests"))  # boundary_cases.py

from boundary_cases import (  # noqa: E402  (found through the path set above)
    GENERATORS,
    Case,
    OrtWorker,
    Outcome,
    check,
    examples,
    repro_text,
)
from hypothesis import HealthCheck, given, seed, settings  # noqa: E402

DEFAULT_OUT = ROOT / "benchmarks" / "results" / "boundary_fuzz"
Signature = tuple[str, str, str]


class FuzzFailure(AssertionError):
    """A failure of one signature (a class per signature, so hypothesis shrinks each apart)."""


_CLASSES: dict[Signature, type[FuzzFailure]] = {}


def _failure_class(signature: Signature) -> type[FuzzFailure]:
    if signature not in _CLASSES:
        slug = re.sub(r"\W+", "_", "_".join(s for s in signature if s))
        _CLASSES[signature] = type(f"Fuzz_{slug}", (FuzzFailure,), {})
    return _CLASSES[signature]


def _file_name(signature: Signature) -> str:
    return re.sub(r"[^\w.-]+", "_", "-".join(s for s in signature if s)) + ".txt"


class Fuzzer:
    """Batches of examples against one onnxruntime child; what was found, counted and kept."""

    def __init__(self, families: list[str] | None, out: Path, batch: int) -> None:
        self.families = families
        self.out = out
        self.batch = batch
        self.worker = OrtWorker()
        self.reported: set[Signature] = set()
        self.smallest: dict[Signature, tuple[Case, list[dict[str, int]], Outcome]] = {}
        self.counts: Counter[Signature] = Counter()
        self.departures: Counter[str] = Counter()
        self.stats: Counter[str] = Counter()
        self.exploring = True

    def run_batch(self, batch_seed: int) -> list[Signature]:
        found: list[Signature] = []

        @seed(batch_seed)
        @settings(
            max_examples=self.batch,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(example=examples(self.families))
        def body(example: tuple[Case, list[dict[str, int]]]) -> None:
            case, bindings = example
            outcome = check(case, bindings, self.worker)
            self.stats["calls"] += 1
            self.stats["examples"] += self.exploring
            self.stats["ran everywhere"] += outcome.ran == len(bindings)
            self.stats["ran nowhere"] += outcome.ran == 0
            self.stats["compared"] += outcome.compared
            for reason in outcome.departures:
                self.departures[reason] += 1
            new = []
            for f in outcome.failures:
                if self.exploring:
                    self.counts[f.signature] += 1
                if f.signature not in self.reported:
                    new.append(f)
            if new:
                self.exploring = False  # shrinking from here: calls are not new examples
                signature = new[0].signature
                self.smallest[signature] = (case, bindings, outcome)
                raise _failure_class(signature)(str(new[0]))

        self.exploring = True
        try:
            body()
        except Exception as exc:  # one failure, or a group of several distinct ones
            errors = list(getattr(exc, "exceptions", [exc]))
            if not all(isinstance(e, FuzzFailure) for e in errors):
                raise
            found += self._collect(errors)
        return found

    def _collect(self, errors: list[BaseException]) -> list[Signature]:
        found = []
        for signature, cls in _CLASSES.items():
            if signature in self.reported or not any(isinstance(e, cls) for e in errors):
                continue
            self.reported.add(signature)
            found.append(signature)
            case, bindings, outcome = self.smallest[signature]
            self.out.mkdir(parents=True, exist_ok=True)
            (self.out / _file_name(signature)).write_text(
                repro_text(case, bindings, outcome), encoding="utf-8"
            )
        return found


def _shown(path: Path) -> str:
    """A path as the summary shows it: from the repository's root when it is inside."""
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def _summary(fuzzer: Fuzzer, seconds: float, batches: int) -> str:
    stats = fuzzer.stats
    lines = [
        f"{stats['examples']} examples ({stats['calls']} with shrinking) in "
        f"{seconds / 60:.1f} min, {batches} batches: "
        f"onnxruntime ran {stats['ran everywhere']} at every binding, "
        f"{stats['ran nowhere']} at none; {stats['compared']} dims and elements compared; "
        f"{fuzzer.worker.restarts} onnxruntime child restarts.",
        "",
        "| failure (op, kind, written) | seen in new examples | smallest case |",
        "| --- | --- | --- |",
    ]
    for signature in sorted(fuzzer.reported | set(fuzzer.counts)):
        where = _shown(fuzzer.out / _file_name(signature)) if signature in fuzzer.reported else "-"
        lines.append(
            f"| {' '.join(s for s in signature if s)} | {fuzzer.counts[signature]} | {where} |"
        )
    if not fuzzer.reported and not fuzzer.counts:
        lines.append("| none | | |")
    if fuzzer.departures:
        lines += [
            "",
            "Listed apart: onnxruntime's departures from the spec, which onnxforge follows, and "
            "dims written under an assumption inference states that the run breaks:",
        ]
        lines += [f"  {count:6d}  {reason}" for reason, count in fuzzer.departures.most_common()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--families", default="", help=f"comma-separated: {','.join(GENERATORS)}")
    parser.add_argument("--batch", type=int, default=400, help="examples per hypothesis run")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--seed", type=int, default=None, help="seed of the batch seeds")
    args = parser.parse_args(argv)
    families = [f for f in args.families.split(",") if f] or None
    for f in families or []:
        if f not in GENERATORS:
            parser.error(f"unknown family {f!r}; known: {', '.join(GENERATORS)}")
    fuzzer = Fuzzer(families, args.out, args.batch)
    rng = random.Random(args.seed)
    start = time.monotonic()
    deadline = start + args.minutes * 60
    batches = 0
    try:
        while time.monotonic() < deadline:
            found = fuzzer.run_batch(rng.getrandbits(64))
            batches += 1
            for signature in found:
                case, bindings, outcome = fuzzer.smallest[signature]
                print(f"new: {' '.join(s for s in signature if s)}", flush=True)
                print(repro_text(case, bindings, outcome), flush=True)
            elapsed = time.monotonic() - start
            print(
                f"[{elapsed / 60:5.1f} min] {fuzzer.stats['examples']} examples, "
                f"{len(fuzzer.reported)} distinct failures",
                file=sys.stderr,
                flush=True,
            )
    except KeyboardInterrupt:
        pass
    finally:
        fuzzer.worker.close()
    summary = _summary(fuzzer, time.monotonic() - start, batches)
    print(summary)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "summary.md").write_text(summary + "\n", encoding="utf-8")
    return 1 if fuzzer.reported else 0


if __name__ == "__main__":
    sys.exit(main())
