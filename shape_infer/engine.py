"""The inference engine: walks graphs in topological order and gives every value a type.

Each op is handled by, in order: a local function (inferred by binding its body to the call's
input types), our own shape rule for the op's schema version (``@shape_rule``), onnx's per-node
inference (``_onnx_fallback``), or, for custom domains, unknown outputs and a note. Small integer
tensors that describe shapes are propagated element by element (``@value_rule``), symbols
included, so ``Reshape(x, Concat(Gather(Shape(x), 0), [-1]))`` gets ``[N, 12]``.

Errors do not stop the walk: each is recorded with node, op version, input types and reason, the
outputs stay unknown, and the report lists all of them at once.

An inference can be kept (``infer_resumable``) and brought up to date after edits: only the ops
the edits stamped, and the readers of what changed, are inferred again (``Resumable.again``).
"""

from __future__ import annotations

__all__ = [
    "INTEGER_DTYPES",
    "VALUE_RULES",
    "Assumption",
    "InferContext",
    "InferError",
    "InferReport",
    "Known",
    "Resumable",
    "StaleDeclaration",
    "ShapeRule",
    "ValueRule",
    "infer",
    "infer_resumable",
    "shape_rule",
    "value_rule",
]

import logging
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from onnxforge import ir, kernels
from onnxforge import opset as schemas
from onnxforge.errors import OnnxForgeError, ShapeError
from onnxforge.ir import (
    Dim,
    DType,
    Graph,
    Model,
    Op,
    OpaqueType,
    Tensor,
    TensorType,
    UnknownDim,
    Value,
)
from onnxforge.kernels import NONDETERMINISTIC
from onnxforge.registry import OpRegistry
from onnxforge.shape_infer.broadcast import format_shape
from onnxforge.shape_infer.symbolic import (
    UNKNOWN_PREFIX,
    at_least_one,
    is_unknown_symbol,
    names,
)

logger = logging.getLogger(__name__)

Type = TensorType | OpaqueType
ShapeRule = Callable[[Op, Sequence["TensorType | None"], "InferContext"], "list[Type | None]"]
Known = tuple[Dim, ...]
"""The elements of a small integer tensor (rank 0 or 1), each an int, a symbol or None."""
ValueRule = Callable[[Op, "InferContext"], "list[Known | None]"]

SHAPE_RULES: OpRegistry[ShapeRule] = OpRegistry("shape rule")
VALUE_RULES: OpRegistry[ValueRule] = OpRegistry("value rule")
MAX_KNOWN_ELEMENTS = 1024
"""Integer tensors up to this size are propagated element by element."""
MAX_KNOWN_FLOATS = 16
"""Float constants up to this size whose elements are whole numbers are known too."""
INTEGER_DTYPES = frozenset(
    {
        DType.INT8, DType.INT16, DType.INT32, DType.INT64,
        DType.UINT8, DType.UINT16, DType.UINT32, DType.UINT64,
    }
)  # fmt: skip
MAX_FUNCTION_DEPTH = 64
MAX_EVAL_INPUT_ELEMENTS = 4096
MAX_EVAL_OUTPUT_ELEMENTS = 1 << 16
MAX_EVAL_VALUE = 4096
MOVED_INPUTS: dict[str, tuple[int, ...] | None] = {
    **dict.fromkeys(
        ("Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Slice", "Split",
         "Gather", "GatherElements", "GatherND", "Expand", "Tile", "ReverseSequence"),
        (0,),
    ),
    "Concat": None,  # every input
    "Where": (1, 2),
}  # fmt: skip
"""Ops that only move elements, and which inputs' elements they move (the others must be
constant): their known elements follow at any rank (``_Engine.moved_known``)."""
NOT_EVALUATED = frozenset({"Resize", "Upsample", "Constant"})
"""Ops whose output size grows with a product of input values; inferred, never evaluated."""
SIZED_BY_VALUES = frozenset(
    {"ConstantOfShape", "Expand", "Tile", "Range", "OneHot", "Pad", "CenterCropPad", "Col2Im"}
)
"""Ops whose output size is a product of input values: evaluated only when their rule gave a
small static shape (4096 x 4096 x 4096 is three small values)."""


def shape_rule(
    op_types: str | Iterable[str], versions: Iterable[int], *, domain: str = ""
) -> Callable[[ShapeRule], ShapeRule]:
    """Register a shape rule for the listed schema versions (``since_version``s)."""
    return SHAPE_RULES.register(op_types, versions, domain=domain)


def value_rule(
    op_types: str | Iterable[str], versions: Iterable[int], *, domain: str = ""
) -> Callable[[ValueRule], ValueRule]:
    """Register an element-wise propagation rule for small integer tensors."""
    return VALUE_RULES.register(op_types, versions, domain=domain)


@dataclass(frozen=True)
class InferError:
    """One inconsistency: where it is, which op version, what came in, why it is wrong."""

    where: str
    node: str
    op: str
    inputs: tuple[str, ...]
    reason: str
    internal: bool = False

    def __str__(self) -> str:
        ins = ", ".join(self.inputs)
        return f"{self.where}node {self.node!r} ({self.op}) inputs ({ins}): {self.reason}"


@dataclass(frozen=True)
class Assumption:
    """Two dims taken as equal because the op requires it (Sub of [N,3] and [M,3])."""

    a: Dim
    b: Dim
    node: str
    op: str
    relation: str = "=="

    def __str__(self) -> str:
        return f"{self.a} {self.relation} {self.b} (node {self.node!r}, {self.op})"


