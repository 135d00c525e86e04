"""Fallback kernels: onnx's reference implementation (onnx.reference) of any default-domain op.

Used for ops without an own numpy kernel, and by shape inference to evaluate small all-constant
ops (shape arithmetic on floats, window functions, OneHot with a constant depth).
"""

from __future__ import annotations

__all__ = ["NONDETERMINISTIC", "run_reference"]

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from onnx.reference.ops import load_op

from onnxforge.errors import KernelError
from onnxforge.io import node_to_proto
from onnxforge.ir import Op

logger = logging.getLogger(__name__)

NONDETERMINISTIC = frozenset(
    {
        "RandomNormal",
        "RandomNormalLike",
        "RandomUniform",
        "RandomUniformLike",
        "Multinomial",
        "Bernoulli",
        "Dropout",  # random in training mode; outputs a mask
    }
)
"""Ops whose result is not a function of their inputs: never evaluated ahead of time."""


def run_reference(
    op: Op, inputs: Sequence[np.ndarray | None], opsets: Mapping[str, int]
) -> list[np.ndarray]:
    """Run ``op`` on arrays with onnx's reference implementation."""
    node = node_to_proto(op)
    version = opsets.get(op.domain or "", None)
    try:
        cls = load_op(op.domain or "", op.op_type, version, node=node)
        impl: Any = cls(node, {"log": lambda *a: None, "opsets": dict(opsets), "new_ops": None})
        result = impl.run(*inputs)
    except Exception as e:  # onnx.reference raises whatever numpy raises
        raise KernelError(f"{op.describe()}: reference kernel failed: {e}") from None
    arrays = []
    for r in result if isinstance(result, tuple | list) else (result,):
        if not isinstance(r, np.ndarray | np.generic):
            raise KernelError(f"{op.describe()}: gives a {type(r).__name__}, not a tensor")
        arrays.append(np.asarray(r))
    return arrays
