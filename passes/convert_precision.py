"""convert-precision: float32 to float16 or bfloat16 and back, typed by the schemas."""

from __future__ import annotations

__all__ = ["DTYPES", "HALVES", "MIN_WEIGHT_ELEMENTS", "ConvertPrecisionPass", "convert_array"]

import functools
import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import ml_dtypes
import networkx as nx
import numpy as np

from onnxforge import opset as schemas
from onnxforge.errors import PostconditionError, PreconditionError
from onnxforge.ir import (
    DType,
    Function,
    Graph,
    Model,
    Op,
    OpaqueType,
    Tensor,
    TensorType,
    Value,
    constant_tensor,
    walk_graphs,
)
from onnxforge.passes._infra import Pass, PassResult, node_label, register_pass
from onnxforge.passes._rewrite import (
    STANDARD_DOMAINS,
    bypass,
    graphs_with_opset,
    inference,
    refresh_captures,
    rename,
    since,
)
from onnxforge.shape_infer import infer

logger = logging.getLogger(__name__)

DTYPES = {"float16": DType.FLOAT16, "bfloat16": DType.BFLOAT16, "float32": DType.FLOAT}
"""What ``dtype`` takes: the two half types, and float32 to turn a half model back."""
HALVES = frozenset({DType.FLOAT16, DType.BFLOAT16})
MIN_WEIGHT_ELEMENTS = 16
"""The fewest elements of a weight stored in the half type behind a Cast (and only where it
saves more bytes than its Cast adds, ``_saves_bytes``): smaller ones stay float32."""
MULTIPLY_ACCUMULATE = frozenset(
    {"Conv", "ConvTranspose", "ConvInteger", "MatMul", "Gemm", "Einsum", "Attention", "LSTM",
     "GRU", "RNN"}
)  # fmt: skip
"""Ops a half type makes faster (tensor cores): they convert even between float32 ops."""
KEPT_NOTES = frozenset({"kept_float32", "weights_kept_float32"})
"""Notes of what stayed as it was: alone, they leave the model unmodified."""
TYPE_ATTRIBUTES = ("to", "dtype")
"""Attributes that name an op's output element type (Cast, RandomNormal, EyeLike, ...)."""
EXACT_IN_HALF = frozenset({"Relu", "Clip", "MaxPool", "GlobalMaxPool", "Max", "Min", "Abs", "Neg"})
"""Ops each of whose output values is one of their inputs' (or its negation): fed values a
half type holds, they compute in it exactly what float32 computes."""
EXACT = {DType.FLOAT16: {1, 11}, DType.BFLOAT16: {1, 11}, DType.FLOAT: {11}}
"""Wider float types that hold every value of a type: a Cast there and back is an identity."""
ANY, JOINT = -1, -2
"""Wants of an input whose type parameter binds no output (Cast's input, Shape's, Resize's
roi): it takes what comes, alone (ANY) or together with the op's other such inputs (JOINT)."""
_NUMPY = {DType.FLOAT16: np.dtype(np.float16), DType.BFLOAT16: np.dtype(ml_dtypes.bfloat16)}


def convert_array(array: np.ndarray, dtype: int) -> tuple[np.ndarray, int]:
    """``array`` in ``dtype`` and how many finite values were beyond its range: those are
    clamped to its largest finite magnitude (a -1e9 or float32-min mask fill becomes float16's
    -65504, not -inf, so that a fully masked row stays a number); inf and NaN stay."""
    if dtype == DType.FLOAT:
        return np.asarray(array, dtype=np.float32), 0
    values = np.asarray(array, dtype=np.float32)
    limit = float(ml_dtypes.finfo(_NUMPY[DType(dtype)]).max)
    over = np.isfinite(values) & (np.abs(values) > limit)
    count = int(over.sum())
    if count:
        values = np.where(over, np.sign(values) * np.float32(limit), values)
    return values.astype(_NUMPY[DType(dtype)]), count


_Read = tuple[Any, Graph, Value, int]
"""A read of a candidate value: (op, port) or ("output", index), the reader's graph, the
value, the dtype it must have."""


@dataclass
class _Plan:
    """What an op takes and makes: the wanted dtype per input port (None: untouched; ANY,
    JOINT) and the new dtype per output port (None: untouched)."""

    inputs: list[int | None]
    outputs: list[int | None]
    kept: str | None = None


@dataclass
class _Work:
    """One conversion's state: the original dtype of every candidate value, their new
    dtypes, and what was made (Casts and sibling constants, by value and dtype)."""

    source: frozenset[int]
    target: int
    orig: dict[Value, int] = field(default_factory=dict)
    dtypes: dict[Value, int | None] = field(default_factory=dict)
    final: dict[Value, int] = field(default_factory=dict)
    plans: dict[Op, _Plan] = field(default_factory=dict)
    made: dict[tuple[Graph, Value, int], Value] = field(default_factory=dict)
    created: set[Op] = field(default_factory=set)
    in_function: set[Graph] = field(default_factory=set)
    opsets: dict[Graph, int] = field(default_factory=dict)
    weight_inputs: set[Value] = field(default_factory=set)
    """Initializers listed as inputs of an IR < 4 model (all were): weights, not inputs."""
    main: Graph | None = None

    def constant(self, value: Value) -> bool:
        """An initializer a caller cannot override, or a Constant's output."""
        graph = value.graph
        if graph is None:
            return False
        if isinstance(value.const, Tensor):
            return value not in graph.inputs or value in self.weight_inputs
        op = graph.producer(value)
        return op is not None and op.op_type == "Constant" and constant_tensor(op) is not None

    def now(self, value: Value) -> int | None:
        """The value's dtype as converted so far."""
        return self.final.get(value, self.dtypes.get(value))


