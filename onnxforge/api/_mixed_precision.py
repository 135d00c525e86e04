"""Automatic mixed precision: which ops stay float32 when a model goes to float16 or bfloat16,
and which weights stay float32 when the weights alone are stored in the half type."""

from __future__ import annotations

__all__ = [
    "DEFAULT_CALIBRATION_RUNS",
    "DEFAULT_MAX_ROUNDS",
    "MEMORY_BUDGET",
    "WEIGHTS_TOLERANCE",
    "Calibration",
    "MixedPrecision",
    "choose_float32_ops",
    "choose_float32_weights",
    "load_calibration",
]

import importlib.util
import logging
import math
import re
import tempfile
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import ml_dtypes
import numpy as np

from onnxforge import io
from onnxforge._runtime_child import run_in_child
from onnxforge.api.compare import (
    HALF_TOLERANCE,
    half_tolerance,
    output_scales,
    random_inputs,
    range_error,
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
    constant_tensor,
    walk_graphs,
)
from onnxforge.passes import ConvertPrecisionPass
from onnxforge.passes.toolchain_forms import dropout_as_inference
from onnxforge.shape_infer import infer
from onnxforge.shape_infer.symbolic import evaluate

logger = logging.getLogger(__name__)

DEFAULT_CALIBRATION_RUNS = 5
"""Random input sets the automatic mixed precision runs by default (--calibrate N)."""
DEFAULT_MAX_ROUNDS = 8
"""Conversions the error step measures at most (each keeps the ops, or the weights, whose
error grows most)."""
WEIGHTS_TOLERANCE = 1e-3
"""The budget of weights stored in the half type (--weights): every op still computes in
float32, so the outputs stay 10x closer than a --dtype conversion's (``HALF_TOLERANCE``)."""
MEMORY_BUDGET = 1 << 30
"""Bytes of exposed values one run may return: above it, the values (or the input sets) are
split over several runs."""
MARGIN = 0.5
"""A calibration aims at this share of the budget, and accepts up to all of it: its input
sets are not those the model will see (g2p-id's BERT met 6.7e-3 on the calibration's five,
and was 1.8e-2 on --check's five others)."""
AIM = 0.85
"""choose_float32_weights keeps weights until the others' estimated error is within this
share of the tolerance (the estimate is rough; the next compression measures it)."""
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
    """

    keep: dict[str, str]
    errors: dict[str, float]
    rounds: int
    tolerance: float = HALF_TOLERANCE

    @property
    def met(self) -> bool:
        """Every output is within the tolerance."""
        return all(e <= self.tolerance for e in self.errors.values())


def choose_float32_ops(
    model: Model,
    dtype: str,
    feeds: Feeds,
    *,
    tolerance: float = HALF_TOLERANCE,
    keep_io_types: bool = True,
    keep_float32: Mapping[str, str] | None = None,
    max_rounds: int = DEFAULT_MAX_ROUNDS,
) -> MixedPrecision:
    """The ops of ``model``'s main graph to keep in float32 when converting it to ``dtype``
    (an op holding a body is kept with every op inside), measured on onnxruntime (each run in
    a child process) on ``feeds``; ``keep_float32`` entries are kept as given. ``model`` is
    not changed.

    1. Range: the float32 model runs with every float value exposed. A value whose finite
       values pass the type's largest (float16's 65504), or whose nonzero values all round
       to 0 in it, keeps its producer and its readers (which would read it through a Cast).
    2. Error: the model converted with what is kept runs with the values it shares with the
       float32 model exposed. While an output's ``range_error`` passes ``tolerance``, the
       converted ops upstream of it whose error grows most (their output's error minus their
       inputs' largest) are kept, and it converts again; ``max_rounds`` conversions at most.
       The result says what the last one measured (``MixedPrecision.met``).

    A converted model is measured on its float32 twin (``_emulate``): every op computes in
    float32 and every half value is rounded to the half type, as a device computing in the
    half type stores it. onnxruntime's CPU provider cannot measure the half model itself: it
    has no bfloat16 arithmetic, and it runs float16 ops it has no float16 kernel for in
    float32, behind Casts it drops between them, so a chain of them never rounds (in 1.31,
    d = (1000 x + x) - 1000 x in float16 comes back as x to 1e-6).
    """
    target = _target(dtype, feeds)
    with tempfile.TemporaryDirectory(prefix="onnxforge-mixed-") as folder:
        chooser = _Chooser(
            model, target, feeds, Path(folder), tolerance=tolerance, keep_io_types=keep_io_types
        )
        return chooser.choose(dict(keep_float32 or {}), max(1, max_rounds))


def choose_float32_weights(
    model: Model,
    dtype: str,
    feeds: Feeds,
    *,
    tolerance: float = WEIGHTS_TOLERANCE,
    keep_float32: Mapping[str, str] | None = None,
    max_rounds: int = DEFAULT_MAX_ROUNDS,
) -> MixedPrecision:
    """The weights of ``model`` to keep in float32 when the others are stored in ``dtype``
    behind a Cast (``ConvertPrecisionPass(weights_only=True)``), measured on onnxruntime (each
    run in a child process) on ``feeds``; ``keep_float32`` entries are kept as given.
    ``model`` is not changed.

    1. Range: a weight whose finite values pass the type's largest (float16's 65504, where
       the compression clamps them), or whose nonzero values all round to 0 in it, is kept.
    2. Error: the float32 model runs with every float value exposed, and the compressed model
       as it is written (its ops compute in float32: nothing to emulate) with the same
       values exposed, each op reading compressed weights beside a twin per weight that
       reads it in float32. While an output's ``range_error`` passes ``tolerance``, each
       weight's share of it is estimated: what its rounding adds where it is read (the op's
       output against the twin's), times how much of an error there reaches the output
       (found backwards from the output, op by op, from how much of the error each op's
       inputs brought it passes on). The weights moving the failing outputs most per byte
       are kept until the others' shares (adding in quadrature, scaled to the measured
       error) fit in ``AIM`` of the tolerance (then those the last, larger ones made moot
       are dropped), and it compresses again; ``max_rounds`` compressions at most. An
       output that turns NaN or infinite keeps the weights read where it first does.
       The result says what the last compression measured (``MixedPrecision.met``). An
       output that moves by jumps (an ArgMax index, a TopK or NMS pick, a near-constant
       output) may need most weights kept, or stay past the tolerance.
    """
    target = _target(dtype, feeds)
    with tempfile.TemporaryDirectory(prefix="onnxforge-mixed-") as folder:
        chooser = _WeightChooser(model, target, feeds, Path(folder), tolerance=tolerance)
        return chooser.choose(dict(keep_float32 or {}), max(1, max_rounds))


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
        self.scales = output_scales(self.base)  # a graph output's error is over these
        self.floats: set[str] = set()  # float32 values, by what the float32 run returned
        self.reference: list[dict[str, np.ndarray]] | None = None  # that run, when it fits
        self.saved: dict[tuple[str, int], Path] = {}  # (value, input set) -> its float32 .npy

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
    def _rounds(self, keep: dict[str, str], conv: Model, max_rounds: int) -> MixedPrecision:
        """Measure ``conv``; while an output fails, keep what ``_pick`` finds and convert
        again, ``max_rounds`` measures at most."""
        rounds = counted = 0
        while True:
            rounds += 1
            measured = self._measure_round(conv)
            counted += self._counts()
            failing = [n for n, e in measured.outputs.items() if not e <= self.tolerance]
            worst = max(measured.outputs.values(), default=0.0)
            logger.info("mixed precision round %d: largest output error %.3g", rounds, worst)
            if not failing or counted >= max_rounds or rounds >= 2 * max_rounds:
                break
            self.round = rounds
            picked = self._pick(measured, keep, failing)
            if not picked:
                break
            for key, reason in picked.items():
                self._keep(keep, key, reason)
            conv = self._convert(keep)
        return MixedPrecision(keep, measured.outputs, rounds, self.tolerance)

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
            for run in runs:
                for name, array in run.items():
                    if name not in names or array.dtype != np.float32:
                        continue
                    self.floats.add(name)
                    largest[name] = max(largest.get(name, 0.0), _largest(array))
            if len(batches) == 1 and probe is self.base:
                self.reference = runs
        return largest

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
                        error = range_error(w[name], g[name], scale=self.scales.get(name, 0.0))[1]
                        done.outputs[name] = max(done.outputs.get(name, 0.0), error)
        return done

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
        bindings, fallback = _bindings(self.base.graph, self.feeds)
        with_ = companions or {}
        sizes = {
            v.name: _nbytes(v, bindings, fallback) * (1 + len(with_.get(v.name, ())))
            for v in values
        }
        return _batches(sizes, len(self.feeds), MEMORY_BUDGET)

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
        name -> array for them and the graph outputs; or the runtime's error."""
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


