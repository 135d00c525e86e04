"""merge-parallel-matmuls: MatMuls of one input by constant weights become one MatMul by the
weights side by side and a Split (the q/k/v projections of attention)."""

from __future__ import annotations

__all__ = ["MergeParallelMatMulsPass"]

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from onnxforge.ir import Graph, Model, Op, Tensor, Value
from onnxforge.passes._infra import Pass, PassResult, node_label, register_pass
from onnxforge.passes._rewrite import (
    STANDARD_DOMAINS,
    constant,
    dtype_of,
    graphs_with_opset,
    inferred_types,
    is_graph_output,
    only_reader,
    refresh_captures,
    rename,
    shape_of,
    since,
)
from onnxforge.passes._worklist import neighbours, visit

logger = logging.getLogger(__name__)


@dataclass
class _Member:
    """One MatMul of a group, its weight, and the bias Add after it (if any)."""

    matmul: Op
    weight: np.ndarray
    add: Op | None = None
    bias: np.ndarray | None = None
    bias_value: Value | None = None


@register_pass
class MergeParallelMatMulsPass(Pass):
    """Replace ``y_i = MatMul(x, W_i)`` for i = 1..n (n >= 2, one graph) by
    ``y = MatMul(x, W)`` with ``W = concat(W_1, ..., W_n, axis=1)`` and
    ``y_1, ..., y_n = Split(y)`` on the last axis.

    1. Each W_i is a constant 2-D weight [K, N_i] (an initializer of the graph or a Constant
       op's output there) with the same K and dtype, read by its MatMul alone: W replaces
       them, so the initializer bytes stay the same. Column j of y is the same dot product
       of the same operands as before, so the result is exact.
    2. When every y_i is read only by ``Add(y_i, b_i)`` (either order, opset 7 or later)
       with a constant 1-D b_i [N_i] of W's dtype read by that Add alone, the Adds merge
       too: ``Add(y, concat(b_i))`` comes before the Split, whose outputs replace the Adds'.
    3. A MatMul whose result (its Add's, in case 2) is an output of the graph stays apart:
       a graph output keeps a one-output producer. onnx2torch 1.5.15 takes a graph output
       for its producer's whole result, so a Split's part there became all of its parts
       (trueocr's order.onnx: ``cls`` [1, 2, 10] came out as seven tensors).

    The Split takes the sizes as an input from opset 13, as an attribute from 2 to 12 (with
    a non-negative axis before 11, so x's rank must be known there); each replaced output
    keeps its name and its readers. Nothing changes before opset 2.
    """

    name: ClassVar[str] = "merge-parallel-matmuls"
    journaled: ClassVar[bool] = True  # every edit stamps the op it changes
    summary: ClassVar[str] = (
        "Merge MatMuls of one input by weights side by side into one MatMul and a Split."
    )

    def call(self, model: Model) -> PassResult:
        result = PassResult(model)
        with inferred_types(model):
            for graph, opset in graphs_with_opset(model):
                if opset < 2:
                    continue
                for group in _groups(graph, opset, self.focus):
                    label = node_label(group[0].matmul)
                    if _merge(graph, group, opset):
                        result.note("matmuls_merged", label)
                        result.stats["matmuls_removed"] += len(group) - 1
                        if group[0].add is not None:
                            result.stats["adds_removed"] += len(group) - 1
        refresh_captures(model)
        result.modified = bool(result.stats)
        return result


def _groups(graph: Graph, opset: int, focus: int | None) -> list[list[_Member]]:
    """MatMuls of this graph by a weight of case 1, grouped by input, K and dtype (``focus``:
    see ``_worklist.visit``)."""
    groups: dict[tuple[Value, int, int], list[_Member]] = {}
    for op in visit(graph, focus, near=_near_siblings):
        if op.op_type != "MatMul" or op.domain not in STANDARD_DOMAINS or len(op._inputs) != 2:
            continue
        x, w_value = op._inputs
        w = _owned_constant(graph, w_value, op)
        dtype = dtype_of(w_value)
        if x is None or w is None or w.ndim != 2 or dtype is None:
            continue
        groups.setdefault((x, w.shape[0], dtype), []).append(_Member(op, w))
    found = []
    for group in groups.values():
        # Case 3, before and after the biases are known
        members = [m for m in group if not _is_output(graph, m.matmul)]
        if len(members) < 2:
            continue
        _find_biases(graph, members, opset)
        members = [m for m in members if m.add is None or not _is_output(graph, m.add)]
        if len(members) >= 2:
            found.append(members)
    return found


def _is_output(graph: Graph, op: Op) -> bool:
    """``op``'s result is an output of ``graph``."""
    value = op._outputs[0] if op._outputs else None
    return value is not None and is_graph_output(graph, value)