@register_pass
class ConvertPrecisionPass(Pass):
    """Convert a float32 model to float16 or bfloat16 (``dtype``), or a half model back to
    float32, so that every node is valid under its op version's type constraints.

    1. Each op computes in the new type where its schema allows it for every float value it
       binds (checked with ``opset.node_problem``); an input whose formal parameter does not
       (Resize's ``scales``) keeps its type, and an op with no such version at the model's
       opset (bfloat16 before opset 13, Range in float16) stays as it is. An input whose type
       parameter binds no output (Cast's, Shape's, Resize's roi) takes what comes.
    2. An op whose ``epsilon`` the new type cannot hold (1e-12 in float16) stays in float32,
       and so does one reading a parameter past its range (``PARAMETER_READERS``: a
       BatchNormalization's variance of 4.8e7): noted as ``kept_float32`` with the reason,
       as are the ops of case 1 that stay. So are cheap ops (not ``MULTIPLY_ACCUMULATE``)
       that would compute in half between such ops alone: there half saves nothing and
       costs Casts (``_keep_islands``). Last, in float16, an ``EXACT_IN_HALF`` op kept
       for what it measured (``exact_free`` names it) whose inputs hold float16 values
       already computes in float16 after all: the same values, without a Cast each way
       (noted as ``exact_in_half``).
    3. Constants (initializers, Constant, ConstantOfShape values) are converted, clamped to
       the type's finite range (``constants_clamped``); a constant read in both types gets a
       sibling holding the other, never a Cast. Cast ``to`` and ``dtype`` attributes follow.
    4. Where a value's new type differs from what a reader takes, one Cast per value and type
       is added beside the value (in the body for a body output). Graph inputs and outputs
       keep their type with ``keep_io_types`` (the outputs' names too).
    5. If/Loop/Scan bodies take their op's types at their interface; a model-local function
       computes in the new type (typed from its first call); captured values keep the outer
       graph's type.
    6. Casts the conversion made into identities, a Cast that undoes an exact one before it,
       and a Cast of a float constant are removed or folded.

    ``keep_float32``: node names, first output names or op types of ops that stay as they are
    (noted like case 2, with the mapping's value as the reason when it is one). ``choose``
    adds to them from the model about to be converted: the automatic mixed precision
    (``onnxforge.api.Calibration``), which runs it; what it adds is ``exact_free`` too, but
    its ``runtime_kept`` (what onnxruntime refuses in the half type). ``store_kept_weights``
    (or the ``store_kept_weights`` of what ``choose`` returns, when it has one): the weights
    the ops left in float32 read are then stored in ``dtype`` behind a Cast, as
    ``weights_only`` stores them, so the file halves while those ops compute in float32; but
    the weights of the ops ``asked`` names (default: ``keep_float32``), which keep the
    original's, and those ``float32_weights`` names (weight -> why: their rounding moves the
    outputs most).

    ``weights_only``: float32 initializers (and Constant values) of at least ``min_elements``
    (default: ``MIN_WEIGHT_ELEMENTS``, and only those whose half values save more bytes than
    their Cast adds) are stored in ``dtype`` behind one Cast to float32 each: every op still
    computes in float32, and the file shrinks by about half; a weight with values past the
    type's range stays float32 (clamped, it would change what its readers compute). There
    ``keep_float32`` names weights (initializers, Constant outputs) that stay float32, and
    ``choose`` adds to them (``onnxforge.api.Calibration(weights_only=True)``, which runs the
    model).
    """

    name: ClassVar[str] = "convert-precision"
    summary: ClassVar[str] = (
        "Convert float32 to float16/bfloat16 (or back) where each op's type constraints allow."
    )

    def __init__(
        self,
        dtype: str = "float16",
        *,
        keep_io_types: bool = True,
        weights_only: bool = False,
        min_elements: int | None = None,
        keep_float32: Collection[str] | Mapping[str, str] = (),
        choose: Callable[[Model], Mapping[str, str]] | None = None,
        store_kept_weights: bool = False,
        asked: Mapping[str, str] | None = None,
        float32_weights: Mapping[str, str] | None = None,
        exact_free: Collection[str] = (),
    ) -> None:
        if dtype not in DTYPES:
            raise PreconditionError(f"dtype {dtype!r}: one of {', '.join(DTYPES)}")
        if weights_only and DTYPES[dtype] not in HALVES:
            raise PreconditionError("weights_only stores weights in float16 or bfloat16")
        self.dtype = dtype
        self.keep_io_types = keep_io_types
        self.weights_only = weights_only
        self.min_elements = min_elements
        self.keep_float32: dict[str, str] = (
            dict(keep_float32)
            if isinstance(keep_float32, Mapping)
            else dict.fromkeys(keep_float32, "asked (--keep-float32)")
        )
        self.choose = choose
        self.store_kept_weights = store_kept_weights
        self.asked = asked
        self.float32_weights = dict(float32_weights or {})
        self.exact_free = frozenset(exact_free)
        self._errors_before = 0

    def call(self, model: Model) -> PassResult:
        result = PassResult(model)
        target = DTYPES[self.dtype]
        given = self.keep_float32
        store = self.store_kept_weights
        float32_weights = self.float32_weights
        free = self.exact_free
        if self.choose is not None:  # what the model computes says more stays float32
            chosen = self.choose(model)
            store = getattr(chosen, "store_kept_weights", store)
            float32_weights = getattr(chosen, "float32_weights", float32_weights)
            runtime: Collection[str] = getattr(chosen, "runtime_kept", frozenset())
            free = free | {key for key in chosen if key not in given and key not in runtime}
            self.keep_float32 = {**chosen, **given}
        try:
            if self.weights_only:
                self._compress_weights(model, target, result, self.keep_float32)
            else:
                self._convert(model, target, result, free)
                refresh_captures(model)
                if store and target in HALVES:  # the float32 ops' weights, stored half
                    asked = given if self.asked is None else self.asked
                    kept = {**_asked_weights(model, asked), **float32_weights}
                    self._compress_weights(model, target, result, kept)
        finally:
            self.keep_float32 = given
        result.modified = any(k not in KEPT_NOTES for k in result.stats)
        return result

    def ensures(self, model: Model) -> None:
        """The conversion is type-correct: inference finds no error the model did not have."""
        if self.weights_only:
            return
        declared = {v: v.type for g in model.graphs() for v in g.values() if v._graph is g}
        errors = inference(model).errors
        for value, t in declared.items():
            value.type = t
        if len(errors) > self._errors_before:
            raise PostconditionError(
                "convert-precision left type errors: " + "; ".join(map(str, errors[:5]))
            )

    # -- weights only ------------------------------------------------------------------------
    def _compress_weights(
        self, model: Model, target: int, result: PassResult, keep: Mapping[str, str]
    ) -> None:
        """Store each float32 weight of ``min_elements`` or more in ``target`` behind a Cast
        to float32 under its name; a weight ``keep`` names stays as it is (noted as
        ``weights_kept_float32`` with the reason)."""
        bodies = {g for f in model.functions for g in walk_graphs(f.graph)}
        for graph, opset in graphs_with_opset(model):
            if graph in bodies:
                continue  # a function has no initializers; its constants are its calls' own
            found = [v for v in graph.initializers if v not in graph.inputs]
            found += [o._outputs[0] for o in graph.ops if o.op_type == "Constant"]
            grid = _quantization_parameters(graph)
            problem = _problem(
                "Cast", "", opset=opset, attrs=frozenset({"to"}), inputs=(target,),
                outputs=(DType.FLOAT,),
            )  # fmt: skip
            for value in found:
                tensor = _tensor_of(graph, value)
                if tensor is None or tensor.dtype != DType.FLOAT:
                    continue
                if not graph.is_used(value):
                    continue
                if not self._worth_storing(graph, value, tensor, target):
                    continue
                if value in grid:
                    result.note("weights_kept_float32", f"{value.name}: {grid[value]}")
                    continue
                if value.name in keep:
                    reason = keep[value.name]
                    result.note("weights_kept_float32", f"{value.name}: {reason}")
                    continue
                if problem is not None and not self.weights_only:
                    break  # a kept op's weights: this graph's opset has no such Cast
                if problem is not None:
                    raise PreconditionError(
                        f"weight {value.name!r} cannot be stored as {_name(target)} behind a "
                        f"Cast at opset {opset}: {problem}"
                    )
                array, clamped = convert_array(tensor.numpy(), target)
                if clamped:  # stored clamped, it would change what every op reading it computes
                    top = float(ml_dtypes.finfo(_NUMPY[DType(target)]).max)
                    why = f"values past {_name(target)}'s {top:g}"
                    result.note("weights_kept_float32", f"{value.name}: {why}")
                    continue
                half = graph.add_initializer(
                    graph.fresh_name(f"{value.name}_{_name(target)}"),
                    Tensor.from_numpy(array, target),
                )
                cast = graph.add_op("Cast", [half], to=int(DType.FLOAT))
                out = cast._outputs[0]
                assert out is not None
                graph.replace_all_uses(value, out)
                name, declared = value.name, value.type
                producer = graph.producer(value)
                if producer is not None:
                    graph.remove_op(producer)
                else:
                    graph.remove_initializer(value)
                rename(out, name)
                if out in graph.outputs:
                    out.type = declared or TensorType(DType.FLOAT, tensor.shape)
                result.note("weights_compressed", name)

    def _worth_storing(self, graph: Graph, value: Value, tensor: Tensor, target: int) -> bool:
        """Whether the float32 weight ``value`` (holding ``tensor``) is stored half behind a
        Cast: ``min_elements`` or more, where given; else ``MIN_WEIGHT_ELEMENTS`` or more and
        saving bytes (``_saves_bytes``)."""
        if self.min_elements is not None:
            return tensor.size >= self.min_elements
        constant = graph.producer(value) is not None
        return tensor.size >= MIN_WEIGHT_ELEMENTS and _saves_bytes(
            value.name, tensor, _name(target), constant
        )

    # -- conversion ---------------------------------------------------------------------------
    def _convert(
        self, model: Model, target: int, result: PassResult, free: frozenset[str] = frozenset()
    ) -> None:
        source = frozenset(HALVES if target == DType.FLOAT else {DType.FLOAT})
        work = _Work(source, target, main=model.graph)
        declared = {v: v.type for g in model.graphs() for v in g.values() if v._graph is g}
        self._errors_before = len(inference(model).errors)
        if model.ir_version < 4:
            work.weight_inputs = {v for v in model.graph.inputs if v.const is not None}
        for graph in model.graphs():
            for value in graph.values():
                if value._graph is graph:
                    work.dtypes[value] = _dtype(value)
        for fn in model.functions:
            work.in_function.update(walk_graphs(fn.graph))
            self._type_function(model, fn, work)
        for value, dtype in work.dtypes.items():
            if dtype in source and not isinstance(value.type, OpaqueType):
                work.orig[value] = dtype
        functions = {f.key for f in model.functions}
        graphs = list(graphs_with_opset(model))
        for graph, opset in graphs:
            work.opsets[graph] = opset
            for op in graph.ops:
                plan = self._plan(op, opset, work, functions)
                if plan is not None:
                    work.plans[op] = plan
        named = {op: plan.kept for op, plan in work.plans.items() if plan.kept}
        for graph, _ in graphs:
            self._keep_parameter_arithmetic(graph, work, result)
            if target in HALVES:
                self._keep_islands(graph, work, result)
        if target == DType.FLOAT16 and free:
            self._compute_exact_in_half(model.graph, work, functions, free)
        for op, why in named.items():
            if work.plans[op].kept:
                result.note("kept_float32", f"{node_label(op)}: {why}")
            else:  # freed by _compute_exact_in_half
                what = "its values are its float16 inputs': it computes in float16 all the same"
                result.note("exact_in_half", f"{node_label(op)}: {why}; {what}")
        self._assign(model, work)
        readers = self._readers(model, work)
        self._choose_constants(model, work, readers, result)
        for graph, _ in graphs:
            for op in graph.ops:
                if op in work.plans:
                    self._retype_attributes(graph, op, work, result)
        for read in readers:
            if work.final.get(read[2], read[3]) != read[3]:
                self._connect(read, work, result)
        for value, t in declared.items():
            new = work.final.get(value)
            if new is not None and isinstance(t, TensorType) and new != t.dtype:
                value.type = TensorType(new, t.shape)
                result.stats["values_retyped"] += 1
            else:
                value.type = t
        for graph, _ in graphs:
            self._clean_casts(graph, work, result)

    def _type_function(self, model: Model, fn: Function, work: _Work) -> None:
        """Type a function's body from its first call (a body is untyped: its calls type it)."""
        call = next(
            (op for _, op in model.ops() if (op.domain, op.op_type, op.overload) == fn.key), None
        )
        if call is None:
            return
        body = fn.graph
        saved = {v: v.type for v in body.values()}
        for value, given in zip(body.inputs, call._inputs, strict=False):
            if value.type is None and given is not None:
                dtype = _dtype(given)
                value.type = None if dtype is None else TensorType(dtype, None)
        imports = {**model.opset_imports, **fn.opset_imports}
        scratch = Model(body, ir_version=model.ir_version, opset_imports=imports)
        scratch.functions = model.functions
        infer(scratch, verify=False)
        for value in body.values():
            work.dtypes[value] = _dtype(value)
            value.type = saved.get(value)

    def _plan(
        self,
        op: Op,
        opset: int,
        work: _Work,
        functions: set[tuple[str, str, str]],
        *,
        by_name: bool = True,
    ) -> _Plan | None:
        ins, outs = list(op._inputs), list(op._outputs)
        if not any(v in work.orig for v in ins + outs if v is not None):
            return None
        base_in = [None if v is None else work.dtypes.get(v) for v in ins]
        base_out = [None if v is None else work.dtypes.get(v) for v in outs]
        kept = _as_is(op, work)
        if (op.domain, op.op_type, op.overload) in functions:
            return _Plan(
                [work.target if v in work.orig else None for v in ins],
                [work.target if v in work.orig else None for v in outs],
            )
        if op.op_type == "Constant" and op.domain in STANDARD_DOMAINS:
            if constant_tensor(op) is not None:
                return None  # a constant: converted by what its readers take
            kept.kept = "a sparse constant"
            return kept
        bodies = any(True for _ in op.subgraphs())
        reason = self._keep_reason(op, opset, work, by_name=by_name)
        values = [v for v in ins + outs if v is not None]
        opaque = [v for v in values if isinstance(v.type, OpaqueType)]
        unknown = [v.name for v in values if work.dtypes.get(v) is None and v not in opaque]
        if reason is None and unknown:
            reason = f"the element type of {unknown[0]!r} is unknown"
        if reason is None and opaque and not bodies:
            reason = "it reads or makes a sequence, map or optional"
        if reason is not None:
            kept.kept = reason
            return kept
        ports = [("in", i) for i, v in enumerate(ins) if v in work.orig]
        ports += [("out", k) for k, v in enumerate(outs) if v in work.orig]

        def check(chosen: set[tuple[str, int]]) -> str | None:
            a = [work.target if ("in", i) in chosen else d for i, d in enumerate(base_in)]
            b = [work.target if ("out", k) in chosen else d for k, d in enumerate(base_out)]
            return _problem(
                op.op_type,
                op.domain,
                opset=opset,
                attrs=frozenset(op.attrs),
                inputs=tuple(a),
                outputs=tuple(b),
            )

        chosen = set(ports)
        problem = check(chosen)
        if problem is not None:
            for port in ports:
                if check(chosen - {port}) is None:
                    chosen.discard(port)
                    break
            else:
                kept.kept = problem
                return kept
        wants: list[int | None] = list(kept.inputs)
        for _, i in (p for p in chosen if p[0] == "in"):
            wants[i] = work.target
        if not bodies:
            inputs = {p for p in chosen if p[0] == "in"}
            free = {p for p in inputs if check(chosen - {p}) is None}
            for _, i in free:
                wants[i] = ANY
            rest = inputs - free
            if rest and not any(p[0] == "out" for p in chosen) and check(chosen - rest) is None:
                for _, i in rest:
                    wants[i] = JOINT
        made = [work.target if ("out", k) in chosen else d for k, d in enumerate(kept.outputs)]
        return _Plan(wants, made)

    def _keep_parameter_arithmetic(self, graph: Graph, work: _Work, result: PassResult) -> None:
        """Keep float32 the ops whose float values feed only inputs that stay float32 while
        their op converts (Resize's scales: the schema has no half there), directly or through
        other such ops: a scale computed in half and cast back is a scale rounded to 3 digits
        (a ViT's position-embedding Resize then got outer scales of 0.9995, which onnxruntime
        refuses for cubic, at some image sizes and not others)."""
        fixed: set[Op] = set()
        for op in reversed(graph.topo_order()):
            plan = work.plans.get(op)
            if plan is None or plan.kept or any(True for _ in op.subgraphs()):
                continue
            made = [v for v, d in zip(op._outputs, plan.outputs, strict=False)
                    if v is not None and d == work.target]  # fmt: skip
            if not made or any(v in graph.outputs or not graph.uses(v) for v in made):
                continue
            if all(self._reads_float32(reader, key, value, work, fixed)
                   for value in made for reader, key in graph.uses(value)):  # fmt: skip
                fixed.add(op)
                why = "its values feed only float32 inputs (Resize's scales)"
                self._keep_as_is(op, work, result, why)

    def _keep_islands(self, graph: Graph, work: _Work, result: PassResult) -> None:
        """Keep float32 each group of connected ops that would compute in the half type
        between ops kept float32 alone (every value the group reads made in it, by a kept op,
        or a constant; every float value it makes read in it or by kept ops), but for
        ``MULTIPLY_ACCUMULATE`` ops, which a half type makes faster, and ops reading a
        weight the conversion would halve (``MIN_WEIGHT_ELEMENTS`` or more). In half such
        a group adds only Casts both ways and rounding (PP-OCRv5's classifier: 7 Adds and
        a Div between the calibration's float32 ops, 16 of its 93 Casts)."""

        def small(value: Value) -> bool:
            tensor = _tensor_of(graph, value)
            return tensor is not None and tensor.size < MIN_WEIGHT_ELEMENTS

        def open_to(op: Op) -> bool:
            plan = work.plans.get(op)
            if plan is None or plan.kept or op.op_type in MULTIPLY_ACCUMULATE:
                return False
            if op.domain not in STANDARD_DOMAINS or any(True for _ in op.subgraphs()):
                return False
            reads = [v for v in op._inputs if v is not None and v in work.orig]
            return all(small(v) for v in reads if work.constant(v))

        def kept(op: Op | None) -> bool:
            plan = None if op is None else work.plans.get(op)
            return plan is not None and plan.kept is not None

        groups = nx.Graph()
        for op in graph.ops:
            if open_to(op):
                groups.add_node(op)
                for value in op._inputs:
                    producer = None if value is None else graph.producer(value)
                    if producer is not None and producer in groups:
                        groups.add_edge(producer, op)
        for group in nx.connected_components(groups):
            moving = [v for op in group for v in op._inputs
                      if v is not None and v in work.orig and not work.constant(v)]  # fmt: skip
            if not moving or not all(
                graph.producer(v) in group or kept(graph.producer(v)) for v in moving
            ):
                continue
            made = [v for op in group for v in op._outputs if v is not None and v in work.orig]
            if any(
                v in graph.outputs
                or not graph.uses(v)
                or not all(
                    isinstance(k, int) and (r in group or kept(r)) for r, k in graph.uses(v)
                )  # fmt: skip
                for v in made
            ):
                continue
            why = "between float32 ops: in half it would add only Casts and rounding"
            for op in (o for o in graph.ops if o in group):
                self._keep_as_is(op, work, result, why)

    def _compute_exact_in_half(
        self, graph: Graph, work: _Work, functions: set[tuple[str, str, str]], free: frozenset[str]
    ) -> None:
        """Let the ops ``free`` names (kept float32 for the error they measured, not asked
        for nor what the runtime refuses) compute in float16 after all where that changes
        no value: an ``EXACT_IN_HALF`` op whose every float input is a float16 value already,
        made by an op computing in it or a constant it holds exactly. Kept, such an op only
        reads through a Cast to float32 and is read through one back (PP-OCRv5's
        classifier: Relus whose error looked grown over their own smaller range). Last, on
        the plans the measure was made with (its islands too): what it measured stays what
        the model computes."""
        opset = work.opsets[graph]
        held = {key for key in self.keep_float32 if key not in free}  # by another name too
        for op in graph.topo_order():
            plan = work.plans.get(op)
            if plan is None or not plan.kept or op.op_type not in EXACT_IN_HALF:
                continue
            if op.domain not in STANDARD_DOMAINS or _named_by(op, free) is None:
                continue
            if _named_by(op, held) is not None:
                continue
            if not all(self._holds_half(graph, v, work) for v in op._inputs
                       if v is not None and v in work.orig):  # fmt: skip
                continue
            bounds = [op.attrs[k] for k in ("min", "max") if isinstance(op.attrs.get(k), float)]
            if not _holds_exactly(np.array(bounds, np.float32), work.target):  # Clip-6's
                continue
            half = self._plan(op, opset, work, functions, by_name=False)
            if half is not None and not half.kept:
                work.plans[op] = half

    @staticmethod
    def _holds_half(graph: Graph, value: Value, work: _Work) -> bool:
        """Whether ``value`` holds only values of the target type: made in it by an op the
        plans convert, or a constant it holds exactly."""
        if work.constant(value):
            tensor = _tensor_of(graph, value)
            if tensor is None:
                return False
            return _holds_exactly(tensor.numpy(), work.target)
        producer = graph.producer(value)
        plan = None if producer is None else work.plans.get(producer)
        if producer is None or plan is None or plan.kept:
            return False
        port = producer._outputs.index(value)
        return plan.outputs[port] == work.target

    @staticmethod
    def _keep_as_is(op: Op, work: _Work, result: PassResult, why: str) -> None:
        """Plan ``op`` to keep its types, noted as ``kept_float32`` with ``why``."""
        work.plans[op] = _as_is(op, work, why)
        result.note("kept_float32", f"{node_label(op)}: {why}")

    @staticmethod
    def _reads_float32(reader: Op, key: object, value: Value, work: _Work, fixed: set[Op]) -> bool:
        """Whether ``reader`` reads ``value`` at ``key`` as float32: a port its converting
        op's schema keeps float32, or an op kept for that reason already."""
        if reader in fixed:
            return True
        plan = work.plans.get(reader)
        if plan is None or plan.kept or not isinstance(key, int):
            return False
        return plan.inputs[key] == work.orig.get(value) and work.orig.get(value) != work.target

    def _keep_reason(self, op: Op, opset: int, work: _Work, *, by_name: bool = True) -> str | None:
        key = _named_by(op, self.keep_float32) if by_name else None
        if key is not None:
            return self.keep_float32[key]
        if op.domain not in STANDARD_DOMAINS and op.domain != "ai.onnx.ml":
            return f"no schema in domain {op.domain!r}"
        if since(op, opset) is None and op.domain in STANDARD_DOMAINS:
            return f"no schema at opset {opset}"
        epsilon = op.attrs.get("epsilon")
        if isinstance(epsilon, float) and work.target in HALVES:
            tiny = float(ml_dtypes.finfo(_NUMPY[DType(work.target)]).smallest_subnormal)
            if 0 < epsilon < tiny:
                return f"epsilon {epsilon:g} is below {_name(work.target)}'s smallest {tiny:.3g}"
        if op.op_type in PARAMETER_READERS and work.target in HALVES:
            top = float(ml_dtypes.finfo(_NUMPY[DType(work.target)]).max)
            for value in op._inputs:
                if value is None or value.graph is None or not work.constant(value):
                    continue
                tensor = _tensor_of(value.graph, value)
                if tensor is None or tensor.dtype != DType.FLOAT:
                    continue
                array = tensor.numpy()
                over = np.abs(array[np.isfinite(array)])
                if over.size and over.max() > top:
                    return (
                        f"its parameter {value.name!r} holds values up to {over.max():.3g}, "
                        f"past {_name(work.target)}'s {top:g}"
                    )
        return None

    def _assign(self, model: Model, work: _Work) -> None:
        """New dtypes of what ops make, of graph inputs and of body inputs."""
        for graph in model.graphs():
            for op in graph.ops:
                plan = work.plans.get(op)
                for k, value in enumerate(op._outputs):
                    if plan is not None and value in work.orig:
                        work.final[value] = plan.outputs[k] or work.orig[value]
            owner = graph.owner
            for i, value in enumerate(graph.inputs):
                if value not in work.orig or work.constant(value):
                    continue
                if graph is model.graph:
                    work.final[value] = work.orig[value] if self.keep_io_types else work.target
                elif owner is None:  # a function's body: its calls convert
                    work.final[value] = work.target
                else:
                    port = _body_port(owner, graph, i, "in", work)
                    want = port if port is not None and port >= 0 else None
                    work.final[value] = want or work.orig[value]

    def _readers(self, model: Model, work: _Work) -> list[_Read]:
        """Every read of a candidate value with the dtype it must have: (op, port) or
        ("output", index), the reader's graph, the value, the wanted dtype."""
        found: list[_Read] = []
        for graph in model.graphs():
            for op in graph.ops:
                plan = work.plans.get(op)
                if plan is None:
                    continue
                joint = [v for v, w in zip(op._inputs, plan.inputs, strict=False) if w == JOINT]
                moving = {
                    work.final.get(v, work.orig[v])
                    for v in joint
                    if v is not None and not work.constant(v)
                }
                shared = moving.pop() if len(moving) == 1 else work.target
                if joint and not moving and joint[0] is not None:
                    shared = work.orig[joint[0]]  # constants alone keep their type
                for i, value in enumerate(op._inputs):
                    want = plan.inputs[i]
                    if value is None or value not in work.orig or want is None:
                        continue
                    if want == ANY:
                        continue  # takes whatever comes
                    found.append(((op, i), graph, value, shared if want == JOINT else want))
            for index, value in enumerate(graph.outputs):
                if value not in work.orig:
                    continue
                if graph is model.graph:
                    want = work.orig[value] if self.keep_io_types else work.target
                elif graph.owner is None:  # a function's body
                    want = work.target
                else:
                    port = _body_port(graph.owner, graph, index, "out", work)
                    want = port if port is not None and port >= 0 else work.orig[value]
                found.append((("output", index), graph, value, want))
        return found

    def _choose_constants(
        self,
        model: Model,
        work: _Work,
        readers: list[_Read],
        result: PassResult,
    ) -> None:
        """A constant takes the new type when any reader wants it (the others get a sibling),
        or when its readers read its shape alone (a Shape of a folded constant: bert_mlm's
        six 64 KiB ones)."""
        votes: dict[Value, set[int]] = {}
        for _, _, value, want in readers:
            votes.setdefault(value, set()).add(want)
        for value in [v for v in work.orig if work.constant(v)]:
            wanted = votes.get(value, set())
            if not wanted and _shape_only(value):
                wanted = {work.target}
            choice = work.target if work.target in wanted else work.orig[value]
            work.final[value] = choice
            if choice != work.orig[value]:
                graph = value.graph
                assert graph is not None
                self._set_constant(graph, value, choice, result)

    def _set_constant(self, graph: Graph, value: Value, dtype: int, result: PassResult) -> None:
        tensor = _tensor_of(graph, value)
        assert tensor is not None
        array, clamped = convert_array(tensor.numpy(), dtype)
        if clamped:
            limit = float(ml_dtypes.finfo(_NUMPY[DType(dtype)]).max)
            result.note(
                "constants_clamped", f"{value.name}: {clamped} value(s) clamped to ±{limit:g}"
            )
        converted = Tensor.from_numpy(array, dtype)
        producer = graph.producer(value)
        if producer is None:
            value.const = converted
        else:
            producer.attrs = {"value": converted}
            graph.touch(producer)
        result.stats["constants_converted"] += 1

    def _retype_attributes(self, graph: Graph, op: Op, work: _Work, result: PassResult) -> None:
        """Cast ``to``, ``dtype`` and ConstantOfShape's value follow the outputs' new type."""
        plan = work.plans[op]
        changed = [
            k
            for k, v in enumerate(op._outputs)
            if v in work.orig and plan.outputs[k] not in (None, work.orig[v])
        ]
        if not changed or plan.kept:
            return
        new = plan.outputs[changed[0]]
        assert new is not None
        if op.op_type == "ConstantOfShape":
            given = op.attrs.get("value")
            fill = given.numpy() if isinstance(given, Tensor) else np.zeros(1, np.float32)
            array, _ = convert_array(fill, new)
            op.attrs["value"] = Tensor.from_numpy(array, new)
        opset_shape = schemas.schema_shape(op.op_type, work.opsets[graph], op.domain)
        for key in TYPE_ATTRIBUTES:
            if opset_shape is not None and key in opset_shape.attributes:
                if op.attrs.get(key) is not None and int(op.attrs[key]) not in work.source:
                    continue
                op.attrs[key] = int(new)
                result.stats["type_attributes_changed"] += 1
        graph.touch(op)

    def _connect(self, read: _Read, work: _Work, result: PassResult) -> None:
        """Make a read (an op's input or a graph output) see its value as the dtype it
        wants: a sibling constant, or one Cast per value and type."""
        slot, graph, value, want = read
        is_output = slot[0] == "output"
        home = graph if is_output else value.graph
        assert home is not None
        key = (home, value, want)
        made = work.made.get(key)
        if made is None:
            if work.constant(value):
                made = self._sibling(home, value, want, work)
                result.stats["constant_siblings"] += 1
            else:
                cast_name = home.fresh_name(f"{value.name}_{_name(want)}")
                cast = home.add_op("Cast", [value], output_names=[cast_name], to=int(want))
                work.created.add(cast)
                made = cast._outputs[0]
                assert made is not None
                result.stats["casts_inserted"] += 1
            work.made[key] = made
            work.final[made] = want
        if not is_output:
            op, port = slot
            graph.set_input(op, port, made)
            return
        if graph is work.main and value not in graph.inputs:
            name = value.name  # the model's interface keeps its names
            rename(value, graph.fresh_name(f"{name}_{_name(work.final[value])}"))
            rename(made, name)
        t = value.type
        made.type = TensorType(want, t.shape if isinstance(t, TensorType) else None)
        graph.outputs[slot[1]] = made

    def _sibling(self, graph: Graph, value: Value, dtype: int, work: _Work) -> Value:
        """A constant holding ``value``'s original data in ``dtype``."""
        tensor = _tensor_of(value.graph or graph, value)
        assert tensor is not None
        array, _ = convert_array(tensor.numpy(), dtype)
        name = graph.fresh_name(f"{value.name}_{_name(dtype)}")
        made = Tensor.from_numpy(array, dtype)
        if graph in work.in_function:
            const = graph.add_op("Constant", [], output_names=[name], value=made)
            out = const._outputs[0]
            assert out is not None
            return out
        return graph.add_initializer(name, made)

    def _clean_casts(self, graph: Graph, work: _Work, result: PassResult) -> None:
        """Drop Casts the conversion made identities, a Cast undoing an exact one before it,
        and fold Casts between float types of a constant."""
        floats = {*work.source, work.target}
        for op in graph.topo_order():
            if op.op_type != "Cast" or op._graph is not graph or op.domain not in STANDARD_DOMAINS:
                continue
            x, y, to = op._inputs[0], op._outputs[0], int(op.attr("to", 0))
            if x is None or y is None:
                continue
            # Case 1: an identity now, and not one before (the model's own stay)
            made_one = op in work.created or work.dtypes.get(x) != work.dtypes.get(y)
            if work.now(x) == to and made_one and bypass(graph, op, x):
                result.stats["casts_removed"] += 1
                continue
            # Case 2: Cast(Cast(x, to=wider), to=type of x)
            inner = graph.producer(x)
            first = inner._inputs[0] if inner is not None and inner.op_type == "Cast" else None
            if (
                inner is not None
                and first is not None
                and work.now(first) == to
                and int(inner.attr("to", 0)) in EXACT.get(DType(to), set())
                and bypass(graph, op, first)
            ):
                result.stats["casts_removed"] += 1
                if not graph.is_used(x):
                    graph.remove_op(inner)
                continue
            # Case 3: a Cast of a float constant
            tensor = _tensor_of(graph, x) if work.constant(x) else None
            if tensor is None or tensor.dtype not in floats or to not in floats:
                continue
            if graph in work.in_function:
                continue  # no initializers there
            array, _ = convert_array(tensor.numpy(), to)
            graph.make_constant(op, [Tensor.from_numpy(array, to)])
            work.final[y] = to
            if x.graph is graph and not graph.is_used(x):
                producer = graph.producer(x)
                if producer is not None:
                    graph.remove_op(producer)
                elif x in graph.initializers and x not in graph.inputs:
                    graph.remove_initializer(x)
            result.stats["casts_folded"] += 1


