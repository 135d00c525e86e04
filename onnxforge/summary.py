"""What `onnxforge info` reports about a model, as plain data (the CLI renders it)."""

from __future__ import annotations

__all__ = ["size_summary", "summarize"]

from collections import Counter
from typing import Any

from onnxforge.ir import Model, SparseTensor, TensorType, Value, dtype_name


def _describe_value(value: Value) -> dict[str, Any]:
    t = value.type
    if isinstance(t, TensorType):
        shape = None if t.shape is None else list(t.shape)
        return {"name": value.name, "dtype": dtype_name(t.dtype).lower(), "shape": shape}
    return {"name": value.name, "dtype": None if t is None else str(t), "shape": None}


def summarize(model: Model) -> dict[str, Any]:
    """Opsets, IR version, producer, node counts, op histogram, interface, weights, structure."""
    ops = Counter[str]()
    n_graphs = 0
    n_initializers = 0
    n_bytes = 0
    for graph in model.graphs(functions=False):
        n_graphs += 1
        for op in graph.ops:
            ops[f"{op.domain}::{op.op_type}" if op.domain else op.op_type] += 1
        for value in graph.initializers:
            n_initializers += 1
            const = value.const
            if isinstance(const, SparseTensor):
                n_bytes += const.values.nbytes + const.indices.nbytes
            elif const is not None:
                n_bytes += const.nbytes
    graph_inputs = [v for v in model.graph.inputs if v.const is None]
    return {
        "ir_version": model.ir_version,
        "opset_imports": {d or "ai.onnx": v for d, v in model.opset_imports.items()},
        "producer": {"name": model.producer_name, "version": model.producer_version},
        "graph_name": model.graph.name,
        "nodes": len(model.graph),
        "nodes_total": sum(ops.values()),
        "op_types": dict(sorted(ops.items(), key=lambda kv: (-kv[1], kv[0]))),
        "inputs": [_describe_value(v) for v in graph_inputs],
        "outputs": [_describe_value(v) for v in model.graph.outputs],
        "initializers": n_initializers,
        "initializer_bytes": n_bytes,
        "subgraphs": n_graphs - 1,
        "functions": len(model.functions),
    }


def size_summary(s: dict[str, Any]) -> dict[str, Any]:
    """The part of ``summarize``'s result a before/after report compares (fold, optimize)."""
    return {
        "nodes": s["nodes_total"],
        "initializers": s["initializers"],
        "initializer_bytes": s["initializer_bytes"],
        "op_types": s["op_types"],
    }
