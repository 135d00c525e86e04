"""broadcast_shape against its authorities: ONNX and OpenVINO docs, numpy, Caffe2, OpenVINO."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from onnxforge.errors import ShapeError
from onnxforge.ir import Dim, UnknownDim
from onnxforge.shape_infer.broadcast import RULES, broadcast_shape
from onnxforge.shape_infer.symbolic import evaluate

# Fixed examples: the same cases on every run, no example database in the repository.
SETTINGS = settings(
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=300,
    suppress_health_check=[HealthCheck.too_slow],
)


def assumptions(a: Sequence[Dim], b: Sequence[Dim], **kwargs: object) -> tuple[object, list]:
    """The result and every on_assume call."""
    calls: list[tuple[Dim, Dim]] = []
    out = broadcast_shape(a, b, on_assume=lambda x, y: calls.append((x, y)), **kwargs)
    return out, calls


# --- numpy: ONNX multidirectional broadcasting, OpenVINO auto_broadcast="numpy" -----------------


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        # ONNX Broadcasting.md, "Multidirectional Broadcasting"
        ((2, 3, 4, 5), (), (2, 3, 4, 5)),
        ((2, 3, 4, 5), (5,), (2, 3, 4, 5)),
        ((4, 5), (2, 3, 4, 5), (2, 3, 4, 5)),
        ((1, 4, 5), (2, 3, 1, 1), (2, 3, 4, 5)),
        ((3, 4, 5), (2, 1, 1, 1), (2, 3, 4, 5)),
        # OpenVINO Subtract-1, example 2
        ((8, 1, 6, 1), (7, 1, 5), (8, 7, 6, 5)),
        # OpenVINO broadcast rules, numpy examples
        ((), (), ()),
        ((2, 1, 5), (4, 1), (2, 4, 5)),
        ((3, 2, 1, 4), (5, 4), (3, 2, 5, 4)),
        # a size-1 dim broadcasts to 0, as numpy does
        ((0, 3), (1, 3), (0, 3)),
    ],
)
def test_numpy_documented_examples(a: tuple, b: tuple, expected: tuple) -> None:
    assert broadcast_shape(a, b, rule="numpy") == expected
    assert broadcast_shape(b, a, rule="numpy") == expected


def test_numpy_mismatch_names_both_shapes_the_rule_and_the_first_bad_dim() -> None:
    with pytest.raises(ShapeError) as info:
        broadcast_shape((2, 3, 4), (5, 4), rule="numpy")
    message = str(info.value)
    assert "[2,3,4]" in message
    assert "[5,4]" in message
    assert "numpy rule" in message
    assert "dim 1 of A (3) does not fit dim 0 of B (5)" in message


def test_numpy_same_symbol_is_that_symbol_without_assumption() -> None:
    assert assumptions(("N", 3), ("N", 3), rule="numpy") == (("N", 3), [])


def test_numpy_symbol_against_1_keeps_the_symbol() -> None:
    assert assumptions(("N",), (1,), rule="numpy") == (("N",), [])
    assert assumptions((1,), ("N",), rule="numpy") == (("N",), [])


def test_numpy_symbol_against_3_is_3_without_assumption_because_the_symbol_may_be_1() -> None:
    assert assumptions(("N",), (3,), rule="numpy") == ((3,), [])
    assert assumptions((3,), ("N",), rule="numpy") == ((3,), [])


def test_numpy_two_symbols_broadcast_to_an_exact_expression_not_an_assumption() -> None:
    # N and M: equal, or one is the broadcast 1 (0 beside 1 included): min(N*M, max(N, M))
    # in every case. Taken as equal, [N, 2] was a written guess (capspot's siamese batches).
    both = "min(M*N, max(M, N))"
    assert assumptions(("N", 2), ("M", 2), rule="numpy") == ((both, 2), [])
    assert assumptions(("N", "N"), ("M", "M"), rule="numpy") == ((both, both), [])
    for n, m in ((1, 5), (5, 1), (4, 4), (1, 0), (0, 1), (0, 0), (1, 1)):
        assert evaluate(both, {"N": n, "M": m}) == (m if n == 1 else n)  # numpy's rule


def test_numpy_expressions_of_one_symbol_broadcast_exactly_too() -> None:
    # N and N+1 are equal nowhere: one of them is 1 (N+1 at N=0: 0; N at N=1: 2), and the
    # same expression says which (boundary fuzz: Expand of [N,1] to [N+1,1] was written [N,1]
    # under "N == N+1").
    assert assumptions(("N", 1), ("N+1", 1), rule="numpy") == (("min(N*N+N, N+1)", 1), [])
    assert evaluate("min(N*N+N, N+1)", {"N": 0}) == 0
    assert evaluate("min(N*N+N, N+1)", {"N": 1}) == 2
    # 2*N is never 1, so N is 1 or 2*N (equal only at 0): 2*N in every run that broadcasts
    assert assumptions(("N",), ("2*N",), rule="numpy") == (("2*N",), [])


def test_numpy_equal_polynomials_are_the_same_dim() -> None:
    assert assumptions(("N+M",), ("M+N",), rule="numpy") == (("N+M",), [])


def test_numpy_unknown_dims_stay_unknown_and_are_never_assumed() -> None:
    assert assumptions((None,), (None,), rule="numpy") == ((None,), [])
    assert assumptions((None,), ("M",), rule="numpy") == ((None,), [])
    assert assumptions((UnknownDim("unk__0"),), ("M",), rule="numpy") == ((None,), [])
    assert assumptions((None,), (3,), rule="numpy") == ((3,), [])
    assert assumptions((1,), (None,), rule="numpy") == ((None,), [])


def test_numpy_failed_broadcast_reports_no_assumption() -> None:
    calls: list = []
    with pytest.raises(ShapeError):
        broadcast_shape(("N", 2), ("M", 3), rule="numpy", on_assume=lambda x, y: calls.append(1))
    assert calls == []


_dims = st.integers(0, 4)
_shapes = st.lists(_dims, max_size=5).map(tuple)


@st.composite
def numpy_pairs(draw: st.DrawFn) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Random pairs (mostly incompatible) and pairs made compatible on purpose, then mutated."""
    a = draw(_shapes)
    if draw(st.booleans()):
        return a, draw(_shapes)
    keep = draw(st.integers(0, len(a)))
    ones = draw(st.lists(st.booleans(), min_size=keep, max_size=keep))
    suffix = [1 if one else d for one, d in zip(ones, a[len(a) - keep :], strict=True)]
    b = draw(st.lists(_dims, max_size=2)) + suffix
    if b and draw(st.integers(0, 3)) == 0:
        b[draw(st.integers(0, len(b) - 1))] = draw(_dims)
    return (a, tuple(b)) if draw(st.booleans()) else (tuple(b), a)