@functools.cache
def _problem(
    op_type: str,
    domain: str,
    *,
    opset: int,
    attrs: frozenset[str],
    inputs: tuple[int | None, ...],
    outputs: tuple[int | None, ...],
) -> str | None:
    return schemas.node_problem(
        op_type,
        opset,
        attrs=set(attrs),
        n_inputs=len(inputs),
        n_outputs=len(outputs),
        input_dtypes=list(inputs),
        output_dtypes=list(outputs),
        domain=domain,
    )


def _body_port(owner: Op | None, body: Graph, index: int, side: str, work: _Work) -> int | None:
    """The dtype a body's input or output takes from its owner's plan (If, Loop, Scan)."""
    if owner is None:
        return None
    plan = work.plans.get(owner)
    if plan is None or plan.kept:
        return None
    if owner.op_type == "If":
        port: int | None = index if side == "out" else None
    elif owner.op_type == "Loop":
        port = (index if index >= 2 else None) if side == "in" else (index - 1 if index else None)
    elif owner.op_type == "Scan":
        shift = 1 if side == "in" and len(owner._inputs) > len(body.inputs) else 0
        port = index + shift
    else:
        return None
    if port is None:
        return None
    wants = plan.inputs if side == "in" else plan.outputs
    return wants[port] if port < len(wants) else None


