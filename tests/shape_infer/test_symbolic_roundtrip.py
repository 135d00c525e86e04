"""Every expression the engine writes to dim_param parses back to itself and means the same
integers: random expressions built with the engine's own operations, over names of every
spelling a model may use, against exact Python integer arithmetic."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from onnxforge.ir import Dim
from onnxforge.shape_infer.symbolic import (
    Expr,
    dim_add,
    dim_ceildiv,
    dim_div_exact,
    dim_floordiv,
    dim_max,
    dim_min,
    dim_mul,
    dim_sub,
    evaluate,
    parse,
    quote,
    to_dim,
)

NAMES = [
    "N",
    "batch",
    "unk__214",  # tf2onnx
    "p2o.DynamicDimension.1",  # paddle2onnx
    "batch size",
    "?",
    "a-b",  # reads as an expression unless quoted
    "it's",
    "back\\slash",
    "floor",
    "Max",
    "12",
    "N+1",
    "floor(H) + 1",
    "名前",
    "",
]
Env = dict[str, int]


@dataclass(frozen=True)
class Case:
    """A dim the engine computed and the integer function it must stand for."""

    dim: Dim
    value: Callable[[Env], int]
    text: str  # how it was built, for failure messages


def _name(name: str) -> Case:
    return Case(to_dim(Expr.atom(name)), lambda env: env[name], quote(name))


def _int(k: int) -> Case:
    return Case(k, lambda env: k, str(k))


def _combine(op: str, a: Case, b: Case) -> Case | None:
    if op == "+":
        return Case(
            dim_add(a.dim, b.dim), lambda e: a.value(e) + b.value(e), f"({a.text}+{b.text})"
        )
    if op == "-":
        return Case(
            dim_sub(a.dim, b.dim), lambda e: a.value(e) - b.value(e), f"({a.text}-{b.text})"
        )
    if op == "*":
        return Case(
            dim_mul(a.dim, b.dim), lambda e: a.value(e) * b.value(e), f"({a.text}*{b.text})"
        )
    if op == "min":
        return Case(dim_min(a.dim, b.dim), lambda e: min(a.value(e), b.value(e)), f"min({a.text})")
    if op == "max":
        return Case(dim_max(a.dim, b.dim), lambda e: max(a.value(e), b.value(e)), f"max({a.text})")
    return None


def _divide(op: str, a: Case, k: int) -> Case:
    if op == "floor":
        return Case(dim_floordiv(a.dim, k), lambda e: a.value(e) // k, f"floor({a.text}/{k})")
    return Case(dim_ceildiv(a.dim, k), lambda e: -(-a.value(e) // k), f"ceil({a.text}/{k})")


leaves = st.one_of(st.sampled_from(NAMES).map(_name), st.integers(-5, 40).map(_int))


def _extend(children: st.SearchStrategy[Case]) -> st.SearchStrategy[Case]:
    binary = st.builds(
        _combine, st.sampled_from(["+", "-", "*", "min", "max"]), children, children
    ).filter(lambda c: c is not None)
    division = st.builds(_divide, st.sampled_from(["floor", "ceil"]), children, st.integers(1, 7))
    return st.one_of(binary, division)  # type: ignore[arg-type]


cases = st.recursive(leaves, _extend, max_leaves=8)
bindings = st.fixed_dictionaries({name: st.integers(0, 300) for name in NAMES})


@settings(max_examples=600, deadline=None, derandomize=True)
@given(cases, bindings)
def test_written_expressions_parse_back_to_themselves_and_mean_the_same(
    case: Case, env: Env
) -> None:
    dim = case.dim
    assert dim is not None, case.text  # no unknown enters: every result is written out
    if isinstance(dim, int):
        assert dim == case.value(env), case.text
        return
    assert to_dim(parse(dim)) == dim, (case.text, dim)  # the written text is a fixed point
    assert evaluate(dim, env) == case.value(env), (case.text, dim)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(cases, st.integers(1, 9), bindings)
def test_exact_division_is_exact_or_refused(case: Case, k: int, env: Env) -> None:
    product = dim_mul(case.dim, k)
    back = dim_div_exact(product, k)
    assert back is not None
    assert evaluate(back, env) == case.value(env), case.text