@SETTINGS
@given(numpy_pairs())
def test_numpy_rule_is_np_broadcast_shapes(pair: tuple[tuple[int, ...], tuple[int, ...]]) -> None:
    a, b = pair
    try:
        expected: tuple[int, ...] | None = np.broadcast_shapes(a, b)
    except ValueError:
        expected = None
    if expected is None:
        with pytest.raises(ShapeError):
            broadcast_shape(a, b, rule="numpy")
    else:
        assert broadcast_shape(a, b, rule="numpy") == expected


# --- none ----------------------------------------------------------------------------------------


def test_none_equal_shapes_pass() -> None:
    assert broadcast_shape((256, 56), (256, 56), rule="none") == (256, 56)  # Subtract-1 example 1
    assert broadcast_shape((), (), rule="none") == ()


def test_none_rejects_what_numpy_would_broadcast() -> None:
    with pytest.raises(ShapeError, match=r"\[2,3\] and \[1,3\] under the none rule: dim 0 of A"):
        broadcast_shape((2, 3), (1, 3), rule="none")


def test_none_rejects_different_ranks() -> None:
    with pytest.raises(ShapeError, match=r"\[2,3\] and \[3\] under the none rule: ranks differ"):
        broadcast_shape((2, 3), (3,), rule="none")


def test_none_static_dim_wins_over_a_symbol_and_the_pair_is_assumed() -> None:
    assert assumptions(("N", 4), (3, "M"), rule="none") == ((3, 4), [("N", 3), (4, "M")])


def test_none_unknown_dim_takes_the_other() -> None:
    assert assumptions((None, "N"), (3, None), rule="none") == ((3, "N"), [])


# --- legacy: ONNX Sub-1/Sub-6 broadcast=1: the spec's text, B's outer 1s as Caffe2 reads them ---