class _Chooser(_Runs):
    """``choose_float32_ops``'s state: the half type, the budget, and the main-graph ops the
    last conversion converted."""

    def __init__(
        self,
        model: Model,
        target: int,
        feeds: Feeds,
        folder: Path,
        *,
        tolerance: float,
        keep_io_types: bool,
    ) -> None:
        super().__init__(model, feeds, folder)
        self.target = target
        self.tolerance = tolerance
        self.keep_io_types = keep_io_types
        self.converted: set[str] = set()
        self.refused: dict[str, str] = {}  # ops onnxruntime cannot run in the half type
        self.last_keep: dict[str, str] = {}  # what the last conversion kept
        self.optimized: list[dict[str, np.ndarray]] | str | None = None  # _real_outputs' want

    def choose(self, keep: dict[str, str], max_rounds: int) -> MixedPrecision:
        largest = self._range()
        plain = self._convert(keep)
        converted = _converted(self.base, plain, self.target)
        found = {**self._grid_keeps(converted), **self._range_keeps(largest, converted)}
        for key, reason in found.items():
            self._keep(keep, key, reason)
        return self._rounds(keep, self._convert(keep) if found else plain, max_rounds)

    # -- step 1: range -----------------------------------------------------------------------
    def _range(self) -> dict[str, float]:
        """Run the float32 model with every float value exposed: the largest finite magnitude
        of each (keeping the arrays as the reference when they fit in one run). Its float
        constants are clamped first, as the conversion clamps them (a -1e9 mask fill becomes
        -65504): a value they alone take past the range converts fine."""
        largest = self._run_float32(self._clamped())
        if self.keep_io_types:  # a float32 input reaches its readers through a Cast
            for value in self.base.graph.inputs:
                arrays = [f[value.name] for f in self.feeds if value.name in f]
                if value.const is None and arrays and arrays[0].dtype == np.float32:
                    largest[value.name] = max(_largest(a) for a in arrays)
        return largest

    def _clamped(self) -> Model:
        """The float32 model with float constants past the target's range clamped to it (the
        model itself when none are)."""
        top = float(ml_dtypes.finfo(_NUMPY[DType(self.target)]).max)

        def clamp(tensor: Tensor) -> Tensor | None:
            if tensor.dtype != DType.FLOAT:
                return None
            array = tensor.numpy()
            over = np.isfinite(array) & (np.abs(array) > top)
            if not over.any():
                return None
            return Tensor.from_numpy(np.where(over, np.sign(array) * np.float32(top), array))

        copy = _copy(self.base)
        changed = False
        for graph in walk_graphs(copy.graph):
            for value in graph.initializers:
                made = clamp(value.const) if isinstance(value.const, Tensor) else None
                if made is not None:
                    value.const, changed = made, True
            for op in graph.ops:
                key = {"Constant": "value", "ConstantOfShape": "value"}.get(op.op_type)
                given = op.attrs.get(key) if key else None
                made = clamp(given) if isinstance(given, Tensor) else None
                if made is not None:
                    op.attrs[key] = made  # type: ignore[index]
                    graph.touch(op)
                    changed = True
        return copy if changed else self.base

    def _range_keeps(self, largest: Mapping[str, float], converted: set[str]) -> dict[str, str]:
        """Producers and readers of the values the target type cannot hold (of the ops that
        convert), with the reason."""
        info = ml_dtypes.finfo(_NUMPY[DType(self.target)])
        top, tiny = float(info.max), float(info.smallest_subnormal)
        name = _name(self.target)
        graph = self.base.graph
        found: dict[str, str] = {}
        readers: dict[str, str] = {}
        for value_name, big in largest.items():
            if big > top:
                why = f"values up to {big:.2g} exceed {name}'s {top:g}"
            elif 0 < big <= tiny / 2:
                why = f"its nonzero values (up to {big:.2g}) all round to 0 in {name}"
            else:
                continue
            value = self.values[value_name]
            producer = graph.producer(value)
            if producer is not None and _key(producer) in converted:
                found.setdefault(_key(producer), why)
            for op, _ in graph.uses(value):
                if _key(op) in converted:
                    readers.setdefault(_key(op), f"reads {value_name!r}: {why}")
        for key, why in readers.items():
            found.setdefault(key, why)
        return found

    def _grid_keeps(self, converted: set[str]) -> dict[str, str]:
        """The converted ops a QuantizeLinear's input depends on, with the reason: rounding
        there moves every value near a step of its grid across it, a whole step (sscd's
        quantized ResNet: 2.7e-3 of the range at its first QuantizeLinear, 5.6e-2 after
        it, 0.35 at the output; no round of keeping the largest growth catches up)."""
        graph = self.base.graph
        quantizers = [
            op
            for op in graph.ops
            if op.op_type == "QuantizeLinear" and op.domain in ("", "ai.onnx")
        ]
        reads = [op._inputs[0] for op in quantizers if op._inputs and op._inputs[0] is not None]
        why = (
            f"a QuantizeLinear reads what it computes ({len(quantizers)} in the model): "
            f"{_name(self.target)} rounding moves values near a step of the grid across it"
        )
        ops = _upstream(graph, reads) | set(quantizers)
        return {_key(op): why for op in ops if _key(op) in converted}

    # -- step 2: error -----------------------------------------------------------------------
    def _measure_round(self, conv: Model) -> _Measured:
        """Run the converted model's emulation (``conv`` becomes it) and the float32 model;
        a float16 model also runs as it is, and each output's error is the larger of the two:
        onnxruntime's float16 kernels (MatMul, Conv, Softmax) accumulate their own way, which
        the emulation's float32 arithmetic does not see (PP-OCR's classifier: 6.7e-2 there,
        under 1e-2 emulated)."""
        self.converted = _converted(self.base, conv, self.target)
        real = self._real_outputs(conv) if self.target == DType.FLOAT16 else {}
        _emulate(conv, self.target)
        what = f"the float32 emulation of the {_name(self.target)} model"
        measured = self._measure(conv, self._feeds_for(), what)
        emulated_met = all(e <= self.tolerance for e in measured.outputs.values())
        if not self.refused and emulated_met and any(e > self.tolerance for e in real.values()):
            # Only onnxruntime's float16 kernels miss the budget: the growth is found in
            # their own values (the emulation's would point nowhere, round after round).
            half = self._converted_copy(self.last_keep)
            seen = self._measure(half, self._half_feeds(half), "the float16 model")
            for name, error in seen.values.items():
                measured.values[name] = max(measured.values.get(name, 0.0), error)
        for name, error in real.items():
            measured.outputs[name] = max(measured.outputs.get(name, 0.0), error)
        return measured

    def _half_feeds(self, conv: Model) -> list[dict[str, np.ndarray]]:
        """The feeds as ``conv`` takes them: float16 where it retyped an input."""
        return [
            {k: v.astype(np.float16) if _is_half_input(conv, k) else v for k, v in f.items()}
            for f in self.feeds
        ]

    def _real_outputs(self, conv: Model) -> dict[str, float]:
        """Each graph output's largest error with ``conv`` run as it is (nothing exposed, so
        onnxruntime computes it as a user's session does). Where onnxruntime names a node it
        cannot run (a kernel its CPU provider lacks in float16 for that form: ScatterElements
        with a reduction, Resize cubic), ``refused`` gets it and every converted op of the
        same form, and each output's error is infinite; any other failure is bisected
        (``_culprit``); empty when that finds nothing. The float32 outputs are the range
        model's run the same way, once (its optimizer turns a quantized model's
        QuantizeLinear, Conv and DequantizeLinear into integer kernels: sscd's embedding
        moves 9e-3 of its range that way, float32 or not)."""
        sets = range(len(self.feeds))
        if self.optimized is None:
            self.optimized = self._run(self.base, [], sets, "float32-outputs.onnx",
                                       runtime="onnxruntime")  # fmt: skip
        want = self.optimized
        given = self._half_feeds(conv)
        got = self._run(conv, [], sets, "float16-outputs.onnx", given, runtime="onnxruntime")
        self.refused = {}
        if isinstance(got, str):
            self.refused = self._refused(conv, got) or self._culprit(got, given[0])
        if self.refused:
            return dict.fromkeys(self.outputs, math.inf)
        if isinstance(want, str) or isinstance(got, str):
            return {}
        found: dict[str, float] = {}
        for w, g in zip(want, got, strict=True):
            for name in self.outputs:
                if name in w and name in g and name not in self.random:
                    error = range_error(w[name], g[name], scale=self.scales.get(name, 0.0))[1]
                    found[name] = max(found.get(name, 0.0), error)
        return found

    def _counts(self) -> bool:
        return not self.refused

    def _refused(self, conv: Model, error: str) -> dict[str, str]:
        """The converted ops of the form onnxruntime's ``error`` names a node of (same type,
        domain and attributes; of an unnamed node, every one of its type): key -> why; empty
        when it names none of them."""
        match = _NODE_IN_ERROR.search(error)
        if match is None:
            return {}
        op_type = match["type"] or match["type2"]
        named = match["name"] or match["name2"] or match["name3"]
        failed = next((op for op in conv.graph.ops if named and op.name == named), None)
        if failed is not None:
            form = (failed.op_type, failed.domain, _attrs(failed))
            same = [op for op in conv.graph.ops if (op.op_type, op.domain, _attrs(op)) == form]
        elif op_type and not named:
            same = [op for op in conv.graph.ops if op.op_type == op_type]
        else:
            return {}
        why = "onnxruntime cannot run it in " + _name(self.target)
        why += ": " + error.split("Status Message: ", 1)[-1][:160]
        return {_key(op): why for op in same if _key(op) in self.converted}

    def load_guard(self, keep: dict[str, str]) -> dict[str, str]:
        """``keep`` with what keeps onnxruntime from crashing as it loads the conversion (its
        optimizer runs at load: no input needed), for a model random inputs do not run."""
        for _ in range(DEFAULT_MAX_ROUNDS):
            conv = self._convert(keep)
            self.converted = _converted(self.base, conv, self.target)
            got = self._run(conv, [], range(0), "load.onnx", [], runtime="onnxruntime")
            found = self._culprit(got, None) if isinstance(got, str) else {}
            if not found:
                break
            keep.update(found)
        return keep

    def _culprit(self, error: str, feeds: Mapping[str, np.ndarray] | None) -> dict[str, str]:
        """The converted op that, kept float32, stops onnxruntime failing on the model (where
        no message names a converted node): the first k converted ops (in order) are kept for
        the smallest k whose conversion loads and runs, found by bisection; empty when keeping
        them all does not stop it. Without ``feeds``, each probe is loaded only. (onnxruntime
        1.31's optimizer crashes on a float16 Transpose of a batch axis feeding a MatMul, which
        has no float16 CPU kernel: onnxruntime#28392, PP-OCR's recognizers; its transpose
        optimizer moves a ViT's Transpose through a Cast pair and the cubic Resize it kept in
        float32 then fails its scale check.)"""
        keep = self.last_keep
        order = [_key(op) for op in self.base.graph.topo_order() if _key(op) in self.converted]

        def fails(count: int) -> bool:
            probe = self._converted_copy({**keep, **dict.fromkeys(order[:count], "")})
            sets = [] if feeds is None else [feeds]
            got = self._run(probe, [], range(len(sets)), "probe.onnx", sets, runtime="onnxruntime")
            return isinstance(got, str)

        low, high = 0, len(order)
        if not order or fails(high):
            return {}
        while high - low > 1:
            middle = (low + high) // 2
            if fails(middle):
                low = middle
            else:
                high = middle
        culprit = order[high - 1]
        logger.info("mixed precision: onnxruntime fails unless %r stays float32", culprit)
        why = f"onnxruntime fails on the model with it in {_name(self.target)}: {error[:200]}"
        return {culprit: why}

    def _pick(
        self, measured: _Measured, keep: Mapping[str, str], failing: Sequence[str]
    ) -> dict[str, str]:
        """The ops onnxruntime cannot run in the half type, if it named one; else the ops
        whose error grows most: within half of the largest growth in the first round, a
        quarter in the second, and so on (a budget missed by a hair after a few rounds is met
        by the next, not given up: PP-OCRv5's recognizer was 1.02e-2 after 8)."""
        if self.refused:
            return dict(self.refused)
        grown = self._growth(measured, self.converted, set(keep), failing)
        most = max(grown.values(), default=(0.0, ""))[0]
        floor = most / 2 ** max(1, self.round)
        return {key: why for key, (growth, why) in grown.items() if growth >= floor}

    def _growth(
        self, measured: _Measured, converted: set[str], keep: set[str], failing: Sequence[str]
    ) -> dict[str, tuple[float, str]]:
        """Ops to keep, upstream of the failing outputs: key -> (how much error grows, why).

        1. A converted op whose output's error passes its inputs' largest: by the difference.
        2. An op already in float32 whose error grows amplifies its inputs' (a difference of
           nearly equal numbers): the converted ops that make its inputs, by its growth.

        A float value the converted model lost (a Cast it removed) carries its producer's
        inputs' error.
        """
        graph = self.base.graph
        errors = {v.name: self._input_error(v) for v in graph.inputs}
        upstream = _upstream(graph, [self.values[n] for n in failing])
        found: dict[str, tuple[float, str]] = {}

        def add(key: str, growth: float, reason: str) -> None:
            if key in converted and key not in keep and growth > found.get(key, (0.0, ""))[0]:
                found[key] = (growth, reason)

        for op in graph.topo_order():
            reads = [v for v in _reads(graph, op) if v.name in errors]
            before = max((errors[v.name] for v in reads), default=0.0)
            outs = [v.name for v in op._outputs if v is not None and v.name in self.floats]
            for name in outs:
                errors[name] = measured.values.get(name, before)
            if not outs or op not in upstream:
                continue
            after = max(errors[n] for n in outs)
            if after == math.inf:
                growth = 0.0 if before == math.inf else math.inf
            else:
                growth = after - before
            if growth <= 0:
                continue
            key = _key(op)
            if key in converted:  # Case 1
                add(key, growth, f"error grows from {_num(before)} to {_num(after)}")
                continue
            for value in reads:  # Case 2
                producer = graph.producer(value)
                if producer is not None and errors[value.name] > 0:
                    add(
                        _key(producer),
                        growth,
                        f"its error {_num(errors[value.name])} grows to {_num(after)} in "
                        f"{key!r}, which stays float32",
                    )
        return found

    def _input_error(self, value: Value) -> float:
        """A graph input's error: 0 when it keeps its type, its rounding otherwise."""
        if self.keep_io_types or value.const is not None or _dtype(value) != DType.FLOAT:
            return 0.0
        errors = [range_error(f[value.name], _rounded(f[value.name], self.target))[1]
                  for f in self.feeds if value.name in f]  # fmt: skip
        return max(errors, default=0.0)

    # -- converting --------------------------------------------------------------------------
    def _convert(self, keep: Mapping[str, str]) -> Model:
        self.last_keep = dict(keep)
        return self._converted_copy(keep)

    def _converted_copy(self, keep: Mapping[str, str]) -> Model:
        conv = _copy(self.base)
        dtype = _name(self.target)
        ConvertPrecisionPass(dtype, keep_io_types=self.keep_io_types, keep_float32=keep)(conv)
        return conv

    def _keep(self, keep: dict[str, str], key: str, reason: str) -> None:
        """Keep the op ``key``, and every op in its bodies."""
        keep.setdefault(key, reason)
        value = self.values.get(key)
        op = self.base.graph.producer(value) if value is not None else None
        for sub in op.subgraphs() if op is not None else ():
            for body in walk_graphs(sub):
                for inner in body.ops:
                    if _key(inner) and inner.op_type != "Constant":  # converted by readers
                        keep.setdefault(_key(inner), f"{reason} (in the body of {key!r})")

    def _feeds_for(self) -> Feeds:
        """The feeds as the emulation takes them: with keep_io_types off, float32 inputs
        rounded to the half type."""
        if self.keep_io_types:
            return self.feeds
        halves = {
            v.name for v in self.base.graph.inputs if v.const is None and _dtype(v) == DType.FLOAT
        }
        made = []
        for feeds in self.feeds:
            made.append(dict(feeds))
            for name in halves & set(feeds):
                made[-1][name] = _rounded(feeds[name], self.target)
        return made