@dataclass(frozen=True)
class StaleDeclaration:
    """A declared type (value_info, graph output, body input) that contradicts inference in
    rank or a static dim. onnxruntime runs such models (it warns and uses what it infers), so
    the inferred type replaces the declared one; ``infer(strict_declared=True)`` refuses."""

    where: str
    name: str
    declared: str
    inferred: str
    node: str
    op: str
    value: Value | None = field(default=None, compare=False, repr=False)

    @property
    def contradiction(self) -> str:
        node = f"node {self.node!r} ({self.op})" if self.node else f"its {self.op} node"
        return (
            f"{self.where}value {self.name!r} is declared {self.declared} but {node} "
            f"computes {self.inferred}"
        )

    def __str__(self) -> str:
        return f"{self.contradiction}; the inferred type replaces it"


@dataclass
class InferReport:
    """What inference found: errors, assumptions, notes and how many values got a type."""

    errors: list[InferError] = field(default_factory=list)
    stale: list[StaleDeclaration] = field(default_factory=list)
    assumptions: list[Assumption] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    values: int = 0
    typed: int = 0
    static_values: dict[Value, tuple[int, ...]] = field(default_factory=dict)
    """Small integer tensors whose every element inference computed (Shape of a static
    tensor, arithmetic on it): what folding may turn into constants without running an op."""
    known_values: dict[Value, tuple[Dim, ...]] = field(default_factory=dict)
    """Small integer tensors whose elements inference knows, static or symbolic (None for an
    unknown element): Shape of [N, 3] is (N, 3)."""
    input_names: dict[Value, TensorType] = field(default_factory=dict)
    """Graph inputs with unnamed dims, as inference named them (skl2onnx's batch ``[?, 4]`` is
    ``[unk__0, 4]``): the model keeps the input as declared, so this says what ``unk__0`` is."""

    @property
    def ok(self) -> bool:
        return not self.errors

    def to_json(self) -> dict[str, Any]:
        return {
            "errors": [
                {
                    "where": e.where.rstrip(": "),
                    "node": e.node,
                    "op": e.op,
                    "inputs": list(e.inputs),
                    "reason": e.reason,
                }
                for e in self.errors
            ],
            "stale_declarations": [
                {
                    "value": s.name,
                    "declared": s.declared,
                    "inferred": s.inferred,
                    "node": s.node,
                    "op": s.op,
                }
                for s in self.stale
            ],
            "assumptions": [
                {"a": a.a, "relation": a.relation, "b": a.b, "node": a.node, "op": a.op}
                for a in self.assumptions
            ],
            "notes": list(self.notes),
        }


class InferContext:
    """What a rule may ask about the op it infers: constants, known elements, fresh dims."""

    def __init__(self, engine: _Engine, scope: _Scope, op: Op, version: int) -> None:
        self.engine = engine
        self.scope = scope
        self.op = op
        self.version = version
        self.inputs = scope.graph.inputs_of(op)

    @property
    def opset(self) -> int:
        return self.scope.opsets.get(self.op.domain or "", 0)

    def input(self, index: int) -> Value | None:
        return self.inputs[index] if index < len(self.inputs) else None

    def attr(self, name: str) -> Any:
        """The attribute's value, or its schema default."""
        value = self.op.attr(name)
        if value is None and schemas.has_schema(self.op.op_type, self.op.domain):
            value = schemas.attribute_default(self.op.op_type, self.opset, name, self.op.domain)
        return value

    def const(self, index: int) -> np.ndarray | None:
        """Input ``index`` as an array when it is constant (initializer, Constant), else None."""
        value = self.input(index)
        return None if value is None else self.engine.const_of(value)

    def value(self, index: int, *, any_rank: bool = False) -> Known | None:
        """The elements of a small integer input of rank 0 or 1, symbols included, when they
        are known. Higher ranks only with ``any_rank``, for rules that map each element on its
        own (Cast, Neg); the data-movement ops have ``moved_known``."""
        value = self.input(index)
        if value is None:
            return None
        t = self.scope.type_of(value)
        if not any_rank and isinstance(t, TensorType) and t.shape is not None and len(t.shape) > 1:
            return None
        return self.engine.known_of(value)

    def new_dim(self) -> str:
        return self.engine.new_dim()

    def at_least_one(self, dim: Dim) -> bool:
        """``dim`` is 1 or more in every run: provably (``N+1``), or a fact the model cannot
        run without (``positive``)."""
        return at_least_one(dim, self.engine.positive)

    def positive(self, *dims: Dim) -> None:
        """Record dims the model cannot run without being 1 or more (onnxruntime's Conv
        refuses an empty spatial dim and one its window does not fit, its Reshape a -1 beside
        dims that multiply to 0): facts, not guesses, for the main graph only (a body's op
        may never run)."""
        if self.scope.depth == 0:
            self.engine.positive.update(d for d in dims if isinstance(d, str))

    def assume(self, a: Dim, b: Dim, relation: str = "==") -> None:
        """Record that the result holds only if ``a relation b`` (two dims taken as equal)."""
        self.engine.record(
            self.engine.report.assumptions,
            Assumption(a, b, self.op.name, f"{self.op.op_type}-{self.version}", relation),
        )

    def infer_subgraph(
        self, graph: Graph, input_types: Sequence[Type | None]
    ) -> list[Type | None]:
        """Infer a body (If/Loop/Scan) with these input types; the types of its outputs."""
        return self.engine.infer_body(graph, self.scope, input_types)


@dataclass
class _Scope:
    """A graph being inferred, with the opsets in force and where to write types."""

    graph: Graph
    opsets: dict[str, int]
    where: str
    types: dict[Value, Type | None]
    parent: _Scope | None = None
    depth: int = 0
    earlier: Callable[[Value], Type | None] | None = None
    """Inference again after edits (``Resumable``): the type of a value not inferred again."""

    def type_of(self, value: Value) -> Type | None:
        scope: _Scope | None = self
        while scope is not None:
            if value in scope.types:
                return scope.types[value]
            scope = scope.parent
        return value.type if self.earlier is None else self.earlier(value)


