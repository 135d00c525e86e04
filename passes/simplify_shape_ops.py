"""simplify-shape-ops: shapes inference knows become constants; chains of reshapes,
transposes and squeeze/unsqueeze pairs collapse."""

from __future__ import annotations

__all__ = ["SimplifyShapeOpsPass"]

import logging
from collections.abc import Iterator
from typing import ClassVar

import numpy as np

from onnxforge.ir import Dim, DType, Graph, Model, Op, Tensor, TensorType, Value
from onnxforge.kernels import NONDETERMINISTIC
from onnxforge.passes._infra import Pass, PassResult, node_label, register_pass
from onnxforge.passes._rewrite import (
    bypass,
    constant,
    graphs_with_opset,
    inferred_types,
    is_graph_output,
    output_name,
    producer_of,
    refresh_captures,
    reshape_target,
    set_input,
    shape_of,
    since,
)
from onnxforge.passes._squeeze import lays_out_recurrent_output, squeeze_chain, squeeze_pair
from onnxforge.passes._worklist import Near, neighbours, visit
from onnxforge.shape_infer.symbolic import same_dim

logger = logging.getLogger(__name__)

KnownValues = dict[Value, tuple[Dim, ...]]  # InferReport.known_values

RESHAPES = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze"})
"""Ops that only change the shape: a Reshape after one of them can read their input."""


@register_pass
class SimplifyShapeOpsPass(Pass):
    """Simplify what only moves shapes around.

    1. An op reading a non-constant whose outputs inference computed element by element
       (Shape or Size of a static tensor, Gather of a static dim of a partly static one, the
       arithmetic on them) becomes initializers.
    2. Reshape(R(x), s) with R a Reshape, Flatten, Squeeze or Unsqueeze reads x directly when
       every 0 of s (allowzero off) copies a dim that R's output and x provably share; R
       stays for its other readers. Not when R lays out the Y of an RNN, GRU or LSTM (reads
       it, or a Transpose of it): converters recognize the recurrent layer by R.
    3. Transpose(Transpose(x, p), q) becomes Transpose(x, [p[i] for i in q]), removed when
       that is the identity.
    4. Unsqueeze(Squeeze(x, a), a) and Squeeze(Unsqueeze(x, a), a) become x (axes compared
       after normalizing negative ones; a Squeeze without axes needs a static shape).
       Squeeze(Squeeze(x, a), b) becomes one Squeeze with the axes combined; the first op
       stays for its other readers; not when the first lays out a recurrent Y (as case 2).
       Unsqueeze chains stay (pnnx misconverts the merged one).
    5. Integer values whose elements inference knows symbolically and which are equal
       (Shape of two tensors that are both [N, 4, 197, 64], the Slices of those) are one:
       readers of the later value read the earlier. Not inside Loop and Scan bodies, whose
       symbolic dims may change from one iteration to the next.
    6. A Reshape whose computed target inference knows but for symbolic dims gets a constant
       target: a symbol equal to the input's dim at that place becomes 0 (allowzero off),
       one other symbol becomes -1 when every other element is a static positive size.
    """

    name: ClassVar[str] = "simplify-shape-ops"
    journaled: ClassVar[bool] = True  # every edit stamps the op it changes
    summary: ClassVar[str] = (
        "Collapse chains of shape ops: Shape arithmetic, Reshape/Transpose/Squeeze pairs."
    )

    def call(self, model: Model) -> PassResult:
        result = PassResult(model)
        with inferred_types(model) as report:
            # The report is shared with later passes: narrowed here, never edited.
            fixed = _inferred_values_are_fixed(model)
            static = report.static_values if fixed else {}
            known = report.known_values if fixed else {}
            for graph, opset in graphs_with_opset(model):
                seen: dict[tuple[object, ...], Value] = {}
                near = _near_same_known(graph, known) if self.focus is not None else neighbours
                for op in visit(graph, self.focus, near=near):
                    version = since(op, opset)
                    if version is None or op._graph is not graph:
                        continue
                    label = node_label(op)
                    if self._static(graph, op, static):
                        result.note("made_constant", label)
                    elif not _in_loop(graph) and _same_known(graph, op, known, seen):
                        result.note("values_merged", label)
                    elif op.op_type == "Reshape" and _constant_target(graph, op, version, known):
                        result.note("reshape_targets_made_constant", label)
                    elif op.op_type == "Reshape" and _reshape_chain(graph, op, version, opset):
                        result.note("reshapes_merged", label)
                    elif op.op_type == "Transpose":
                        merged = _transpose_chain(graph, op)
                        if merged:
                            result.note(f"transposes_{merged}", label)
                    elif op.op_type in ("Squeeze", "Unsqueeze"):
                        if squeeze_pair(graph, op, opset):
                            result.note("squeeze_pairs_removed", label)
                        elif op.op_type == "Squeeze" and squeeze_chain(graph, op, version, opset):
                            result.note("squeezes_merged", label)
        refresh_captures(model)
        result.modified = bool(result.stats)
        return result

    @staticmethod
    def _static(graph: Graph, op: Op, static: dict[Value, tuple[int, ...]]) -> bool:
        """Case 1."""
        if op.op_type in NONDETERMINISTIC or any(True for _ in op.subgraphs()):
            return False
        if not op._inputs:
            return False  # Constant: fold-constants makes it an initializer
        tensors: list[Tensor | None] = []
        for value in op._outputs:
            if value is None:
                tensors.append(None)
                continue
            known, t = static.get(value), value.type
            if known is None or not isinstance(t, TensorType) or t.shape is None:
                return False
            if len(t.shape) > 1 or not all(isinstance(d, int) for d in t.shape):
                return False
            dtype = DType(t.dtype).numpy
            if dtype is None or dtype.kind not in "iub":
                return False
            array = np.array(known, dtype=dtype).reshape(tuple(int(d) for d in t.shape))  # type: ignore[arg-type]
            tensors.append(Tensor.from_numpy(array, t.dtype))
        graph.make_constant(op, tensors)
        return True


