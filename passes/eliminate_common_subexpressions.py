"""eliminate-common-subexpressions: ops computing the same thing from the same inputs, and
initializers holding the same bytes, are merged."""

from __future__ import annotations

__all__ = ["EliminateCommonSubexpressionsPass"]

import hashlib
import logging
from collections import defaultdict
from collections.abc import Hashable, Iterator
from typing import Any, ClassVar

import numpy as np

from onnxforge.ir import AttrRef, Graph, Model, Op, Tensor, Value
from onnxforge.kernels import NONDETERMINISTIC
from onnxforge.passes._infra import Pass, PassResult, node_label, register_pass
from onnxforge.passes._rewrite import STANDARD_DOMAINS, is_graph_output, refresh_captures
from onnxforge.passes._worklist import visit

logger = logging.getLogger(__name__)

SMALL_BYTES = 1024
"""Tensor attributes up to this size are keyed by their bytes, larger ones by a digest."""
SAMPLE_BYTES = 4096
"""Initializers of the same dtype and shape are grouped by this many bytes spread over them
(reading a few pages of a large weight, not all of it); only within a group are all bytes
compared."""
COMMUTATIVE = frozenset({"Add", "Mul", "Max", "Min", "Sum", "Mean", "And", "Or", "Xor", "Equal"})
DOMAINS = STANDARD_DOMAINS | {"ai.onnx.ml"}


@register_pass
class EliminateCommonSubexpressionsPass(Pass):
    """Merge duplicates, in every graph, innermost bodies first.

    1. Initializers with the same dtype, shape and bytes (not graph inputs, which a caller
       may override, nor graph outputs) become one; readers read the first.
    2. Ops with the same type, domain, attributes and inputs (commutative ops without
       attributes: the same inputs in any order) become one, in topological order so that
       merges cascade. Never merged: random ops, ops of other domains (they may call
       anything), ops with subgraphs unless the subgraphs are equal node for node.
    3. Graph outputs keep their names: when the duplicate's output is a graph output the
       first op's readers move to the duplicate instead; when both are, nothing merges.
    """

    name: ClassVar[str] = "eliminate-common-subexpressions"
    journaled: ClassVar[bool] = True  # every edit stamps the op it changes
    keeps_types: ClassVar[bool] = True  # readers read an equal value
    summary: ClassVar[str] = (
        "Merge ops computing the same from the same inputs, and initializers with the same bytes."
    )

    def call(self, model: Model) -> PassResult:
        result = PassResult(model)
        for graph in reversed(list(model.graphs())):
            self._initializers(graph, result)
            self._ops(graph, result)
        refresh_captures(model)
        result.modified = bool(result.stats)
        return result

    @staticmethod
    def _initializers(graph: Graph, result: PassResult) -> None:
        """Case 1."""
        groups: dict[Hashable, list[Value]] = defaultdict(list)
        for value in graph.initializers:
            if not isinstance(value.const, Tensor) or value in graph.inputs:
                continue
            if not is_graph_output(graph, value):
                groups[(value.const.dtype, value.const.shape)].append(value)
        for candidates in groups.values():
            if len(candidates) < 2:
                continue
            kept: dict[Hashable, list[tuple[Value, np.ndarray]]] = defaultdict(list)
            for value in candidates:
                data = _raw(value.const)  # type: ignore[arg-type]
                key = _sample(data)
                same = next((k for k, d in kept[key] if np.array_equal(d, data)), None)
                if same is None:
                    kept[key].append((value, data))
                    continue
                graph.replace_all_uses(value, same)
                graph.remove_initializer(value)
                result.note("initializers_merged", value.name)

    def _ops(self, graph: Graph, result: PassResult) -> None:
        """Cases 2 and 3."""
        seen: dict[Hashable, Op] = {}
        heads: dict[Hashable, Hashable] = {}
        for op in visit(graph, self.focus, near=_same_inputs):
            key = _op_key(op, heads)
            if key is None:
                continue
            first = seen.get(key)
            if first is None:
                seen[key] = op
                continue
            keep, drop = first, op
            if any(v is not None and is_graph_output(graph, v) for v in op._outputs):
                keep, drop = op, first
                if any(v is not None and is_graph_output(graph, v) for v in first._outputs):
                    continue  # Case 3: both outputs are named by the graph
            for new, old in zip(keep._outputs, drop._outputs, strict=True):
                if new is not None and old is not None:
                    graph.replace_all_uses(old, new)
            label = node_label(drop)
            graph.remove_op(drop)
            seen[key] = keep
            result.note("ops_merged", label)


def _same_inputs(graph: Graph, op: Op) -> Iterator[Op]:
    """``op`` and the ops that may duplicate it: the other readers of its least read input
    (a duplicate reads them all), or, for an op without inputs, every such op."""
    yield op
    inputs = [v for v in op._inputs if v is not None]
    if not inputs:
        yield from (other for other in graph._ops if not any(other._inputs))
        return
    uses = graph._uses
    fewest = min(inputs, key=lambda v: len(uses.get(v, ())))
    for reader, _ in uses.get(fewest, ()):
        yield reader


