"""What the automatic mixed precision's two choosers share: the float32 run of the model
with its values exposed, the rounds of measuring a conversion and keeping what grows its
error most, and the helpers both read the graph with."""

from __future__ import annotations

__all__ = [
    "DEFAULT_MAX_ROUNDS",
    "MEMORY_BUDGET",
    "MixedPrecision",
    "UnrunnableError",
]

import gc
import importlib.util
import logging
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import ml_dtypes
import numpy as np

from onnxforge import io
from onnxforge._runtime_child import run_in_child
from onnxforge.api._decisions import find_decisions, pin, tally_flips
from onnxforge.api.compare import (
    HALF_TOLERANCE,
    close_call_error,
    close_call_inputs,
    middle_error,
    output_scales,
    range_error,
    saturating_inputs,
)
from onnxforge.errors import OnnxForgeError
from onnxforge.ir import (
    DType,
    Graph,
    Model,
    Op,
    Tensor,
    TensorType,
    Value,
    walk_graphs,
)
from onnxforge.passes.toolchain_forms import dropout_as_inference
from onnxforge.shape_infer import infer
from onnxforge.shape_infer.symbolic import evaluate

logger = logging.getLogger(__name__)

DEFAULT_MAX_ROUNDS = 12
"""Conversions the error step measures at most (each keeps the ops, or the weights, whose
error grows most)."""

MEMORY_BUDGET = 1 << 30
"""Bytes of exposed values one run may return: above it, the values (or the input sets) are
split over several runs."""

TARGETS = {"float16": DType.FLOAT16, "bfloat16": DType.BFLOAT16}

_NUMPY = {DType.FLOAT16: np.dtype(np.float16), DType.BFLOAT16: np.dtype(ml_dtypes.bfloat16)}

Feeds = Sequence[Mapping[str, np.ndarray]]

Batch = tuple[list[str], range]
"""Names of the values a run exposes, and the input sets it runs on."""


class UnrunnableError(OnnxForgeError):
    """onnxruntime cannot run the float32 model on the input sets given."""


@dataclass
class MixedPrecision:
    """What ``choose_float32_ops`` (or ``choose_float32_weights``) found.

    ``keep``: op key (an op's first output name, or the caller's own keys) -> why it stays
    float32, for ``ConvertPrecisionPass(keep_float32=...)``; for the weights, weight name
    (initializer or Constant output) -> why. ``errors``: per graph output, the converted
    model's largest error over the output's range (``range_error``) on the feeds. ``rounds``:
    conversions measured. ``met``: every error is within ``tolerance``.
    ``store_kept_weights``: the errors were measured with the kept ops' weights stored in the
    half type (``ConvertPrecisionPass(store_kept_weights=True)``) but ``float32_weights``
    (weight -> why), which stayed as they are. ``judged``: the values
    in ``errors`` that are not graph outputs, those a decision is made on (``_decisions``),
    name -> which; ``flipped``: per decision, the picks the last conversion made otherwise
    than the original (it was measured with the original's), and of how many.
    ``estimates``: the values in ``errors`` that estimate a saturating output where it is not
    saturated (``middle_error``), named in ``judged`` too. ``close_calls``: per Softmax
    output, what the last conversion would move it by at a close call between two classes
    (``close_call_error``): reported, not aimed at nor held to the tolerance.
    ``runtime_kept``: the keys in ``keep`` kept because onnxruntime fails on
    them in the half type (the others were kept for what they measured).
    """

    keep: dict[str, str]
    errors: dict[str, float]
    rounds: int
    tolerance: float = HALF_TOLERANCE
    store_kept_weights: bool = False
    float32_weights: dict[str, str] = field(default_factory=dict)
    judged: dict[str, str] = field(default_factory=dict)
    flipped: dict[str, tuple[int, int]] = field(default_factory=dict)
    estimates: frozenset[str] = frozenset()
    close_calls: dict[str, float] = field(default_factory=dict)
    runtime_kept: frozenset[str] = frozenset()

    @property
    def met(self) -> bool:
        """Every output (and decided-on value) is within the tolerance; ``estimates`` steer
        the rounds, and are not held to it."""
        return all(e <= self.tolerance for n, e in self.errors.items() if n not in self.estimates)