class _WeightChooser(_Runs):
    """``choose_float32_weights``'s state: the half type, the budget, the float32 weights
    (by name, in every graph but functions'), and those the last compression stored in the
    half type."""

    def __init__(
        self, model: Model, target: int, feeds: Feeds, folder: Path, *, tolerance: float
    ) -> None:
        super().__init__(model, feeds, folder)
        self.target = target
        self.tolerance = tolerance
        self.weights: dict[str, Tensor] = {}
        for graph in walk_graphs(self.base.graph):
            for value in graph.initializers:
                if isinstance(value.const, Tensor) and value.const.dtype == DType.FLOAT:
                    self.weights[value.name] = value.const
            for op in graph.ops:
                tensor = constant_tensor(op) if op.op_type == "Constant" else None
                out = op._outputs[0] if op._outputs else None
                if tensor is not None and tensor.dtype == DType.FLOAT and out is not None:
                    self.weights[out.name] = tensor
        self.compressed: set[str] = set()  # by the last compression
        self.kept: dict[str, str] = {}  # by it
        self.flow = _Flow(set(), {}, {})  # of the last compression measured

    def choose(self, keep: dict[str, str], max_rounds: int) -> MixedPrecision:
        plain = self._convert(keep)
        found = self._range_keeps()
        for key, reason in found.items():
            self._keep(keep, key, reason)
        self._run_float32(self.base)
        return self._rounds(keep, self._convert(keep) if found else plain, max_rounds)

    def _range_keeps(self) -> dict[str, str]:
        """The compressed weights the target type cannot hold, with the reason."""
        info = ml_dtypes.finfo(_NUMPY[DType(self.target)])
        top, tiny = float(info.max), float(info.smallest_subnormal)
        name = _name(self.target)
        found = {}
        for key in sorted(self.compressed):
            big = _largest(self.weights[key].numpy())
            if big > top:
                found[key] = f"values up to {big:.2g} exceed {name}'s {top:g}"
            elif 0 < big <= tiny / 2:
                found[key] = f"its nonzero values (up to {big:.2g}) all round to 0 in {name}"
        return found

    def _convert(self, keep: Mapping[str, str]) -> Model:
        self.kept = dict(keep)
        conv = _copy(self.base)
        dtype = _name(self.target)
        done = ConvertPrecisionPass(dtype, weights_only=True, keep_float32=keep)(conv)
        self.compressed = set(done.details.get("weights_compressed", ())) & set(self.weights)
        return conv

    def _measure_round(self, conv: Model) -> _Measured:
        """Run ``conv`` as it is, each op reading compressed weights beside one twin per
        weight that reads it in float32 (and the rest as ``conv`` has them): an output's
        difference from its twin is what that weight's rounding adds there; what is left
        of its error came in through its inputs."""
        self.flow = _Flow.of(self.base.graph, self.compressed)
        twins = self._add_twins(conv)
        companions = {o: [t for _, t in pairs] for o, pairs in twins.items()}

        def extra(
            want: Mapping[str, np.ndarray], got: Mapping[str, np.ndarray]
        ) -> dict[tuple[str, str], float]:
            found = {}
            for name, pairs in twins.items():
                if name not in want or name not in got or any(t not in got for _, t in pairs):
                    continue
                out = np.asarray(got[name], dtype=np.float64)
                added = np.zeros_like(out)
                with np.errstate(invalid="ignore", over="ignore"):  # inf - inf: not counted
                    for weight, twin in pairs:
                        step = out - np.asarray(got[twin], dtype=np.float64)
                        found[weight, name] = _max_abs(step)
                        added += step
                    came = out - added - np.asarray(want[name], np.float64)
                found["", name] = _max_abs(came)
            return found

        what = f"the model with {_name(self.target)} weights"
        try:
            return self._measure(conv, self.feeds, what, companions, extra)
        except OnnxForgeError as exc:  # the twins' fault: measure without them
            logger.info("mixed precision: measuring without twins (%s)", exc)
            return self._measure(self._convert(self.kept), self.feeds, what)

    def _add_twins(self, conv: Model) -> dict[str, list[tuple[str, str]]]:
        """Beside each main-graph op of ``conv`` that reads compressed weights (an op holding
        a body aside), a twin per weight reading that weight in float32 (through a twin of
        what makes it from the weight, a Transpose of it): float output name -> [(weight,
        the twin's output name)]."""
        graph = conv.graph
        values = _by_name(graph)
        made_of = self.flow.made_of
        restored: dict[tuple[str, str], Value] = {}

        def exact(value: Value, weight: str) -> Value:
            if weight not in made_of.get(value.name, ()):
                return value
            found = restored.get((weight, value.name))
            if found is not None:
                return found
            if value.name == weight:
                name = graph.fresh_name(f"{weight}_float32")
                found = graph.add_initializer(name, self.weights[weight])
            else:
                op = graph.producer(value)
                assert op is not None  # made from weights
                twin = _twin(graph, op, [exact(v, weight) if v else None for v in op._inputs])
                for old, new in zip(op._outputs, twin._outputs, strict=False):
                    if old is not None and new is not None:
                        restored[weight, old.name] = new
                found = restored[weight, value.name]
            restored[weight, value.name] = found
            return found

        twins: dict[str, list[tuple[str, str]]] = {}
        for base_op, weights in self.flow.readers.items():
            made = values.get(_key(base_op))
            op = graph.producer(made) if made is not None else None
            if op is None or any(True for _ in op.subgraphs()):
                continue
            for weight in sorted(weights):
                twin = _twin(graph, op, [exact(v, weight) if v else None for v in op._inputs])
                for old, new in zip(op._outputs, twin._outputs, strict=False):
                    if old is not None and new is not None and old.name in self.floats:
                        new.type = old.type
                        twins.setdefault(old.name, []).append((weight, new.name))
        return twins

    def _pick(
        self, measured: _Measured, keep: Mapping[str, str], failing: Sequence[str]
    ) -> dict[str, str]:
        """The weights whose rounding moves the failing outputs most per byte, until what
        the others move them by is within ``AIM`` of the tolerance; then, from the last
        picked back, those the others already make up for are dropped.

        What a weight moves an output by: what its rounding adds at each op reading it
        (the op's output against its twin), times how much of the error there reaches the
        output. That is found backwards from the output (1 over its range): a value
        passes on its readers' share, each reader's the part of its error that came
        through its inputs over their largest error (Relu and Sigmoid pass on less than
        they take, a difference of nearly equal values more). An integer output (ArgMax,
        an NMS pick) starts from the float values it is computed from. The errors add
        in quadrature: the estimates are scaled so that theirs equals each output's
        measured error.
        """
        moved: dict[str, dict[str, float]] = {}  # weight -> output -> its error share
        for output in failing:
            reach = self._reach(output, measured)
            for op, weights in self.flow.readers.items():
                outs = [v.name for v in op._outputs if v is not None and reach.get(v.name)]
                for weight in weights:
                    share = sum(
                        reach[o] * measured.extra.get((weight, o), measured.absolute.get(o, 0.0))
                        for o in outs
                    )
                    if 0 < share < math.inf and weight not in keep:
                        shares = moved.setdefault(weight, {})
                        shares[output] = shares.get(output, 0.0) + share
        if any(not math.isfinite(measured.outputs[o]) for o in failing):
            return self._first_broken(measured, keep)
        picked: dict[str, str] = {}
        scale = {}
        for output in failing:
            total = math.sqrt(sum(s.get(output, 0.0) ** 2 for s in moved.values()))
            if total > 0:
                scale[output] = measured.outputs[output] / total
        if not scale:
            return {}
        left = {o: measured.outputs[o] ** 2 for o in scale}
        goal = (AIM * self.tolerance) ** 2

        def score(weight: str) -> float:
            shares = moved[weight]
            most = max((scale[o] * shares.get(o, 0.0)) ** 2 for o in scale)
            return most / max(1, self.weights[weight].nbytes)

        for weight in sorted(moved, key=score, reverse=True):
            if all(e <= goal for e in left.values()):
                break
            shares = moved[weight]
            output = max(scale, key=lambda o: scale[o] * shares.get(o, 0.0))
            share = scale[output] * shares.get(output, 0.0)
            if share == 0:
                continue
            for o, times in scale.items():
                left[o] -= (times * shares.get(o, 0.0)) ** 2
            picked[weight] = f"its rounding moves {output!r} by about {_num(share)} of its range"
        for weight in reversed(list(picked)):  # the last, largest, may make earlier ones moot
            back = {o: (times * moved[weight].get(o, 0.0)) ** 2 for o, times in scale.items()}
            if all(left[o] + back[o] <= goal for o in scale):
                del picked[weight]
                for o in scale:
                    left[o] += back[o]
        return picked

    def _first_broken(self, measured: _Measured, keep: Mapping[str, str]) -> dict[str, str]:
        """The weights read where values first turn NaN or infinite: by the ops that make
        them, or else by the nearest ops upstream."""
        graph = self.base.graph
        picked: dict[str, str] = {}
        for op in graph.topo_order():
            outs = [v.name for v in op._outputs if v is not None]
            if all(math.isfinite(measured.absolute.get(n, 0.0)) for n in outs):
                continue
            reads = [v for v in _reads(graph, op) if v.name in self.flow.data]
            if any(not math.isfinite(measured.absolute.get(v.name, 0.0)) for v in reads):
                continue  # it came in
            stack, seen = [op], set()
            while stack:
                at = stack.pop()
                if at in seen:
                    continue
                seen.add(at)
                weights = self.flow.readers.get(at, frozenset()) - set(keep)
                for weight in weights:
                    picked.setdefault(weight, f"{outs[0]!r} turns NaN or infinite with it")
                if not weights:
                    ups = [
                        graph.producer(v) for v in _reads(graph, at) if v.name in self.flow.data
                    ]
                    stack.extend(u for u in ups if u is not None)
        return picked

    def _reach(self, output: str, measured: _Measured) -> dict[str, float]:
        """How much of each value's largest error reaches ``output``'s, over its range."""
        graph = self.base.graph
        data = self.flow.data

        def per_range(name: str) -> float:
            largest = measured.absolute.get(name, 0.0)
            error = measured.values.get(name, 0.0)
            return error / largest if largest > 0 and math.isfinite(error) else 0.0

        reach: dict[str, float] = {}
        if output in self.floats:
            reach[output] = per_range(output)
        else:  # an integer output: the float values it is computed from
            stack = [self.values[output]]
            while stack:
                op = graph.producer(stack.pop())
                for value in _reads(graph, op) if op is not None else ():
                    if value.name in self.floats:
                        reach[value.name] = per_range(value.name)
                    elif value.name in data:
                        stack.append(value)
        for op in reversed(graph.topo_order()):
            outs = [v.name for v in op._outputs if v is not None and reach.get(v.name)]
            given = [
                v.name
                for v in _reads(graph, op)
                if v.name in data and measured.absolute.get(v.name, 0.0) > 0
            ]
            if not outs or not given:
                continue
            came = max(measured.absolute[n] for n in given)
            if not math.isfinite(came):
                continue
            passed = sum(
                reach[o] * measured.extra.get(("", o), measured.absolute.get(o, 0.0)) for o in outs
            )
            for name in given:
                reach[name] = reach.get(name, 0.0) + passed / came
        return reach