class _Engine:
    def __init__(self, model: Model, *, strict_declared: bool = False) -> None:
        self.model = model
        self.strict_declared = strict_declared
        self.report = InferReport()
        self.consts: dict[Value, np.ndarray] = {}
        self.known: dict[Value, Known] = {}
        self.functions = {f.key: f for f in model.functions}
        self.graph_inputs: dict[Graph, set[Value]] = {}
        self.taken: set[str] | None = None  # every name the model's dims read, when needed
        self.counter = 0
        self.memo = _MEMOS.setdefault(model, {})
        self.attr_keys: dict[Op, Any] = {}
        self.versions: dict[tuple[str, str, int], int] = {}
        """(op type, domain, opset) -> the schema's since_version: one lookup per kind of op."""
        self.constant_known: dict[Value, Known | None] = {}
        self.positive: set[str] = set()
        """Symbolic dims that are 1 or more in every run (InferContext.positive)."""
        self.current: Op | None = None  # the main graph's op being inferred
        self.by_op: dict[Op, list[tuple[list[Any], Any]]] = {}
        """The report entries each op of the main graph added (``record``)."""

    # -- facts about values ----------------------------------------------------------------
    def new_dim(self) -> UnknownDim:
        """A fresh unknown, spelled so that no name of the model is reused."""
        if self.taken is None:  # read on first need: most models name no unknown at all
            self.taken = set()
            for graph in self.model.graphs():
                for value in graph.values():
                    if isinstance(value.type, TensorType) and value.type.shape:
                        for d in value.type.shape:
                            if isinstance(d, str):
                                self.taken.add(d)
                                self.taken.update(names(d))
        while True:
            name = f"{UNKNOWN_PREFIX}{self.counter}"
            self.counter += 1
            if name not in self.taken:
                return UnknownDim(name)

    def const_of(self, value: Value) -> np.ndarray | None:
        """The value's data when it cannot change at run time.

        An initializer that is also a graph input is a default the caller may override: not a
        constant, except in IR < 4 models, where every initializer had to be listed as an input
        (shape rules may read those; they are never evaluated, see ``overridable``).
        """
        if value in self.consts:
            return self.consts[value]
        if isinstance(value.const, Tensor) and (
            self.model.ir_version < 4 or not self.overridable(value)
        ):
            array = value.const.numpy()
            self.consts[value] = array
            return array
        return None

    def overridable(self, value: Value) -> bool:
        graph = value.graph
        if graph is None:
            return False
        if graph not in self.graph_inputs:
            self.graph_inputs[graph] = set(graph.inputs)
        return value in self.graph_inputs[graph]

    def known_of(self, value: Value) -> Known | None:
        known = self.known.get(value)
        if known is not None and None not in known:
            return known
        computed = self._known_constant(value)  # an evaluated op knows what a rule could not
        return computed if computed is not None else known

    def _known_constant(self, value: Value) -> Known | None:
        if value in self.constant_known:
            return self.constant_known[value]
        found = self._read_known_constant(value)
        if value.const is not None:  # an initializer's data does not change during inference
            self.constant_known[value] = found
        return found

    def _read_known_constant(self, value: Value) -> Known | None:
        stored = value.const
        if isinstance(stored, Tensor) and (
            stored.size > MAX_KNOWN_ELEMENTS
            or (stored.dtype not in INTEGER_DTYPES and stored.size > MAX_KNOWN_FLOATS)
        ):
            return None  # a weight: not worth reading
        array = self.const_of(value)
        if array is None or array.size > MAX_KNOWN_ELEMENTS:
            return None
        if array.dtype.kind in "iu":
            return tuple(int(x) for x in array.reshape(-1))
        if array.ndim > 1:
            return None
        if (  # a float scale that is a whole number (2.0): shape arithmetic in float
            array.dtype in (np.float32, np.float64)
            and array.size <= MAX_KNOWN_FLOATS
            and bool(np.all(np.isfinite(array)))
            and bool(np.all(array == np.round(array)))
            and bool(np.all(np.abs(array) < 1 << 24))
        ):
            return tuple(int(x) for x in array.reshape(-1))
        return None

    # -- walking ---------------------------------------------------------------------------
    def infer_graph(self, scope: _Scope) -> None:
        graph = scope.graph
        for value in graph.initializers:
            const = value.const
            if const is not None and value not in scope.types:
                declared = value.type if isinstance(value.type, TensorType) else None
                shape = tuple(const.shape) if isinstance(const, Tensor) else tuple(const.dims)
                scope.types[value] = declared or TensorType(const.dtype, shape)
        main = scope.parent is None and not scope.depth  # remember what each op reports
        for op in graph.topo_order():
            if main:
                self.current = op
            self.infer_op(scope, op)
        if main:
            self.current = None

    def infer_body(
        self, graph: Graph, outer: _Scope, input_types: Sequence[Type | None]
    ) -> list[Type | None]:
        if outer.depth >= MAX_FUNCTION_DEPTH:
            raise ShapeError(f"subgraphs nested deeper than {MAX_FUNCTION_DEPTH} levels")
        where = f"{outer.where}{graph.name or 'subgraph'}: "
        scope = _Scope(
            graph, outer.opsets, where, outer.types, outer, outer.depth + 1, outer.earlier
        )
        for inner in ir.walk_graphs(graph):  # a body inferred again (Loop) starts afresh:
            for op in inner.ops:  # an earlier pass's shapes are not declared ones
                for value in op._outputs:
                    outer.types.pop(value, None)  # type: ignore[arg-type]
        for value, t in zip(graph.inputs, input_types, strict=False):
            declared = value.type
            if t is None:
                scope.types[value] = declared
                continue
            try:
                scope.types[value] = _merge(declared, t, value)
            except _Contradiction:
                if self.strict_declared:
                    raise
                self.stale(
                    outer, value, declared, t, node=graph.name or "subgraph", label="body input"
                )
                scope.types[value] = _replace(declared, t)
        self.infer_graph(scope)
        return [scope.type_of(v) for v in graph.outputs]

    def infer_op(self, scope: _Scope, op: Op) -> None:
        # read, never changed here: not the copies inputs_of and outputs_of make
        inputs, outputs = op._inputs, op._outputs
        in_types = [None if v is None else scope.type_of(v) for v in inputs]
        domain = "" if op.domain == "ai.onnx" else op.domain
        version = 0
        try:
            functions = self.functions
            function = functions.get((op.domain, op.op_type, op.overload)) if functions else None
            contrib = self.contrib_rule(op, domain, scope) if function is None else None
            if function is not None:
                label = f"{op.op_type} (local function)"
                results = self.infer_call(scope, op, function, in_types)
            elif contrib is not None:
                label = f"{domain}::{op.op_type}"
                ctx = InferContext(self, scope, op, 1)
                tensors = [t if isinstance(t, TensorType) else None for t in in_types]
                results = contrib(op, tensors, ctx)
            else:
                if domain not in scope.opsets:
                    raise ShapeError(f"the model imports no opset for domain {domain!r}")
                opset = scope.opsets[domain]
                version = self.versions.get((op.op_type, domain, opset), 0)
                if not version:
                    if not schemas.has_schema(op.op_type, domain):
                        self.record(
                            self.report.notes,
                            f"{scope.where}node {op.name!r}: custom op {domain}::{op.op_type} "
                            "passed over (outputs unknown)",
                        )
                        return
                    version = schemas.since_version(op.op_type, opset, domain)
                    self.versions[(op.op_type, domain, opset)] = version
                label = None  # made from the version only for a message (see error)
                for value in outputs:
                    if value is not None:  # a body inferred again (Loop) starts afresh
                        self.known.pop(value, None)
                        self.consts.pop(value, None)
                key = self.memo_key(
                    op, version, opset, inputs=inputs, in_types=in_types, outputs=outputs
                )
                remembered = None
                if key is not None:
                    try:  # hashed once here, not also to test that it can be
                        remembered = self.memo.get(key)
                    except TypeError:
                        key = None
                if remembered is not None:
                    results, knowns = remembered
                    for value, known in zip(outputs, knowns, strict=False):
                        if value is not None and known is not None:
                            self.known[value] = known
                else:
                    noted = len(self.report.assumptions) + len(self.report.notes)
                    results = self.infer_standard(
                        scope, op, version, inputs=inputs, outputs=outputs, in_types=in_types
                    )
                    if key is not None and self.reusable(results, outputs, in_types, noted):
                        self.memo[key] = (
                            results,
                            [None if v is None else self.known.get(v) for v in outputs],
                        )
        except OnnxForgeError as e:
            self.error(scope, op, version, in_types, str(e))
            return
        except Exception as e:  # a rule's bug must not hide the other errors
            logger.debug("shape rule failed", exc_info=True)
            self.error(scope, op, version, in_types, f"{type(e).__name__}: {e}", internal=True)
            return
        for value, result in zip(outputs, results, strict=False):
            if value is None:
                continue
            declared = scope.type_of(value)
            inferred = self.name_unknowns(result)
            try:
                try:
                    merged = _merge(declared, inferred, value)
                except _Contradiction:
                    if self.strict_declared:
                        raise
                    self.stale(
                        scope,
                        value,
                        declared,
                        inferred,
                        node=op.name,
                        label=label or f"{op.op_type}-{version}",
                    )
                    merged = _replace(declared, inferred)
                _check_size(merged, value)
                scope.types[value] = merged
            except ShapeError as e:
                self.error(scope, op, version, in_types, str(e), label=label)

    def infer_standard(
        self,
        scope: _Scope,
        op: Op,
        version: int,
        *,
        inputs: list[Value | None],
        outputs: list[Value | None],
        in_types: list[Type | None],
    ) -> list[Type | None]:
        """An op of a standard domain: its shape rule, then what is known of its elements
        (value rules, moved elements) and, when small and constant, its computed outputs."""
        domain = "" if op.domain == "ai.onnx" else op.domain
        opset = scope.opsets[domain]
        ctx = InferContext(self, scope, op, version)
        results = self.run_rule(op, ctx, in_types, opset, domain)
        value_fn = VALUE_RULES.find(op.op_type, opset, domain)
        if value_fn is not None:
            for value, known in zip(outputs, value_fn(op, ctx), strict=False):
                if value is not None and known is not None:
                    self.known[value] = known
        if (
            op.op_type in MOVED_INPUTS
            and domain == ""
            and any(v is not None and v not in self.known for v in outputs)
        ):
            moved = self.moved_known(scope, op, inputs, results)
            for value, known in zip(outputs, moved, strict=False):
                if value is not None and known is not None:
                    self.known.setdefault(value, known)
        return self.evaluate(scope, op, inputs, outputs, results)

    def memo_key(
        self,
        op: Op,
        version: int,
        opset: int,
        *,
        inputs: list[Value | None],
        in_types: list[Type | None],
        outputs: list[Value | None],
    ) -> tuple[Any, ...] | None:
        """What decides a standard op's inference: its kind, attributes, input types and the
        constant or known inputs. The thousand identical layers of a large model are inferred
        once (profile of a 100k-op chain: the rules were 60% of infer). None when an attribute
        cannot be a key (subgraphs, tensors); a key that does not hash is none either."""
        if op.domain not in ("", "ai.onnx"):
            return None
        attrs = self.attr_keys.get(op, _MISSING) if op.attrs else ()  # none: nothing to keep
        if attrs is _MISSING:
            attrs = self.attr_keys[op] = _attrs_key(op)
        if attrs is None:
            return None
        facts: list[Any] = []
        for value in inputs:
            if value is None:
                facts.append(None)
            elif value in self.known:
                facts.append(self.known[value])
            elif value.const is not None:
                facts.append((value, value.const))  # the same tensor, the same data
            elif value in self.consts:
                return None  # computed in this inference: nothing to key it by later
            else:
                facts.append(False)
        key = (op.op_type, version, opset, attrs, tuple(in_types), tuple(facts), len(outputs))
        if None in outputs:
            return (*key, tuple(v is None for v in outputs))
        return key  # may not hash (a known value's array): the caller finds out

    def reusable(
        self,
        results: list[Type | None],
        outputs: list[Value | None],
        in_types: list[Type | None],
        noted: int,
    ) -> bool:
        """A result another op with the same key may take: the rule recorded nothing about
        this node, computed no constant, and named no fresh unknown of its own."""
        if len(self.report.assumptions) + len(self.report.notes) != noted:
            return False
        if any(v is not None and v in self.consts for v in outputs):
            return False
        given = {d for t in in_types if isinstance(t, TensorType) and t.shape for d in t.shape}
        for t in results:
            if isinstance(t, TensorType) and t.shape is not None:
                for d in t.shape:
                    if isinstance(d, UnknownDim) and d not in given:
                        return False
            elif t is not None and not isinstance(t, TensorType):
                return False
        return True

    @staticmethod
    def contrib_rule(op: Op, domain: str, scope: _Scope) -> ShapeRule | None:
        """The rule of an op onnx has no schema for: com.microsoft's (version 1), and
        onnxruntime's own ONNX-domain ops below the opset ONNX added them at (the same rule
        as com.microsoft's)."""
        if domain not in scope.opsets:
            return None
        if domain == "":  # the common case: only onnxruntime's own ops have a contrib rule
            if op.op_type in schemas.RUNTIME_DEFINED and schemas.runtime_defined(
                op.op_type, scope.opsets[domain], domain
            ):
                return SHAPE_RULES.entry(op.op_type, 1, "com.microsoft")
            return None
        if not schemas.has_schema(op.op_type, domain):
            return SHAPE_RULES.entry(op.op_type, 1, domain)
        return None

    def evaluate(
        self,
        scope: _Scope,
        op: Op,
        inputs: list[Value | None],
        outputs: list[Value | None],
        results: list[Type | None],
    ) -> list[Type | None]:
        """Run a small all-constant op (our kernel, else onnx's reference one): its outputs become
        constants (and their types exact), so float shape arithmetic and ops like OneHot with a
        constant depth get shapes. Bounded: outputs must be small by the rule's shape, or, when
        the rule could not tell, the inputs must be small in size and value."""
        if (
            op.op_type in NONDETERMINISTIC
            or op.op_type in NOT_EVALUATED
            or op.domain not in ("", "ai.onnx")
            or not inputs
            or any(isinstance(a, Graph) for a in op.attrs.values())
        ):
            return results
        arrays = []
        for value in inputs:
            array = None if value is None else self.const_of(value)
            if value is not None and (array is None or self.overridable(value)):
                return results
            arrays.append(array)
        present = [a for a in arrays if a is not None]
        if sum(a.size for a in present) > MAX_EVAL_INPUT_ELEMENTS:
            return results
        if _static_outputs(results):  # the rule knows the sizes: they alone decide
            if not _small_outputs(results):
                return results
        elif op.op_type in SIZED_BY_VALUES or not _small_values(present):
            return results  # small values may still multiply into a huge output
        try:
            values = kernels.run(op, arrays, scope.opsets)
        except OnnxForgeError:  # no value computed; the rule's types stand
            logger.debug("could not evaluate %s", op.describe(), exc_info=True)
            return results
        out: list[Type | None] = list(results)
        for i, (value, array) in enumerate(zip(outputs, values, strict=False)):
            if value is None:
                continue
            self.consts[value] = array
            rule = results[i] if i < len(results) else None
            # The computed shape is exact, even where onnx's inference disagrees; the element
            # type stays the rule's (numpy has no float8 or int4: the array's dtype may differ).
            dtype = rule.dtype if isinstance(rule, TensorType) and rule.dtype else None
            out[i] = TensorType(dtype or Tensor.from_numpy(array).dtype, tuple(array.shape))
        return out

    def moved_known(
        self, scope: _Scope, op: Op, inputs: list[Value | None], results: list[Type | None]
    ) -> list[Known | None]:
        """Known elements through an op that only moves them (Transpose, Slice, Concat, ...),
        at any rank: our kernel runs on the positions of the elements (0, 1, 2, ... in the
        input's shape) and the positions it returns say which element lands where. So the
        pads PyTorch computes with Reshape, a reversing Slice and Transpose of a 2-D tensor
        keep their symbols."""
        moved = MOVED_INPUTS[op.op_type]
        elements: list[Dim] = []
        arrays: list[np.ndarray | None] = []
        for i, value in enumerate(inputs):
            if value is None:
                arrays.append(None)
            elif moved is None or i in moved:
                known = self.known_of(value)
                t = scope.type_of(value)
                if known is None or not isinstance(t, TensorType) or t.shape is None:
                    return []
                shape = tuple(d for d in t.shape if isinstance(d, int))
                if len(shape) != len(t.shape) or int(np.prod(shape)) != len(known):
                    return []
                start = len(elements)
                elements.extend(known)
                arrays.append(np.arange(start, len(elements), dtype=np.int64).reshape(shape))
            else:
                array = self.const_of(value)
                if array is None or self.overridable(value):
                    return []
                arrays.append(array)
        if not elements or not _static_outputs(results) or not _small_outputs(results):
            return []
        try:
            positions = kernels.run(op, arrays, scope.opsets)
        except OnnxForgeError:
            return []
        return [
            tuple(elements[int(i)] for i in p.reshape(-1))
            if p.size <= MAX_KNOWN_ELEMENTS
            else None
            for p in positions
        ]

    def run_rule(
        self, op: Op, ctx: InferContext, in_types: list[Type | None], opset: int, domain: str
    ) -> list[Type | None]:
        if any(isinstance(v, ir.AttrRef) for v in op.attrs.values()):
            return [None] * len(ctx.scope.graph.outputs_of(op))
        rule = SHAPE_RULES.find(op.op_type, opset, domain)
        if rule is not None:
            tensors = [t if isinstance(t, TensorType) else None for t in in_types]
            return rule(op, tensors, ctx)
        from onnxforge.shape_infer import _onnx_fallback  # noqa: PLC0415  (imports onnx)

        results = _onnx_fallback.infer_node(op, in_types, ctx)
        if all(isinstance(t, TensorType) and t.shape is not None for t in results):
            return results
        function = _onnx_fallback.schema_function(op, in_types, ctx)
        if function is None:
            return results
        body = self.infer_call(ctx.scope, op, function, in_types)
        return [_merge(a, b, None) for a, b in zip(results, body, strict=False)]

    def infer_call(
        self, scope: _Scope, op: Op, function: ir.Function, in_types: list[Type | None]
    ) -> list[Type | None]:
        if scope.depth >= MAX_FUNCTION_DEPTH:
            raise ShapeError(f"local functions call each other deeper than {MAX_FUNCTION_DEPTH}")
        opsets = dict(function.opset_imports) or dict(scope.opsets)
        body = _Scope(
            function.graph, opsets, f"{scope.where}{op.op_type}: ", {}, None, scope.depth + 1
        )
        for value, t in zip(function.graph.inputs, in_types, strict=False):
            body.types[value] = t
        given = {**function.attribute_defaults, **op.attrs}
        bound: list[tuple[Op, dict[str, Any]]] = []
        for graph in ir.walk_graphs(function.graph):
            for inner in graph.ops:
                if any(isinstance(v, ir.AttrRef) for v in inner.attrs.values()):
                    bound.append((inner, inner.attrs))
                    inner.attrs = {
                        k: given.get(v.name) if isinstance(v, ir.AttrRef) else v
                        for k, v in inner.attrs.items()
                        if not isinstance(v, ir.AttrRef) or given.get(v.name) is not None
                    }
        try:  # the body is shared by every call: bind this call's attributes, then restore
            self.infer_graph(body)
        finally:
            for inner, attrs in bound:
                inner.attrs = attrs
        return [body.type_of(v) for v in function.graph.outputs]

    def name_unknowns(self, t: Type | None) -> Type | None:
        if isinstance(t, TensorType) and t.shape is not None and None in t.shape:
            return TensorType(t.dtype, tuple(self.new_dim() if d is None else d for d in t.shape))
        return t

    def stale(
        self,
        scope: _Scope,
        value: Value,
        declared: Type | None,
        inferred: Type | None,
        *,
        node: str,
        label: str,
    ) -> None:
        entry = StaleDeclaration(
            scope.where, value.name, str(declared), str(inferred), node, label, value
        )
        logger.info("%s", entry)  # the report carries it; commands print it as a warning
        self.record(self.report.stale, entry)

    def error(
        self,
        scope: _Scope,
        op: Op,
        version: int,
        in_types: list[Type | None],
        reason: str,
        *,
        internal: bool = False,
        label: str | None = None,
    ) -> None:
        self.record(
            self.report.errors,
            InferError(
                scope.where,
                op.name,
                label or (f"{op.op_type}-{version}" if version else op.op_type),
                tuple("none" if t is None else str(t) for t in in_types),
                reason,
                internal,
            ),
        )

    def record(self, entries: list[Any], entry: Any) -> None:
        """Add an error, stale declaration, assumption or note to the report, remembering
        which op of the main graph it came from (``Resumable`` replaces an op's entries when
        it infers the op again)."""
        entries.append(entry)
        if self.current is not None:
            self.by_op.setdefault(self.current, []).append((entries, entry))


