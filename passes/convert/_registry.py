"""Version adapters: one function per op and opset step, up or down, and what they are given."""

from __future__ import annotations

__all__ = [
    "DOWNGRADES",
    "UPGRADES",
    "Adapter",
    "ConvertContext",
    "adapter",
    "find_adapter",
]

from collections.abc import Callable, Iterable
from typing import TypeAlias

import numpy as np

from onnxforge.errors import AdapterError
from onnxforge.ir import Dim, Graph, Op, Tensor, TensorType, Value, constant_tensor
from onnxforge.registry import OpRegistry

Adapter: TypeAlias = Callable[[Op, Graph, "ConvertContext"], None]

UPGRADES: OpRegistry[Adapter] = OpRegistry("upgrade adapter")
"""Keyed by the since_version ``v`` an adapter brings a node up to (from the schema before)."""
DOWNGRADES: OpRegistry[Adapter] = OpRegistry("downgrade adapter")
"""Keyed by the since_version ``v`` an adapter brings a node down from (to the schema before)."""


def adapter(
    op_types: str | Iterable[str], from_opset: int, to_opset: int, *, domain: str = ""
) -> Callable[[Adapter], Adapter]:
    """``@adapter("Split", 17, 18)`` adapts Split-13 nodes to Split-18 on the step 17 -> 18;
    ``@adapter("Split", 18, 17)`` the way back. One opset step, where the schema changes."""
    if abs(from_opset - to_opset) != 1:
        raise ValueError(f"an adapter does one opset step, not {from_opset} -> {to_opset}")
    if to_opset > from_opset:
        return UPGRADES.register(op_types, (to_opset,), domain=domain)
    return DOWNGRADES.register(op_types, (from_opset,), domain=domain)


def find_adapter(op_type: str, from_opset: int, to_opset: int, domain: str = "") -> Adapter | None:
    """The adapter registered for this exact step, or None."""
    if to_opset > from_opset:
        return UPGRADES.entry(op_type, to_opset, domain)
    return DOWNGRADES.entry(op_type, from_opset, domain)


class ConvertContext:
    """What an adapter may ask while it rewrites one node for one opset step.

    Types come from shape inference run once before conversion (conversion keeps shapes);
    values an adapter adds carry no type unless it gives one.
    """

    def __init__(
        self,
        from_opset: int,
        to_opset: int,
        *,
        allow_cast: bool = False,
        static_values: dict[Value, tuple[int, ...]] | None = None,
        known_values: dict[Value, tuple[Dim, ...]] | None = None,
    ) -> None:
        self.from_opset = from_opset
        self.to_opset = to_opset
        self.allow_cast = allow_cast
        self._static_values = static_values or {}
        self._known_values = known_values or {}

    @property
    def upgrading(self) -> bool:
        return self.to_opset > self.from_opset

    def type(self, value: Value | None) -> TensorType | None:
        """The tensor type of ``value`` (inferred or declared), or None."""
        if value is None:
            return None
        if isinstance(value.type, TensorType):
            return value.type
        if isinstance(value.const, Tensor):
            return TensorType(value.const.dtype, tuple(value.const.shape))
        return None

    def const(self, graph: Graph, value: Value | None) -> np.ndarray | None:
        """The value's data when it is known without running the model: an initializer that
        is not a graph input, a Constant's output, or an integer vector shape inference
        computed (a Shape's output)."""
        if value is None:
            return None
        if value.const is not None and value not in graph.inputs:
            return value.const.numpy() if isinstance(value.const, Tensor) else None
        producer = graph.producer(value)
        if producer is not None and producer.op_type == "Constant" and producer.domain == "":
            tensor = constant_tensor(producer)
            if isinstance(tensor, Tensor):
                return tensor.numpy()
        known = self._static_values.get(value)
        if known is not None:
            return np.array(known, dtype=np.int64)
        return None

    def known(self, graph: Graph, value: Value | None) -> tuple[Dim, ...] | None:
        """The elements of a small integer vector as far as shape inference knows them: ints,
        symbolic dims (``Shape`` of ``[N, 3]`` is ``(N, 3)``), None for an unknown one; None
        when nothing is known."""
        data = self.const(graph, value)
        if data is not None:
            flat = np.asarray(data).reshape(-1)
            return tuple(int(v) for v in flat) if flat.dtype.kind in "iu" else None
        return self._known_values.get(value) if value is not None else None

    def add_constant(self, graph: Graph, base: str, array: np.ndarray) -> Value:
        """A new initializer holding ``array``, under a name unused in the model."""
        value = graph.add_initializer(graph.fresh_name(base), Tensor.from_numpy(array))
        value.type = TensorType(value.const.dtype, tuple(array.shape))  # type: ignore[union-attr]
        return value

    def fail(self, op: Op, reason: str) -> AdapterError:
        """The error that stops this node's conversion; raise it."""
        return AdapterError(
            f"{op.op_type} node {op.name or '(unnamed)'!r}, opset {self.from_opset} -> "
            f"{self.to_opset}: {reason}"
        )
