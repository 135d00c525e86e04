"""Symbolic dimensions: integer polynomials over dim names, with floor/ceil division by
constants and min/max.

A dim is ``int`` (static), ``str`` (a name such as ``batch`` or an expression such as ``N+M``,
exactly what ONNX writes to ``dim_param``), an ``UnknownDim`` (a name inference gave to a dim it
knows nothing about) or ``None`` (unknown). Arithmetic parses the strings into polynomials,
computes, and prints a canonical string back, so ``N+M`` and ``M+N`` are the same dim. A model's
name is any string: one the syntax cannot hold (``batch size``, ``a-b``) is quoted inside an
expression (``'batch size'*2``), so every written expression parses back to itself. Anything
that cannot be written soundly (division that may not be exact, a product with an unknown)
gives ``None``; the engine names such dims with fresh ``UnknownDim``s.
"""

from __future__ import annotations

__all__ = [
    "UNKNOWN_PREFIX",
    "Apply",
    "Expr",
    "at_least_one",
    "never_one",
    "dim_add",
    "dim_max",
    "dim_min",
    "dim_ceildiv",
    "dim_div_exact",
    "dim_product",
    "dim_floordiv",
    "dim_mul",
    "dim_neg",
    "dim_sub",
    "evaluate",
    "evaluate_expr",
    "is_unknown_symbol",
    "names",
    "nonnegative",
    "parse",
    "quote",
    "same_dim",
    "to_dim",
]

import functools
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence, Set
from dataclasses import dataclass

from onnxforge.ir import Dim, UnknownDim

UNKNOWN_PREFIX = "unk__"
"""How inference spells the ``UnknownDim``s it writes (skipping names the model uses)."""

Atom = "str | Apply"
"""A name the model gave (any string) or a function of expressions (floor, ceil, min, max)."""
Monomial = tuple  # sorted atoms (see _atom_key); () is the constant term


@dataclass(frozen=True, slots=True)
class Apply:
    """``floor(E/c)``, ``ceil(E/c)``, ``min(A, B)`` or ``max(A, B)``: an atom that is no name."""

    func: str
    args: tuple[Expr, ...]
    divisor: int = 1

    def __str__(self) -> str:
        if self.func in ("floor", "ceil"):
            inner = self.args[0]
            text = str(inner) if inner.name() is not None else f"({inner})"
            return f"{self.func}({text}/{self.divisor})"
        return f"{self.func}({', '.join(map(str, self.args))})"


def _atom_key(atom: str | Apply) -> tuple[int, str]:
    return (0, atom) if isinstance(atom, str) else (1, str(atom))


def _monomial(atoms: Iterable[str | Apply]) -> Monomial:
    return tuple(sorted(atoms, key=_atom_key))


MAX_TERMS = 256
"""Terms a product may expand to; past it a dim is unknown (a hostile ``(a+b)*(a+b)*...``
would otherwise take 2**n terms)."""


class TooLarge(ValueError):
    """An expression past MAX_TERMS."""


def _bounded(fn: Callable[..., Dim]) -> Callable[..., Dim]:
    """Dim arithmetic whose result would be too large to write is an unknown dim; a result
    that is one of the arguments' ``UnknownDim``s (``6*unk__0 / 6``) stays of that kind."""

    @functools.wraps(fn)
    def wrapper(*args: Dim) -> Dim:
        try:
            result = fn(*args)
        except TooLarge:
            return None
        if isinstance(result, str) and not isinstance(result, UnknownDim):
            for arg in args:
                if isinstance(arg, UnknownDim) and arg == result:
                    return arg
        return result

    return wrapper


_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.:]*")
_FUNCTIONS = frozenset({"floor", "ceil", "min", "max"})


def quote(name: str) -> str:
    """A name as it stands in an expression: bare when it is an identifier (dots and colons
    allowed), else in single quotes with ``\\`` and ``\'`` escaped."""
    if _PLAIN_NAME.fullmatch(name) and name.lower() not in _FUNCTIONS:
        return name
    return "'" + name.replace("\\", "\\\\").replace("'", "\\'") + "'"


