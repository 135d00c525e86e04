"""Fallback kernels: onnx's reference implementation (onnx.reference) of any default-domain op.

Used for ops without an own numpy kernel, and by shape inference to evaluate small all-constant
ops (shape arithmetic on floats, window functions, OneHot with a constant depth).
"""

from __future__ import annotations

__all__ = ["run_reference"]

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx.reference import ReferenceEvaluator
from onnx.reference.ops import load_op

from onnxforge.errors import KernelError
from onnxforge.io import node_to_proto
from onnxforge.ir import Op

logger = logging.getLogger(__name__)


def run_reference(
    op: Op, inputs: Sequence[np.ndarray | None], opsets: Mapping[str, int]
) -> list[np.ndarray]:
    """Run ``op`` on arrays with onnx's reference implementation."""
    node = node_to_proto(op)
    domain = "" if op.domain == "ai.onnx" else op.domain
    try:
        if domain == "":
            try:
                cls = load_op("", op.op_type, opsets.get("", None), node=node)
            except Exception:  # no Python implementation: defined by a function, or newer
                result = _run_as_model(node, inputs, opsets)
            else:
                run_params = {"log": lambda *a: None, "opsets": dict(opsets), "new_ops": None}
                impl: Any = cls(node, run_params)
                result = impl.run(*inputs)
        else:
            result = _run_as_model(node, inputs, opsets)
    except Exception as e:  # onnx.reference raises whatever numpy raises
        raise KernelError(f"{op.describe()}: reference kernel failed: {e}") from None
    arrays = []
    for r in result if isinstance(result, tuple | list) else (result,):
        if not isinstance(r, np.ndarray | np.generic):
            raise KernelError(f"{op.describe()}: gives a {type(r).__name__}, not a tensor")
        arrays.append(np.asarray(r))
    return arrays


def _run_as_model(
    node: onnx.NodeProto, inputs: Sequence[np.ndarray | None], opsets: Mapping[str, int]
) -> list[Any]:
    """One node as a model through ReferenceEvaluator: other domains (ai.onnx.ml, training)
    and ops that onnx defines by a function body."""
    names = [f"in{i}" if name else "" for i, name in enumerate(node.input)]
    call = onnx.NodeProto()
    call.CopyFrom(node)
    del call.input[:]
    call.input.extend(names)
    outs = [f"out{i}" for i in range(len(node.output))]
    del call.output[:]
    call.output.extend(outs)
    graph = onnx.helper.make_graph(
        [call],
        "one_node",
        [onnx.helper.make_value_info(n, onnx.TypeProto()) for n in names if n],
        [onnx.helper.make_value_info(n, onnx.TypeProto()) for n in outs],
    )
    imports = [onnx.helper.make_opsetid(d, v) for d, v in opsets.items()]
    model = onnx.helper.make_model(graph, opset_imports=imports)
    feeds = {n: a for n, a in zip(names, inputs, strict=False) if n}
    return list(ReferenceEvaluator(model).run(None, feeds))