SHAPE_READERS = frozenset({"Shape", "Size"})
"""Ops that read their input's shape and not its values."""


def _as_is(op: Op, work: _Work, kept: str | None = None) -> _Plan:
    """The plan that leaves ``op``'s float values in their original types (``kept``: why)."""
    return _Plan(
        [None if v is None else work.orig.get(v) for v in op._inputs],
        [None if v is None else work.orig.get(v) for v in op._outputs],
        kept,
    )


def _holds_exactly(array: np.ndarray, dtype: int) -> bool:
    """Whether the half type ``dtype`` holds every value of ``array`` as it is."""
    half = array.astype(_NUMPY[DType(dtype)])
    return bool(np.array_equal(half.astype(array.dtype), array, equal_nan=True))


def _saves_bytes(name: str, tensor: Tensor, half_type: str, constant: bool) -> bool:
    """Whether storing the float32 weight ``name`` (a ``constant`` node's value, or an
    initializer) half behind a Cast makes the file smaller: the half initializer and its Cast
    against what is there now, in protobuf's bytes (a BatchNormalization's 16 values save 32
    bytes; its Cast and the longer name add more)."""
    half = f"{name}_{half_type}"

    def stored(element_bytes: int, tensor_name: str) -> int:  # a TensorProto
        dims = sum(1 + _varint_bytes(d) for d in tensor.shape)
        named = _field(len(tensor_name.encode())) if tensor_name else 0
        return dims + 2 + named + _field(element_bytes * tensor.size)

    def node(inputs: Sequence[str], output: str, op_type: str, attribute: int) -> int:
        names = sum(_field(len(n.encode())) for n in [*inputs, output])
        return _field(names + _field(len(op_type)) + _field(attribute))

    if constant:
        value = _field(len(b"value")) + _field(stored(4, "")) + 3  # 3: type = TENSOR
        now = node([], name, "Constant", value)
    else:
        now = _field(stored(4, name))
    to = _field(len(b"to")) + 2 + 3  # i = FLOAT, type = INT
    return _field(stored(2, half)) + node([half], name, "Cast", to) < now


