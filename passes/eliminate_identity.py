"""eliminate-identity: remove Identity and the ops that compute their input unchanged."""

from __future__ import annotations

__all__ = ["EliminateIdentityPass"]

import logging
from collections.abc import Callable
from typing import ClassVar

import numpy as np

from onnxforge.ir import Graph, Model, Op, Shape, Value
from onnxforge.passes._infra import Pass, PassResult, node_label, register_pass
from onnxforge.passes._rewrite import (
    bypass,
    constant,
    dtype_of,
    graphs_with_opset,
    inferred_types,
    refresh_captures,
    reshape_target,
    shape_of,
    since,
)
from onnxforge.passes._worklist import visit
from onnxforge.shape_infer.symbolic import same_dim

logger = logging.getLogger(__name__)

Check = Callable[[Graph, Op, int], "Value | None"]


@register_pass
class EliminateIdentityPass(Pass):
    """Remove ``y = op(x, ...)`` where y always equals x, and make y's readers read x.

    1. Identity; Dropout in inference mode (before 7 with is_test=1, from 12 with
       training_mode absent or a constant false, or a constant ratio of 0) whose mask nobody
       reads.
    2. Cast (CastLike) to x's own dtype.
    3. Reshape, Expand, Squeeze, Unsqueeze, Flatten, Tile whose output shape is provably x's
       (static dims, or the same symbols), or whose constant operand says so: Reshape to
       x's shape (0 and -1 included), Expand to a shape x already has, Squeeze of a static
       shape without 1s, Unsqueeze of no axes.
    4. Transpose with the identity perm; Slice of everything (start 0, step 1, end at least
       the dim or the dtype's max); Pad of all-zero pads.
    5. x + 0, x - 0, x * 1, 1 * x, x / 1 with a constant that changes neither the shape nor
       the dtype (x + 0 turns -0.0 into +0.0: equal, as == and onnxruntime's fusions see it).
    6. Concat of one input, Split into one output (onnx2torch hands the next op a tuple: a
       DTLN export's TF unstack, where onnxsim's output converts). Concat inputs whose static
       size along the axis is 0 add nothing and are dropped first (the first stays when all
       are): ncnn has no empty blobs, and pnnx writes a constant empty part as a MemoryData
       that ncnn fails to load.

    The graph-output rule of ``_rewrite.bypass`` applies: an op whose output is a graph output
    and whose input is a graph input, initializer or another output stays.
    """

    name: ClassVar[str] = "eliminate-identity"
    journaled: ClassVar[bool] = True  # every edit stamps the op it changes
    keeps_types: ClassVar[bool] = True  # y's readers read x, which has y's type
    summary: ClassVar[str] = (
        "Remove Identity and ops that return their input unchanged (x + 0, a no-op Reshape)."
    )

    def call(self, model: Model) -> PassResult:
        result = PassResult(model)
        with inferred_types(model):
            for graph, opset in graphs_with_opset(model):
                for op in visit(graph, self.focus):
                    check = CHECKS.get(op.op_type)
                    version = since(op, opset)
                    if check is None or version is None or op._graph is not graph:
                        continue
                    label = node_label(op)
                    if op.op_type == "Concat" and _drop_empty_parts(graph, op, version):
                        result.note("dropped.Concat_inputs", label)
                    source = check(graph, op, version)
                    if source is None:
                        continue
                    if bypass(graph, op, source):
                        result.note(f"removed.{op.op_type}", label)
                    else:
                        result.note("kept.graph_output", label)
        refresh_captures(model)
        result.modified = any(stat.startswith(("removed.", "dropped.")) for stat in result.stats)
        return result


def _identity(graph: Graph, op: Op, version: int) -> Value | None:
    return op._inputs[0] if op._inputs else None


