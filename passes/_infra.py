"""Pass infrastructure: Pass, PassResult, the registry of named passes, and PassManager."""

from __future__ import annotations

__all__ = [
    "PASSES",
    "FixedPoint",
    "Instrument",
    "Pass",
    "PassManager",
    "PassResult",
    "Report",
    "changes",
    "node_label",
    "note_change",
    "register_pass",
]

import abc
import logging
import time
import weakref
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, TypeVar

from onnxforge import ir
from onnxforge.errors import OnnxForgeError, PassError
from onnxforge.ir import Model, Op

logger = logging.getLogger(__name__)


@dataclass
class PassResult:
    """What a pass did: the (same) model, whether it changed, counters by name."""

    model: Model
    modified: bool = False
    stats: Counter[str] = field(default_factory=Counter)
    details: dict[str, list[str]] = field(default_factory=dict)
    inferred: bool = False
    """The pass's last inference saw the model as the pass leaves it (fold-constants infers
    once more after its last fold, finding nothing): the next pass may reuse it although the
    model was modified."""

    def note(self, key: str, detail: str) -> None:
        """Count ``key`` and keep ``detail`` (a node name) for --verbose."""
        self.stats[key] += 1
        self.details.setdefault(key, []).append(detail)


class Pass(abc.ABC):
    """One transformation with a stable kebab-case name; it edits the model in place."""

    name: ClassVar[str]
    summary: ClassVar[str] = ""
    """What the pass does, in one line (`onnxforge passes`); every registered pass has one."""
    types_only: ClassVar[bool] = False
    """True for a pass that only sets value types from inference: what was inferred before it
    stays valid, so it notes no change (see ``note_change``)."""
    journaled: ClassVar[bool] = False
    """True for a pass whose every edit leaves a stamp on the op it changes (Graph's methods
    do; ``Graph.touch`` for what it changes by hand): inference after it infers again only
    the ops it touched and what their new types reach (``shape_infer.Resumable``)."""
    focus: int | None = None
    """Set by a fixed point for a journaled pass's later runs: the edit mark taken when it
    last started. The pass then need only visit the ops touched since, and what is near
    them (``_worklist.visit``); None: every op."""
    keeps_types: ClassVar[bool] = False
    """True for a pass that only removes or merges ops, so that whatever read a removed value
    reads one of the same type: the inference made before it stands for the model it leaves
    (see ``carry_inference``)."""

    def requires(self, model: Model) -> None:  # noqa: B027  (optional hook)
        """Raise PreconditionError when the pass cannot work on ``model``."""

    @abc.abstractmethod
    def call(self, model: Model) -> PassResult: ...

    def ensures(self, model: Model) -> None:  # noqa: B027  (optional hook)
        """Raise PostconditionError when the pass left the model in a broken state."""

    def __call__(self, model: Model) -> PassResult:
        self.requires(model)
        key = inference_key(model) if self.keeps_types else None
        try:
            result = self.call(model)
        except BaseException:
            note_change(tracked=False)  # a failed pass may have changed the model half way
            raise
        if result.modified and key is not None and carry_inference(model, key):
            result.inferred = True
        if result.modified and not self.types_only and not result.inferred:
            note_change(tracked=self.journaled)
        self.ensures(result.model)
        return result


_changes = [0, 0]


def note_change(*, tracked: bool = False) -> None:
    """Something changed a model: what was inferred for it before is stale (see
    ``_rewrite.inferred_types``). Every pass that reports ``modified`` calls it. ``tracked``:
    every edit left a stamp on the op it changed (``Pass.journaled``), so the inference can be
    brought up to date instead of made again."""
    _changes[0] += 1
    if not tracked:
        _changes[1] += 1


def changes() -> int:
    """How many changes were noted so far (a cache key)."""
    return _changes[0]


def untracked_changes() -> int:
    """How many of them may have changed ops without a stamp."""
    return _changes[1]


