"""Symbolic dims: canonical printing, sound arithmetic, evaluation."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from onnxforge.shape_infer.symbolic import (
    dim_add,
    dim_ceildiv,
    dim_div_exact,
    dim_floordiv,
    dim_mul,
    dim_product,
    dim_sub,
    evaluate,
    parse,
    same_dim,
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
    assert dim_mul("unk__3", 2) is None
    assert dim_mul(None, 0) == 0
    assert not same_dim("unk__1", None)


def test_text_that_is_no_expression_is_one_symbol() -> None:
    assert str(parse("batch size")) == "batch size"
    assert evaluate("batch size", {"batch size": 4}) == 4


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