MAX_ELEMENTS = (1 << 63) - 1


def _check_size(t: Type | None, value: Value) -> None:
    """A shape with more elements than int64 counts describes no tensor (2^62 x 2^62)."""
    if not isinstance(t, TensorType) or t.shape is None:
        return
    count = 1
    for d in t.shape:
        if isinstance(d, int):
            count *= d
            if count > MAX_ELEMENTS:
                raise ShapeError(
                    f"{value.name!r}: the shape {format_shape(t.shape)} has more elements "
                    "than int64 counts"
                )


Memo = dict[tuple[Any, ...], tuple[list["Type | None"], list["Known | None"]]]
_MEMOS: weakref.WeakKeyDictionary[Model, Memo] = weakref.WeakKeyDictionary()
"""Each model's remembered inferences (``_Engine.memo_key``), kept from one inference to the
next: a pipeline infers the same model again after each pass that changed it, and the ops it
did not touch are found here."""
_MISSING = object()
_SIMPLE = (int, float, str, bytes)


def _attrs_key(op: Op) -> tuple[Any, ...] | None:
    """The op's attributes as a hashable key; None when one is a tensor or a graph."""
    items: list[tuple[str, Any]] = []
    for name, value in op.attrs.items():
        if isinstance(value, _SIMPLE):
            items.append((name, value))
        elif isinstance(value, (list, tuple)) and all(isinstance(v, _SIMPLE) for v in value):
            items.append((name, tuple(value)))
        else:
            return None
    return tuple(sorted(items))