@pytest.mark.parametrize(
    ("b", "axis"),
    [  # the shapes the ONNX Sub-1 and Sub-6 docs list as supported
        ((), None),
        ((1, 1), None),
        ((5,), None),
        ((4, 5), None),
        ((3, 4), 1),
        ((2,), 0),
    ],
)
def test_legacy_onnx_documented_examples_have_a_shape(b: tuple, axis: int | None) -> None:
    assert broadcast_shape((2, 3, 4, 5), b, rule="legacy", axis=axis) == (2, 3, 4, 5)


def test_legacy_one_element_b_fits_up_to_the_rank_of_a() -> None:
    assert broadcast_shape((2, 3), (1, 1), rule="legacy") == (2, 3)
    assert broadcast_shape((2, 3), (1,), rule="legacy") == (2, 3)
    assert broadcast_shape((2, 3), (), rule="legacy") == (2, 3)
    assert broadcast_shape((), (), rule="legacy") == ()


@pytest.mark.parametrize(
    ("a", "b"), [((3,), (1, 1)), ((1,), (1, 1)), ((), (1,)), ((2, 3), (1, 1, 1, 1))]
)
def test_legacy_one_element_b_of_higher_rank_than_a_is_rejected(a: tuple, b: tuple) -> None:
    # Sub-1/6: "element size 1 (including a scalar tensor and any tensor with rank equal to or
    # smaller than the first tensor)"; Caffe2 ran any one-element B, the spec does not allow it.
    with pytest.raises(ShapeError) as info:
        broadcast_shape(a, b, rule="legacy")
    shape = lambda s: "[" + ",".join(map(str, s)) + "]"  # noqa: E731
    assert str(info.value) == (
        f"cannot broadcast {shape(a)} and {shape(b)} under the legacy rule: rank of B "
        f"({len(b)}) exceeds rank of A ({len(a)}); broadcast=1 needs rank(B) <= rank(A), "
        "a one-element B included"
    )


def test_legacy_one_element_b_ignores_the_axis() -> None:
    assert broadcast_shape((2, 3), (1,), rule="legacy", axis=7) == (2, 3)
    assert broadcast_shape((2, 3), (), rule="legacy", axis=-5) == (2, 3)


def test_legacy_leading_and_trailing_ones_of_b_broadcast() -> None:
    assert broadcast_shape((2, 3, 4, 5), (1, 3, 1), rule="legacy", axis=0) == (2, 3, 4, 5)
    assert broadcast_shape((2, 3, 4, 5), (1, 4, 1), rule="legacy") == (2, 3, 4, 5)


def test_legacy_inner_one_of_b_does_not_expand() -> None:
    with pytest.raises(ShapeError) as info:
        broadcast_shape((2, 3, 4, 5), (3, 1, 5), rule="legacy", axis=1)
    assert str(info.value) == (
        "cannot broadcast [2,3,4,5] and [3,1,5] under the legacy rule: "
        "dim 2 of A (4) does not fit dim 1 of B (1)"
    )


def test_legacy_output_is_a_even_where_a_has_ones() -> None:
    # numpy would give (2, 3); legacy keeps A's shape and needs B's dims to equal A's.
    with pytest.raises(ShapeError, match="dim 1 of A \\(1\\) does not fit dim 0 of B \\(3\\)"):
        broadcast_shape((2, 1), (3,), rule="legacy")


def test_legacy_b_of_higher_rank_is_rejected() -> None:
    with pytest.raises(ShapeError, match=r"\[3\] and \[2,3\] under the legacy rule: rank of B"):
        broadcast_shape((3,), (2, 3), rule="legacy")


@pytest.mark.parametrize("axis", [-2, 3, 4])
def test_legacy_axis_outside_0_to_rank_difference_is_rejected(axis: int) -> None:
    with pytest.raises(ShapeError, match=f"legacy rule: axis {axis} is outside \\[0, 2\\]"):
        broadcast_shape((2, 3, 4, 5), (4, 5), rule="legacy", axis=axis)


def test_legacy_minus_one_and_none_mean_suffix_alignment() -> None:
    for axis in (None, -1):
        assert broadcast_shape((2, 3, 4), (3, 4), rule="legacy", axis=axis) == (2, 3, 4)
        with pytest.raises(ShapeError):
            broadcast_shape((2, 3, 4), (2, 3), rule="legacy", axis=axis)


