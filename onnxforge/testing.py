"""Helpers for tests of onnxforge and of code built on it."""

from __future__ import annotations

__all__ = [
    "Observed",
    "ShapeTally",
    "assert_models_close",
    "declared_dims",
    "every_value_exposed",
    "model_from_text",
    "observe",
    "random_feeds",
    "run_onnxruntime",
    "strip_shapes",
    "tally",
]

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
import onnx.parser
from onnx import helper, numpy_helper

from onnxforge.io import from_proto, to_proto
from onnxforge.ir import Model
from onnxforge.shape_infer.symbolic import parse


def model_from_text(text: str, /, **weights: np.ndarray) -> Model:
    """A Model from ONNX text: ``'<ir_version: 10, opset_import: ["" : 18]> g (...)'``, with
    ``weights`` added as initializers under their keyword names (checked by onnx's checker)."""
    proto = onnx.parser.parse_model(text)
    proto.graph.initializer.extend(numpy_helper.from_array(a, n) for n, a in weights.items())
    onnx.checker.check_model(proto)
    return from_proto(proto)


def run_onnxruntime(
    model: Model | onnx.ModelProto | str, feeds: Mapping[str, np.ndarray]
) -> list[Any]:
    """Outputs of onnxruntime's CPU provider (the test extras install it)."""
    import onnxruntime as ort

    if isinstance(model, Model):
        model = to_proto(model)
    source = model if isinstance(model, str) else model.SerializeToString()
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])
    return session.run(None, dict(feeds))


def random_feeds(model: Model | onnx.ModelProto, *, dim: int = 3, seed: int = 0) -> dict:
    """Random inputs for every graph input without a default: symbolic dims ``dim``; floats
    standard normal, integers in [0, 2), booleans either."""
    proto = model if isinstance(model, onnx.ModelProto) else to_proto(model)
    initialized = {t.name for t in proto.graph.initializer}
    rng = np.random.default_rng(seed)
    feeds = {}
    for vi in proto.graph.input:
        if vi.name in initialized:
            continue
        tt = vi.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else dim for d in tt.shape.dim]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)
        if dtype == np.bool_:
            feeds[vi.name] = rng.integers(0, 2, shape).astype(bool)
        elif dtype.kind in "iu":
            feeds[vi.name] = rng.integers(0, 2, shape).astype(dtype)
        else:
            feeds[vi.name] = rng.standard_normal(shape).astype(dtype)
    return feeds


def assert_models_close(
    expected: Model | onnx.ModelProto,
    actual: Model | onnx.ModelProto,
    feeds: Mapping[str, np.ndarray] | None = None,
    *,
    rtol: float = 1e-4,
    atol: float = 1e-5,
) -> None:
    """Both models give the same outputs on onnxruntime for the same (random) inputs. Take
    ``to_proto(model)`` before a pass changes ``model`` in place to keep the original."""
    if feeds is None:
        feeds = random_feeds(expected)
    want, got = run_onnxruntime(expected, feeds), run_onnxruntime(actual, feeds)
    assert len(want) == len(got), f"{len(want)} outputs before, {len(got)} after"
    for i, (w, g) in enumerate(zip(want, got, strict=True)):
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=f"output {i}")


# -- shapes against onnxruntime -------------------------------------------------------------------
SIZES = (2, 3, 4, 8, 16, 32, 64)
"""Sizes tried for symbolic input dims; the first two that onnxruntime runs are compared."""


@dataclass
class ShapeTally:
    """How one tool's shapes compare with what onnxruntime computes, value by value."""

    values: int = 0
    agree: int = 0
    wrong: list[str] = field(default_factory=list)
    unresolved: list[str] = field(default_factory=list)
    failed: str = ""

    def counts(self) -> dict[str, int]:
        return {
            "values": self.values,
            "agree": self.agree,
            "wrong": len(self.wrong),
            "unresolved": len(self.unresolved),
        }