@dataclass
class _Flow:
    """What a main graph's values are made of, when ``compressed`` weights are stored in a
    half type: ``data``, the values that depend on a graph input; ``made_of``, for the
    others, the compressed weights they are made from (a weight itself, a Transpose of
    it); ``readers``, the data ops reading some of those (directly, through such values,
    or in their bodies) and which."""

    data: set[str]
    made_of: dict[str, frozenset[str]]
    readers: dict[Op, frozenset[str]]

    @classmethod
    def of(cls, graph: Graph, compressed: Collection[str]) -> _Flow:
        data = {v.name for v in graph.inputs if v.const is None}
        made_of = {n: frozenset({n}) for n in compressed}
        readers = {}
        for op in graph.topo_order():
            reads = _reads(graph, op)
            inside = [
                v.name
                for sub in op.subgraphs()
                for body in walk_graphs(sub)
                for v in body.values()
                if v.name in compressed
            ]
            weights = frozenset(inside).union(
                *(made_of.get(v.name, ()) for v in reads if v.name not in data)
            )
            outs = [v.name for v in op._outputs if v is not None]
            if any(v.name in data for v in reads):
                data.update(outs)
                if weights:
                    readers[op] = weights
            else:
                for name in outs:
                    made_of.setdefault(name, weights)
        return cls(data, made_of, readers)