def _near_siblings(graph: Graph, op: Op) -> Iterator[Op]:
    """Near a touched op: its neighbours, and every MatMul reading the first input of a
    MatMul among them (the group it may join)."""
    for near in neighbours(graph, op):
        yield near
        if near.op_type == "MatMul" and near._inputs and near._inputs[0] is not None:
            for reader, _ in graph._uses.get(near._inputs[0], ()):
                if reader.op_type == "MatMul":
                    yield reader


def _owned_constant(graph: Graph, value: Value | None, reader: Op) -> np.ndarray | None:
    """The contents of ``value`` when it is a constant of this graph read by ``reader``
    alone (an initializer or a Constant op's output)."""
    if value is None or not only_reader(graph, value, reader):
        return None
    is_initializer = value in graph.initializers
    producer = graph.producer(value)
    if not is_initializer and (producer is None or producer.op_type != "Constant"):
        return None
    return constant(value)


def _find_biases(graph: Graph, members: list[_Member], opset: int) -> None:
    """Case 2: fill in every member's bias Add, or none."""
    found: list[tuple[Op, np.ndarray, Value]] = []
    for member in members:
        y = member.matmul._outputs[0]
        uses = graph.consumers(y) if y is not None else []
        add = uses[0][0] if len(uses) == 1 else None
        if y is None or add is None or add.op_type != "Add" or len(add._inputs) != 2:
            return
        if add.domain not in STANDARD_DOMAINS or (since(add, opset) or 0) < 7:
            return
        if not only_reader(graph, y, add):
            return
        other = add._inputs[1] if add._inputs[0] is y else add._inputs[0]
        bias = _owned_constant(graph, other, add)
        columns = member.weight.shape[1]
        if bias is None or bias.shape != (columns,) or dtype_of(other) != dtype_of(y):
            return
        assert other is not None
        found.append((add, bias, other))
    for member, (add, bias, value) in zip(members, found, strict=True):
        member.add, member.bias, member.bias_value = add, bias, value


def _merge(graph: Graph, members: list[_Member], opset: int) -> bool:
    first = members[0].matmul
    x, w0 = first._inputs
    assert x is not None and w0 is not None
    dtype = dtype_of(w0)
    sizes = [m.weight.shape[1] for m in members]
    split_version = since(Op("Split"), opset) or 0
    axis = -1
    if split_version < 11:
        x_shape = shape_of(x)
        if x_shape is None:
            return False  # Split-2 needs a non-negative axis
        axis = max(len(x_shape), 1) - 1
    weight = np.concatenate([m.weight for m in members], axis=1)
    w_value = graph.add_initializer(
        graph.fresh_name(f"{w0.name}_merged"), Tensor.from_numpy(weight, dtype)
    )
    base = first.name or (first._outputs[0].name if first._outputs[0] else "matmul")
    matmul = graph.add_op("MatMul", [x, w_value], name=graph.fresh_name(f"{base}_merged"))
    joined = matmul._outputs[0]
    assert joined is not None
    bias_add = None
    if members[0].add is not None:
        bias = np.concatenate([m.bias for m in members if m.bias is not None])
        b_value = graph.add_initializer(
            graph.fresh_name(f"{w0.name}_merged_bias"), Tensor.from_numpy(bias, dtype)
        )
        bias_add = graph.add_op("Add", [joined, b_value], name=graph.fresh_name(f"{base}_bias"))
        joined = bias_add._outputs[0]
        assert joined is not None
    split_name = graph.fresh_name(f"{base}_split")
    if split_version >= 13:
        sizes_value = graph.add_initializer(
            graph.fresh_name(f"{split_name}_sizes"),
            Tensor.from_numpy(np.array(sizes, dtype=np.int64)),
        )
        split = graph.add_op(
            "Split", [joined, sizes_value], n_outputs=len(members), name=split_name, axis=axis
        )
    else:
        split = graph.add_op(
            "Split", [joined], n_outputs=len(members), name=split_name, axis=axis, split=sizes
        )
    for member, part in zip(members, split._outputs, strict=True):
        last = member.add or member.matmul
        out = last._outputs[0]
        assert out is not None and part is not None
        constants = [member.matmul._inputs[1], member.bias_value]
        graph.replace_all_uses(out, part)
        part.type = out.type
        if member.add is not None:
            graph.remove_op(member.add)
        graph.remove_op(member.matmul)
        rename(part, out.name)
        for value in constants:
            if value is not None:
                _drop_constant(graph, value)
    return True


def _drop_constant(graph: Graph, value: Value) -> None:
    """Remove an initializer or Constant op nothing reads any more."""
    if graph.is_used(value):
        return
    producer = graph.producer(value)
    if producer is not None:
        graph.remove_op(producer)
    elif value in graph.initializers:
        graph.remove_initializer(value)