def test_legacy_symbol_inside_b_is_assumed_equal_to_a() -> None:
    assert assumptions((2, 3, 4), (2, "N", 4), rule="legacy", axis=0) == ((2, 3, 4), [(3, "N")])
    assert assumptions(("S", 3, 4), (5, "N", 4), rule="legacy", axis=0) == (
        ("S", 3, 4),
        [("S", 5), (3, "N")],
    )


def test_legacy_symbol_at_the_edge_of_b_may_be_a_trimmed_one() -> None:
    # B=(N, 4): N = 1 is trimmed, N = 3 matches; either way the output is A and nothing is forced.
    assert assumptions((2, 3, 4), ("N", 4), rule="legacy") == ((2, 3, 4), [])


def test_legacy_unknown_b_of_higher_rank_is_rejected_even_if_one_element() -> None:
    for a, b in (((), (None, 1)), ((3,), ("N", "M"))):
        with pytest.raises(ShapeError, match="one-element B included"):
            broadcast_shape(a, b, rule="legacy")


def test_legacy_unknown_b_outside_the_axis_range_may_be_one_element() -> None:
    assert assumptions((3,), ("N",), rule="legacy", axis=1) == ((3,), [("N", 1)])
    assert assumptions((3, 4), (None, 1), rule="legacy", axis=5) == ((3, 4), [])


def test_legacy_static_one_inside_a_symbolic_a_is_assumed() -> None:
    assert assumptions(("S", "T", 4), (3, 1, 4), rule="legacy") == (
        ("S", "T", 4),
        [("S", 3), ("T", 1)],
    )


class Caffe2Enforce(Exception):
    """A CAFFE_ENFORCE that fails."""


def caffe2_legacy_sub(a: np.ndarray, b: np.ndarray, axis: int | None) -> np.ndarray:
    """A - B the way Caffe2's BinaryElementwiseWithArgsOp runs with legacy broadcast: a
    one-element B goes against A flattened; otherwise ComputeLegacyBroadcastSizes splits A into
    (pre, n, post) and B into (n, 1), enforcing every condition on the way. One change, the
    ONNX spec's: a one-element B must not have a higher rank than A (Caffe2 ran it)."""
    if axis is None:
        axis = -1  # the op's default
    if a.ndim < b.ndim:
        raise Caffe2Enforce("input1 should have a smaller or equal number of dimensions")
    if b.size == 1:
        return (a.reshape(a.size) - b.reshape(1)).reshape(a.shape)
    if axis == -1:
        axis = a.ndim - b.ndim
    if not 0 <= axis <= a.ndim - b.ndim:
        raise Caffe2Enforce("Broadcast axis should be in the range of [0, A.ndim() - B.ndim()]")
    start = 0
    while start < b.ndim and b.shape[start] == 1:
        start += 1
    end = b.ndim - 1
    while end >= start and b.shape[end] == 1:
        end -= 1
    pre = math.prod(a.shape[: axis + start])
    n = 1
    for i in range(start, end + 1):
        if a.shape[i + axis] != b.shape[i]:
            raise Caffe2Enforce("Broadcast dimension mismatch.")
        n *= b.shape[i]
    post = math.prod(a.shape[axis + end + 1 :])
    c = a.reshape(pre, n, post) - b.reshape(n, 1)
    return c.reshape(a.shape)


@st.composite
def legacy_cases(draw: st.DrawFn) -> tuple[tuple[int, ...], tuple[int, ...], int | None]:
    """A, B and axis: B cut from A (then edge dims set to 1, or any dim changed) or random."""
    a = tuple(draw(st.lists(st.integers(0, 4), max_size=5)))
    axis = draw(st.one_of(st.none(), st.integers(-3, len(a) + 1)))
    kind = draw(st.sampled_from(["cut", "random", "ones"]))
    if kind == "random":
        return a, tuple(draw(st.lists(st.integers(0, 4), max_size=5))), axis
    if kind == "ones":
        return a, (1,) * draw(st.integers(0, 6)), axis
    start = draw(st.integers(0, len(a)))
    stop = draw(st.integers(start, len(a)))
    b = list(a[start:stop])
    lead = draw(st.integers(0, len(b)))
    trail = draw(st.integers(0, len(b) - lead))
    b[:lead] = [1] * lead
    b[len(b) - trail :] = [1] * trail
    if b and draw(st.integers(0, 3)) == 0:
        b[draw(st.integers(0, len(b) - 1))] = draw(st.integers(0, 4))
    if draw(st.booleans()):
        axis = start
    return a, tuple(b), axis


