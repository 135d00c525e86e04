"""Shape rules of the ops with subgraphs: If, Loop, Scan. Their bodies are inferred too.

onnx's per-node inference cannot reach into a body from Python, so these rules infer the body
with the types the op gives it and read the types of its outputs.
"""

from __future__ import annotations

__all__: list[str] = []

from collections.abc import Sequence

from onnxforge.errors import ShapeError
from onnxforge.ir import Dim, DType, Graph, Op, OpaqueType, TensorType
from onnxforge.opset import schema_versions
from onnxforge.shape_infer.engine import InferContext, Known, shape_rule, value_rule
from onnxforge.shape_infer.symbolic import same_dim

Type = TensorType | OpaqueType
Inputs = Sequence[TensorType | None]


def _join(a: Type | None, b: Type | None) -> Type | None:
    """A type both may have: dims that differ become unknown, and a side whose type is unknown
    leaves only the element type (the spec makes both branches give the same one)."""
    if isinstance(a, TensorType) and b is None:
        return TensorType(a.dtype, None)
    if isinstance(b, TensorType) and a is None:
        return TensorType(b.dtype, None)
    if not isinstance(a, TensorType) or not isinstance(b, TensorType):
        return a if a is not None and b is None else b if a is None else a
    if a.dtype != b.dtype and a.dtype and b.dtype:
        raise ShapeError(f"branches give different element types: {a} and {b}")
    if a.shape is None or b.shape is None or len(a.shape) != len(b.shape):
        return TensorType(a.dtype or b.dtype, None)
    dims: tuple[Dim, ...] = tuple(
        x if same_dim(x, y) else None for x, y in zip(a.shape, b.shape, strict=True)
    )
    return TensorType(a.dtype or b.dtype, dims)


def _graph(op: Op, name: str) -> Graph:
    body = op.attr(name)
    if not isinstance(body, Graph):
        raise ShapeError(f"attribute {name!r} is not a graph")
    return body


@shape_rule("If", versions=schema_versions("If"))
def infer_if(op: Op, inputs: Inputs, ctx: InferContext) -> list[Type | None]:
    """Both branches, joined; with a constant condition only the branch that runs (the other
    may be invalid for these inputs, as in onnx's AffineGrid function for 3-D grids)."""
    then_b, else_b = _graph(op, "then_branch"), _graph(op, "else_branch")
    if len(then_b.outputs) != len(else_b.outputs):
        raise ShapeError(
            f"then_branch has {len(then_b.outputs)} outputs, else_branch {len(else_b.outputs)}"
        )
    taken = _condition(ctx)
    if taken is not None:
        return ctx.infer_subgraph(then_b if taken else else_b, [])
    then_out = ctx.infer_subgraph(then_b, [])
    else_out = ctx.infer_subgraph(else_b, [])
    return [_join(a, b) for a, b in zip(then_out, else_out, strict=True)]


def _condition(ctx: InferContext) -> bool | None:
    """The If's condition when inference knows it: a constant, or shape arithmetic that
    decides it (PyTorch's ``squeeze(1)`` asks ``Shape(x)[1] == 1`` of a dim that is 1)."""
    cond = ctx.const(0)
    if cond is not None and cond.size == 1:
        return bool(cond.reshape(-1)[0])
    known = ctx.value(0)
    if known is not None and len(known) == 1 and isinstance(known[0], int):
        return bool(known[0])
    return None


@shape_rule("Loop", versions=schema_versions("Loop"))
def infer_loop(op: Op, inputs: Inputs, ctx: InferContext) -> list[Type | None]:
    body = _graph(op, "body")
    carried_in: list[Type | None] = [
        None if v is None else ctx.scope.type_of(v) for v in ctx.inputs[2:]
    ]
    n_carried = len(carried_in)
    if len(body.inputs) != n_carried + 2:
        raise ShapeError(f"body takes {len(body.inputs)} inputs, the loop gives {n_carried + 2}")
    counters: list[Type | None] = [
        _counter(body.inputs[0].type, DType.INT64),
        _counter(body.inputs[1].type, DType.BOOL),
    ]
    state = carried_in
    for _ in range(2):  # a second pass when a carried shape changes from one iteration on
        out = ctx.infer_subgraph(body, counters + state)
        widened = [_join(s, o) for s, o in zip(state, out[1 : 1 + n_carried], strict=False)]
        if all(_same(s, w) for s, w in zip(state, widened, strict=True)):
            break
        state = widened
    carried_out = out[1 : 1 + n_carried]
    trips: Dim = None
    m = ctx.value(0) if ctx.input(0) is not None else None  # a dim too (Loop over Shape(x)[0])
    if m is not None and len(m) == 1 and _runs_to_the_end(body, ctx):
        trips = m[0]
    scans: list[Type | None] = []
    for t in out[1 + n_carried :]:
        if isinstance(t, TensorType):
            scans.append(TensorType(t.dtype, None if t.shape is None else (trips, *t.shape)))
        else:
            scans.append(None)
    return [*(_join(a, b) for a, b in zip(carried_in, carried_out, strict=True)), *scans]