Inference = tuple[tuple[int, ...], Any, list[Any], int]
"""A model's last inference (``_rewrite.inference``), kept in ``Model._inference``: the
model's key then, the ``shape_infer.Resumable`` (report included), the values, whose
``_inferred`` holds the type it gave them, and ``untracked_changes()`` then. It is held by the
model, not in a table weakly keyed by it: the Resumable refers back to the model, so such a
table never let a model go (each converted copy a calibration measured stayed alive: a ViT's
parent process grew 230 MB a copy, past an 8 GiB address-space cap)."""


def inference_key(model: Model) -> tuple[int, ...]:
    """Changes noted by passes, and every graph's identity and size: equal means no pass and
    no graph edit happened in between."""
    key = [changes()]
    for graph in model.graphs():
        key += [id(graph), len(graph), len(graph._values)]
    return tuple(key)


def carry_inference(model: Model, key: tuple[int, ...]) -> bool:
    """After a ``keeps_types`` pass, every type inferred before it (``key``: the model then)
    is still true: that inference stands for the model as the pass leaves it, and the next
    pass does not infer the whole model again. True when there was one to carry."""
    cached: Inference | None = model._inference
    if cached is None or cached[0] != key:
        return False
    model._inference = (inference_key(model), *cached[1:])
    return True


_verified: weakref.WeakSet[Model] = weakref.WeakSet()


def verified(model: Model) -> bool:
    """True while a PassManager runs on ``model``: it verified the graph when it started, so
    inference between passes need not verify it again."""
    return model in _verified


class Instrument(Protocol):
    """Watches passes run (progress display, timing); FixedPoint reports its inner passes."""

    def before_pass(self, pass_: Pass, model: Model) -> None: ...
    def after_pass(self, pass_: Pass, model: Model, result: PassResult) -> None: ...


class FixedPoint(Pass):
    """Run ``passes`` in order, again and again until none of them changes the model, at
    most ``max_iterations`` rounds. From the second round on, each pass visits only the ops
    touched since it last started and what is near them (``worklist``: as MLIR's greedy
    pattern driver revisits only what a rewrite touched). Stats are the passes' own,
    prefixed with their name, plus ``iterations``; a cap reached with changes still coming
    is logged. ``rows`` sums each inner pass over the rounds: its time, the ops before its
    first run, and after it that count changed by what its own runs added and removed (not
    what the passes between them did, so a pass that changed nothing shows the same count
    twice)."""

    name: ClassVar[str] = "fixed-point"

    def __init__(
        self, passes: Sequence[Pass], *, max_iterations: int = 8, worklist: bool = True
    ) -> None:
        self.passes = list(passes)
        self.max_iterations = max_iterations
        self.worklist = worklist
        """From the second round on, a pass visits only the ops touched since it last
        started (``Pass.focus``), when every pass is journaled: a round that finds little
        costs little. False: every pass visits every op every round."""
        self.verify_each = False  # set by the PassManager that runs it
        self.instruments: Sequence[Instrument] = ()
        self.rows: list[Row] = []

    def call(self, model: Model) -> PassResult:
        result = PassResult(model)
        rows = {p.name: Row(f"  {p.name}", False, 0.0, 0, 0, {}) for p in self.passes}
        first = True
        incremental = self.worklist and all(p.journaled for p in self.passes)
        started: list[int | None] = [None] * len(self.passes)
        for i in range(1, self.max_iterations + 1):
            result.stats["iterations"] += 1
            changed = False
            for index, p in enumerate(self.passes):
                row = rows[p.name]
                before = _count_ops(model)
                if first:
                    row.ops_before = row.ops_after = before
                start = time.perf_counter()
                for instrument in self.instruments:
                    instrument.before_pass(p, model)
                p.focus = started[index] if incremental else None
                started[index] = ir.edit_mark()
                try:
                    step = p(model)
                    if self.verify_each:
                        ir.verify(model)
                except OnnxForgeError as e:
                    raise PassError(f"pass {p.name} (iteration {i}): {e}") from e
                finally:
                    p.focus = None
                for instrument in self.instruments:
                    instrument.after_pass(p, model, step)
                row.seconds += time.perf_counter() - start
                row.ops_after += _count_ops(model) - before  # its own effect only
                row.modified |= step.modified
                changed |= step.modified
                for key, count in step.stats.items():
                    result.stats[f"{p.name}.{key}"] += count
                    row.stats[key] = row.stats.get(key, 0) + count
                for key, details in step.details.items():
                    result.details.setdefault(f"{p.name}.{key}", []).extend(details)
            first = False
            result.modified |= changed
            if not changed:
                break
        else:
            logger.info("%s: still changing after %d iterations", self.name, self.max_iterations)
        self.rows = list(rows.values())
        return result