@SETTINGS
@given(legacy_cases())
def test_legacy_rule_matches_caffe2_on_real_arrays(
    case: tuple[tuple[int, ...], tuple[int, ...], int | None],
) -> None:
    a_shape, b_shape, axis = case
    a = np.arange(math.prod(a_shape), dtype=np.float64).reshape(a_shape)
    b = np.arange(math.prod(b_shape), dtype=np.float64).reshape(b_shape) * 7 + 1
    try:
        c = caffe2_legacy_sub(a, b, axis)
    except Caffe2Enforce:
        with pytest.raises(ShapeError, match="legacy rule"):
            broadcast_shape(a_shape, b_shape, rule="legacy", axis=axis)
        return
    # The oracle itself: B lands on A's dims from axis, as the ONNX doc describes.
    if b.size == 1:
        placed = b.reshape(())
    else:
        at = len(a_shape) - len(b_shape) if axis in (None, -1) else axis
        placed = b.reshape((1,) * at + b_shape + (1,) * (len(a_shape) - at - len(b_shape)))
    np.testing.assert_array_equal(c, a - placed)
    assert broadcast_shape(a_shape, b_shape, rule="legacy", axis=axis) == c.shape


# --- pdpd: OpenVINO PartialShape::broadcast_merge_into ------------------------------------------


@pytest.mark.parametrize(
    ("b", "axis"),
    [  # OpenVINO broadcast rules, PDPD examples, all on A = (2, 3, 4, 5)
        ((3, 4), 1),
        ((3, 1), 1),
        ((), -1),
        ((5,), -1),
        ((5,), 3),
        ((1, 3), 0),
    ],
)
def test_pdpd_documented_examples(b: tuple, axis: int) -> None:
    assert broadcast_shape((2, 3, 4, 5), b, rule="pdpd", axis=axis) == (2, 3, 4, 5)


def test_pdpd_trailing_ones_of_b_must_still_lie_inside_a() -> None:
    # broadcast_merge_into checks src_rank + axis > dst_rank before looking at any dim.
    with pytest.raises(ShapeError, match=r"\[2,3\] and \[3,1\] under the pdpd rule: B placed"):
        broadcast_shape((2, 3), (3, 1), rule="pdpd", axis=1)
    with pytest.raises(ShapeError):
        broadcast_shape((2, 3), (3, 1), rule="pdpd", axis=-1)  # axis 0: 3 > 2
    assert broadcast_shape((2, 3, 1), (3, 1), rule="pdpd", axis=1) == (2, 3, 1)


def test_pdpd_axis_below_minus_one_is_rejected_even_for_a_scalar_b() -> None:
    with pytest.raises(ShapeError, match="pdpd rule: axis -2 is below -1"):
        broadcast_shape((2, 3), (), rule="pdpd", axis=-2)


def test_pdpd_scalar_b_fits_from_every_axis_up_to_rank_a() -> None:
    for axis in (-1, 0, 1, 2):
        assert broadcast_shape((2, 3), (), rule="pdpd", axis=axis) == (2, 3)
    with pytest.raises(ShapeError, match="axis 3 runs past the end of A"):
        broadcast_shape((2, 3), (), rule="pdpd", axis=3)


def test_pdpd_equal_ranks_fit_only_from_axis_0() -> None:
    assert broadcast_shape((2, 3), (2, 3), rule="pdpd", axis=0) == (2, 3)
    assert broadcast_shape((2, 3), (2, 3), rule="pdpd", axis=-1) == (2, 3)
    with pytest.raises(ShapeError):
        broadcast_shape((2, 3), (2, 3), rule="pdpd", axis=1)


def test_pdpd_b_of_higher_rank_is_rejected_even_when_all_ones() -> None:
    with pytest.raises(ShapeError, match="rank of B \\(3\\) exceeds rank of A \\(2\\)"):
        broadcast_shape((2, 3), (1, 1, 1), rule="pdpd")


def test_pdpd_b_all_ones_inside_a_fits() -> None:
    assert broadcast_shape((2, 3, 4), (1, 1), rule="pdpd", axis=0) == (2, 3, 4)