def _target(dtype: str, feeds: Feeds) -> int:
    """The half type ``dtype`` names, once the call is known to be possible."""
    target = TARGETS.get(dtype)
    if target is None:
        raise OnnxForgeError(f"mixed precision: dtype {dtype!r}, not one of {', '.join(TARGETS)}")
    if not feeds:
        raise OnnxForgeError("mixed precision: no input sets to run the model on")
    if importlib.util.find_spec("onnxruntime") is None:
        raise OnnxForgeError(
            "mixed precision runs the model on onnxruntime, which is not installed "
            "(pip install onnxruntime)"
        )
    return target


@dataclass
class _Measured:
    """One conversion's run: each shared value's and each graph output's error (over its
    range), each shared value's largest absolute difference, and what a chooser's own
    ``extra`` found (the largest of each over the input sets)."""

    values: dict[str, float] = field(default_factory=dict)
    outputs: dict[str, float] = field(default_factory=dict)
    absolute: dict[str, float] = field(default_factory=dict)
    extra: dict[tuple[str, str], float] = field(default_factory=dict)
    close_calls: dict[str, float] = field(default_factory=dict)  # by the Softmax output


Extra = Callable[
    [Mapping[str, np.ndarray], Mapping[str, np.ndarray]], dict[tuple[str, str], float]
]
"""What a chooser measures beside the errors, from one input set's float32 and converted
arrays: key -> number (the largest over the sets is kept)."""


