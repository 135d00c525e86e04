"""Symbolic dims: canonical printing, sound arithmetic, evaluation."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from onnxforge.ir import UnknownDim
from onnxforge.shape_infer.symbolic import (
    dim_add,
    dim_ceildiv,
    dim_div_exact,
    dim_floordiv,
    dim_max,
    dim_min,
    dim_mul,
    dim_product,
    dim_sub,
    evaluate,
    is_unknown_symbol,
    parse,
    same_dim,
    to_dim,
)


def test_sums_print_canonically_whatever_the_order() -> None:
    assert dim_add("N", "M") == "M+N"
    assert dim_add("M", "N") == "M+N"
    assert same_dim("N+M", "M+N")


def test_subtracting_a_symbol_from_itself_gives_a_static_dim() -> None:
    assert dim_sub(dim_add("N", 3), "N") == 3


def test_products_cancel_in_exact_division() -> None:
    assert dim_div_exact(dim_product(["N", "S", 768]), dim_product(["N", "S", 12])) == 64
    assert dim_div_exact("N", "M") is None
    assert dim_div_exact(10, 4) is None


def test_division_that_may_not_be_exact_is_written_as_floor_or_ceil() -> None:
    assert dim_ceildiv("N", 3) == "ceil(N/3)"
    assert dim_floordiv("N", 2) == "floor(N/2)"
    assert dim_floordiv("2*N", 2) == "N"


def test_unknowns_never_produce_an_expression() -> None:
    assert dim_add("N", None) is None
    assert dim_mul(None, 0) == 0
    assert not same_dim(UnknownDim("unk__1"), None)


def test_a_named_unknown_is_one_fixed_size_that_arithmetic_keeps() -> None:
    # skl2onnx's unnamed batch, named unk__3 by inference, reshaped [?, 1, 6] -> [-1, 6]
    fresh = UnknownDim("unk__3")
    assert dim_mul(fresh, 2) == "2*unk__3"
    assert dim_div_exact(dim_mul(fresh, 6), 6) == fresh
    assert isinstance(dim_product([fresh]), UnknownDim)  # still possibly 1 to broadcasting


def test_a_models_own_unk_name_is_a_real_symbol() -> None:
    # tf2onnx names batch dims unk__214: only the dims inference names are unknowns.
    assert dim_mul("unk__214", 2) == "2*unk__214"
    assert dim_div_exact(dim_mul("unk__214", 2048), 2048) == "unk__214"
    assert not is_unknown_symbol("unk__214")
    assert is_unknown_symbol(UnknownDim("unk__0"))


def test_text_that_is_no_expression_is_one_symbol() -> None:
    assert to_dim(parse("batch size")) == "batch size"  # written back as the model spelled it
    assert str(parse("batch size")) == "'batch size'"  # quoted inside an expression
    assert evaluate("batch size", {"batch size": 4}) == 4
    assert dim_mul("batch size", 2) == "2*'batch size'"


def test_a_product_of_sums_keeps_its_meaning_when_written() -> None:
    # YOLOv8: (floor(H)+1)*(floor(W)+1) had been written "floor(H) + 1*floor(W) + 1".
    h, w = "floor(H) + 1", "floor(W) + 1"  # as another tool wrote them
    product = dim_mul(h, w)
    assert evaluate(product, {"H": 2, "W": 4}) == 15
    odd = dim_mul("height px", "width px")  # no expression: two names
    assert odd == "'height px'*'width px'"
    assert evaluate(odd, {"height px": 3, "width px": 5}) == 15
    grid = dim_mul(dim_add(dim_floordiv("H", 32), 1), dim_add(dim_floordiv("W", 32), 1))
    assert evaluate(grid, {"H": 640, "W": 480}) == 21 * 16
    assert to_dim(parse(str(grid))) == grid


def test_floor_of_a_sum_is_parenthesized() -> None:
    assert dim_floordiv(dim_add("S", -1), 2) == "floor((S+1)/2)-1"
    assert dim_ceildiv(dim_mul("N", 3), 2) == "N+ceil(N/2)"
    assert dim_floordiv(dim_floordiv("N", 2), 3) == "floor(N/6)"


def test_min_and_max_decide_when_the_difference_is_constant() -> None:
    assert dim_min("N", dim_add("N", 3)) == "N"
    assert dim_max("N", dim_add("N", 3)) == "N+3"
    assert dim_max("N", "M") == "max(M, N)"
    assert evaluate(dim_max("N", "M"), {"N": 2, "M": 7}) == 7
    assert str(parse("Max(1, s50)")) == "max(1, s50)"  # sympy's spelling reads too


def test_evaluate_reads_floor_and_ceil_back() -> None:
    assert evaluate("ceil(N/3)", {"N": 7}) == 3
    assert evaluate("floor(N/3)+M", {"N": 7, "M": 1}) == 3
    assert evaluate("N*M-1", {"N": 2}) is None


ints = st.integers(min_value=0, max_value=50)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(ints, ints, st.integers(min_value=1, max_value=7))
def test_arithmetic_on_symbols_evaluates_like_arithmetic_on_ints(n: int, m: int, k: int) -> None:
    env = {"N": n, "M": m}
    assert evaluate(dim_add("N", dim_mul("M", k)), env) == n + m * k
    assert evaluate(dim_sub(dim_mul("N", "M"), "N"), env) == n * m - n
    assert evaluate(dim_ceildiv(dim_add("N", "M"), k), env) == -(-(n + m) // k)
    assert evaluate(dim_floordiv(dim_add("N", 1), k), env) == (n + 1) // k


@pytest.mark.parametrize("text", ["N+M", "2*N*M-3", "ceil((N+1)/4)", "floor(N/2)"])
def test_printed_expressions_parse_back_to_themselves(text: str) -> None:
    assert str(parse(str(parse(text)))) == str(parse(text))


def test_a_division_by_a_constant_is_reduced_by_the_common_factor() -> None:
    from onnxforge.shape_infer.symbolic import dim_ceildiv, dim_floordiv, evaluate

    assert dim_floordiv("4*h", 8) == "floor(h/2)"
    assert dim_floordiv("24*F*T", 2520) == "floor((F*T)/105)"
    assert dim_ceildiv("2*N+2", 4) == "ceil((N+1)/2)"
    for n in range(12):
        assert evaluate(dim_floordiv("6*N+3", 9), {"N": n}) == (6 * n + 3) // 9