@dataclass
class Observed:
    """onnxruntime's run of a model with every main-graph value exposed, at two sizes."""

    bindings: list[dict[str, int]]
    shapes: list[dict[str, tuple[int, ...]]]
    feeds: list[dict[str, np.ndarray]]
    data_dependent: set[str] = field(default_factory=set)
    """Values whose shape may depend on the contents of the inputs (``data_dependent``)."""


DATA_DEPENDENT_OPS = frozenset(
    {"NonZero", "NonMaxSuppression", "Unique", "Compress", "StringSplit"}
)
"""Ops whose output size is decided by the values they read."""
SIZE_INPUTS: dict[str, tuple[int, ...]] = {
    "Reshape": (1,), "Expand": (1,), "Tile": (1,), "Range": (0, 1, 2), "ConstantOfShape": (0,),
    "Slice": (1, 2, 3, 4), "Pad": (1, 3), "Resize": (1, 2, 3), "Upsample": (1,), "TopK": (1,),
    "OneHot": (1,), "Split": (1,), "Squeeze": (1,), "Unsqueeze": (1,), "CenterCropPad": (1, 2),
    "Col2Im": (1, 2), "AffineGrid": (1,), "MaxUnpool": (2,), "If": (0,), "Loop": (0, 1),
    "ReduceSum": (1,), "ReduceMean": (1,), "ReduceMax": (1,), "ReduceMin": (1,),
    "ReduceProd": (1,), "ReduceL1": (1,), "ReduceL2": (1,), "ReduceLogSum": (1,),
    "ReduceLogSumExp": (1,), "ReduceSumSquare": (1,), "BlackmanWindow": (0,),
    "HannWindow": (0,), "HammingWindow": (0,), "STFT": (1, 2, 3), "DFT": (2,),
}  # fmt: skip
"""Per op, the inputs whose values decide the output's size."""


def data_dependent(graph: onnx.GraphProto) -> set[str]:
    """The main-graph values whose shape may depend on input contents, not only on input
    shapes: outputs of NonZero and its kind, of ops whose size inputs (``SIZE_INPUTS``) are
    computed from input data rather than from shapes, of Loops that may stop early, and
    everything downstream of those. A fresh symbol is the right answer only there."""
    inits = {t.name for t in graph.initializer}
    content = {vi.name for vi in graph.input if vi.name not in inits}  # values read from data
    shaped: set[str] = set()  # values whose shape may depend on data
    for node in graph.node:
        ins = [n for n in node.input if n]
        if node.op_type in ("Shape", "Size"):
            from_data = bool(ins) and ins[0] in shaped
        else:
            from_data = any(n in content for n in ins)
        sized = node.op_type in DATA_DEPENDENT_OPS or any(n in shaped for n in ins)
        sized = sized or any(
            i < len(node.input) and node.input[i] in content
            for i in SIZE_INPUTS.get(node.op_type, ())
        )
        if node.op_type == "Loop" and not sized:
            sized = _may_stop_early(node)
        for out in node.output:
            if from_data:
                content.add(out)
            if sized:
                shaped.add(out)
    return shaped


def _may_stop_early(node: onnx.NodeProto) -> bool:
    """A Loop whose body computes its condition (a while loop) runs a data-dependent count."""
    body = next(a.g for a in node.attribute if a.name == "body")
    cond_in, cond_out = body.input[1].name, body.output[0].name
    if cond_out == cond_in:
        return False
    producer = next((n for n in body.node if cond_out in n.output), None)
    return not (
        producer is not None
        and (
            producer.op_type == "Constant"
            or (producer.op_type == "Identity" and producer.input[0] == cond_in)
        )
    )


def _input_dims(vi: onnx.ValueInfoProto) -> list[int | str | None]:
    dims: list[int | str | None] = []
    for d in vi.type.tensor_type.shape.dim:
        if d.HasField("dim_value") and d.dim_value >= 0:
            dims.append(d.dim_value)
        else:
            dims.append(d.dim_param or None)
    return dims


