"""Numpy kernels per op and schema version (onnxforge.kernels).

``@kernel("Split", versions=(18,))`` registers a function ``(op, inputs) -> outputs`` mapping
numpy arrays to numpy arrays; it never touches the graph. ``run(op, inputs, opsets)`` runs our
kernel for the op's schema version, or onnx's reference implementation when there is none.
"""

from __future__ import annotations

__all__ = ["KERNELS", "NONDETERMINISTIC", "Kernel", "kernel", "run"]

from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np

from onnxforge.errors import KernelError
from onnxforge.ir import Op
from onnxforge.registry import OpRegistry

Kernel = Callable[[Op, Sequence["np.ndarray | None"]], "list[np.ndarray]"]
KERNELS: OpRegistry[Kernel] = OpRegistry("kernel")
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


def kernel(
    op_types: str | Iterable[str], versions: Iterable[int], *, domain: str = ""
) -> Callable[[Kernel], Kernel]:
    """Register a numpy kernel for the listed schema versions (``since_version``s)."""
    return KERNELS.register(op_types, versions, domain=domain)


def run(
    op: Op, inputs: Sequence[np.ndarray | None], opsets: Mapping[str, int]
) -> list[np.ndarray]:
    """Outputs of ``op`` on ``inputs``: our kernel, else onnx's reference implementation.
    Raises KernelError, whatever went wrong inside either."""
    domain = "" if op.domain == "ai.onnx" else op.domain
    if domain not in opsets:
        raise KernelError(f"{op.describe()}: the model imports no opset for {domain or 'ai.onnx'}")
    fn = KERNELS.find(op.op_type, opsets[domain], domain)
    if fn is None:
        from onnxforge.kernels._reference import run_reference  # noqa: PLC0415  (imports onnx)

        return run_reference(op, inputs, opsets)
    try:
        return fn(op, inputs)
    except KernelError:
        raise
    except (ValueError, TypeError, IndexError, ArithmeticError) as e:
        raise KernelError(f"{op.describe()}: {e}") from None
    except Exception as e:  # noqa: BLE001  (as run_reference: the op is not computed, no crash)
        raise KernelError(f"{op.describe()}: kernel failed: {type(e).__name__}: {e}") from None


from onnxforge.kernels import elementwise, nn, tensor  # noqa: E402, F401  (registers kernels)