# -- helpers ------------------------------------------------------------------------------------
def _is_half_input(model: Model, name: str) -> bool:
    value = next((v for v in model.graph.inputs if v.name == name), None)
    return value is not None and _dtype(value) == DType.FLOAT16


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
        if random or any(v in found for v in _reads(graph, op)):
            found.update(v for v in op._outputs if v is not None)
    return found


_NODE_IN_ERROR = re.compile(
    r"running (?P<type>\w+) node\. Name:'(?P<name>[^']*)'"
    r"|implementation for (?P<type2>\w+)\(\d+\) node with name '(?P<name2>[^']*)'"
    r"|of node \((?P<name3>[^)]*)\)"
)
"""Where onnxruntime's errors name the node they fail on (at run, at load, in type checks)."""


def _attrs(op: Op) -> str:
    """An op's attributes, comparable (those holding graphs by name only)."""
    return repr(
        sorted((k, v if not isinstance(v, Graph) else "graph") for k, v in op.attrs.items())
    )


def _copy(model: Model) -> Model:
    return io.from_proto(io.to_proto(model))


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


def _reads(graph: Graph, op: Op) -> list[Value]:
    """The values ``op`` reads: its inputs and what its bodies capture."""
    found = [v for v in op._inputs if v is not None]
    for sub in op.subgraphs():
        found += sub.captures()
    return found