class Expr:
    """An integer polynomial: {monomial: coefficient}. Atoms are names or ``Apply`` forms."""

    __slots__ = ("terms",)

    def __init__(self, terms: Mapping[Monomial, int]) -> None:
        self.terms = {m: c for m, c in terms.items() if c != 0}

    @staticmethod
    def const(value: int) -> Expr:
        return Expr({(): value})

    @staticmethod
    def atom(atom: str | Apply) -> Expr:
        return Expr({(atom,): 1})

    def constant(self) -> int | None:
        """The value if the expression has no symbols."""
        if not self.terms:
            return 0
        if len(self.terms) == 1 and () in self.terms:
            return self.terms[()]
        return None

    def name(self) -> str | None:
        """The name, when the expression is one name and nothing else."""
        if len(self.terms) == 1:
            ((monomial, coef),) = self.terms.items()
            if coef == 1 and len(monomial) == 1 and isinstance(monomial[0], str):
                return monomial[0]
        return None

    def names(self) -> set[str]:
        """Every name the expression reads, inside functions too."""
        found: set[str] = set()
        for monomial in self.terms:
            for atom in monomial:
                if isinstance(atom, str):
                    found.add(atom)
                else:
                    for arg in atom.args:
                        found |= arg.names()
        return found

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
        if len(self.terms) * len(other.terms) > MAX_TERMS:
            raise TooLarge(f"a product of {len(self.terms)} and {len(other.terms)} terms")
        terms: dict[Monomial, int] = {}
        for m1, c1 in self.terms.items():
            for m2, c2 in other.terms.items():
                m = _monomial(m1 + m2)
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
        """Exact text that ``parse`` reads back to this polynomial: names that are no identifier
        are quoted, functions are atoms, and a product never holds a sum (it is expanded)."""
        if not self.terms:
            return "0"
        parts: list[str] = []
        # Higher-degree terms first, then by name; the constant last: "N*M+2*N-1".
        for m in sorted(self.terms, key=lambda m: (-len(m), [_atom_key(a) for a in m])):
            c = self.terms[m]
            body = "*".join(quote(a) if isinstance(a, str) else str(a) for a in m)
            if not m:
                text = str(abs(c))
            elif abs(c) == 1:
                text = body
            else:
                text = f"{abs(c)}*{body}"
            sign = "-" if c < 0 else "+"
            parts.append(text if not parts and c > 0 else sign + text)
        return "".join(parts)


_TOKEN = re.compile(
    r"\s*(?:(\d+)|([A-Za-z]+)\s*\(|([A-Za-z_][A-Za-z0-9_.:]*)|'((?:[^'\\]|\\.)*)'|(.))",
    re.DOTALL,
)


class _Parser:
    """Recursive descent over + - * / ( ) , integers, names (bare or quoted) and the functions
    floor(E/c), ceil(E/c), floor(E), min(A, B, ...), max(A, B, ...) (any letter case: sympy
    writes Min, Max)."""

    def __init__(self, text: str) -> None:
        self.tokens: list[tuple[str, str]] = []
        pos = 0
        while pos < len(text):
            match = _TOKEN.match(text, pos)
            if match is None or match.end() == pos:
                if text[pos:].strip():
                    raise ValueError("unreadable text")
                break
            pos = match.end()
            number, func, name, quoted, other = match.groups()
            if number:
                self.tokens.append(("int", number))
            elif func:
                if func.lower() not in _FUNCTIONS:
                    raise ValueError(f"unknown function {func}")
                self.tokens.append(("func", func.lower()))
            elif name:
                self.tokens.append(("name", name))
            elif quoted is not None:
                self.tokens.append(("name", re.sub(r"\\(.)", r"\1", quoted, flags=re.DOTALL)))
            elif other is not None and other.strip():
                self.tokens.append(("op", other))
        self.pos = 0

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self, value: str) -> bool:
        if self.peek() == ("op", value):
            self.pos += 1
            return True
        return False

    def expect(self, value: str) -> None:
        if not self.take(value):
            raise ValueError(f"missing {value}")

    def parse(self) -> Expr:
        if not self.tokens:
            raise ValueError("empty")
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
            return self.call(text)
        if text == "(":
            inner = self.sum()
            self.expect(")")
            return inner
        raise ValueError(f"unexpected {text!r}")

    def call(self, func: str) -> Expr:
        args = [self.sum()]
        if func in ("floor", "ceil"):
            divisor = 1
            if self.take("/"):
                number = self.peek()
                if number is None or number[0] != "int":
                    raise ValueError("floor/ceil divide by an integer")
                self.pos += 1
                divisor = int(number[1])
            self.expect(")")
            if divisor <= 0:
                raise ValueError("floor/ceil divide by a positive integer")
            return floordiv(args[0], divisor) if func == "floor" else ceildiv(args[0], divisor)
        while self.take(","):
            args.append(self.sum())
        self.expect(")")
        return extremum(func, args)