def _symbols(proto: onnx.ModelProto) -> list[str]:
    """The named symbolic dims of the graph inputs, in order of first appearance."""
    found: dict[str, None] = {}
    inits = {t.name for t in proto.graph.initializer}
    for vi in proto.graph.input:
        if vi.name not in inits and vi.type.HasField("tensor_type"):
            for d in _input_dims(vi):
                if isinstance(d, str) and d:
                    found.setdefault(d)
    return list(found)


def _size_plans(symbols: Sequence[str], sizes: Sequence[int]) -> list[tuple[dict[str, int], int]]:
    """Sizes to try for the input symbols, as (size per symbol, size of unnamed dims): first
    a different size for each symbol (so a rule that mixes two dims up is caught), then one
    size for all (models whose differently named dims must match)."""
    plans: list[tuple[dict[str, int], int]] = []
    if len(symbols) > 1:
        for i in range(len(sizes)):
            spread = {s: sizes[(i + k) % len(sizes)] for k, s in enumerate(symbols)}
            plans.append((spread, sizes[i]))
    plans += [(dict.fromkeys(symbols, size), size) for size in sizes]
    return plans


def _feeds(
    proto: onnx.ModelProto, plan: tuple[Mapping[str, int], int], seed: int
) -> tuple[dict[str, np.ndarray], dict]:
    named, unnamed = plan
    rng = np.random.default_rng(seed)
    inits = {t.name for t in proto.graph.initializer}
    feeds: dict[str, np.ndarray] = {}
    bindings: dict[str, int] = {}
    for vi in proto.graph.input:
        if vi.name in inits or not vi.type.HasField("tensor_type"):
            continue
        shape = []
        for d in _input_dims(vi):
            if isinstance(d, int):
                shape.append(d)
            elif d:
                bindings[d] = named[d]
                shape.append(named[d])
            else:
                shape.append(unnamed)
        dtype = helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type)
        name = vi.name.lower()
        if dtype.kind in "iu":
            ones = "mask" in name
            feeds[vi.name] = (np.ones(shape) if ones else rng.integers(0, 2, shape)).astype(dtype)
        elif dtype.kind == "b":
            feeds[vi.name] = np.ones(shape, dtype=dtype)
        elif dtype.kind == "O":
            feeds[vi.name] = np.full(shape, "a", dtype=object)
        else:
            feeds[vi.name] = rng.standard_normal(shape).astype(dtype)
    return feeds, bindings