class _Runs:
    """What both choosers share: the float32 copy of the model, the feeds, what its float32
    run found (its float values, and its arrays when they fit in one run), the rounds of
    measuring a conversion and keeping what grows its error most."""

    tolerance: float
    budget: float = math.inf
    """What the result is held to (``Calibration.budget``; ``tolerance`` is what the rounds
    aim at): ``_rounds`` goes on past ``max_rounds`` while an output is past it."""

    def __init__(self, model: Model, feeds: Feeds, folder: Path) -> None:
        self.base = _copy(model)
        # A Dropout left in training mode draws a new mask each run: measured as inference
        # computes it (the written model keeps it), else no two runs agree (torch's BERT
        # exported in train mode); values a Random op feeds are not measured at all.
        dropout_as_inference(self.base)
        infer(self.base, verify=False)  # the float values and what reads them need types
        self.random = {v.name for v in _random_values(self.base.graph)}
        self.feeds = feeds
        self.folder = folder
        graph = self.base.graph
        self.values = _by_name(graph)
        self.outputs = [v.name for v in graph.outputs]
        # Decisions are measured as --check judges them: the values they are made on as
        # outputs, and every conversion run with the original's picks (_decisions).
        self.decisions = find_decisions(self.base)
        self.judged = {n: w for n, w in self.decisions.judged.items() if n not in self.outputs}
        self.outputs += list(self.judged)
        self.scales = output_scales(self.base, also=self.judged)  # the outputs' errors' scales
        # A Sigmoid's output is also estimated where it is not saturated, from
        # its input: the rounds aim at it, the result is judged by the outputs themselves.
        self.middles = {
            n: how for n, how in saturating_inputs(self.base).items() if n not in self.outputs
        }
        self.outputs += list(self.middles)
        self.judged.update({n: how.about for n, how in self.middles.items()})
        self.close_calls = close_call_inputs(self.base)  # Softmax inputs, for a note
        self.picks: list[dict[str, np.ndarray]] | None = None  # the float32 model's, per set
        self.flipped: dict[str, tuple[int, int]] = {}  # by the last conversion run
        self.floats: set[str] = set()  # float32 values, by what the float32 run returned
        self.reference: list[dict[str, np.ndarray]] | None = None  # that run, when it fits
        self.saved: dict[tuple[str, int], Path] = {}  # (value, input set) -> its float32 .npy
        self.known: dict[str, int] = {}  # value -> its bytes per input set, as a run gave it
        self._estimated: dict[str, int] | None = None  # _estimates', made once

    def adopt_float32_run(self, other: _Runs) -> None:
        """Take what ``other``'s float32 runs gave (of the same model on the same feeds):
        which values are float32, their sizes, the reference arrays or the files they were
        saved to, the decisions' picks, instead of running the model again (a 640 x 640
        detector's: 80 s on two busy cores)."""
        self.floats = set(other.floats)
        self.known = dict(other.known)
        self.reference = other.reference
        self.saved = dict(other.saved)
        self.picks = other.picks

    # -- what a chooser gives ----------------------------------------------------------------
    def _convert(self, keep: Mapping[str, str]) -> Model:
        """A converted copy of the model with ``keep`` as it is."""
        raise NotImplementedError

    def _measure_round(self, conv: Model) -> _Measured:
        """``conv`` (made by ``_convert``; it may be changed) measured on the float32 run."""
        raise NotImplementedError

    def _pick(
        self, measured: _Measured, keep: Mapping[str, str], failing: Sequence[str]
    ) -> dict[str, str]:
        """What to keep next for the failing outputs: key -> why (nothing: give up)."""
        raise NotImplementedError

    def _keep(self, keep: dict[str, str], key: str, reason: str) -> None:
        keep.setdefault(key, reason)

    round: int = 0
    """The round ``_pick`` chooses for (1 first)."""

    def _counts(self) -> bool:
        """Whether the round just measured counts against ``max_rounds`` (one that only
        found what the runtime cannot run does not)."""
        return True

    # -- shared ------------------------------------------------------------------------------
    def _rounds(
        self, keep: dict[str, str], conv: Model, max_rounds: int, *, more: int = 0
    ) -> MixedPrecision:
        """Measure ``conv``; while an output fails, keep what ``_pick`` finds and convert
        again, ``max_rounds`` measures at most, and ``more`` after them while an output (not
        an estimate) is past ``budget``, which would refuse the conversion: the rounds aim at
        the tolerance, and where they run out short of the budget, more of them cost time,
        not a refusal (Multilingual PP-OCRv3 det: 1.74e-2 after 12, within 1e-2 at 15). When
        none meets the tolerance, the round with the smallest largest error is the result:
        keeping more can undo errors that cancelled (caustic's weights: 6.9e-4 at round 3,
        1.08e-3 at round 8)."""
        rounds = counted = 0
        best: MixedPrecision | None = None
        while True:
            rounds += 1
            measured = self._measure_round(conv)
            counted += self._counts()
            failing = [n for n, e in measured.outputs.items() if not e <= self.tolerance]
            worst = max(measured.outputs.values(), default=0.0)
            logger.info("mixed precision round %d: largest output error %.3g", rounds, worst)
            found = MixedPrecision(
                dict(keep), measured.outputs, rounds, self.tolerance, judged=self.judged,
                flipped=dict(self.flipped), estimates=frozenset(self.middles),
                close_calls=dict(measured.close_calls),
            )  # fmt: skip
            if best is None or worst < max(best.errors.values(), default=0.0):
                best = found
            refused = any(
                not e <= self.budget for n, e in measured.outputs.items() if n not in self.middles
            )
            limit = max_rounds + (more if refused else 0)
            if not failing or counted >= limit or rounds >= 2 * limit:
                break
            self.round = rounds
            picked = self._pick(measured, keep, failing)
            if not picked:
                break
            for key, reason in picked.items():
                self._keep(keep, key, reason)
            conv = self._convert(keep)
        if best is not found:
            logger.info("mixed precision: round %d measured least: its choice stands", best.rounds)
            keep.clear()
            keep.update(best.keep)
            best.rounds = rounds
        return best

    def _run_float32(self, probe: Model) -> dict[str, float]:
        """Run ``probe`` (the float32 model, or a copy whose values are its own) with every
        float value exposed: the largest finite magnitude of each, keeping the arrays as the
        reference when ``probe`` is the model itself and they fit in one run."""
        candidates = [
            v
            for op in self.base.graph.ops
            if op.op_type != "Constant"
            for v in op._outputs
            if v is not None and _maybe_float(v)
        ]
        batches = self._batches(candidates)
        largest: dict[str, float] = {}
        for names, sets in batches:
            if probe is self.base:
                runs = self._float32(names, sets, save=len(batches) > 1)
            else:
                runs = self._run(probe, names, sets, "float32.onnx")
            if isinstance(runs, str):
                raise UnrunnableError(f"onnxruntime cannot run the float32 model: {runs}")
            self._tally_largest(runs, names, largest)
            if len(batches) == 1 and probe is self.base:
                self.reference = runs
            del runs  # before the next batch's run: one batch's arrays at a time
        return largest

    def _tally_largest(
        self, runs: Sequence[Mapping[str, np.ndarray]], names: Sequence[str],
        largest: dict[str, float],
    ) -> None:  # fmt: skip
        """Note each float32 value of ``names`` in ``runs``, and its largest magnitude."""
        wanted = set(names)
        for run in runs:
            for name, array in run.items():
                if name not in wanted or array.dtype != np.float32:
                    continue
                self.floats.add(name)
                largest[name] = max(largest.get(name, 0.0), _largest(array))
                self.known[name] = max(self.known.get(name, 0), array.nbytes)

    def _measure(
        self,
        conv: Model,
        feeds: Feeds,
        what: str,
        companions: Mapping[str, Sequence[str]] | None = None,
        extra: Extra | None = None,
    ) -> _Measured:
        """Run ``conv`` (``what`` it is, for an error) on ``feeds`` and the float32 model on
        the feeds: each shared value's and each graph output's largest range_error over the
        input sets. ``companions``: values of ``conv`` alone exposed in the same run as a
        shared value (as large as it), for ``extra``."""
        values = _by_name(conv.graph)
        shared = [self.values[n] for n in sorted(self.floats) if n in values]
        with_ = companions or {}
        if self.reference is not None and not with_:  # it fit in one run: so does this
            batches = [([v.name for v in shared], range(len(self.feeds)))]
        else:
            batches = self._batches(shared, with_)
        done = _Measured()
        for exposed, sets in batches:
            extras = [c for n in exposed for c in with_.get(n, ())]
            got = self._run(conv, [*exposed, *extras], sets, "converted.onnx", feeds)
            if isinstance(got, str):
                raise OnnxForgeError(f"onnxruntime cannot run {what}: {got}")
            if self.reference is not None:
                want = [self.reference[i] for i in sets]
            else:
                runs = self._float32(exposed, sets)
                if isinstance(runs, str):
                    raise UnrunnableError(f"onnxruntime cannot run the float32 model: {runs}")
                want = runs
            self._tally_errors(done, want, got, exposed, extra)
            del got, want  # before the next batch's run: one batch's arrays at a time
        return done

    def _tally_errors(
        self,
        done: _Measured,
        want: Sequence[Mapping[str, np.ndarray]],
        got: Sequence[Mapping[str, np.ndarray]],
        exposed: Sequence[str],
        extra: Extra | None,
    ) -> None:
        """Add one batch's errors to ``done``: each of ``exposed``, ``extra``'s, each output's."""
        for w, g in zip(want, got, strict=True):
            for name in exposed:
                if name in w and name in g and name not in self.random:
                    largest, error = range_error(w[name], g[name])
                    done.values[name] = max(done.values.get(name, 0.0), error)
                    done.absolute[name] = max(done.absolute.get(name, 0.0), largest)
            for key, number in (extra(w, g) if extra is not None else {}).items():
                done.extra[key] = max(done.extra.get(key, 0.0), number)
            for name in self.outputs:
                if name in w and name in g and name not in self.random:
                    error = self._output_error(name, w[name], g[name])
                    done.outputs[name] = max(done.outputs.get(name, 0.0), error)
            for name, how in self.close_calls.items():
                if name in w and name in g and name in exposed:
                    error = close_call_error(w[name], g[name], how)
                    done.close_calls[how.output] = max(done.close_calls.get(how.output, 0), error)

    def _output_error(self, name: str, want: np.ndarray, got: np.ndarray) -> float:
        """An output's (or judged value's) error as the rounds measure it: over its range
        or its bounds (``range_error``), or for a saturating output's input, the output's
        estimated where it is not saturated (``middle_error``)."""
        if name in self.middles:
            return middle_error(want, got, self.middles[name])
        return range_error(want, got, scale=self.scales.get(name, 0.0))[1]

    def _float32(
        self, names: Sequence[str], sets: range, *, save: bool = True
    ) -> list[dict[str, np.ndarray]] | str:
        """The float32 model run on ``sets`` with ``names`` exposed (as ``_run``), from the
        files an earlier run of them left when there are: when the values do not fit in one
        run, every round ran the same float32 model again (half of a 960 x 960 detector's
        child processes), so each numeric array is saved once in the folder and mapped."""
        wanted = [*names, *self.outputs]
        if all((n, i) in self.saved for n in wanted for i in sets):
            return [{n: np.load(self.saved[n, i], mmap_mode="r") for n in wanted} for i in sets]
        runs = self._run(self.base, names, sets, "float32.onnx")
        if isinstance(runs, str) or not save:
            return runs
        folder = self.folder / "float32"
        folder.mkdir(exist_ok=True)
        for i, run in zip(sets, runs, strict=True):
            for name, array in run.items():
                if (name, i) not in self.saved and isinstance(array, np.ndarray) \
                        and array.dtype.kind in "fiub":  # fmt: skip
                    path = folder / f"{len(self.saved)}.npy"
                    np.save(path, array)
                    self.saved[name, i] = path
        return runs

    def _batches(
        self, values: Sequence[Value], companions: Mapping[str, Sequence[str]] | None = None
    ) -> list[Batch]:
        """The runs exposing ``values``: sized by what the float32 run gave where it ran
        them, else estimated from their shapes (an unknown dim as the largest input dim: a
        paddle2onnx detector's values came out at terabytes, one value and one set per run,
        1,570 runs a round where 3 hold them)."""
        with_ = companions or {}
        estimated = self._estimates() if any(v.name not in self.known for v in values) else {}
        sizes = {
            v.name: (self.known.get(v.name) or estimated.get(v.name, 0))
            * (1 + len(with_.get(v.name, ())))
            for v in values
        }
        return _batches(sizes, len(self.feeds), MEMORY_BUDGET)

    def _estimates(self) -> dict[str, int]:
        """Each main-graph value's bytes per input set, estimated from its shape with the
        feeds' sizes bound (``_nbytes``). The shapes come from a fresh inference of a copy
        with only the inputs' types kept: inferred again, a model whose unnamed batch dim an
        earlier inference named keeps that name inside while the input's gets a new one,
        which no feed binds (v-ppocr's detector: every value estimated at 640 images, one
        value a run, 4 min of runs before the float32 run gave the sizes)."""
        if self._estimated is not None:
            return self._estimated
        sizing = _copy(self.base)
        inputs = set(sizing.graph.inputs)
        for value in _by_name(sizing.graph).values():
            if value not in inputs and value.const is None:
                value.type = None
        try:
            report = infer(sizing, verify=False)
            named = {v.name: t for v, t in report.input_names.items()}
        except Exception as exc:  # noqa: BLE001  (estimates from the model's own types then)
            logger.info("mixed precision: sizes estimated from the declared types (%s)", exc)
            sizing, named = self.base, {}
        bindings, fallback = _bindings(sizing.graph, self.feeds, named)
        self._estimated = {
            v.name: _nbytes(v, bindings, fallback) for v in _by_name(sizing.graph).values()
        }
        return self._estimated

    def _run(
        self,
        model: Model,
        names: Sequence[str],
        sets: range,
        file: str,
        feeds: Sequence[Mapping[str, np.ndarray]] | None = None,
        *,
        runtime: str = "onnxruntime-unoptimized",
    ) -> list[dict[str, np.ndarray]] | str:
        """``model`` (one of ours) run on ``sets`` with ``names`` exposed as outputs: per set,
        name -> array for them and the graph outputs; or the runtime's error. A model with
        decisions runs with the float32 model's picks in place of its own (``pin``), and
        ``flipped`` says how many of its own differed."""
        given = list(feeds if feeds is not None else self.feeds)
        as_is = model is self.base and runtime == "onnxruntime-unoptimized"
        probe = len(given) != len(self.feeds)  # a bisection's, on one set
        if not self.decisions or not sets or as_is or probe:
            return self._run_as_is(model, names, sets, file, given, runtime=runtime)
        if self.picks is None:
            picked = self._run_as_is(self.base, list(self.decisions.picks),
                                     range(len(self.feeds)), "picks.onnx")  # fmt: skip
            if isinstance(picked, str):
                raise UnrunnableError(f"onnxruntime cannot run the float32 model: {picked}")
            self.picks = [{n: run[n] for n in self.decisions.picks} for run in picked]
        pinned = _copy(model)
        own = pin(pinned, self.decisions.picks)
        if not own:  # a part of the model that makes none
            return self._run_as_is(model, names, sets, file, given, runtime=runtime)
        fed = [{**f, **{n: p[n] for n in own}} for f, p in zip(given, self.picks, strict=True)]
        runs = self._run_as_is(pinned, names, sets, file, fed, runtime=runtime)
        if isinstance(runs, str):  # pinning's fault, or the model's: as the user runs it
            logger.info("mixed precision: fails pinned (%s); run without picks", runs[:200])
            return self._run_as_is(model, names, sets, file, given, runtime=runtime)
        counts = tally_flips(
            (pick, self.picks[i][pick], run.pop(name))
            for i, run in zip(sets, runs, strict=True)
            for pick, name in own.items()
        )
        if model is not self.base:  # a conversion's: the float32 model's own are noise
            self.flipped = counts
        return runs

    def _run_as_is(
        self,
        model: Model,
        names: Sequence[str],
        sets: range,
        file: str,
        feeds: Sequence[Mapping[str, np.ndarray]] | None = None,
        *,
        runtime: str = "onnxruntime-unoptimized",
    ) -> list[dict[str, np.ndarray]] | str:
        """``model`` run on ``sets`` with ``names`` exposed as outputs: per set, name -> array
        for them and the graph outputs; or the runtime's error."""
        graph = model.graph
        values = _by_name(graph)
        listed = {v.name for v in graph.outputs}
        saved = list(graph.outputs)
        graph.outputs.extend(values[n] for n in names if n not in listed and n in values)
        order = [v.name for v in graph.outputs]
        path = self.folder / file
        try:
            io.save(model, path)
        finally:
            graph.outputs[:] = saved
        given = feeds if feeds is not None else self.feeds
        done = run_in_child(runtime, path, [given[i] for i in sets], self.folder)
        if done.error is not None:
            return done.error
        return [dict(zip(order, outs, strict=True)) for outs in done.outputs]