@functools.lru_cache(maxsize=65536)
def parse(text: str) -> Expr:
    """The polynomial a dim_param spells; a string that is no expression is one name."""
    try:
        return _Parser(text).parse()
    except (ValueError, RecursionError):
        return Expr.atom(str(text))


def floordiv(expr: Expr, divisor: int) -> Expr:
    return _divide("floor", expr, divisor)


def ceildiv(expr: Expr, divisor: int) -> Expr:
    return _divide("ceil", expr, divisor)


def _divide(func: str, expr: Expr, divisor: int) -> Expr:
    """floor or ceil of expr / divisor (> 0), in a canonical form: multiples of the divisor
    come out (``floor((2*N+5)/2)`` is ``N+2+floor(1/2)``, so ``N+2``), the constant left inside
    is in [0, divisor), and ``floor(floor(E/a)/b)`` is ``floor(E/(a*b))``."""
    outside: dict[Monomial, int] = {}
    inside: dict[Monomial, int] = {}
    for monomial, coef in expr.terms.items():
        whole, rest = divmod(coef, divisor)  # c*X/d = (c//d)*X + (c%d)*X/d, X an integer
        if whole:
            outside[monomial] = whole
        if rest:
            inside[monomial] = rest
    out, left = Expr(outside), Expr(inside)
    const = left.constant()
    if const is not None:  # 0 <= const < divisor
        return out if func == "floor" or const == 0 else out + Expr.const(1)
    rest = left.terms.get((), 0)
    symbolic = {m: c for m, c in left.terms.items() if m}
    if len(symbolic) == 1:
        ((monomial, coef),) = symbolic.items()
        if coef == 1 and len(monomial) == 1:
            (atom,) = monomial
            if isinstance(atom, Apply) and atom.func == func:
                # Nested: floor((floor(E/b) + r)/d) = floor((E + r*b)/(b*d)) for integers E, r
                # and b, d > 0 (ceil alike), so a chain of strided convs is one division.
                inner = atom.args[0] + Expr.const(rest * atom.divisor)
                return out + _divide(func, inner, atom.divisor * divisor)
    common = math.gcd(divisor, *left.terms.values())  # floor(4*h/8) is floor(h/2)
    if common > 1:
        left = Expr({m: c // common for m, c in left.terms.items()})
        divisor //= common
    return out + Expr.atom(Apply(func, (left,), divisor))


def extremum(func: str, args: Sequence[Expr]) -> Expr:
    """min or max of expressions; decided where the sign of a difference is known (names are
    dims, so ``max(N, N-2)`` is ``N`` and ``min(N, 0)`` is ``0``), else an atom."""
    kept: list[Expr] = []
    for arg in args:
        for i, other in enumerate(kept):
            gap = arg - other  # names are dims, never negative: N+1 >= N, N >= 0
            if _nonnegative(gap) or _nonnegative(-gap):
                if _nonnegative(-gap) == (func == "min"):
                    kept[i] = arg
                break
        else:
            kept.append(arg)
    if len(kept) == 1:
        return kept[0]
    kept.sort(key=str)
    return Expr.atom(Apply(func, tuple(kept)))


def to_dim(expr: Expr) -> Dim:
    """The dim an expression is: an int, the bare name when it is one name (a model's own
    ``batch size`` stays as it was), else the exact text of ``Expr.__str__``."""
    const = expr.constant()
    if const is not None:
        return const
    name = expr.name()
    if name is not None and parse(name) == expr:
        return name
    return str(expr)


def _expr(dim: int | str) -> Expr:
    return Expr.const(dim) if isinstance(dim, int) else parse(dim)


def names(dim: Dim) -> set[str]:
    """The names a dim reads (``N`` and ``M`` for ``N*M+1``); none for ints and None."""
    return parse(dim).names() if isinstance(dim, str) else set()


def is_clamp_of(x: Dim, y: Dim) -> bool:
    """``x`` is ``min(c, y)`` for a constant c >= 2: a slice of a buffer of c by the length y
    (BERT's position ids ``[:, :S]`` of 512 are ``min(512, S)`` long)."""
    if not isinstance(x, str) or y is None:
        return False
    terms = parse(x).terms
    if len(terms) != 1:
        return False
    ((monomial, coef),) = terms.items()
    if coef != 1 or len(monomial) != 1 or not isinstance(monomial[0], Apply):
        return False
    atom = monomial[0]
    if atom.func != "min" or len(atom.args) != 2:
        return False
    target = _expr(y)
    for bound, other in (atom.args, atom.args[::-1]):
        c = bound.constant()
        if c is not None and c >= 2 and other == target:
            return True
    return False


def is_unknown_symbol(dim: Dim) -> bool:
    """True for None and for the dims inference named (``UnknownDim``), never for a name the
    model gave, however it is spelled (``unk__214`` from tf2onnx is a real symbol)."""
    return dim is None or isinstance(dim, UnknownDim)


def _known(*dims: Dim) -> bool:
    """Arithmetic needs every operand: an ``UnknownDim`` is one (a fixed size, only not known
    ahead; ``unk__0*6 / 6`` is ``unk__0``), None is not."""
    return not any(d is None for d in dims)


def nonnegative(dim: Dim) -> bool:
    """Provably >= 0: a static dim >= 0, or a sum of products of dim names with positive
    coefficients (a dim is never negative)."""
    if dim is None:
        return False
    if isinstance(dim, int):
        return dim >= 0
    return _nonnegative(parse(dim))


def _nonnegative(expr: Expr) -> bool:
    for monomial, coef in expr.terms.items():
        if coef < 0:
            return False
        for atom in monomial:
            if isinstance(atom, Apply) and not _atom_nonnegative(atom):
                return False
    return True


def _atom_nonnegative(atom: Apply) -> bool:
    """max(0, N-14) is >= 0 by its 0; min, floor and ceil by every argument."""
    test = any if atom.func == "max" else all
    return test(_nonnegative(a) for a in atom.args)


def at_least_one(dim: Dim, facts: Set[str] = frozenset()) -> bool:
    """Provably >= 1: ``N+1``, or ``facts`` (dims known to be 1 or more) and sums and products
    of them with positive coefficients: ``floor((H+31)/32)*floor((W+31)/32)`` when both Conv
    output sizes are facts."""
    if dim is None:
        return False
    if isinstance(dim, int):
        return dim >= 1
    if dim in facts or nonnegative(dim_sub(dim, 1)):
        return True
    expr = parse(dim)
    if not _nonnegative(expr):
        return False
    return any(
        coef >= 1 and monomial and all(_atom_at_least_one(a, facts) for a in monomial)
        for monomial, coef in expr.terms.items()
    )


def _atom_at_least_one(atom: str | Apply, facts: Set[str]) -> bool:
    if isinstance(atom, str):
        return atom in facts
    if str(atom) in facts:
        return True
    args = [to_dim(a) for a in atom.args]
    if atom.func == "floor":  # floor(E/c) >= 1 where E >= c
        return nonnegative(dim_sub(args[0], atom.divisor))
    if atom.func == "ceil":  # ceil(E/c) >= 1 where E >= 1
        return at_least_one(args[0], facts)
    test = all if atom.func == "min" else any
    return test(at_least_one(a, facts) for a in args)


def never_one(dim: Dim) -> bool:
    """Provably not 1 in any run: 2 or more (``N+2``), or a multiple of some k >= 2 plus a
    constant that is not 1 modulo k (``2*floor((H+31)/32)``, an upsampled size, is even)."""
    if dim is None:
        return False
    if isinstance(dim, int):
        return dim != 1
    if nonnegative(dim_sub(dim, 2)):
        return True
    expr = parse(dim)
    k = math.gcd(*(c for m, c in expr.terms.items() if m))
    return k >= 2 and expr.terms.get((), 0) % k != 1


def same_dim(a: Dim, b: Dim) -> bool:
    """Provably equal: same static value or the same polynomial (unknowns never are)."""
    if a is None or b is None:
        return False
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    return a == b or _expr(a) == _expr(b)


@_bounded
def dim_add(a: Dim, b: Dim) -> Dim:
    if not _known(a, b):
        return None
    if isinstance(a, int) and isinstance(b, int):
        return a + b
    return to_dim(_expr(a) + _expr(b))  # type: ignore[arg-type]


@_bounded
def dim_sub(a: Dim, b: Dim) -> Dim:
    if not _known(a, b):
        return None
    if isinstance(a, int) and isinstance(b, int):
        return a - b
    return to_dim(_expr(a) - _expr(b))  # type: ignore[arg-type]


def dim_neg(a: Dim) -> Dim:
    return dim_sub(0, a)


@_bounded
def dim_mul(a: Dim, b: Dim) -> Dim:
    if a == 0 or b == 0:
        return 0
    if not _known(a, b):
        return None
    if isinstance(a, int) and isinstance(b, int):
        return a * b
    return to_dim(_expr(a) * _expr(b))  # type: ignore[arg-type]


@_bounded
def dim_floordiv(a: Dim, b: Dim) -> Dim:
    """floor(a / b) for a constant b > 0; a symbolic divisor gives None unless a == k*b."""
    if not _known(a, b):
        return None
    if isinstance(a, int) and isinstance(b, int):
        return a // b if b else None
    if isinstance(b, int):
        return to_dim(floordiv(_expr(a), b)) if b > 0 else None  # type: ignore[arg-type]
    return _divide_by_symbol(a, b)


@_bounded
def dim_ceildiv(a: Dim, b: Dim) -> Dim:
    if not _known(a, b):
        return None
    if isinstance(a, int) and isinstance(b, int):
        return -(-a // b) if b else None
    if isinstance(b, int):
        return to_dim(ceildiv(_expr(a), b)) if b > 0 else None  # type: ignore[arg-type]
    return _divide_by_symbol(a, b)


def dim_min(a: Dim, b: Dim) -> Dim:
    return _extremum("min", a, b)


def dim_max(a: Dim, b: Dim) -> Dim:
    return _extremum("max", a, b)


@_bounded
def _extremum(func: str, a: Dim, b: Dim) -> Dim:
    if not _known(a, b):
        return None
    if isinstance(a, int) and isinstance(b, int):
        return min(a, b) if func == "min" else max(a, b)
    return to_dim(extremum(func, [_expr(a), _expr(b)]))  # type: ignore[arg-type]


def dim_product(dims: Iterable[Dim]) -> Dim:
    total: Dim = 1
    for d in dims:
        total = dim_mul(total, d)
    return total


@_bounded
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
    return evaluate_expr(parse(dim), bindings)


def evaluate_expr(expr: Expr, bindings: Mapping[str, int]) -> int | None:
    """Exact integer value of an expression; None when a name is unbound."""
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


def _evaluate_atom(atom: str | Apply, bindings: Mapping[str, int]) -> int | None:
    if isinstance(atom, str):
        return bindings.get(atom)
    args = [evaluate_expr(a, bindings) for a in atom.args]
    if any(a is None for a in args):
        return None
    values = [a for a in args if a is not None]
    if atom.func == "floor":
        return values[0] // atom.divisor
    if atom.func == "ceil":
        return -(-values[0] // atom.divisor)
    return min(values) if atom.func == "min" else max(values)