def _static_outputs(results: list[Type | None]) -> bool:
    return all(
        isinstance(t, TensorType)
        and t.shape is not None
        and all(isinstance(d, int) for d in t.shape)
        for t in results
    )


def _small_outputs(results: list[Type | None]) -> bool:
    for t in results:
        if not isinstance(t, TensorType) or t.shape is None:
            return False
        if not all(isinstance(d, int) for d in t.shape):
            return False
        if int(np.prod([int(d) for d in t.shape if d is not None], dtype=np.float64)) > (
            MAX_EVAL_OUTPUT_ELEMENTS
        ):
            return False
    return True


def _small_values(arrays: list[np.ndarray]) -> bool:
    """Inputs whose numbers are all small (an output sized by them stays small)."""
    for a in arrays:
        if a.dtype.kind in "iuf" and a.size and float(np.max(np.abs(a))) > MAX_EVAL_VALUE:
            return False
        if a.dtype.kind not in "iufbOUSV":  # V: ml_dtypes' bfloat16, float8, int4
            return False
    return True


def _replace(declared: Type | None, inferred: Type | None) -> Type | None:
    """The inferred type in place of a stale declared one (its element type kept if unknown)."""
    if not isinstance(inferred, TensorType) or not isinstance(declared, TensorType):
        return inferred
    return TensorType(inferred.dtype or declared.dtype, inferred.shape)