def test_pdpd_b_never_broadcasts_a() -> None:
    with pytest.raises(ShapeError, match="dim 1 of A \\(1\\) does not fit dim 0 of B \\(3\\)"):
        broadcast_shape((2, 1), (3,), rule="pdpd")
    with pytest.raises(ShapeError, match="dim 0 of A \\(0\\) does not fit dim 0 of B \\(1\\)"):
        broadcast_shape((0,), (1,), rule="pdpd")


def test_pdpd_zero_of_b_merges_into_a_one_of_a() -> None:
    assert broadcast_shape((2, 1), (2, 0), rule="pdpd", axis=0) == (2, 0)


def test_pdpd_symbols() -> None:
    assert assumptions(("N", 4), ("N",), rule="pdpd", axis=0) == (("N", 4), [])
    assert assumptions(("N", 4), (1,), rule="pdpd", axis=0) == (("N", 4), [])
    # B's 3 cannot go into an A dim of 1, so N must be 3
    assert assumptions(("N", 4), (3,), rule="pdpd", axis=0) == ((3, 4), [("N", 3)])
    # B's N is 1 or 3
    assert assumptions((3, 4), ("N",), rule="pdpd", axis=0) == ((3, 4), [])
    # B's N is 0 or 1 and wins over A's 1
    assert assumptions((1, 4), ("N",), rule="pdpd", axis=0) == (("N", 4), [])
    assert assumptions(("N", 4), ("M",), rule="pdpd", axis=0) == (("N", 4), [("N", "M")])
    assert assumptions(("N", 4), (None,), rule="pdpd", axis=0) == ((None, 4), [])


# --- any rule ------------------------------------------------------------------------------------


def test_unknown_rule_is_a_value_error_listing_the_rules() -> None:
    with pytest.raises(ValueError, match="numpy, legacy, none, pdpd"):
        broadcast_shape((1,), (1,), rule="bidirectional")
    assert RULES == ("numpy", "legacy", "none", "pdpd")


# --- OpenVINO itself --------------------------------------------------------------------------


OvSubtract = Callable[[Sequence[Dim], Sequence[Dim], str, int], "tuple[Dim, ...] | None"]


@pytest.fixture(scope="module")
def ov_subtract() -> OvSubtract:
    """Subtract-1 built by OpenVINO on two Parameters; its output shape, or None if rejected.

    openvino.opset1.subtract takes no axis and leaves a pdpd axis at 0, not -1; the node
    factory sets AutoBroadcastSpec's axis through the ``auto_broadcast.auto_broadcast_axis``
    attribute (the name get_attributes() shows)."""
    ov = pytest.importorskip("openvino")
    from openvino.utils.node_factory import NodeFactory

    factory = NodeFactory("opset1")

    def subtract(a: Sequence[Dim], b: Sequence[Dim], mode: str, axis: int) -> tuple | None:
        params = [
            ov.opset1.parameter(ov.PartialShape([-1 if d is None else d for d in s]), ov.Type.f32)
            for s in (a, b)
        ]
        attrs: dict[str, object] = {"auto_broadcast": mode}
        if mode == "pdpd":
            attrs["auto_broadcast.auto_broadcast_axis"] = axis
        try:
            node = factory.create("Subtract", [p.output(0) for p in params], attrs)
        except RuntimeError as error:
            assert "Argument shapes are inconsistent" in str(error)
            return None
        model = ov.Model([node.output(0)], params)
        shape = model.output(0).get_partial_shape()
        out: list[Dim] = []
        for d in shape:
            if d.is_static:
                out.append(d.get_length())
            else:
                assume(d.get_min_length() == 0 and d.get_max_length() == -1)  # no intervals
                out.append(None)
        return tuple(out)

    return subtract


def ours(a: Sequence[Dim], b: Sequence[Dim], mode: str, axis: int) -> tuple | None:
    try:
        return broadcast_shape(a, b, rule=mode, axis=axis)
    except ShapeError:
        return None