def node_label(op: Op) -> str:
    """The node's name, or what it produces when it has none (for --verbose)."""
    if op.name:
        return op.name
    first = next((v.name for v in op._outputs if v is not None), "?")
    return f"{op.op_type} -> {first}"


PASSES: dict[str, type[Pass]] = {}
P = TypeVar("P", bound=type[Pass])


def register_pass(cls: P) -> P:
    """Make a pass available by its name (``--passes``, `onnxforge passes`)."""
    if cls.name in PASSES:
        raise OnnxForgeError(f"pass {cls.name!r} registered twice")
    if not cls.summary or "\n" in cls.summary:
        raise OnnxForgeError(f"pass {cls.name!r} needs a one-line summary")
    PASSES[cls.name] = cls
    return cls


@dataclass
class Row:
    pass_name: str
    modified: bool
    seconds: float
    ops_before: int
    ops_after: int
    stats: dict[str, int]
    details: dict[str, list[str]] = field(default_factory=dict)


@dataclass
class Report:
    """One row per pass run, in order."""

    rows: list[Row] = field(default_factory=list)

    def details(self, pass_name: str, key: str) -> list[str]:
        """What the runs of ``pass_name`` noted under ``key`` (node names, messages)."""
        return [d for r in self.rows if r.pass_name == pass_name for d in r.details.get(key, [])]

    def to_json(self) -> list[dict[str, Any]]:
        return [
            {
                "pass": r.pass_name,
                "modified": r.modified,
                "seconds": round(r.seconds, 6),
                "ops_before": r.ops_before,
                "ops_after": r.ops_after,
                "stats": r.stats,
            }
            for r in self.rows
        ]


def _count_ops(model: Model) -> int:
    return sum(len(graph._ops) for graph in model.graphs())


class PassManager:
    """Runs passes in order; ``verify_each`` checks the graph after every pass and names the
    pass that broke it. A failure names the pass and the passes before it."""

    def __init__(
        self,
        passes: Sequence[Pass],
        *,
        verify_each: bool = False,
        instruments: Sequence[Instrument] = (),
    ) -> None:
        self.passes = list(passes)
        self.verify_each = verify_each
        self.instruments = list(instruments)
        self.results: list[PassResult] = []

    def run(self, model: Model) -> Report:
        ir.verify(model)  # once: passes keep the graph valid (--verify-each checks each one)
        model._loaded_nodes = None  # passes edit ops: their nodes are no longer as read
        _verified.add(model)
        try:
            with ir.no_gc():
                return self._run(model)
        finally:
            _verified.discard(model)

    def _run(self, model: Model) -> Report:
        report = Report()
        done: list[str] = []
        note_change()  # the caller may have edited the model since any earlier run
        for p in self.passes:
            if isinstance(p, FixedPoint):
                p.verify_each, p.instruments = self.verify_each, self.instruments
            before = _count_ops(model)
            start = time.perf_counter()
            for instrument in self.instruments:
                instrument.before_pass(p, model)
            try:
                result = p(model)
                if self.verify_each:
                    ir.verify(model)
            except OnnxForgeError as e:
                after = f" (after {', '.join(done)})" if done else ""
                raise PassError(f"pass {p.name}{after}: {e}") from e
            for instrument in self.instruments:
                instrument.after_pass(p, model, result)
            self.results.append(result)
            report.rows.append(
                Row(
                    p.name,
                    result.modified,
                    time.perf_counter() - start,
                    before,
                    _count_ops(model),
                    dict(result.stats),
                    result.details,
                )
            )
            if isinstance(p, FixedPoint):
                report.rows.extend(p.rows)
            done.append(p.name)
        return report