RANDOM_OPS = frozenset(
    {"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Bernoulli",
     "Multinomial", "Dropout"}
)  # fmt: skip
"""Ops whose outputs may differ run to run (a Dropout measured here is in inference mode
unless its training flag is a graph input)."""


def _random_values(graph: Graph) -> set[Value]:
    """The values of ``graph`` a random op (one in a body included) may change run to run."""
    found: set[Value] = set()
    for op in graph.topo_order():
        random = any(
            inner.op_type in RANDOM_OPS
            for sub in op.subgraphs()
            for body in walk_graphs(sub)
            for inner in body.ops
        )
        if op.op_type == "Dropout":
            flag = op._inputs[2] if len(op._inputs) > 2 else None
            random = random or (flag is not None and flag.const is None
                                and graph.producer(flag) is None)  # fmt: skip
        elif op.op_type in RANDOM_OPS:
            random = True
        if random or any(v in found for v in op.reads()):
            found.update(v for v in op._outputs if v is not None)
    return found


COLLECT_ABOVE = 16 << 20
"""Bytes of a model's copy from which ``_copy`` collects the dropped copies first."""


def _copy(model: Model) -> Model:
    """A copy of ``model``, made after collecting the copies dropped before it when it is
    large: a model is a cycle (graph, ops, values), which only the collector frees, and its
    thresholds count objects, not the arrays they hold, so the copies of the rounds and probes
    piled up (a ViT's bisection: 230 MB a probe, nine probes, past an 8 GiB address-space
    cap). A collection scans the whole heap, so a small model's copies are left to the
    thresholds (collecting before each made the precision tests 13% slower)."""
    proto = io.to_proto(model)
    if proto.ByteSize() >= COLLECT_ABOVE:
        gc.collect()
    return io.from_proto(proto)


