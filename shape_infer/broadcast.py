"""Broadcasting rules, one module for every element-wise op's shape rule.

- ``numpy``: ONNX multidirectional broadcasting (Add/Sub/... from opset 7) and OpenVINO
  ``auto_broadcast="numpy"``.
- ``legacy``: ONNX Add/Sub/Mul/Div/Pow-1 and -6 with ``broadcast=1``, as the spec's text states
  it: rank(B) <= rank(A) always, a one-element B included (the text allows "a scalar tensor and
  any tensor with rank equal to or smaller than the first tensor", so A=[3], B=[1,1] and A=[],
  B=[1] are invalid models, although Caffe2 ran any one-element B). A one-element B fits
  whatever ``axis`` says; any other B is placed on A's dims from ``axis`` (None or -1: suffix
  alignment; any other value must lie in [0, rank(A)-rank(B)]). Where the text says only "a
  contiguous subset of the first tensor's shape", B's leading and trailing 1s are read as
  Caffe2's ComputeLegacyBroadcastSizes reads them (those ops come from Caffe2): set aside, not
  placed; every dim between them equals A's, 1s included ("1-dim expansion doesn't work yet").
  The output has A's shape. ``broadcast=0`` is the ``none`` rule.
- ``none``: equal shapes (OpenVINO ``auto_broadcast="none"``, ONNX legacy ``broadcast=0``).
- ``pdpd``: OpenVINO's PaddlePaddle rule, as ``PartialShape::broadcast_merge_into`` implements it
  for shape inference: rank(B) <= rank(A), ``axis`` >= -1 (-1: rank(A)-rank(B)), and all of B,
  trailing 1s included, placed on A's dims from ``axis`` must lie inside A. Each dim of B is no
  larger than A's and equal to it or 1, or A's dim is 1 (then B's, which is 0 or 1, wins); the
  output is A's shape merged with B's dims. OpenVINO's reference kernel trims B's trailing 1s
  before placing B, its shape inference does not: we follow the shape inference, so B=[3,1] does
  not fit A=[2,3] at axis 1.

Dims are ints, symbol names (``N``, ``N+1``) or None. Only static dims can contradict each other:
a static mismatch is a ShapeError naming both shapes, the rule and the first dim that does not
fit. Two dims that must be equal but are not provably so (``N`` and ``M`` under the none,
legacy and pdpd rules, ``N`` and 3 when ``N`` cannot be the broadcast 1) are taken as equal and
reported through ``on_assume``, once per pair and only when the broadcast succeeds; None and the
engine's ``unk__`` names are never reported. Under the numpy rule two symbolic dims neither of
which is provably 1 or never 1 (``N`` and ``M``, ``N`` and ``N+1``) are equal or one of them is
the broadcast 1, and which depends on the sizes: the dim is ``min(x*y, max(x, y))``, exact in
every case (0 beside 1 included), never a guess that they are equal.
"""

from __future__ import annotations

__all__ = ["RULES", "broadcast_shape", "format_shape"]

from collections.abc import Callable, Sequence

from onnxforge.errors import ShapeError
from onnxforge.ir import Dim, Shape
from onnxforge.shape_infer.symbolic import (
    dim_max,
    dim_min,
    dim_mul,
    is_clamp_of,
    is_unknown_symbol,
    never_one,
    same_dim,
)

RULES = ("numpy", "legacy", "none", "pdpd")

Assume = Callable[[Dim, Dim], None]


def format_shape(shape: Sequence[Dim] | None) -> str:
    """``[N,3,?]``: a shape as messages print it; None (unknown rank) is ``[?]``."""
    if shape is None:
        return "[?]"
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


def _named(dim: Dim) -> bool:
    """A symbol worth an assumption: not static, not None, not a fresh ``unk__`` name."""
    return isinstance(dim, str) and not is_unknown_symbol(dim)