def every_value_exposed(proto: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of ``proto`` with every main-graph node output a graph output (untyped), so a
    runtime returns them all."""
    exposed = onnx.ModelProto.FromString(proto.SerializeToString())
    listed = {o.name for o in exposed.graph.output}
    for node in exposed.graph.node:
        for name in node.output:
            if name and name not in listed:
                exposed.graph.output.append(onnx.ValueInfoProto(name=name))
                listed.add(name)
    return exposed


def observe(proto: onnx.ModelProto, sizes: Sequence[int] = SIZES) -> Observed | str:
    """Run the model in onnxruntime (optimizations off) with every main-graph value exposed,
    at the first two size plans it runs with (``_size_plans``: a different size of ``sizes``
    for each input symbol, else one for all); or why it runs with none."""
    import onnxruntime as ort

    exposed = every_value_exposed(proto)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3
    try:
        session = ort.InferenceSession(
            exposed.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )
    except Exception as exc:  # noqa: BLE001  (any failure is the answer)
        return f"onnxruntime cannot load it: {exc}"
    names = [o.name for o in session.get_outputs()]
    result = Observed([], [], [], data_dependent(proto.graph))
    error = ""
    for seed, plan in enumerate(_size_plans(_symbols(proto), sizes)):
        feeds, bindings = _feeds(proto, plan, seed=seed)
        try:
            outputs = session.run(names, feeds)
        except Exception as exc:  # noqa: BLE001
            error = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            continue
        result.bindings.append(bindings)
        result.feeds.append(feeds)
        result.shapes.append(
            {n: o.shape for n, o in zip(names, outputs, strict=True) if isinstance(o, np.ndarray)}
        )
        if len(result.shapes) == 2:
            return result
    return result if result.shapes else f"onnxruntime runs it at no size tried: {error}"


def tally(
    types: Mapping[str, tuple[Any, ...] | None],
    observed: Observed,
    evaluate_dim: Callable[[Any, Mapping[str, int]], int | None],
) -> ShapeTally:
    """Compare a tool's shapes (value name -> dims, None for an unknown rank) with onnxruntime.

    A value agrees when its rank and every dim, evaluated with the input symbols' sizes, equal
    what onnxruntime computes at both sizes; it is wrong when the rank or an evaluable dim
    differs; unresolved when a dim cannot be evaluated (unknown, or an expression over a name
    no input binds). A lone name no input binds (a fresh ``unk__3``, a data-dependent size) is
    bound to its first size in each run, so every value it sizes must agree with that; it
    resolves only a value whose size depends on data (``Observed.data_dependent``): anywhere
    else the size follows from the input sizes and a fresh name leaves it unresolved."""
    out = ShapeTally()
    runs = [dict(b) for b in observed.bindings]  # input sizes, then names bound on first sight
    fresh: set[str] = set()  # the names bound on first sight
    for bindings, feeds in zip(runs, observed.feeds, strict=True):
        for name, array in feeds.items():  # a name the tool gave an unnamed input dim is that
            dims = types.get(name)  # dim (skl2onnx's batch): bound to the size fed
            if dims is not None and isinstance(array, np.ndarray) and len(dims) == array.ndim:
                for dim, size in zip(dims, array.shape, strict=True):
                    if _lone_name(dim) and evaluate_dim(dim, bindings) is None:
                        bindings[dim] = size
    for name in observed.shapes[0]:
        if any(name in feeds for feeds in observed.feeds):
            continue
        out.values += 1
        dims = types.get(name)
        if dims is None:
            out.unresolved.append(f"{name}: no shape")
            continue
        verdict = "agree"
        for bindings, shapes in zip(runs, observed.shapes, strict=True):
            actual = shapes.get(name)
            if actual is None:
                continue
            if len(dims) != len(actual):
                verdict = "wrong"
                break
            for dim, size in zip(dims, actual, strict=True):
                value = evaluate_dim(dim, bindings)
                if value is None and _lone_name(dim) and dim not in bindings:
                    value = bindings[dim] = size  # a name no input gives (unk__3): its first size
                    fresh.add(dim)
                if dim in fresh and name not in observed.data_dependent:
                    verdict = "unresolved" if verdict == "agree" else verdict
                if value is None:
                    verdict = "unresolved" if verdict == "agree" else verdict
                elif value != size:
                    verdict = "wrong"
        if verdict == "wrong":
            out.wrong.append(f"{name}: {list(dims)}, onnxruntime {list(actual or ())}")
        elif verdict == "unresolved":
            out.unresolved.append(f"{name}: {list(dims)}")
        else:
            out.agree += 1
    return out


def _lone_name(dim: object) -> bool:
    return isinstance(dim, str) and bool(dim) and parse(dim).name() == dim


def declared_dims(model: onnx.ModelProto) -> dict[str, tuple[Any, ...] | None]:
    """Every main-graph value's dims as a tool wrote them (value_info, outputs, inputs)."""
    found: dict[str, tuple[Any, ...] | None] = {}
    for vi in [*model.graph.input, *model.graph.value_info, *model.graph.output]:
        t = vi.type.tensor_type if vi.type.HasField("tensor_type") else None
        if t is None or not t.HasField("shape"):
            found.setdefault(vi.name, None)
            continue
        found[vi.name] = tuple(_input_dims(vi))
    return found


def strip_shapes(proto: onnx.ModelProto) -> onnx.ModelProto:
    """A copy without value_info and without graph-output shapes: what inference must find."""
    copy = onnx.ModelProto.FromString(proto.SerializeToString())
    del copy.graph.value_info[:]
    for output in copy.graph.output:
        if output.type.HasField("tensor_type"):
            output.type.tensor_type.ClearField("shape")
    return copy