def test_openvino_agrees_on_the_edge_cases(ov_subtract: OvSubtract) -> None:
    cases = [
        ((2, 3), (3, 1), 1),
        ((2, 3), (3, 1), -1),
        ((2, 3, 1), (3, 1), 1),
        ((2, 3), (), 2),
        ((2, 3), (), 3),
        ((2, 3), (), -2),
        ((), (), -1),
        ((2, 3), (1, 1, 1), -1),
        ((2, 3), (2, 3), 1),
        ((1,), (0,), -1),
        ((0,), (1,), -1),
        ((4, 3), (2, 1), 0),
        ((2, 3), (3,), 5),
        ((2, 3), (3,), 0),
    ]
    for a, b, axis in cases:
        for mode in ("none", "numpy", "pdpd"):
            assert ours(a, b, mode, axis) == ov_subtract(a, b, mode, axis), (a, b, mode, axis)
    assert ov_subtract((2, 3), (3, 1), "pdpd", 1) is None  # not a vacuous comparison
    assert ov_subtract((1,), (0,), "pdpd", -1) == (0,)


@st.composite
def ov_cases(draw: st.DrawFn, dims: st.SearchStrategy) -> tuple[tuple, tuple, str, int]:
    a = tuple(draw(st.lists(dims, max_size=4)))
    mode = draw(st.sampled_from(["none", "numpy", "pdpd"]))
    axis = draw(st.integers(-2, 5))
    if draw(st.booleans()):
        b = tuple(draw(st.lists(dims, max_size=4)))
    else:  # a piece of A with some dims set to 1
        start = draw(st.integers(0, len(a)))
        stop = draw(st.integers(start, len(a)))
        b = tuple(1 if draw(st.integers(0, 2)) == 0 else d for d in a[start:stop])
        if draw(st.booleans()):
            axis = start
    return a, b, mode, axis


@SETTINGS
@given(ov_cases(st.integers(0, 4)))
def test_openvino_agrees_on_static_shapes(
    ov_subtract: OvSubtract, case: tuple[tuple, tuple, str, int]
) -> None:
    a, b, mode, axis = case
    assert ours(a, b, mode, axis) == ov_subtract(a, b, mode, axis)


@SETTINGS
@given(ov_cases(st.one_of(st.none(), st.integers(0, 3))))
def test_openvino_agrees_on_dynamic_dims(
    ov_subtract: OvSubtract, case: tuple[tuple, tuple, str, int]
) -> None:
    a, b, mode, axis = case
    assert ours(a, b, mode, axis) == ov_subtract(a, b, mode, axis)


def test_a_clamp_of_a_symbol_broadcast_against_the_symbol_is_the_symbol() -> None:
    """BERT's position ids: [:, :S] of a [1, 512] buffer is min(512, S) long, expanded to
    [B, S]. Past S = 512 neither dim is 1, so the model runs only where they are equal: S.
    Other pairs of one symbol broadcast to the exact expression of any two dims."""
    assert broadcast_shape((1, "min(512, S)"), ("B", "S")) == ("B", "S")
    assert broadcast_shape(("B", "S"), (1, "min(512, S)")) == ("B", "S")
    (dim,) = broadcast_shape(("min(1, S)",), ("S",))  # min(1, S) is 1 or 0
    assert [evaluate(dim, {"S": s}) for s in (0, 1, 7)] == [0, 1, 7]


def test_bert_position_ids_sliced_and_expanded_are_what_onnxruntime_computes() -> None:
    ort = pytest.importorskip("onnxruntime")
    from onnxforge import io
    from onnxforge.shape_infer import infer
    from onnxforge.shape_infer.symbolic import evaluate
    from onnxforge.testing import model_from_text

    model = model_from_text(
        """<ir_version: 8, opset_import: ["" : 17]>
    g (int64[B, S] ids) => (int64[?, ?] y) {
        buffer = Constant <value = int64[1, 512] {"""
        + ", ".join(map(str, range(512)))
        + """}> ()
        shape = Shape(ids)
        one = Constant <value = int64[1] {1}> ()
        two = Constant <value = int64[1] {2}> ()
        zero = Constant <value = int64[1] {0}> ()
        s = Slice(shape, one, two)
        p = Slice(buffer, zero, s, one)
        y = Expand(p, shape)
    }"""
    )
    proto = io.to_proto(model)
    infer(model)
    assert model.graph.outputs[0].type.shape == ("B", "S")
    session = ort.InferenceSession(proto.SerializeToString())
    for b, s in ((2, 7), (1, 512), (3, 1)):
        (y,) = session.run(None, {"ids": np.zeros((b, s), np.int64)})
        shape = [evaluate(d, {"B": b, "S": s}) for d in model.graph.outputs[0].type.shape]
        assert shape == list(y.shape)