def _dropout(graph: Graph, op: Op, version: int) -> Value | None:
    mask = op._outputs[1] if len(op._outputs) > 1 else None
    if mask is not None and graph.is_used(mask):
        return None
    if version >= 12 and len(op._inputs) > 1 and op._inputs[1] is not None:
        ratio = constant(op._inputs[1])
        if ratio is not None and ratio.size == 1 and float(ratio.reshape(-1)[0]) == 0.0:
            return op._inputs[0]  # drops nothing and scales by 1/(1 - 0), training or not
    if version < 7 and not op.attr("is_test", 0):
        return None  # training mode
    if version >= 12 and len(op._inputs) > 2 and op._inputs[2] is not None:
        mode = constant(op._inputs[2])
        if mode is None or mode.size != 1 or bool(mode.reshape(-1)[0]):
            return None
    return op._inputs[0]


def _cast(graph: Graph, op: Op, version: int) -> Value | None:
    x = op._inputs[0]
    target = dtype_of(op._inputs[1]) if op.op_type == "CastLike" else op.attr("to")
    return x if target is not None and dtype_of(x) == target else None


def _same_shape(graph: Graph, op: Op) -> Value | None:
    """Case 3: the output's shape is provably the input's (a reshape that moves nothing)."""
    x, out = op._inputs[0], op._outputs[0]
    a, b = shape_of(x), shape_of(out)
    if a is None or b is None or len(a) != len(b):
        return None
    return x if all(same_dim(p, q) for p, q in zip(a, b, strict=True)) else None


def _reshape(graph: Graph, op: Op, version: int) -> Value | None:
    x = op._inputs[0]
    shape = shape_of(x)
    if shape is not None and _moves_nothing(op, version, shape):
        return x
    return _same_shape(graph, op)


def _moves_nothing(op: Op, version: int, shape: Shape) -> bool:
    """Case 3, from the constant operand."""
    if op.op_type == "Reshape":
        target = reshape_target(op, version)
        if target is None or len(target) != len(shape):
            return False
        allowzero = version >= 14 and bool(op.attr("allowzero", 0))
        same = [
            (t == 0 and not allowzero) or (isinstance(d, int) and d == t)
            for t, d in zip(target.tolist(), shape, strict=True)
        ]  # the other dims equal x's, so a -1 stands for the remaining one
        return all(s or t == -1 for s, t in zip(same, target.tolist(), strict=True)) and (
            same.count(False) <= 1
        )
    if op.op_type == "Expand":
        target = constant(op._inputs[1])
        return (
            target is not None
            and target.ndim == 1
            and len(target) <= len(shape)
            and all(
                t == 1 or (isinstance(d, int) and d == t)
                for t, d in zip(target.tolist()[::-1], shape[::-1], strict=False)
            )
        )
    axes = op._inputs[1] if len(op._inputs) > 1 else None
    if op.op_type == "Squeeze":  # without axes: removes the 1s, of which there are none
        absent = op.attr("axes") is None if version < 13 else axes is None
        return absent and all(isinstance(d, int) and d != 1 for d in shape)
    if op.op_type == "Unsqueeze":
        array = np.array(op.attr("axes", [])) if version < 13 else constant(axes)
        return array is not None and array.size == 0
    return False


def _transpose(graph: Graph, op: Op, version: int) -> Value | None:
    x = op._inputs[0]
    perm = op.attr("perm")
    if perm is None:
        shape = shape_of(x)
        return x if shape is not None and len(shape) <= 1 else None
    return x if list(perm) == list(range(len(perm))) else None


def _slice(graph: Graph, op: Op, version: int) -> Value | None:
    x, shape = op._inputs[0], shape_of(op._inputs[0])
    if version < 10:  # attributes starts, ends, axes
        raw = [op.attr(key) for key in ("starts", "ends", "axes")] + [None]
        arrays = [None if r is None else np.array(r, dtype=np.int64) for r in raw]
    else:  # inputs starts, ends, axes, steps
        inputs = list(op._inputs[1:5]) + [None] * (5 - len(op._inputs))
        arrays = [constant(v) for v in inputs]
        if any(v is not None and a is None for v, a in zip(inputs, arrays, strict=True)):
            return None
    starts, ends, axes, steps = arrays
    if shape is None or starts is None or ends is None:
        return None
    axes = np.arange(len(starts)) if axes is None else axes
    steps = np.ones(len(starts), dtype=np.int64) if steps is None else steps
    if not len(starts) == len(ends) == len(axes) == len(steps):
        return None
    top = np.iinfo(ends.dtype).max if ends.dtype.kind == "i" else np.iinfo(np.int64).max
    for start, end, axis, step in zip(
        starts.tolist(), ends.tolist(), axes.tolist(), steps.tolist(), strict=True
    ):
        if not -len(shape) <= axis < len(shape) or step != 1:
            return None
        dim = shape[axis]
        if start < 0 and not (isinstance(dim, int) and start + dim <= 0):
            return None
        if start > 0 or not (end >= top or (isinstance(dim, int) and end >= dim)):
            return None
    return x


