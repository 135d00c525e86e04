"""Broadcasting rules, one module for every element-wise op's shape rule.

- ``numpy``: ONNX multidirectional broadcasting (Add/Sub/... from opset 7) and OpenVINO
  ``auto_broadcast="numpy"``.
- ``legacy``: ONNX Add/Sub/Mul/Div/Pow-1 and -6 with ``broadcast=1``, with the semantics of
  Caffe2's ComputeLegacyBroadcastSizes (those ops come from Caffe2): a one-element B always fits;
  otherwise rank(B) <= rank(A), B is placed on A's dims from ``axis`` (None or -1: suffix
  alignment), B's leading and trailing 1s broadcast and every dim between them equals A's. The
  output has A's shape. ``broadcast=0`` is the ``none`` rule.
- ``none``: equal shapes (OpenVINO ``auto_broadcast="none"``, ONNX legacy ``broadcast=0``).
- ``pdpd``: OpenVINO's PaddlePaddle rule, as ``PartialShape::broadcast_merge_into`` implements it:
  B onto A from ``axis`` (-1: rank(A)-rank(B)), B's trailing 1s ignored, every other dim of B equal
  to A's or 1; the output has A's shape.

Dims are ints, symbol names (``N``, ``N+1``) or None. Two different symbols that must be equal are
taken as equal and reported through ``on_assume``; a static mismatch is a ShapeError naming both
shapes, the rule and the first dim that does not fit.
"""

from __future__ import annotations

__all__ = ["RULES", "broadcast_shape", "format_shape"]

from collections.abc import Callable, Sequence

from onnxforge.errors import ShapeError
from onnxforge.ir import Dim, Shape
from onnxforge.shape_infer.symbolic import is_unknown_symbol, same_dim

RULES = ("numpy", "legacy", "none", "pdpd")

Assume = Callable[[Dim, Dim], None]


def format_shape(shape: Sequence[Dim] | None) -> str:
    if shape is None:
        return "[?]"
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


class _Broadcast:
    def __init__(self, a: Shape, b: Shape, rule: str, on_assume: Assume | None) -> None:
        self.a, self.b, self.rule, self.on_assume = a, b, rule, on_assume

    def fail(self, reason: str) -> ShapeError:
        return ShapeError(
            f"cannot broadcast {format_shape(self.a)} and {format_shape(self.b)} "
            f"under the {self.rule} rule: {reason}"
        )

    def mismatch(self, i: int, j: int) -> ShapeError:
        return self.fail(f"dim {i} of A ({self.a[i]}) does not fit dim {j} of B ({self.b[j]})")

    def equal(self, i: int, j: int) -> Dim:
        """The dim when A[i] and B[j] must be equal; static wins over symbolic."""
        x, y = self.a[i], self.b[j]
        if same_dim(x, y):
            return x
        if isinstance(x, int) and isinstance(y, int):
            raise self.mismatch(i, j)
        if is_unknown_symbol(x):
            return y
        if is_unknown_symbol(y):
            return x
        if self.on_assume is not None:
            self.on_assume(x, y)
        return y if isinstance(y, int) else x

    def numpy_dim(self, i: int, j: int) -> Dim:
        x, y = self.a[i], self.b[j]
        if same_dim(x, y):
            return x
        if x == 1:
            return y
        if y == 1:
            return x
        if isinstance(x, int) and isinstance(y, int):
            raise self.mismatch(i, j)
        if isinstance(x, int):
            return x  # y is 1 or x
        if isinstance(y, int):
            return y
        if is_unknown_symbol(x) or is_unknown_symbol(y):
            return None  # either may be 1: nothing sound to say
        if self.on_assume is not None:
            self.on_assume(x, y)
        return x

    def numpy(self) -> Shape:
        a, b = self.a, self.b
        rank = max(len(a), len(b))
        out: list[Dim] = []
        for k in range(rank):
            i, j = k - rank + len(a), k - rank + len(b)
            if i < 0:
                out.append(b[j])
            elif j < 0:
                out.append(a[i])
            else:
                out.append(self.numpy_dim(i, j))
        return tuple(out)

    def none(self) -> Shape:
        if len(self.a) != len(self.b):
            raise self.fail(f"ranks differ ({len(self.a)} and {len(self.b)})")
        return tuple(self.equal(i, i) for i in range(len(self.a)))

    def legacy(self, axis: int | None) -> Shape:
        a, b = self.a, self.b
        if all(d == 1 for d in b):
            return a  # a one-element B always fits
        if len(b) > len(a):
            raise self.fail(f"rank of B ({len(b)}) exceeds rank of A ({len(a)})")
        if axis is None or axis == -1:
            axis = len(a) - len(b)
        if not 0 <= axis <= len(a) - len(b):
            raise self.fail(f"axis {axis} is outside [0, {len(a) - len(b)}]")
        start, end = 0, len(b)
        while start < end and b[start] == 1:
            start += 1
        while end > start and b[end - 1] == 1:
            end -= 1
        for j in range(start, end):
            self.equal(axis + j, j)
        return a

    def pdpd(self, axis: int) -> Shape:
        a, b = self.a, self.b
        if len(b) > len(a):
            raise self.fail(f"rank of B ({len(b)}) exceeds rank of A ({len(a)})")
        if axis < -1:
            raise self.fail(f"axis {axis} is below -1")
        if axis == -1:
            axis = len(a) - len(b)
        end = len(b)
        while end > 0 and b[end - 1] == 1:
            end -= 1
        if axis + end > len(a):
            raise self.fail(f"B from axis {axis} runs past the end of A")
        out = list(a)
        for j in range(end):
            if b[j] != 1:
                out[axis + j] = self.equal(axis + j, j)
        return tuple(out)


def broadcast_shape(
    a: Sequence[Dim],
    b: Sequence[Dim],
    *,
    rule: str = "numpy",
    axis: int | None = -1,
    on_assume: Assume | None = None,
) -> Shape:
    """The output shape of an element-wise op on shapes ``a`` and ``b`` under ``rule``."""
    work = _Broadcast(tuple(a), tuple(b), rule, on_assume)
    if rule == "numpy":
        return work.numpy()
    if rule == "none":
        return work.none()
    if rule == "legacy":
        return work.legacy(axis)
    if rule == "pdpd":
        return work.pdpd(-1 if axis is None else axis)
    raise ValueError(f"unknown broadcast rule {rule!r}; rules: {', '.join(RULES)}")
