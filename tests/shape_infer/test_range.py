"""Range's length: max(ceil((limit - start) / delta), 0), symbols included."""

from __future__ import annotations

import pytest

from onnxforge.ir import TensorType
from onnxforge.shape_infer import infer
from onnxforge.shape_infer.symbolic import evaluate, is_unknown_symbol
from onnxforge.testing import model_from_text


def _range_length(start: str, limit: str, delta: str) -> object:
    """The length inference writes for Range(start, limit, delta) over x: float[N]; each
    argument is a node reading ``n``, x's length, or none."""
    model = model_from_text(f"""
    <ir_version: 8, opset_import: ["" : 18]>
    g (float[N] x) => (int64[?] y) {{
        s = Shape(x)
        zero = Constant <value = int64 {{0}}> ()
        n = Gather <axis = 0> (s, zero)
        start = {start}
        limit = {limit}
        delta = {delta}
        y = Range(start, limit, delta)
    }}""")
    report = infer(model)
    assert not report.errors, report.errors
    t = model.graph.outputs[0].type
    assert isinstance(t, TensorType) and t.shape is not None
    return t.shape[0]


def _const(value: int) -> str:
    return f"Constant <value = int64 {{{value}}}> ()"


@pytest.mark.parametrize(
    ("start", "limit", "delta"),
    [
        (5, "n", 1),  # boundary fuzz: written N-5, which is -5 at N=0 (onnxruntime: 0)
        ("n", -2, 1),  # written -N-2
        ("n", 0, -1),
        (0, "n", 3),
        (3, "n", -2),
        ("n", 7, -3),
    ],
)
def test_range_length_with_a_symbolic_bound_is_never_negative(
    start: int | str, limit: int | str, delta: int
) -> None:
    text = ["Identity(n)" if a == "n" else _const(int(a)) for a in (start, limit)]
    dim = _range_length(text[0], text[1], _const(delta))
    for n in range(9):
        s, lim = (n if a == "n" else int(a) for a in (start, limit))
        assert evaluate(dim, {"N": n}) == len(range(s, lim, delta)), (dim, n)


def test_range_from_zero_to_a_dim_is_that_dim() -> None:
    assert _range_length(_const(0), "Identity(n)", _const(1)) == "N"


@pytest.mark.parametrize(
    ("start", "limit", "delta"),
    [
        # onnxruntime counts ceil((double(limit) - double(start)) / double(delta)): 1 here,
        # where the exact count (1, then 1 + INT64_MIN > INT64_MIN) is 2
        (1, -(1 << 63), -(1 << 63)),
        (0, (1 << 63) - 1, (1 << 62)),
    ],
)
def test_range_past_2_to_the_53_is_unknown(start: int, limit: int, delta: int) -> None:
    dim = _range_length(_const(start), _const(limit), _const(delta))
    assert dim is None or is_unknown_symbol(dim)


def test_range_of_int64_extremes_does_not_crash_inference() -> None:
    # boundary fuzz: Range(INT64_MIN, 1, 1) with 1 read from Shape listed its 2**63 elements
    # (OverflowError in the value rule, an internal error)
    model = model_from_text("""
    <ir_version: 8, opset_import: ["" : 18]>
    g (float[1] x) => (int64[?] y) {
        s = Shape(x)
        zero = Constant <value = int64 {0}> ()
        one = Gather <axis = 0> (s, zero)
        start = Constant <value = int64 {-9223372036854775808}> ()
        y = Range(start, one, one)
    }""")
    report = infer(model)
    assert not any(e.internal for e in report.errors), report.errors