def _by_name(graph: Graph) -> dict[str, Value]:
    return {v.name: v for v in graph.values() if v._graph is graph}


def _key(op: Op) -> str:
    """What ConvertPrecisionPass's keep_float32 knows an op by: its first output's name."""
    return next((v.name for v in op._outputs if v is not None), "")


def _name(dtype: int) -> str:
    return {DType.FLOAT: "float32"}.get(DType(dtype), DType(dtype).name.lower())


def _num(x: float) -> str:
    return "inf" if x == math.inf else f"{x:.1e}"


def _dtype(value: Value) -> int | None:
    if isinstance(value.const, Tensor):
        return value.const.dtype
    return value.type.dtype if isinstance(value.type, TensorType) else None


def _maybe_float(value: Value) -> bool:
    """float32, or of a type not known (the run tells)."""
    return value.type is None or _dtype(value) == DType.FLOAT


def _largest(array: np.ndarray) -> float:
    """The largest finite magnitude in ``array`` (0 when there is none)."""
    finite = np.abs(array[np.isfinite(array)])
    return float(finite.max()) if finite.size else 0.0


def _rounded(array: np.ndarray, target: int) -> np.ndarray:
    return np.asarray(array).astype(_NUMPY[DType(target)]).astype(np.float32)


def _upstream(graph: Graph, values: Iterable[Value]) -> set[Op]:
    """The ops of ``graph`` that ``values`` depend on."""
    found: set[Op] = set()
    stack = list(values)
    while stack:
        op = graph.producer(stack.pop())
        if op is not None and op not in found:
            found.add(op)
            stack.extend(op.reads())
    return found


