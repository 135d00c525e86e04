"""Squeeze and Unsqueeze for simplify-shape-ops: their axes, the pairs and chains of them
that collapse, and the layout of a recurrent output that must stay."""

from __future__ import annotations

__all__ = [
    "RECURRENT",
    "axes_absent",
    "lays_out_recurrent_output",
    "normalize_axes",
    "ones_axes",
    "raw_axes",
    "squeeze_chain",
    "squeeze_pair",
]

import numpy as np

from onnxforge.ir import Graph, Op, Tensor, Value
from onnxforge.passes._rewrite import (
    bypass,
    constant,
    output_name,
    producer_of,
    set_input,
    shape_of,
    since,
)


def raw_axes(op: Op, opset: int) -> list[int] | None:
    """Squeeze/Unsqueeze axes as written (attribute before 13, then input); None when absent
    or not constant."""
    if (since(op, opset) or 0) < 13:
        raw = op.attr("axes")
        return None if raw is None else [int(a) for a in raw]
    array = constant(op._inputs[1]) if len(op._inputs) > 1 else None
    return None if array is None else [int(a) for a in array.reshape(-1).tolist()]


def axes_absent(op: Op, opset: int) -> bool:
    """A Squeeze or Unsqueeze without axes (attribute before 13, input after)."""
    if (since(op, opset) or 0) < 13:
        return op.attr("axes") is None
    return len(op._inputs) < 2 or op._inputs[1] is None


def normalize_axes(raw: list[int] | None, rank: int | None) -> tuple[int, ...] | None:
    """Sorted non-negative axes; None when unknown, or negative with an unknown rank."""
    if raw is None or (rank is None and any(a < 0 for a in raw)):
        return None
    return tuple(sorted(a + rank if a < 0 else a for a in raw))  # type: ignore[operator]


def ones_axes(shape: tuple[object, ...] | None) -> tuple[int, ...] | None:
    """The axes a Squeeze without axes removes: known only for a static shape."""
    if shape is None or not all(isinstance(d, int) for d in shape):
        return None
    return tuple(i for i, d in enumerate(shape) if d == 1)


def squeeze_pair(graph: Graph, op: Op, opset: int) -> bool:
    """Unsqueeze(Squeeze(x, a), a) or Squeeze(Unsqueeze(x, a), a): x."""
    other = "Squeeze" if op.op_type == "Unsqueeze" else "Unsqueeze"
    first = producer_of(graph, op._inputs[0], {other})
    if first is None or first._inputs[0] is None:
        return False
    x, mid = first._inputs[0], first._outputs[0]
    shape = shape_of(x)
    rank = None if shape is None else len(shape)
    squeeze, unsqueeze = (first, op) if op.op_type == "Unsqueeze" else (op, first)
    squeezed, unsqueezed = raw_axes(squeeze, opset), raw_axes(unsqueeze, opset)
    if squeezed == [] or unsqueezed is None:
        return False  # Squeeze of empty axes: onnxruntime squeezes all 1s, the spec is silent
    if op.op_type == "Unsqueeze":  # Unsqueeze(Squeeze(x, a), a): both ranks are x's
        outer, squeezed_shape = rank, shape
    else:  # Squeeze(Unsqueeze(x, a), a): both ranks are the Unsqueeze output's
        outer = None if rank is None else rank + len(unsqueezed)
        squeezed_shape = shape_of(mid)
    removed = normalize_axes(squeezed, outer)
    if squeezed is None and axes_absent(squeeze, opset):
        removed = ones_axes(squeezed_shape)
    added = normalize_axes(unsqueezed, outer)
    if added is None or removed is None or added != removed:
        return False
    return bypass(graph, op, x)


def nth_kept(n: int, removed: tuple[int, ...]) -> int:
    """The index of the ``n``-th (from 0) position not in ``removed``."""
    i = -1
    for _ in range(n + 1):
        i += 1
        while i in removed:
            i += 1
    return i


RECURRENT = frozenset({"RNN", "GRU", "LSTM"})
"""Their Y is [seq, directions, batch, hidden]; exporters give it the framework's layout with
Squeeze(1) or Transpose(0, 2, 1, 3) -> Reshape(0, 0, -1), and converters (pnnx) match those
ops to rebuild the framework's layer: a raw LSTM is left for ncnn, which cannot load it."""


def lays_out_recurrent_output(graph: Graph, value: Value) -> bool:
    """``value`` is the Y of an RNN, GRU or LSTM, or a Transpose of it: the op reading it
    lays it out and stays."""
    transpose = producer_of(graph, value, {"Transpose"})
    if transpose is not None:
        value = transpose._inputs[0]
    recurrent = producer_of(graph, value, RECURRENT)
    return recurrent is not None and bool(recurrent._outputs) and recurrent._outputs[0] is value


def squeeze_chain(graph: Graph, op: Op, version: int, opset: int) -> bool:
    """Squeeze(Squeeze(x, a), b): the second op reads x with the axes combined (non-negative,
    sorted); not when the first lays out a recurrent Y. Unsqueeze chains are not merged: pnnx
    lowers a multi-axis Unsqueeze that adds the batch axis to ncnn with the other axes
    misplaced, and ncnn then fails (-100) on the Conv after it (madmom's CNNs: the original
    converts, the merged form does not)."""
    first = producer_of(graph, op._inputs[0], {op.op_type})
    if first is None or first._inputs[0] is None:
        return False
    x = first._inputs[0]
    if lays_out_recurrent_output(graph, x):
        return False
    shape = shape_of(x)
    rank = None if shape is None else len(shape)
    a, b = raw_axes(first, opset), raw_axes(op, opset)
    if not a or not b:
        return False  # absent, not constant or empty: a Squeeze's meaning depends on shapes
    # the second's axes are positions among the dims the first kept
    na = normalize_axes(a, rank)
    nb = normalize_axes(b, None if rank is None else rank - len(a))
    if na is None or nb is None:
        return False
    combined = sorted(set(na) | {nth_kept(p, na) for p in nb})
    if version < 13:
        op.attrs["axes"] = combined
        graph.touch(op)
    else:
        axes = graph.add_initializer(
            graph.fresh_name(f"{output_name(op)}_axes"),
            Tensor.from_numpy(np.array(combined, dtype=np.int64)),
        )
        set_input(graph, op, 1, axes)
    set_input(graph, op, 0, x)
    return True