def _upstream(graph: Graph, values: Iterable[Value]) -> set[Op]:
    """The ops of ``graph`` that ``values`` depend on."""
    found: set[Op] = set()
    stack = list(values)
    while stack:
        op = graph.producer(stack.pop())
        if op is not None and op not in found:
            found.add(op)
            stack.extend(_reads(graph, op))
    return found


def _twin(graph: Graph, op: Op, inputs: Sequence[Value | None]) -> Op:
    """A copy of ``op`` reading ``inputs``, its outputs under fresh names (as many as
    ``op`` has up to its last)."""
    count = max((i + 1 for i, v in enumerate(op._outputs) if v is not None), default=1)
    names = [graph.fresh_name(f"{_key(op) or op.op_type}_twin") for _ in range(count)]
    twin = graph.add_op(op.op_type, inputs, domain=op.domain, output_names=names)
    twin.attrs, twin.overload = dict(op.attrs), op.overload  # no body: its op is not twinned
    graph.touch(twin)
    return twin


def _max_abs(array: np.ndarray) -> float:
    """The largest finite magnitude in ``array`` (0 when there is none)."""
    return _largest(np.asarray(array))


def _converted(base: Model, conv: Model, target: int) -> set[str]:
    """Keys of ``base``'s main-graph ops that read or make a ``target`` value in ``conv``
    (found by their first output's name; a graph output keep_io_types gave a Cast names the
    Cast, whose input is the op's output renamed)."""
    values = _by_name(conv.graph)
    names = set(_by_name(base.graph))
    outputs = set(conv.graph.outputs)
    found = set()
    for op in base.graph.ops:
        key = _key(op)
        made = values.get(key)
        twin = conv.graph.producer(made) if made is not None else None
        if twin is not None and twin.op_type == "Cast" and made in outputs:
            inner = twin._inputs[0]
            if inner is not None and inner.name not in names:
                twin = conv.graph.producer(inner)
        if twin is None:
            continue
        if any(_dtype(v) == target for v in [*twin._inputs, *twin._outputs] if v is not None):
            found.add(key)
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