class _Contradiction(ShapeError):
    """A declared type whose rank or a static dim differs from the inferred one."""


def _merge(declared: Type | None, inferred: Type | None, value: Value | None) -> Type | None:
    """Combine a declared type (value_info, graph output) with an inferred one.

    A static dim beats a symbol, a symbol beats an unknown; different element types are a
    ShapeError, a different rank or two different static dims a ``_Contradiction``.
    """
    if inferred is None or isinstance(inferred, OpaqueType):
        return declared if declared is not None else inferred
    if not isinstance(declared, TensorType) or declared == inferred:
        return inferred  # equal: what an earlier inference wrote, inferred again
    name = f"{value.name!r}: " if value is not None else ""
    if declared.dtype and inferred.dtype and declared.dtype != inferred.dtype:
        raise ShapeError(f"{name}declared {declared}, inferred {inferred} (element types differ)")
    dtype = inferred.dtype or declared.dtype
    if declared.shape is None:
        return TensorType(dtype, inferred.shape)
    if inferred.shape is None:
        return TensorType(dtype, declared.shape)
    if len(declared.shape) != len(inferred.shape):
        raise _Contradiction(f"{name}declared {declared}, inferred {inferred} (ranks differ)")
    dims: list[Dim] = []
    for i, (d, n) in enumerate(zip(declared.shape, inferred.shape, strict=True)):
        if isinstance(d, int) and isinstance(n, int) and d != n:
            raise _Contradiction(
                f"{name}declared {format_shape(declared.shape)}, inferred "
                f"{format_shape(inferred.shape)} (dim {i}: {d} != {n})"
            )
        if isinstance(d, int) or (is_unknown_symbol(n) and d is not None):
            dims.append(d)
        else:
            dims.append(n)
    return TensorType(dtype, tuple(dims))


