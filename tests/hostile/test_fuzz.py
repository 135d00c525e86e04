"""Fuzz `optimize --check`: random valid graphs of element-wise ops, Split, Reshape, Concat,
Gather and Slice (shape arithmetic on Shape included, a symbolic batch dim sometimes), at every
opset from 7 to the newest onnxruntime loads, optimized by onnxforge.optimize_model and run on
onnxruntime against the original: the outputs must agree.

500 examples by default (the ``default`` and ``ci`` profiles of tests/conftest.py); 10,000
with ``--hypothesis-profile long``.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from onnxforge import ir
from onnxforge.api._optimize import OptimizeOptions, optimize_model
from onnxforge.api.compare import compare_on_onnxruntime
from onnxforge.errors import AdapterError, PassError
from onnxforge.io import load, save
from onnxforge.opset import min_ir_version

ort = pytest.importorskip("onnxruntime")

F = TensorProto.FLOAT
I64 = TensorProto.INT64
N = "N"  # the symbolic batch dim (only ever at the place of an input's first dim)
UNARY = ("Relu", "Neg", "Abs", "Sigmoid", "Tanh", "Identity")
BINARY = ("Add", "Sub", "Mul", "Div", "Max", "Min")


def _max_opset() -> int:
    from onnxforge.api._check import onnxruntime_limits

    return onnxruntime_limits().max_opset[""]


MAX_OPSET = _max_opset()


@dataclass
class _Value:
    name: str
    shape: tuple[int | str, ...]
    dtype: int = F
    computed: bool = False  # made by a node (graph outputs are chosen among these)

    @property
    def symbolic(self) -> bool:
        return N in self.shape


@dataclass
class _Graph:
    """A graph being drawn: nodes, initializers, and the values ops may read."""

    opset: int
    rng: np.random.Generator
    nodes: list[onnx.NodeProto] = field(default_factory=list)
    initializers: list[TensorProto] = field(default_factory=list)
    values: list[_Value] = field(default_factory=list)
    count: int = 0

    def name(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def node(self, op: str, inputs: list[str], outputs: list[_Value], **attrs: object) -> None:
        self.nodes.append(helper.make_node(op, inputs, [v.name for v in outputs], **attrs))
        for value in outputs:
            value.computed = True
            self.values.append(value)

    def const(self, array: np.ndarray, *, as_node: bool = False) -> _Value:
        value = _Value(self.name("c"), tuple(array.shape), _dtype(array))
        tensor = numpy_helper.from_array(array, value.name)
        if as_node:
            self.nodes.append(helper.make_node("Constant", [], [value.name], value=tensor))
        else:
            self.initializers.append(tensor)
        self.values.append(value)
        return value

    def ints(self, values: list[int]) -> _Value:
        return self.const(np.array(values, dtype=np.int64))

    def floats(self, shape: tuple[int, ...], draw: st.DrawFn) -> _Value:
        array = self.rng.standard_normal(shape).astype(np.float32)
        return self.const(array, as_node=draw(st.booleans()))


def _dtype(array: np.ndarray) -> int:
    return I64 if array.dtype == np.int64 else F


def _axis(draw: st.DrawFn, rank: int, opset: int, allowed: list[int]) -> tuple[int, int]:
    """(axis to write, axis as a positive index); negative axes from opset 11."""
    axis = draw(st.sampled_from(allowed))
    written = axis - rank if opset >= 11 and draw(st.booleans()) else axis
    return written, axis


def _static_axes(value: _Value) -> list[int]:
    return [i for i, d in enumerate(value.shape) if d != N]


# -- one step each ------------------------------------------------------------------------------
def _unary(draw: st.DrawFn, g: _Graph, x: _Value) -> None:
    op = draw(st.sampled_from(UNARY))
    g.node(op, [x.name], [_Value(g.name("u"), x.shape)])


def _binary(draw: st.DrawFn, g: _Graph, x: _Value) -> None:
    op = draw(st.sampled_from(BINARY))
    same = [v for v in g.values if v.dtype == F and v.shape == x.shape and v is not x]
    if same and draw(st.booleans()):
        other = draw(st.sampled_from(same))
    else:  # a constant that broadcasts: some dims 1, maybe fewer of them
        if op in ("Max", "Min") and g.opset < 8:
            shape = tuple(1 if d == N else d for d in x.shape)
            if x.symbolic:
                return _unary(draw, g, x)
        else:
            keep = draw(st.integers(0, len(x.shape)))
            shape = tuple(
                1 if d == N or draw(st.booleans()) else d for d in x.shape[len(x.shape) - keep :]
            )
        other = g.floats(tuple(int(d) for d in shape), draw)
    if op == "Div":  # keep the divisor away from zero: the same op on both sides, but
        absolute = _Value(g.name("a"), other.shape)  # 1e7 / 1e-7 makes comparisons noisy
        g.node("Abs", [other.name], [absolute])
        one = g.const(np.array(1.0, dtype=np.float32))
        divisor = _Value(g.name("d"), other.shape)
        g.node("Add", [absolute.name, one.name], [divisor])
        other = divisor
    inputs = [x.name, other.name] if draw(st.booleans()) else [other.name, x.name]
    g.node(op, inputs, [_Value(g.name("b"), _broadcast(x.shape, other.shape))])


def _broadcast(a: tuple[int | str, ...], b: tuple[int | str, ...]) -> tuple[int | str, ...]:
    rank = max(len(a), len(b))
    a = (1,) * (rank - len(a)) + a
    b = (1,) * (rank - len(b)) + b
    return tuple(y if x == 1 else x for x, y in zip(a, b, strict=True))


def _concat(draw: st.DrawFn, g: _Graph, x: _Value) -> None:
    axes = _static_axes(x)
    if not axes:
        return _unary(draw, g, x)
    written, axis = _axis(draw, len(x.shape), g.opset, axes)
    parts = [x]
    for _ in range(draw(st.integers(1, 2))):
        if x.symbolic:
            parts.append(draw(st.sampled_from([x, *[v for v in g.values if v.shape == x.shape]])))
        else:
            shape = list(x.shape)
            shape[axis] = draw(st.integers(1, 4))
            parts.append(g.floats(tuple(int(d) for d in shape), draw))
    order = draw(st.permutations(parts))
    shape = list(x.shape)
    shape[axis] = sum(int(p.shape[axis]) for p in parts)
    g.node("Concat", [p.name for p in order], [_Value(g.name("cat"), tuple(shape))], axis=written)


def _split(draw: st.DrawFn, g: _Graph, x: _Value) -> None:
    axes = [i for i in _static_axes(x) if int(x.shape[i]) >= 2]
    if not axes:
        return _unary(draw, g, x)
    written, axis = _axis(draw, len(x.shape), g.opset, axes)
    dim = int(x.shape[axis])
    k = draw(st.integers(2, min(dim, 4)))
    even = dim % k == 0 and draw(st.booleans())
    if even:
        sizes = [dim // k] * k
    else:
        cuts = sorted(
            draw(st.lists(st.integers(1, dim - 1), min_size=k - 1, max_size=k - 1, unique=True))
        )
        sizes = [b - a for a, b in zip([0, *cuts], [*cuts, dim], strict=True)]
    outs = []
    for size in sizes:
        shape = list(x.shape)
        shape[axis] = size
        outs.append(_Value(g.name("s"), tuple(shape)))
    if g.opset < 13:
        attrs: dict[str, object] = {"axis": written}
        if not even or draw(st.booleans()):
            attrs["split"] = sizes
        g.node("Split", [x.name], outs, **attrs)
    elif g.opset < 18 or not even or draw(st.booleans()):
        inputs = [x.name]
        if not even or draw(st.booleans()) or g.opset >= 18:
            inputs.append(g.ints(sizes).name)
        g.node("Split", inputs, outs, axis=written)
    else:
        g.node("Split", [x.name], outs, axis=written, num_outputs=k)


def _reshape(draw: st.DrawFn, g: _Graph, x: _Value) -> None:
    if x.symbolic and x.shape[0] != N:
        return _unary(draw, g, x)
    rest = [int(d) for d in x.shape[1:]] if x.symbolic else [int(d) for d in x.shape]
    size = int(np.prod(rest))
    dims: list[int] = []
    while size > 1:  # a random factorization of what is static, in 3 dims at most
        if len(dims) == 2:
            dims.append(size)
            break
        factors = [f for f in range(2, size + 1) if size % f == 0]
        f = draw(st.sampled_from(factors))
        dims.append(f)
        size //= f
    if draw(st.booleans()):
        dims.append(1)
    dims = list(draw(st.permutations(dims)))
    if x.symbolic:
        if draw(st.booleans()):  # from the shape itself: Concat(Gather(Shape(x), 0), dims)
            shape = _Value(g.name("sh"), (len(x.shape),), I64)
            g.node("Shape", [x.name], [shape])
            first = _Value(g.name("g"), (1,), I64)
            g.node("Gather", [shape.name, g.ints([0]).name], [first], axis=0)
            target = _Value(g.name("t"), (1 + len(dims),), I64)
            g.node("Concat", [first.name, g.ints(dims).name], [target], axis=0)
            g.node("Reshape", [x.name, target.name], [_Value(g.name("r"), (N, *dims))])
        else:  # 0 copies the batch dim
            target = g.ints([0, *dims])
            g.node("Reshape", [x.name, target.name], [_Value(g.name("r"), (N, *dims))])
        return
    written = list(dims)
    if written and draw(st.booleans()):
        written[draw(st.integers(0, len(written) - 1))] = -1
    g.node("Reshape", [x.name, g.ints(written).name], [_Value(g.name("r"), tuple(dims))])


def _gather(draw: st.DrawFn, g: _Graph, x: _Value) -> None:
    axes = [i for i in range(len(x.shape)) if x.shape[i] != N]
    if not axes:
        return _unary(draw, g, x)
    written, axis = _axis(draw, len(x.shape), g.opset, axes)
    dim = int(x.shape[axis])
    low = -dim if g.opset >= 11 else 0
    rank = draw(st.integers(0, 2))
    shape = tuple(draw(st.integers(1, 3)) for _ in range(rank))
    count = int(np.prod(shape)) if shape else 1
    idx = [draw(st.integers(low, dim - 1)) for _ in range(count)]
    indices = g.const(np.array(idx, dtype=np.int64).reshape(shape))
    out = (*x.shape[:axis], *shape, *x.shape[axis + 1 :])
    g.node("Gather", [x.name, indices.name], [_Value(g.name("ga"), out)], axis=written)


def _slice(draw: st.DrawFn, g: _Graph, x: _Value) -> None:
    axes = _static_axes(x)
    if not axes:
        return _unary(draw, g, x)
    chosen = draw(st.lists(st.sampled_from(axes), min_size=1, max_size=len(axes), unique=True))
    shape = list(x.shape)
    starts, ends, steps, written = [], [], [], []
    for axis in chosen:
        dim = int(x.shape[axis])
        step = draw(st.sampled_from([1, 1, 2, -1, -2])) if g.opset >= 10 else 1
        start = draw(st.integers(-dim - 2, dim + 2))
        end = draw(
            st.one_of(st.integers(-dim - 2, dim + 2), st.just(2**62 if step > 0 else -(2**62)))
        )
        length = len(range(*slice(start, end, step).indices(dim)))
        if length == 0:  # empty tensors are valid but make dull graphs
            start, end = (0, dim) if step > 0 else (dim - 1, -(2**62))
            length = len(range(*slice(start, end, step).indices(dim)))
        shape[axis] = length
        starts.append(start)
        ends.append(end)
        steps.append(step)
        written.append(axis - len(x.shape) if g.opset >= 11 and draw(st.booleans()) else axis)
    out = _Value(g.name("sl"), tuple(shape))
    if g.opset < 10:
        g.node("Slice", [x.name], [out], starts=starts, ends=ends, axes=written)
        return
    inputs = [x.name, g.ints(starts).name, g.ints(ends).name, g.ints(written).name]
    if any(s != 1 for s in steps) or draw(st.booleans()):
        inputs.append(g.ints(steps).name)
    g.node("Slice", inputs, [out])


def _flatten(draw: st.DrawFn, g: _Graph, x: _Value) -> None:
    """Reshape(x, Concat(Slice(Shape(x), 0, k), [-1])): the trailing dims into one, as
    exporters write it."""
    if len(x.shape) < 2 or any(d == N for d in x.shape[1:]):
        return _reshape(draw, g, x)
    k = draw(st.integers(1, len(x.shape) - 1))
    shape = _Value(g.name("sh"), (len(x.shape),), I64)
    g.node("Shape", [x.name], [shape])
    lead = _Value(g.name("lead"), (k,), I64)
    if g.opset < 10:
        g.node("Slice", [shape.name], [lead], starts=[0], ends=[k], axes=[0])
    else:
        g.node("Slice", [shape.name, g.ints([0]).name, g.ints([k]).name], [lead])
    target = _Value(g.name("t"), (k + 1,), I64)
    g.node("Concat", [lead.name, g.ints([-1]).name], [target], axis=0)
    rest = int(np.prod([int(d) for d in x.shape[k:]]))
    g.node("Reshape", [x.name, target.name], [_Value(g.name("fl"), (*x.shape[:k], rest))])


def _merge_dims(draw: st.DrawFn, g: _Graph, x: _Value) -> None:
    """Two neighbouring dims into one, computed: Reshape(x, Concat(Slice(shape, 0, i),
    Mul(Gather(shape, [i]), Gather(shape, [i + 1])), Slice(shape, i + 2, r)))."""
    r = len(x.shape)
    pairs = [i for i in range(r - 1) if N not in (x.shape[i], x.shape[i + 1])]
    if not pairs:
        return _reshape(draw, g, x)
    i = draw(st.sampled_from(pairs))
    shape = _Value(g.name("sh"), (r,), I64)
    g.node("Shape", [x.name], [shape])
    parts = []
    for lo, hi in ((0, i), (i + 2, r)):
        if hi > lo:
            part = _Value(g.name("p"), (hi - lo,), I64)
            if g.opset < 10:
                g.node("Slice", [shape.name], [part], starts=[lo], ends=[hi], axes=[0])
            else:
                g.node("Slice", [shape.name, g.ints([lo]).name, g.ints([hi]).name], [part])
            parts.append(part)
    a, b = _Value(g.name("da"), (1,), I64), _Value(g.name("db"), (1,), I64)
    g.node("Gather", [shape.name, g.ints([i]).name], [a], axis=0)
    g.node("Gather", [shape.name, g.ints([i + 1]).name], [b], axis=0)
    merged = _Value(g.name("m"), (1,), I64)
    g.node("Mul", [a.name, b.name], [merged])
    parts.insert(1 if i > 0 else 0, merged)
    target = _Value(g.name("t"), (r - 1,), I64)
    g.node("Concat", [p.name for p in parts], [target], axis=0)
    dims = (*x.shape[:i], int(x.shape[i]) * int(x.shape[i + 1]), *x.shape[i + 2 :])
    g.node("Reshape", [x.name, target.name], [_Value(g.name("mg"), dims)])


STEPS = (
    _unary, _binary, _binary, _concat, _split, _reshape, _flatten, _merge_dims, _gather, _slice,
)  # fmt: skip


@st.composite
def models(draw: st.DrawFn) -> tuple[onnx.ModelProto, bool]:
    """A random valid model and whether its first input has a symbolic batch dim."""
    opset = draw(st.integers(7, MAX_OPSET))
    g = _Graph(opset, np.random.default_rng(draw(st.integers(0, 2**32 - 1))))
    symbolic = draw(st.booleans())
    inputs = []
    for i in range(draw(st.integers(1, 2))):
        shape: tuple[int | str, ...] = tuple(
            draw(st.lists(st.integers(1, 5), min_size=1, max_size=4))
        )
        if i == 0 and symbolic:
            shape = (N, *shape[1:]) if len(shape) > 1 else (N, 3)
        value = _Value(f"x{i}", shape)
        inputs.append(value)
        g.values.append(value)
    if draw(st.booleans()):  # a subgraph of constants only, for folding
        c = g.floats(tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=3))), draw)
        for _ in range(draw(st.integers(1, 3))):
            draw(st.sampled_from(STEPS))(draw, g, c)
            c = g.values[-1]
    for _ in range(draw(st.integers(1, 12))):
        floats = [v for v in g.values if v.dtype == F and 0 < len(v.shape) <= 5]
        x = draw(st.sampled_from(floats))
        draw(st.sampled_from(STEPS))(draw, g, x)
    computed = [v for v in g.values if v.computed and v.dtype == F]
    if not computed:
        _unary(draw, g, inputs[0])
        computed = [g.values[-1]]
    outputs = [computed[-1]]
    for v in draw(st.lists(st.sampled_from(computed), max_size=2, unique_by=lambda v: v.name)):
        if v not in outputs:
            outputs.append(v)
    graph = helper.make_graph(
        g.nodes,
        "fuzz",
        [helper.make_tensor_value_info(v.name, v.dtype, list(v.shape)) for v in inputs],
        [helper.make_tensor_value_info(v.name, v.dtype, list(v.shape)) for v in outputs],
        g.initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = max(4, min_ir_version({"": opset}))  # IR 3: initializers are inputs
    return model, symbolic


def _feeds(model: onnx.ModelProto, batch: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    feeds = {}
    for vi in model.graph.input:
        dims = [
            d.dim_value if d.HasField("dim_value") else batch
            for d in vi.type.tensor_type.shape.dim
        ]
        feeds[vi.name] = rng.standard_normal(dims).astype(np.float32)
    return feeds


def _optimize_and_compare(
    proto: onnx.ModelProto, symbolic: bool, seed: int, options: OptimizeOptions
) -> None:
    note(onnx.printer.to_text(proto))
    onnx.checker.check_model(proto)
    with tempfile.TemporaryDirectory() as tmp:
        original, result = Path(tmp) / "model.onnx", Path(tmp) / "optimized.onnx"
        original.write_bytes(proto.SerializeToString())
        model = load(original)
        before = len(model.graph)
        try:
            optimize_model(model, options)
        except PassError as exc:  # a node the target opset cannot express: refused
            if not isinstance(exc.__cause__, AdapterError):
                raise
            event("not convertible")
            note(str(exc))
            return
        ir.verify(model)
        save(model, result)
        event(f"opset {proto.opset_import[0].version}")
        event("symbolic batch" if symbolic else "static shapes")
        event("ops removed" if len(model.graph) < before else "ops kept")
        note(onnx.printer.to_text(onnx.load(result)))
        feeds = [_feeds(proto, 2, seed)] + ([_feeds(proto, 3, seed + 1)] if symbolic else [])
        names = [o.name for o in proto.graph.output]
        problems = compare_on_onnxruntime(original, result, feeds, names)
        assert problems == []


SETTINGS = settings(
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large], deadline=None
)


@SETTINGS
@given(models(), st.integers(0, 2**16))
def test_optimize_computes_what_the_original_did(
    drawn: tuple[onnx.ModelProto, bool], seed: int
) -> None:
    proto, symbolic = drawn
    _optimize_and_compare(proto, symbolic, seed, OptimizeOptions())


@SETTINGS
@given(models(), st.integers(7, MAX_OPSET), st.integers(0, 2**16))
def test_optimize_to_another_opset_computes_what_the_original_did(
    drawn: tuple[onnx.ModelProto, bool], target: int, seed: int
) -> None:
    """optimize --opset N: converted up or down, then folded and cleaned up."""
    proto, symbolic = drawn
    event(f"{proto.opset_import[0].version} -> {target}")
    _optimize_and_compare(proto, symbolic, seed, OptimizeOptions(opset=target))