def _bindings(graph: Graph, feeds: Feeds) -> tuple[dict[str, int], int]:
    """The input symbols' sizes in the feeds (the largest over the sets), and the size taken
    for a dim they do not give (the largest input dim)."""
    bindings: dict[str, int] = {}
    largest = 1
    for value in graph.inputs:
        t = value.type
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


def _emulate(model: Model, target: int) -> None:
    """Make a converted model float32 throughout, each ``target`` value rounded to it: an op
    that made one computes in float32 and its output goes through Cast(to=target) and
    Cast(to=float) under its name; a Cast to ``target`` is followed by a Cast to float;
    ``target`` constants become float32 (the same numbers)."""
    for graph in model.graphs(functions=False):
        for op in graph.ops:
            for key, attr in op.attrs.items():
                if isinstance(attr, Tensor) and attr.dtype == target:
                    op.attrs[key] = Tensor.from_numpy(attr.numpy().astype(np.float32))
            if op.op_type == "Cast":  # the conversion's Casts have no declared type
                made = [v for v in op._outputs[:1] if v is not None and op.attr("to") == target]
            elif op.op_type != "Constant":
                made = [v for v in op._outputs if v is not None and _dtype(v) == target]
            else:
                made = []
            if made and op.op_type != "Cast":
                for key in ("dtype", "to"):
                    if op.attrs.get(key) == target:
                        op.attrs[key] = int(DType.FLOAT)
            for value in made:
                _round_after(graph, op, value, target)
        kept = {
            v for op in graph.ops if op.op_type == "Cast" for v in op._outputs if v is not None
        }  # Casts to target: made by the conversion or by _round_after
        for value in list(graph.values()):
            if value._graph is not graph or value in kept:
                continue
            if isinstance(value.const, Tensor) and value.const.dtype == target:
                value.const = Tensor.from_numpy(value.const.numpy().astype(np.float32))
            t = value.type
            if isinstance(t, TensorType) and t.dtype == target:
                value.type = TensorType(DType.FLOAT, t.shape)