def _integer_typed(t: Type | None) -> bool:
    return (
        isinstance(t, TensorType)
        and t.dtype in INTEGER_DTYPES
        or (isinstance(t, TensorType) and t.dtype == DType.BOOL)
    )


def infer(
    model: Model, *, strict: bool = False, verify: bool = True, strict_declared: bool = False
) -> InferReport:
    """Give every value of ``model`` a type, in place; the report lists errors, replaced stale
    declarations and assumptions.

    ``strict``: raise a ShapeError listing every error instead of returning them.
    ``verify``: check the graph's invariants first (a pipeline that already did may skip it).
    ``strict_declared``: a declared type that contradicts inference is an error, not replaced.
    """
    return infer_resumable(
        model, strict=strict, verify=verify, strict_declared=strict_declared
    ).engine.report


def infer_resumable(
    model: Model, *, strict: bool = False, verify: bool = True, strict_declared: bool = False
) -> Resumable:
    """``infer``, keeping what it takes to bring the types up to date after edits
    (``Resumable.again``); its report is ``.engine.report``."""
    if verify:
        ir.verify(model)
    engine = _Engine(model, strict_declared=strict_declared)
    types: dict[Value, Type | None] = {}
    scope = _Scope(model.graph, _opsets(model), "", types)
    interface: dict[Value, Type | None] = {}
    for value in model.graph.inputs:  # an unnamed input dim (skl2onnx's batch) gets a name, so
        if value.const is None:  # every value sized by it shares it; the input stays as declared
            named = engine.name_unknowns(value.type)
            if named is not value.type:
                types[value] = named
                interface[value] = named
                if isinstance(named, TensorType):
                    engine.report.input_names[value] = named
    engine.infer_graph(scope)
    for value, t in types.items():
        # Initializers keep their own type; value_info is written only where it says something.
        if (
            t is not None
            and value not in interface
            and (value.const is None or value.type is not None)
        ):
            value.type = t
    resumable = Resumable(engine, interface, list(model.graph.inputs))
    resumable.finish(types, strict=strict)
    return resumable


def _opsets(model: Model) -> dict[str, int]:
    opsets = dict(model.opset_imports)
    if "ai.onnx" in opsets:
        opsets.setdefault("", opsets["ai.onnx"])
    return opsets