def _counter(declared: Type | None, dtype: DType) -> TensorType:
    """What a Loop body receives as its iteration number or condition. The spec says scalars,
    but the body's declaration is the contract runtimes keep: onnx's checker compares the
    condition with the outer ``cond`` and onnxruntime feeds both as ``[1]`` to a body that
    declares rank 1 (paddle2onnx declares ``int64[1]`` and ``bool[1]``), so such a body is
    inferred with, and written back with, ``[1]``."""
    if (
        isinstance(declared, TensorType)
        and declared.shape is not None
        and len(declared.shape) == 1
    ):
        return TensorType(dtype, (1,))
    return TensorType(dtype, ())


def _runs_to_the_end(body: Graph, ctx: InferContext) -> bool:
    """The loop stops only at the trip count: no condition, or a true one the body passes on."""
    if ctx.input(1) is not None:
        cond = ctx.const(1)
        if cond is None or not bool(cond.reshape(-1)[0]):
            return False
    out = body.outputs[0]
    while out is not body.inputs[1]:
        producer = body.producer(out)
        if producer is None or producer.op_type != "Identity":
            return False
        source = body.inputs_of(producer)[0]
        if source is None:
            return False
        out = source
    return True


def _same(a: Type | None, b: Type | None) -> bool:
    if isinstance(a, TensorType) and isinstance(b, TensorType):
        return a == b
    return a is b


@shape_rule("Scan", versions=tuple(v for v in schema_versions("Scan") if v >= 9))
def infer_scan(op: Op, inputs: Inputs, ctx: InferContext) -> list[Type | None]:
    body = _graph(op, "body")
    n_scan = int(op.attr("num_scan_inputs"))
    n_state = len(inputs) - n_scan
    if n_state < 0:
        raise ShapeError(f"num_scan_inputs {n_scan} exceeds the {len(inputs)} inputs")
    in_axes = list(op.attr("scan_input_axes") or [0] * n_scan)
    trips: Dim = None
    slices: list[Type | None] = []
    for t, axis in zip(inputs[n_state:], in_axes, strict=False):
        if t is None or t.shape is None:
            slices.append(None if t is None else TensorType(t.dtype, None))
            continue
        at = axis + len(t.shape) if axis < 0 else axis
        if not 0 <= at < len(t.shape):
            raise ShapeError(f"scan_input_axes {axis} is out of range for {t}")
        trips = t.shape[at] if trips is None else trips
        slices.append(TensorType(t.dtype, t.shape[:at] + t.shape[at + 1 :]))
    state_in = [ctx.scope.type_of(v) if v is not None else None for v in ctx.inputs[:n_state]]
    out = ctx.infer_subgraph(body, [*state_in, *slices])
    results: list[Type | None] = [
        _join(a, b) for a, b in zip(state_in, out[:n_state], strict=False)
    ]
    out_axes = list(op.attr("scan_output_axes") or [0] * (len(out) - n_state))
    for t, axis in zip(out[n_state:], out_axes, strict=False):
        if not isinstance(t, TensorType) or t.shape is None:
            results.append(t if not isinstance(t, TensorType) else TensorType(t.dtype, None))
            continue
        rank = len(t.shape) + 1
        shape = list(t.shape)
        shape.insert(axis + rank if axis < 0 else axis, trips)
        results.append(TensorType(t.dtype, tuple(shape)))
    return results


@value_rule("If", versions=schema_versions("If"))
def if_value(op: Op, ctx: InferContext) -> list[Known | None]:
    """A known condition picks its branch's elements (and constants); else equal ones pass."""
    then_b, else_b = _graph(op, "then_branch"), _graph(op, "else_branch")
    cond = _condition(ctx)
    outputs = ctx.scope.graph.outputs_of(op)
    engine = ctx.engine
    if cond is not None:
        taken = then_b if cond else else_b  # the only branch inferred
        for value, inner in zip(outputs, taken.outputs, strict=False):
            array = engine.const_of(inner)
            if value is not None and array is not None:
                engine.consts[value] = array
        return [engine.known_of(v) for v in taken.outputs]
    found: list[Known | None] = []
    for a, b in zip(then_b.outputs, else_b.outputs, strict=False):
        ka, kb = engine.known_of(a), engine.known_of(b)
        found.append(ka if ka is not None and ka == kb else None)
    return found