def _field(payload: int) -> int:
    """The bytes of a length-delimited protobuf field of ``payload`` bytes (number < 16)."""
    return 1 + _varint_bytes(payload) + payload


def _varint_bytes(number: int) -> int:
    return max(1, (number.bit_length() + 6) // 7)


def _shape_only(value: Value) -> bool:
    """Whether every use of ``value`` reads its shape alone (it is not a graph output)."""
    graph = value.graph
    if graph is None or value in graph.outputs:
        return False
    uses = graph.uses(value)
    return bool(uses) and all(op.op_type in SHAPE_READERS for op, _ in uses)


def _named_by(op: Op, names: Collection[str]) -> str | None:
    """The key of ``names`` that names ``op``: its node name, first output name or op type."""
    first = next((v.name for v in op._outputs if v is not None), "")
    return next((k for k in (op.name, first, op.op_type) if k and k in names), None)


def _asked_weights(model: Model, asked: Mapping[str, str]) -> dict[str, str]:
    """The weights an op the caller asked to keep (by node name, first output name or op
    type) reads -> why they stay float32 with ``store_kept_weights``: asked for, the op's
    arithmetic stays as the original's, its weights too."""
    found: dict[str, str] = {}
    for graph in model.graphs():
        for op in graph.ops:
            key = _named_by(op, asked)
            if key is None:
                continue
            for value in op._inputs:
                if value is not None and _tensor_of(graph, value) is not None:
                    found.setdefault(value.name, f"read by {key!r}, asked to stay float32")
    return found


QUANTIZE_DEQUANTIZE = frozenset({"QuantizeLinear", "DequantizeLinear"})
"""Ops whose inputs after the first are the quantization grid (scale, zero point); every
float input of a QLinear op (QLinearConv, com.microsoft's QLinearAdd, ...) is a scale."""
PARAMETER_READERS = frozenset(
    {"BatchNormalization", "InstanceNormalization", "LayerNormalization", "GroupNormalization",
     "Conv", "ConvTranspose", "Gemm", "MatMul", "Einsum", "PRelu", "LSTM", "GRU", "RNN"}
)  # fmt: skip
"""Ops whose float constant inputs are parameters every input computes with (a
BatchNormalization's variance, a Conv's weight): one past the half type's range keeps its op
float32 instead of being clamped, which would change what the op computes for every input
(PP-OCRv3 and v4 text detectors' variances of up to 9.8e7); a clamp is for fills, bounds and
masks (Where, Clip, Mul by a -3.4e38 mask), whose values past the range only saturate."""


def _quantization_parameters(graph: Graph) -> dict[Value, str]:
    """The values ``graph``'s quantization ops read as scales or zero points -> why they stay
    float32 when the weights are compressed: they are the grid the model was quantized on,
    and rounding one moves every value near a step across it (a per-channel scale rounded to
    float16 moved sscd's embedding by 6e-2 of its range with all else float32), for bytes
    that are a sliver of the integer weights beside them."""
    found: dict[Value, str] = {}
    for op in graph.ops:
        if op.op_type in QUANTIZE_DEQUANTIZE:
            reads = op._inputs[1:]
        elif op.op_type.startswith("QLinear"):
            reads = op._inputs
        else:
            continue
        for value in reads:
            if value is not None:
                found.setdefault(value, f"a quantization parameter of {op.op_type} {op.name!r}")
    return found


def _tensor_of(graph: Graph, value: Value) -> Tensor | None:
    if isinstance(value.const, Tensor):
        return value.const
    op = (value.graph or graph).producer(value)
    if op is not None and op.op_type == "Constant":
        return constant_tensor(op)
    return None


def _dtype(value: Value) -> int | None:
    if isinstance(value.const, Tensor):
        return value.const.dtype
    if isinstance(value.type, TensorType) and value.type.dtype:
        return int(value.type.dtype)
    return None


def _name(dtype: int) -> str:
    return {DType.FLOAT: "float32"}.get(DType(dtype), DType(dtype).name.lower())