class _Broadcast:
    """One broadcast of A and B; assumptions wait in ``assumed`` until the result is known."""

    def __init__(self, a: Shape, b: Shape, rule: str) -> None:
        self.a, self.b, self.rule = a, b, rule
        self.assumed: list[tuple[Dim, Dim]] = []

    def fail(self, reason: str) -> ShapeError:
        return ShapeError(
            f"cannot broadcast {format_shape(self.a)} and {format_shape(self.b)} "
            f"under the {self.rule} rule: {reason}"
        )

    def mismatch(self, i: int, j: int) -> ShapeError:
        return self.fail(f"dim {i} of A ({self.a[i]}) does not fit dim {j} of B ({self.b[j]})")

    def assume(self, x: Dim, y: Dim) -> None:
        if (x, y) not in self.assumed:
            self.assumed.append((x, y))

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
        self.assume(x, y)
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
        if never_one(y):
            return y  # x is 1 or y (an upsampled 2*floor(H/32) beside floor(H/16))
        if never_one(x):
            return x
        if is_unknown_symbol(x) or is_unknown_symbol(y):
            return None  # either may be 1: nothing sound to say
        if is_clamp_of(x, y) or is_clamp_of(y, x):
            # min(c, S) against S (c >= 2): equal up to S = c, and past it neither is 1, so
            # the model runs only where they are equal: S in every run (BERT's position ids)
            return y if is_clamp_of(x, y) else x
        # Equal, or one of them is the broadcast 1, and which depends on the sizes (N and M,
        # N and N+1): min(x*y, max(x, y)) is the result in every case, 0 beside 1 included.
        # Taking them as equal would write a guess (capspot's siamese batches: [B1, 512] was
        # written for a [B2, 512] result at B1 = 1).
        return dim_min(dim_mul(x, y), dim_max(x, y))

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
        """The spec's rule, B's outer 1s set aside as Caffe2 does. Only static dims other than 1
        are surely B's own: a symbol or None may be a 1 that Caffe2 trims, so the dims that must
        equal A's run from B's first to its last static non-1 dim, and a B without such dims may
        be one element, which fits from any axis (but never with a rank above A's)."""
        a, b = self.a, self.b
        core = [j for j, d in enumerate(b) if isinstance(d, int) and d != 1]
        if len(b) > len(a):
            one = "" if core else ", a one-element B included"
            raise self.fail(
                f"rank of B ({len(b)}) exceeds rank of A ({len(a)}); broadcast=1 needs "
                f"rank(B) <= rank(A){one}"
            )
        if axis is None or axis == -1:
            axis = len(a) - len(b)
        if not core:
            if not 0 <= axis <= len(a) - len(b):
                for d in b:  # only a one-element B fits here
                    if _named(d):
                        self.assume(d, 1)
            return a
        if not 0 <= axis <= len(a) - len(b):
            raise self.fail(f"axis {axis} is outside [0, {len(a) - len(b)}]")
        for j in range(core[0], core[-1] + 1):
            self.equal(axis + j, j)
        return a

    def pdpd_dim(self, i: int, j: int) -> Dim:
        """A[i] merged with B[j]: OpenVINO's ``src > dst`` check, then broadcast_merge."""
        x, y = self.a[i], self.b[j]
        if isinstance(x, int) and isinstance(y, int):
            if y > x:
                raise self.mismatch(i, j)
            if y in (x, 1):
                return x
            if x == 1:
                return y  # 0: merged into A's 1
            raise self.mismatch(i, j)
        if same_dim(x, y) or y == 1:
            return x
        if x == 1:
            return y  # 0 or 1, whichever B has
        if isinstance(x, int):
            return x  # y is 1 or x
        if isinstance(y, int):
            if y != 0 and _named(x):
                self.assume(x, y)  # x = 1 would be smaller than y
            return y
        if is_unknown_symbol(x) or is_unknown_symbol(y):
            return None
        self.assume(x, y)
        return x

    def pdpd(self, axis: int) -> Shape:
        a, b = self.a, self.b
        if len(b) > len(a):
            raise self.fail(f"rank of B ({len(b)}) exceeds rank of A ({len(a)})")
        if axis < -1:
            raise self.fail(f"axis {axis} is below -1")
        if axis == -1:
            axis = len(a) - len(b)
        if axis + len(b) > len(a):
            raise self.fail(f"B placed from axis {axis} runs past the end of A")
        out = list(a)
        for j in range(len(b)):
            out[axis + j] = self.pdpd_dim(axis + j, j)
        return tuple(out)


def broadcast_shape(
    a: Sequence[Dim],
    b: Sequence[Dim],
    *,
    rule: str = "numpy",
    axis: int | None = -1,
    on_assume: Assume | None = None,
) -> Shape:
    """The output shape of an element-wise op on shapes ``a`` and ``b`` under ``rule``.

    Args:
        a: A's shape (the left operand; the one B is placed on under ``legacy`` and ``pdpd``).
        b: B's shape.
        rule: One of ``RULES``.
        axis: Where B starts on A under ``legacy`` and ``pdpd``; None or -1: suffix alignment.
        on_assume: Called with each pair of dims taken as equal, after the broadcast succeeded.

    Raises:
        ShapeError: The shapes cannot be broadcast under ``rule``.
        ValueError: ``rule`` is not one of ``RULES``.
    """
    if rule not in RULES:
        raise ValueError(f"unknown broadcast rule {rule!r}; rules: {', '.join(RULES)}")
    work = _Broadcast(tuple(a), tuple(b), rule)
    if rule == "numpy":
        out = work.numpy()
    elif rule == "none":
        out = work.none()
    elif rule == "legacy":
        out = work.legacy(axis)
    else:
        out = work.pdpd(-1 if axis is None else axis)
    if on_assume is not None:
        for x, y in work.assumed:
            on_assume(x, y)
    return out