def _round_after(graph: Graph, op: Op, value: Value, target: int) -> None:
    """Readers of ``value`` (and the graph's outputs) read it rounded to ``target`` and back,
    under its name; ``value`` itself is renamed."""
    t = value.type
    shape = t.shape if isinstance(t, TensorType) else None
    name = value.name
    fresh = graph.fresh_name(f"{name}_unrounded")
    if any(isinstance(key, tuple) for _, key in graph.uses(value)):
        graph.rename(value, fresh)  # a body reads it: its capture keys follow
    else:
        value.name = fresh  # Graph.rename walks every body of the model: quadratic here
    first = value
    if op.op_type != "Cast":  # a Cast to target makes the rounded value itself
        rounded = graph.fresh_name(f"{name}_rounded")
        rounding = graph.add_op("Cast", [value], output_names=[rounded], to=int(target))
        first = graph.outputs_of(rounding)[0] or value
        first.type = TensorType(target, shape)
    back = graph.add_op("Cast", [first], output_names=[name], to=int(DType.FLOAT))
    out = graph.outputs_of(back)[0]
    assert out is not None
    out.type = TensorType(DType.FLOAT, shape)
    reader = graph.producer(first) if first is not value else back
    graph.replace_all_uses(value, out)
    assert reader is not None
    graph.set_input(reader, 0, value)  # replace_all_uses made it read its own output


def load_calibration(folder: Path) -> list[dict[str, np.ndarray]]:
    """The input sets of a --calibration folder: one .npz file each, an array per graph
    input named as the input, in file-name order."""
    files = sorted(folder.glob("*.npz")) if folder.is_dir() else []
    if not files:
        raise OnnxForgeError(f"--calibration {folder}: no .npz files there (one per input set)")
    sets = []
    for path in files:
        try:
            with np.load(path, allow_pickle=False) as data:
                sets.append({k: data[k] for k in data.files})
        except (OSError, ValueError) as exc:
            raise OnnxForgeError(
                f"--calibration {path}: not a readable .npz file ({exc})"
            ) from None
    return sets


@dataclass
class Calibration:
    """ConvertPrecisionPass's ``choose``: the automatic mixed precision (``choose_float32_ops``)
    on ``feeds``, or on ``runs`` random input sets made for the model it is given (after any
    opset conversion and folding, as it will be converted); with ``weights_only``, the
    weights that stay float32 (``choose_float32_weights``, for
    ``ConvertPrecisionPass(weights_only=True)``). ``tolerance`` None is ``half_tolerance``,
    or ``WEIGHTS_TOLERANCE`` with ``weights_only``. ``result`` keeps what the last call
    found; a budget it cannot meet is an error saying what to change."""

    dtype: str
    runs: int = DEFAULT_CALIBRATION_RUNS
    feeds: Sequence[Mapping[str, np.ndarray]] | None = None
    tolerance: float | None = None
    keep_io_types: bool = True
    keep_float32: Mapping[str, str] = field(default_factory=dict)
    weights_only: bool = False
    max_rounds: int = DEFAULT_MAX_ROUNDS
    result: MixedPrecision | None = None
    skipped: str | None = None
    """Why the last call chose nothing: random inputs the model does not run on (a detector
    whose sides must be multiples of 32 gets 5); real ones (``feeds``) must run."""

    @property
    def budget(self) -> float:
        """The tolerance this calibration holds the outputs to."""
        if self.tolerance is not None:
            return self.tolerance
        return WEIGHTS_TOLERANCE if self.weights_only else half_tolerance(self.dtype)

    def __call__(self, model: Model) -> dict[str, str]:
        feeds = self.feeds
        if feeds is None:
            feeds = random_inputs(model, self.runs, seed=0)
        else:
            names = {v.name for v in model.graph.inputs if v.const is None}
            for i, given in enumerate(feeds):
                missing = sorted(names - set(given))
                if missing:
                    raise OnnxForgeError(
                        f"calibration input set {i} has no array for {', '.join(missing)}"
                    )
        try:
            self.result = self._choose(model, feeds)
        except UnrunnableError as exc:
            if self.feeds is not None:
                raise
            self.skipped = f"{exc}; give --calibration DIR with input sets it runs on"
            return self._load_guard(model)
        return self._judge()

    def _load_guard(self, model: Model) -> dict[str, str]:
        """Without a calibration, a float16 conversion still keeps what onnxruntime crashes
        loading (``_Chooser.load_guard``)."""
        if self.weights_only or self.dtype != "float16":
            return {}
        with tempfile.TemporaryDirectory(prefix="onnxforge-mixed-") as folder:
            chooser = _Chooser(
                model, DType.FLOAT16, [{}], Path(folder), tolerance=self.budget,
                keep_io_types=self.keep_io_types,
            )  # fmt: skip
            keep = chooser.load_guard(dict(self.keep_float32))
        self.result = MixedPrecision(keep, {}, 0, self.budget)
        return keep

    def _choose(self, model: Model, feeds: Sequence[Mapping[str, np.ndarray]]) -> MixedPrecision:
        if self.weights_only:
            return choose_float32_weights(
                model,
                self.dtype,
                feeds,
                tolerance=self.budget * MARGIN,
                keep_float32=self.keep_float32,
                max_rounds=self.max_rounds,
            )
        return choose_float32_ops(
            model,
            self.dtype,
            feeds,
            tolerance=self.budget * MARGIN,
            keep_io_types=self.keep_io_types,
            keep_float32=self.keep_float32,
            max_rounds=self.max_rounds,
        )

    def _judge(self) -> dict[str, str]:
        """The keep set, or the error saying what to change when the budget is not met."""
        assert self.result is not None
        over = {n: e for n, e in self.result.errors.items() if not e <= self.budget}
        if over:
            worst = ", ".join(f"{name!r} {error:.3g}" for name, error in over.items())
            if self.weights_only:
                kept = f"{len(self.result.keep)} weights kept in float32"
                advice = "give a larger --tolerance, or --calibrate 0 to store every weight in "
                advice += f"{self.dtype} as it is"
            else:
                kept = f"{len(self.result.keep)} ops kept in float32"
                advice = (
                    "give a larger --tolerance, --keep-float32 for the ops you know, or convert "
                    "less (--weights float16)"
                )
            raise OnnxForgeError(
                f"mixed precision: after {self.result.rounds} rounds ({kept}) the outputs are "
                f"still past the tolerance {self.budget:g} of their range: {worst}; "
                f"{advice}"
            )
        return dict(self.result.keep)
