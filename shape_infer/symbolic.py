"""Symbolic dimensions: integer polynomials over dim names, with floor/ceil division by constants.

A dim is ``int`` (static), ``str`` (a name such as ``batch`` or an expression such as ``N+M``,
exactly what ONNX writes to ``dim_param``) or ``None`` (unknown). Arithmetic parses the strings
into polynomials, computes, and prints a canonical string back, so ``N+M`` and ``M+N`` are the
same dim. Anything that cannot be written soundly (division that may not be exact, a product
with an unknown) gives ``None``; the engine names such dims with fresh ``unk__`` symbols.
"""

from __future__ import annotations

__all__ = [
    "UNKNOWN_PREFIX",
    "Expr",
    "dim_add",
    "dim_ceildiv",
    "dim_div_exact",
    "dim_product",
    "dim_floordiv",
    "dim_mul",
    "dim_neg",
    "dim_sub",
    "evaluate",
    "is_unknown_symbol",
    "nonnegative",
    "parse",
    "same_dim",
    "to_dim",
]

import functools
import re
from collections.abc import Iterable, Mapping

from onnxforge.ir import Dim

UNKNOWN_PREFIX = "unk__"
"""Fresh names for dims nothing more is known about; never equated with other symbols."""

Monomial = tuple[str, ...]  # sorted atom names; () is the constant term


class Expr:
    """An integer polynomial: {monomial: coefficient}. Atoms are names or ``floor(E/c)`` forms."""

    __slots__ = ("terms",)

    def __init__(self, terms: Mapping[Monomial, int]) -> None:
        self.terms = {m: c for m, c in terms.items() if c != 0}

    @staticmethod
    def const(value: int) -> Expr:
        return Expr({(): value})

    @staticmethod
    def atom(name: str) -> Expr:
        return Expr({(name,): 1})

    def constant(self) -> int | None:
        """The value if the expression has no symbols."""
        if not self.terms:
            return 0
        if len(self.terms) == 1 and () in self.terms:
            return self.terms[()]
        return None

    def __add__(self, other: Expr) -> Expr:
        terms = dict(self.terms)
        for m, c in other.terms.items():
            terms[m] = terms.get(m, 0) + c
        return Expr(terms)

    def __neg__(self) -> Expr:
        return Expr({m: -c for m, c in self.terms.items()})

    def __sub__(self, other: Expr) -> Expr:
        return self + (-other)

    def __mul__(self, other: Expr) -> Expr:
        terms: dict[Monomial, int] = {}
        for m1, c1 in self.terms.items():
            for m2, c2 in other.terms.items():
                m = tuple(sorted(m1 + m2))
                terms[m] = terms.get(m, 0) + c1 * c2
        return Expr(terms)

    def divide_exactly(self, divisor: int) -> Expr | None:
        """self / divisor when every coefficient divides, else None."""
        if divisor == 0 or any(c % divisor for c in self.terms.values()):
            return None
        return Expr({m: c // divisor for m, c in self.terms.items()})

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Expr) and self.terms == other.terms

    def __hash__(self) -> int:
        return hash(frozenset(self.terms.items()))

    def __str__(self) -> str:
        if not self.terms:
            return "0"
        parts: list[str] = []
        # Higher-degree terms first, then by name; the constant last: "N*M+2*N-1".
        for m in sorted(self.terms, key=lambda m: (-len(m), m)):
            c = self.terms[m]
            body = "*".join(m)
            if not m:
                text = str(abs(c))
            elif abs(c) == 1:
                text = body
            else:
                text = f"{abs(c)}*{body}"
            sign = "-" if c < 0 else "+"
            parts.append(text if not parts and c > 0 else sign + text)
        return "".join(parts)


_TOKEN = re.compile(r"\s*(?:(\d+)|(floor|ceil)\s*\(|([A-Za-z_][A-Za-z0-9_.:]*)|(.))")


class _Parser:
    """Recursive descent over + - * / ( ) floor( ) ceil( ) integers and names."""

    def __init__(self, text: str) -> None:
        self.tokens: list[tuple[str, str]] = []
        for number, func, name, other in _TOKEN.findall(text):
            if number:
                self.tokens.append(("int", number))
            elif func:
                self.tokens.append(("func", func))
            elif name:
                self.tokens.append(("name", name))
            elif other.strip():
                self.tokens.append(("op", other))
        self.pos = 0

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self, value: str) -> bool:
        if self.peek() == ("op", value):
            self.pos += 1
            return True
        return False

    def parse(self) -> Expr:
        expr = self.sum()
        if self.peek() is not None:
            raise ValueError("trailing tokens")
        return expr

    def sum(self) -> Expr:
        expr = self.product()
        while True:
            if self.take("+"):
                expr = expr + self.product()
            elif self.take("-"):
                expr = expr - self.product()
            else:
                return expr

    def product(self) -> Expr:
        expr = self.unary()
        while self.take("*"):
            expr = expr * self.unary()
        return expr

    def unary(self) -> Expr:
        if self.take("-"):
            return -self.unary()
        token = self.peek()
        if token is None:
            raise ValueError("unexpected end")
        self.pos += 1
        kind, text = token
        if kind == "int":
            return Expr.const(int(text))
        if kind == "name":
            return Expr.atom(text)
        if kind == "func":
            inner = self.sum()
            if not self.take("/"):
                raise ValueError("floor/ceil need a division")
            number = self.peek()
            if number is None or number[0] != "int":
                raise ValueError("floor/ceil divide by an integer")
            self.pos += 1
            if not self.take(")"):
                raise ValueError("missing )")
            divisor = int(number[1])
            return floordiv(inner, divisor) if text == "floor" else ceildiv(inner, divisor)
        if text == "(":
            inner = self.sum()
            if not self.take(")"):
                raise ValueError("missing )")
            return inner
        raise ValueError(f"unexpected {text!r}")


