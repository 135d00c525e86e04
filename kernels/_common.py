"""What every kernel module needs: errors that name the op, required inputs."""

from __future__ import annotations

__all__ = ["LOW_FLOATS", "Inputs", "fail", "required_input"]

from collections.abc import Sequence

import numpy as np

from onnxforge.errors import KernelError
from onnxforge.ir import Op

Inputs = Sequence["np.ndarray | None"]

LOW_FLOATS = frozenset({"float16", "bfloat16"})
"""Float types accumulated in float32 (sums, means, cumulative sums) and cast back."""


def fail(op: Op, message: str) -> KernelError:
    return KernelError(f"{op.describe()}: {message}")


def required_input(op: Op, inputs: Inputs, index: int, name: str) -> np.ndarray:
    """A required input as an array."""
    if index >= len(inputs) or inputs[index] is None:
        raise fail(op, f"input {index} ({name}) is missing")
    return np.asarray(inputs[index])