def _pad(graph: Graph, op: Op, version: int) -> Value | None:
    if version < 11:
        pads = op.attr("paddings" if version < 2 else "pads")
        pads = None if pads is None else np.array(pads)
    else:
        pads = constant(op._inputs[1])
    return op._inputs[0] if pads is not None and not np.any(pads) else None


NEUTRAL = {
    "Add": (0, (0, 1)),
    "Sub": (0, (1,)),
    "Mul": (1, (0, 1)),
    "Div": (1, (1,)),
    "And": (True, (0, 1)),
    "Or": (False, (0, 1)),
}
"""The neutral element of each op and the ports it may sit on (x - 0, not 0 - x)."""


def _arith(graph: Graph, op: Op, version: int) -> Value | None:
    if version < 7 or len(op._inputs) != 2:
        return None  # legacy broadcast attribute
    neutral, ports = NEUTRAL[op.op_type]
    for port in ports:
        c, x = constant(op._inputs[port]), op._inputs[1 - port]
        shape = shape_of(x)
        if c is None or x is None or shape is None or c.dtype.kind not in "iufb":
            continue
        if dtype_of(x) != dtype_of(op._inputs[port]) or c.ndim > len(shape):
            continue
        if all(
            n == 1 or (isinstance(d, int) and d == n)
            for n, d in zip(c.shape[::-1], shape[::-1], strict=False)
        ) and np.all(c == neutral):
            return x
    return None


def _drop_empty_parts(graph: Graph, op: Op, version: int) -> int:
    """Case 6: drop the inputs empty along the axis; how many went."""
    parts = list(op._inputs)
    rank = next((len(s) for s in map(shape_of, parts) if s is not None), None)
    axis = op.attr("axis", 1 if version < 4 else None)
    if rank is None or not isinstance(axis, int) or not -rank <= axis < rank:
        return 0
    axis %= rank

    def empty(value: Value | None) -> bool:
        shape = shape_of(value)
        dim = shape[axis] if shape is not None and len(shape) == rank else None
        return isinstance(dim, int) and dim == 0

    kept = [v for v in parts if v is not None and not empty(v)] or parts[:1]
    if len(kept) == len(parts):
        return 0
    for port in range(len(parts)):
        graph.set_input(op, port, None)
    del op._inputs[len(kept) :]
    for port, value in enumerate(kept):
        graph.set_input(op, port, value)
    graph.touch(op)
    return len(parts) - len(kept)


def _concat(graph: Graph, op: Op, version: int) -> Value | None:
    return op._inputs[0] if len(op._inputs) == 1 else None


def _split(graph: Graph, op: Op, version: int) -> Value | None:
    """One output is the whole input: the spec lets its one split size be only the dim."""
    return op._inputs[0] if len(op._outputs) == 1 and op._inputs else None


CHECKS: dict[str, Check] = {
    "Identity": _identity,
    "Dropout": _dropout,
    "Cast": _cast,
    "CastLike": _cast,
    "Reshape": _reshape,
    "Expand": _reshape,
    "Squeeze": _reshape,
    "Unsqueeze": _reshape,
    "Flatten": _reshape,
    "Tile": _reshape,
    "Transpose": _transpose,
    "Slice": _slice,
    "Pad": _pad,
    "Concat": _concat,
    "Split": _split,
    **dict.fromkeys(NEUTRAL, _arith),
}
