"""The automatic mixed precision of ``--weights``: which weights stay float32 when the others
are stored in the half type behind a Cast (``choose_float32_weights``)."""

from __future__ import annotations

__all__ = [
    "AIM",
    "WEIGHTS_TOLERANCE",
    "choose_float32_weights",
    "float32_weight_tensors",
]

import logging
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import ml_dtypes
import numpy as np

from onnxforge._cleanup import temporary_folder
from onnxforge.api._mixed_runs import (
    _NUMPY,
    DEFAULT_MAX_ROUNDS,
    Feeds,
    MixedPrecision,
    _by_name,
    _copy,
    _key,
    _largest,
    _Measured,
    _name,
    _num,
    _Runs,
    _target,
)
from onnxforge.errors import OnnxForgeError
from onnxforge.ir import (
    DType,
    Graph,
    Model,
    Op,
    Tensor,
    Value,
    constant_tensor,
    walk_graphs,
)
from onnxforge.passes import ConvertPrecisionPass

logger = logging.getLogger(__name__)

WEIGHTS_TOLERANCE = 1e-3
"""The budget of weights stored in the half type (--weights): every op still computes in
float32, so the outputs stay 10x closer than a --dtype conversion's (``HALF_TOLERANCE``)."""

AIM = 0.85
"""choose_float32_weights keeps weights until the others' estimated error is within this
share of the tolerance (the estimate is rough; the next compression measures it)."""


def choose_float32_weights(
    model: Model,
    dtype: str,
    feeds: Feeds,
    *,
    tolerance: float = WEIGHTS_TOLERANCE,
    keep_float32: Mapping[str, str] | None = None,
    max_rounds: int = DEFAULT_MAX_ROUNDS,
    only: Collection[str] | None = None,
    float32_run: _Runs | None = None,
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
       error) fit in ``AIM`` of the tolerance, halved for each round that measured no less
       than an earlier one (then those the last, larger ones made moot are dropped), and it
       compresses again; ``max_rounds`` compressions at most. An
       output that turns NaN or infinite keeps the weights read where it first does.
       The result says what the last compression measured (``MixedPrecision.met``). An
       output that moves by jumps (an ArgMax index, a TopK or NMS pick, a near-constant
       output) may need most weights kept, or stay past the tolerance.

    ``only``: the weights open to the choice (the others are kept as they are, noted so).
    ``float32_run``: a chooser that ran the same model on the same feeds already, whose
    float32 run is taken instead of running it again (``_Runs.adopt_float32_run``).
    """
    target = _target(dtype, feeds)
    with temporary_folder("onnxforge-mixed-") as folder:
        chooser = _WeightChooser(model, target, feeds, folder, tolerance=tolerance)
        if float32_run is not None:
            chooser.adopt_float32_run(float32_run)
        keep = dict(keep_float32 or {})
        if only is not None:
            closed = [w for w in chooser.weights if w not in only]
            keep = {**dict.fromkeys(closed, "not open to this choice"), **keep}
        return chooser.choose(keep, max(1, max_rounds))


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
        self.weights = float32_weight_tensors(self.base)
        self.compressed: set[str] = set()  # by the last compression
        self.least = math.inf  # the smallest largest output error measured so far
        self.stalls = 0  # rounds that measured no less: each halves the aim
        self.kept: dict[str, str] = {}  # by it
        self.flow = _Flow(set(), {}, {})  # of the last compression measured

    def choose(self, keep: dict[str, str], max_rounds: int) -> MixedPrecision:
        plain = self._convert(keep)
        found = self._range_keeps()
        for key, reason in found.items():
            self._keep(keep, key, reason)
        if not self.floats:  # no float32 run adopted
            self._run_float32(self.base)
        return self._rounds(keep, self._convert(keep) if found else plain, max_rounds)

    def _range_keeps(self) -> dict[str, str]:
        """The compressed weights the target type rounds to 0 entirely, with the reason (one
        with values past its range the pass keeps float32 itself)."""
        tiny = float(ml_dtypes.finfo(_NUMPY[DType(self.target)]).smallest_subnormal)
        name = _name(self.target)
        found = {}
        for key in sorted(self.compressed):
            big = _largest(self.weights[key].numpy())
            if 0 < big <= tiny / 2:
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
        worst = max(measured.outputs.values())
        if worst >= self.least:  # the estimate was too kind: aim lower
            self.stalls += 1
        self.least = min(self.least, worst)
        goal = (AIM * self.tolerance / 2**self.stalls) ** 2

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
            reads = [v for v in op.reads() if v.name in self.flow.data]
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
                    ups = [graph.producer(v) for v in at.reads() if v.name in self.flow.data]
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
                for value in op.reads() if op is not None else ():
                    if value.name in self.floats:
                        reach[value.name] = per_range(value.name)
                    elif value.name in data:
                        stack.append(value)
        for op in reversed(graph.topo_order()):
            outs = [v.name for v in op._outputs if v is not None and reach.get(v.name)]
            given = [
                v.name
                for v in op.reads()
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
            reads = op.reads()
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


def float32_weight_tensors(model: Model) -> dict[str, Tensor]:
    """The float32 weights of ``model`` by name, in every graph but functions': its
    initializers and Constants' values."""
    found: dict[str, Tensor] = {}
    for graph in walk_graphs(model.graph):
        for value in graph.initializers:
            if isinstance(value.const, Tensor) and value.const.dtype == DType.FLOAT:
                found[value.name] = value.const
        for op in graph.ops:
            tensor = constant_tensor(op) if op.op_type == "Constant" else None
            out = op._outputs[0] if op._outputs else None
            if tensor is not None and tensor.dtype == DType.FLOAT and out is not None:
                found[out.name] = tensor
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