class Resumable:
    """An inference that edits need not end: ``again`` infers the ops of the main graph that
    edits touched since (``ir.Graph.touched_since``; an edit inside a body touches the op
    holding it) and the readers of every value whose type, known elements or computed data
    that changed, in topological order, and nothing else. A value not inferred again keeps
    the type this inference gave it, which the caller keeps in ``Value._inferred``.

    It touches (``Graph.touch``) the readers of every value whose facts changed, and every
    op holding a body it inferred again: a pass visiting only what changed since its last
    run (``passes._worklist``) looks at them.

    The result is what inference of the whole model would give, except for the names of
    fresh unknown dims (numbered on from the last) and the order of the report's entries
    (an op inferred again reports last); ``tests/shape_infer/test_resumable.py`` checks it
    on real models after every pass of optimize."""

    def __init__(
        self, engine: _Engine, interface: dict[Value, Type | None], inputs: list[Value]
    ) -> None:
        self.engine = engine
        self.interface = interface  # graph inputs whose unnamed dims inference named
        self.inputs = inputs
        self.mark = 0
        self.inferred_again = 0  # ops, over every ``again``

    def again(self, *, strict: bool = False, most: float = 0.5) -> InferReport | None:
        """Bring the types up to date with the edits made since; None when a full inference
        is needed instead: the main graph's inputs changed, a local function's body was
        edited, or more than ``most`` of the main graph's ops (and over 64) were touched
        (inferring all of them costs no more)."""
        engine = self.engine
        model = engine.model
        main = model.graph
        if main.inputs != self.inputs:
            return None
        dirty: set[Op] = set()
        for graph in model.graphs():
            touched = graph.touched_since(self.mark)
            if not touched:
                continue
            if graph is main:
                dirty.update(touched)
                continue
            body = graph
            while body.parent is not None and body.parent is not main:
                body = body.parent
            if body.parent is not main or body.owner is None:
                return None  # a local function's body: every call of it would change
            dirty.add(body.owner)
        if len(dirty) > max(most * len(main), 64):
            return None
        self._forget(dirty)
        types: dict[Value, Type | None] = {}
        scope = _Scope(main, _opsets(model), "", types, earlier=self._earlier)
        uses = main._uses
        for op in main.topo_order():
            if op not in dirty:
                continue
            self.inferred_again += 1
            before = {}
            for value in op._outputs:
                if value is not None:
                    known, const = engine.known.pop(value, None), engine.consts.pop(value, None)
                    before[value] = (value._inferred, known, const)
                    types[value] = value.type  # declared: what a whole inference merges with
            engine.current = op
            engine.infer_op(scope, op)
            engine.current = None
            if op.attrs and any(True for _ in op.subgraphs()):
                main.touch(op)  # its bodies' types may have changed: look at them again
            for value, (old_type, old_known, old_const) in before.items():
                if (
                    types.get(value) != old_type
                    or engine.known.get(value) != old_known
                    or not _same_array(engine.consts.get(value), old_const)
                ):
                    for reader, _ in uses.get(value, ()):
                        dirty.add(reader)
                        main.touch(reader)  # what it reads changed: passes look at it again
        for value, t in types.items():
            if t is not None and (value.const is None or value.type is not None):
                value.type = t
        for graph in model.graphs(functions=False):
            for value in graph.values():
                if value not in types and value._inferred is not None and value.const is None:
                    value.type = value._inferred  # an initializer keeps its own (folded since)
        self.finish(types, strict=strict)
        return engine.report

    def _earlier(self, value: Value) -> Type | None:
        """A value's type when this round does not infer it again: as inference named a
        graph input, an initializer's own, else the one kept from the last round."""
        named = self.interface.get(value)
        if named is not None:
            return named
        const = value.const
        if const is not None and value._producer is None:
            declared = value.type
            if isinstance(declared, TensorType):
                return declared
            shape = tuple(const.shape) if isinstance(const, Tensor) else tuple(const.dims)
            return TensorType(const.dtype, shape)
        return value._inferred  # type: ignore[no-any-return]

    def _forget(self, dirty: set[Op]) -> None:
        """Drop the report entries of the ops to infer again and of the removed ops."""
        engine = self.engine
        dropped: set[int] = set()
        for op in [op for op in engine.by_op if op in dirty or op._graph is None]:
            dropped.update(id(entry) for _, entry in engine.by_op.pop(op))
        if dropped:
            report = engine.report
            kinds: tuple[list[Any], ...] = (
                report.errors,
                report.stale,
                report.assumptions,
                report.notes,
            )
            for entries in kinds:
                entries[:] = [e for e in entries if id(e) not in dropped]

    def finish(self, types: dict[Value, Type | None], *, strict: bool) -> None:
        """The report's known values and counts for the model as it is now; the edit mark
        later edits are measured from. ``types``: what this round inferred."""
        engine = self.engine
        report = engine.report
        known = engine.known
        for value in [v for v in known if v._producer is None or v._producer._graph is None]:
            del known[value]  # removed since
        integer = {v: k for v, k in known.items() if _integer_typed(types.get(v) or v.type)}
        report.static_values = {
            v: tuple(k)  # type: ignore[arg-type]
            for v, k in integer.items()
            if all(isinstance(d, int) for d in k)
        }
        report.known_values = integer  # float shape values stay inside the engine
        report.values = report.typed = 0
        for graph in engine.model.graphs(functions=False):
            for value in graph.values():
                if value.graph is not graph:
                    continue  # captured from an enclosing graph: counted there
                if value.const is not None and value not in graph.inputs:
                    continue  # initializers carry their own type
                report.values += 1
                if isinstance(value.type, TensorType) and value.type.shape is not None:
                    report.typed += 1
        # What the engine read of ops and initializers may change by the next round (a pass
        # sets an attribute or an initializer's data in place): read again when needed. The
        # attribute keys would also be most of the memory an inference kept.
        engine.attr_keys = {}
        engine.consts = {v: a for v, a in engine.consts.items() if v.const is None}
        engine.constant_known.clear()
        engine.graph_inputs.clear()
        self.mark = ir.edit_mark()
        if strict and report.errors:
            raise ShapeError("\n".join(map(str, report.errors)))


def _same_array(a: np.ndarray | None, b: np.ndarray | None) -> bool:
    """Both absent, or the same dtype, shape and elements."""
    if a is None or b is None:
        return a is b
    return a.dtype == b.dtype and np.array_equal(a, b)