def _reshape_chain(graph: Graph, op: Op, version: int, opset: int) -> bool:
    """Case 2."""
    first = producer_of(graph, op._inputs[0], RESHAPES)
    if first is None or not first._inputs or first._inputs[0] is None:
        return False
    x, mid = first._inputs[0], first._outputs[0]
    if lays_out_recurrent_output(graph, x):
        return False
    if version >= 14 and op.attr("allowzero", 0):
        set_input(graph, op, 0, x)
        return True
    target = reshape_target(op, version)
    if target is None:
        return False
    copied = None  # where the first op (a Reshape) itself copies x's dim
    first_version = since(first, opset) or 0
    if first.op_type == "Reshape" and not (first_version >= 14 and first.attr("allowzero", 0)):
        copied = reshape_target(first, first_version)
    a, b = shape_of(x), shape_of(mid)
    for i, t in enumerate(target.reshape(-1).tolist()):
        if t != 0:
            continue
        if copied is not None and i < copied.size and copied.reshape(-1)[i] == 0:
            continue
        if a is None or b is None or i >= min(len(a), len(b)) or not same_dim(a[i], b[i]):
            return False
    set_input(graph, op, 0, x)
    return True


def _constant_target(graph: Graph, op: Op, version: int, known_values: KnownValues) -> bool:
    """Case 6."""
    target = op._inputs[1] if version >= 5 and len(op._inputs) > 1 else None
    known = known_values.get(target) if target is not None else None
    if known is None or constant(target) is not None or _in_loop(graph):
        return False
    shape = shape_of(op._inputs[0])
    allowzero = version >= 14 and bool(op.attr("allowzero", 0))
    elements: list[int] = []
    for i, d in enumerate(known):
        if isinstance(d, int):
            elements.append(d)
        elif d is None:
            return False
        elif not allowzero and shape is not None and i < len(shape) and same_dim(d, shape[i]):
            elements.append(0)  # copies the input's dim
        else:
            elements.append(-1)
    if elements.count(-1) > 1 or (-1 in elements and any(e <= 0 for e in elements if e != -1)):
        return False  # -1 is only inferred exactly from positive static sizes
    value = graph.add_initializer(
        graph.fresh_name(f"{output_name(op)}_shape"),
        Tensor.from_numpy(np.array(elements, dtype=np.int64)),
    )
    set_input(graph, op, 1, value)
    return True


def _transpose_chain(graph: Graph, op: Op) -> str | None:
    """Case 3: "merged", "removed" or None."""
    first = producer_of(graph, op._inputs[0], {"Transpose"})
    if first is None or first._inputs[0] is None:
        return None
    x = first._inputs[0]
    p, q = first.attr("perm"), op.attr("perm")
    shape = shape_of(x)
    rank = len(p) if p else len(q) if q else len(shape) if shape is not None else None
    if rank is None:
        return None
    p = list(p) if p else list(range(rank))[::-1]
    q = list(q) if q else list(range(rank))[::-1]
    if len(p) != len(q):
        return None
    perm = [p[i] for i in q]
    set_input(graph, op, 0, x)
    op.attrs["perm"] = perm
    if perm == list(range(rank)) and bypass(graph, op, x):
        return "removed"
    return "merged"


def _in_loop(graph: Graph) -> bool:
    """Inside a Loop or Scan body (or a graph nested in one)."""
    while graph.owner is not None and graph.parent is not None:
        if graph.owner.op_type not in ("If",):
            return True
        graph = graph.parent
    return False


def _known_key(value: Value | None, known_values: KnownValues) -> tuple[object, ...] | None:
    """What Case 5 compares: dtype, shape and known elements, when all are known."""
    known = known_values.get(value) if value is not None else None
    if value is None or known is None or any(d is None for d in known):
        return None
    t = value.type
    if not isinstance(t, TensorType) or t.shape is None:
        return None
    return (t.dtype, t.shape, known)


def _near_same_known(graph: Graph, known_values: KnownValues) -> Near:
    """Case 5 merges a value into the first one with its key: when an op is touched, the
    producers of every value with the key of one of its outputs are near it too."""
    producers: dict[tuple[object, ...], list[Op]] = {}
    for value in known_values:
        producer = value._producer
        key = _known_key(value, known_values) if producer is not None else None
        if key is not None and producer is not None and producer._graph is graph:
            producers.setdefault(key, []).append(producer)

    def near(graph: Graph, op: Op) -> Iterator[Op]:
        yield from neighbours(graph, op)
        for value in op._outputs:
            key = _known_key(value, known_values)
            if key is not None:
                yield from producers.get(key, ())

    return near


def _same_known(
    graph: Graph, op: Op, known_values: KnownValues, seen: dict[tuple[object, ...], Value]
) -> bool:
    """Case 5: the op's outputs that equal an earlier value read it instead."""
    merged = False
    for value in op._outputs:
        key = _known_key(value, known_values)
        if value is None or key is None:
            continue
        earlier = seen.setdefault(key, value)
        if earlier is not value and not is_graph_output(graph, value):
            graph.replace_all_uses(value, earlier)
            merged = True
    return merged


def _inferred_values_are_fixed(model: Model) -> bool:
    """False when inference read defaults a caller may override: in IR < 4 models (where
    every initializer is listed as an input) it takes those as constants. Cases 1 and 5 are
    off for such models."""
    if model.ir_version >= 4:
        return True
    return not any(
        any(v is w for w in graph.inputs) for graph in model.graphs() for v in graph.initializers
    )