def _batches(sizes: Mapping[str, int], runs: int, budget: int) -> list[Batch]:
    """Runs that expose values of ``sizes`` (bytes per input set) on ``runs`` input sets,
    each returning ``budget`` bytes at most: every set at once when they fit, else groups of
    sets, else groups of values in order (a value alone larger than the budget: one set)."""
    chunks: list[tuple[list[str], int]] = []
    for name, size in sizes.items():
        if chunks and chunks[-1][1] + size <= budget:
            chunks[-1] = (chunks[-1][0] + [name], chunks[-1][1] + size)
        else:
            chunks.append(([name], size))
    if not chunks:
        return [([], range(runs))]
    found = []
    for names, size in chunks:
        step = max(1, budget // max(1, size))
        found += [(names, range(i, min(i + step, runs))) for i in range(0, runs, step)]
    return found


def _bindings(
    graph: Graph, feeds: Feeds, named: Mapping[str, TensorType] | None = None
) -> tuple[dict[str, int], int]:
    """The input symbols' sizes in the feeds (the largest over the sets), and the size taken
    for a dim they do not give (the largest input dim). ``named``: input name -> its type
    with the names an inference gave its unnamed dims (``InferReport.input_names``)."""
    bindings: dict[str, int] = {}
    largest = 1
    for value in graph.inputs:
        t = (named or {}).get(value.name, value.type)
        for feed in feeds:
            array = feed.get(value.name)
            if array is None:
                continue
            largest = max(largest, *np.shape(array), 1)
            if isinstance(t, TensorType) and t.shape is not None and len(t.shape) == array.ndim:
                for dim, size in zip(t.shape, array.shape, strict=True):
                    if isinstance(dim, str):
                        bindings[dim] = max(bindings.get(dim, 0), size)
    return bindings, largest


def _nbytes(value: Value, bindings: Mapping[str, int], fallback: int) -> int:
    """Estimated bytes of a float32 value: its shape with the symbols bound, ``fallback`` for
    a dim the bindings do not give; a value of unknown rank is taken as ``fallback``**2."""
    t = value.type
    if not isinstance(t, TensorType) or t.shape is None:
        return 4 * fallback * fallback
    dims = [evaluate(d, bindings) if d is not None else None for d in t.shape]
    return 4 * math.prod(fallback if d is None else max(d, 0) for d in dims)