def _raw(tensor: Tensor) -> np.ndarray:
    """The tensor's bytes as a flat uint8 array (a view where it lies in a file); strings as
    the bytes of their repr."""
    array = tensor.numpy()
    if array.dtype.kind == "O":
        return np.frombuffer(repr(array.tolist()).encode(), np.uint8)
    return np.ascontiguousarray(array).reshape(-1).view(np.uint8)


def _sample(data: np.ndarray) -> bytes:
    """Bytes spread over ``data`` (all of them when small): equal data, equal samples."""
    if data.size <= SAMPLE_BYTES:
        return data.tobytes()
    return data[:: data.size // SAMPLE_BYTES][:SAMPLE_BYTES].tobytes() + data[-64:].tobytes()


def _digest(data: np.ndarray) -> bytes:
    if data.size <= SMALL_BYTES:
        return data.tobytes()
    return hashlib.blake2b(data.data).digest()


def _op_key(op: Op, heads: dict[Hashable, Hashable]) -> tuple[Any, ...] | None:
    """``(head, *inputs)``: the head (kind, attributes, which outputs are unused) is one shared
    tuple per distinct head, and the inputs are the Values themselves (identity-hashed). Keys
    of a million ops held 210 MiB while they repeated the head and boxed each input's id."""
    if op.domain not in DOMAINS or op.op_type in NONDETERMINISTIC:
        return None
    try:
        attrs = tuple(sorted((k, _attr_key(v)) for k, v in op.attrs.items()))
    except _Unequal:
        return None
    inputs = list(op._inputs)
    while inputs and inputs[-1] is None:
        inputs.pop()
    if op.op_type in COMMUTATIVE and not op.attrs:
        inputs.sort(key=id)
    head = (op.domain or "", op.op_type, op.overload, attrs, tuple(v is None for v in op._outputs))
    return (heads.setdefault(head, head), *inputs)


class _Unequal(Exception):
    """An attribute this pass cannot compare: the op is never merged."""


LIST_DIGEST = 64
"""Attribute lists longer than this of one scalar kind are keyed by a digest of their values,
not by a tuple of keys per element: a 190 MB LightGBM tree ensemble's lists (tens of millions
of numbers) took optimize to a peak of 11.7 GB and 36 s in this pass."""


def _attr_key(value: object) -> Hashable:
    if isinstance(value, (int, float, str, bytes, AttrRef)):
        return (type(value).__name__, repr(value))
    if isinstance(value, list):
        if len(value) > LIST_DIGEST:
            digest = _list_digest(value)
            if digest is not None:
                return digest
        return ("list", tuple(_attr_key(v) for v in value))
    if isinstance(value, Tensor):
        return ("tensor", value.dtype, value.shape, _digest(_raw(value)))
    if isinstance(value, Graph):
        return ("graph", _graph_key(value))
    raise _Unequal  # sparse tensors, type protos


def _list_digest(values: list[Any]) -> Hashable | None:
    """("list", kind, length, digest) for a list of ints, floats or strings alone; None for a
    mixed list. Floats by their float64 bytes: -0.0 and 0.0 differ, as their reprs do."""
    kind = type(values[0])
    if kind not in (int, float, str, bytes) or set(map(type, values)) != {kind}:
        return None
    digest = hashlib.blake2b()
    if kind is int:
        try:
            digest.update(np.asarray(values, dtype=np.int64).tobytes())
        except OverflowError:
            return None
    elif kind is float:
        digest.update(np.asarray(values, dtype=np.float64).tobytes())
    else:
        for v in values:
            data = v.encode("utf-8", "surrogatepass") if isinstance(v, str) else v
            digest.update(len(data).to_bytes(8, "little"))
            digest.update(data)
    return ("list", kind.__name__, len(values), digest.digest())


def _graph_key(graph: Graph) -> Hashable:
    """The body node for node, inner values numbered by where they appear, outer values by
    identity: equal keys compute the same from the same outer values."""
    number: dict[Value, int] = {}

    def ref(value: Value | None) -> Hashable:
        if value is None:
            return None
        if value in number:
            return ("local", number[value])
        if value.graph is graph:
            number[value] = len(number)
            return ("local", number[value])
        return ("outer", id(value))

    key: list[Hashable] = [tuple(_type_key(v) for v in graph.inputs)]
    key.append(tuple(ref(v) for v in graph.inputs))
    for value in graph.initializers:
        const = value.const
        key.append((ref(value), _attr_key(const) if isinstance(const, Tensor) else id(value)))
    heads: dict[Hashable, Hashable] = {}
    for op in graph.topo_order():
        op_key = _op_key(op, heads)
        if op_key is None:
            raise _Unequal
        key.append(op_key[0])
        key.append(tuple(ref(v) for v in op._inputs))
        key.append(tuple(ref(v) for v in op._outputs))
    key.append(tuple(ref(v) for v in graph.outputs))
    return tuple(key)


def _type_key(value: Value) -> Hashable:
    return repr(value.type)