@functools.lru_cache(maxsize=65536)
def parse(text: str) -> Expr:
    """The polynomial a dim_param spells; a string that is no expression is one atom."""
    try:
        return _Parser(text).parse()
    except (ValueError, RecursionError):
        return Expr.atom(text)


def floordiv(expr: Expr, divisor: int) -> Expr:
    exact = expr.divide_exactly(divisor)
    if exact is not None:
        return exact
    const = expr.constant()
    if const is not None:
        return Expr.const(const // divisor)
    return Expr.atom(f"floor({expr}/{divisor})")


def ceildiv(expr: Expr, divisor: int) -> Expr:
    exact = expr.divide_exactly(divisor)
    if exact is not None:
        return exact
    const = expr.constant()
    if const is not None:
        return Expr.const(-(-const // divisor))
    return Expr.atom(f"ceil({expr}/{divisor})")


def to_dim(expr: Expr) -> Dim:
    const = expr.constant()
    return const if const is not None else str(expr)


def _expr(dim: int | str) -> Expr:
    return Expr.const(dim) if isinstance(dim, int) else parse(dim)


def is_unknown_symbol(dim: Dim) -> bool:
    """True for None and for the fresh ``unk__`` names that stand for it."""
    return dim is None or (isinstance(dim, str) and dim.startswith(UNKNOWN_PREFIX))


def _known(*dims: Dim) -> bool:
    return not any(is_unknown_symbol(d) for d in dims)


def nonnegative(dim: Dim) -> bool:
    """Provably >= 0: a static dim >= 0, or a sum of products of dim names with positive
    coefficients (a dim is never negative)."""
    if dim is None:
        return False
    if isinstance(dim, int):
        return dim >= 0
    return all(c > 0 or (not m and c >= 0) for m, c in parse(dim).terms.items())


def same_dim(a: Dim, b: Dim) -> bool:
    """Provably equal: same static value or the same polynomial (unknowns never are)."""
    if a is None or b is None:
        return False
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    return a == b or _expr(a) == _expr(b)


def dim_add(a: Dim, b: Dim) -> Dim:
    if not _known(a, b):
        return None
    if isinstance(a, int) and isinstance(b, int):
        return a + b
    return to_dim(_expr(a) + _expr(b))  # type: ignore[arg-type]


def dim_sub(a: Dim, b: Dim) -> Dim:
    if not _known(a, b):
        return None
    if isinstance(a, int) and isinstance(b, int):
        return a - b
    return to_dim(_expr(a) - _expr(b))  # type: ignore[arg-type]


def dim_neg(a: Dim) -> Dim:
    return dim_sub(0, a)


def dim_mul(a: Dim, b: Dim) -> Dim:
    if a == 0 or b == 0:
        return 0
    if not _known(a, b):
        return None
    if isinstance(a, int) and isinstance(b, int):
        return a * b
    return to_dim(_expr(a) * _expr(b))  # type: ignore[arg-type]


def dim_floordiv(a: Dim, b: Dim) -> Dim:
    """floor(a / b) for a constant b > 0; a symbolic divisor gives None unless a == k*b."""
    if not _known(a, b):
        return None
    if isinstance(a, int) and isinstance(b, int):
        return a // b if b else None
    if isinstance(b, int):
        return to_dim(floordiv(_expr(a), b)) if b > 0 else None  # type: ignore[arg-type]
    return _divide_by_symbol(a, b)


def dim_ceildiv(a: Dim, b: Dim) -> Dim:
    if not _known(a, b):
        return None
    if isinstance(a, int) and isinstance(b, int):
        return -(-a // b) if b else None
    if isinstance(b, int):
        return to_dim(ceildiv(_expr(a), b)) if b > 0 else None  # type: ignore[arg-type]
    return _divide_by_symbol(a, b)


def dim_product(dims: Iterable[Dim]) -> Dim:
    total: Dim = 1
    for d in dims:
        total = dim_mul(total, d)
    return total


def dim_div_exact(a: Dim, b: Dim) -> Dim:
    """a / b when b divides a exactly as polynomials (N*S*768 / (N*S*12) = 64), else None."""
    if not _known(a, b) or b == 0:
        return None
    if isinstance(a, int) and isinstance(b, int):
        return a // b if a % b == 0 else None
    ea, eb = _expr(a), _expr(b)  # type: ignore[arg-type]
    if len(eb.terms) != 1:
        return _divide_by_symbol(a, b)
    ((monomial, coef),) = eb.terms.items()
    terms: dict[Monomial, int] = {}
    for m, c in ea.terms.items():
        rest = list(m)
        for atom in monomial:
            if atom not in rest:
                return None
            rest.remove(atom)
        if c % coef:
            return None
        terms[tuple(rest)] = c // coef
    return to_dim(Expr(terms))


def _divide_by_symbol(a: Dim, b: Dim) -> Dim:
    """a / b where b is symbolic: exact only when a is a constant multiple of b."""
    ea, eb = _expr(a), _expr(b)  # type: ignore[arg-type]
    for k in range(1, 65):
        if ea == eb * Expr.const(k):
            return k
    return None


def evaluate(dim: Dim, bindings: Mapping[str, int]) -> int | None:
    """The value of a dim given values for its names; None when a name is unbound."""
    if dim is None or isinstance(dim, int):
        return dim
    return _evaluate(parse(dim), bindings)


def _evaluate(expr: Expr, bindings: Mapping[str, int]) -> int | None:
    total = 0
    for monomial, coef in expr.terms.items():
        term = coef
        for atom in monomial:
            value = _evaluate_atom(atom, bindings)
            if value is None:
                return None
            term *= value
        total += term
    return total


_DIVISION = re.compile(r"^(floor|ceil)\((.*)/(\d+)\)$")


def _evaluate_atom(atom: str, bindings: Mapping[str, int]) -> int | None:
    if atom in bindings:
        return bindings[atom]
    match = _DIVISION.match(atom)
    if match is None:
        return None
    inner = _evaluate(parse(match.group(2)), bindings)
    if inner is None:
        return None
    divisor = int(match.group(3))
    return inner // divisor if match.group(1) == "floor" else -(-inner // divisor)
