"""The version-conversion pass: walks every node of the default domain one opset step at a
time, up or down, through adapters or the automatic check; all blocking nodes are reported
together."""

from __future__ import annotations

__all__ = ["ConvertOpsetPass", "PlannedStep", "convert"]

import logging
from dataclasses import dataclass

from onnxforge import opset as schemas
from onnxforge.errors import AdapterError, OnnxForgeError
from onnxforge.ir import Graph, Model, Op, SparseTensor, walk_graphs
from onnxforge.passes._infra import Pass, PassResult, node_label, register_pass
from onnxforge.passes.convert._classify import automatic_problem
from onnxforge.passes.convert._registry import ConvertContext, find_adapter
from onnxforge.shape_infer import infer

logger = logging.getLogger(__name__)

_DEFAULT = ("", "ai.onnx")


@dataclass(frozen=True, slots=True)
class PlannedStep:
    """One node crossing one opset step: how (an adapter's name, "automatic") or why not."""

    where: str  # "" for the main graph, else the function or subgraph path
    node: str
    op_type: str
    from_opset: int
    to_opset: int
    how: str
    problem: str | None = None

    def __str__(self) -> str:
        where = f"{self.where}: " if self.where else ""
        head = f"{where}{self.op_type} node {self.node!r} {self.from_opset} -> {self.to_opset}"
        return f"{head}: {self.problem}" if self.problem else f"{head}: {self.how}"


def _steps(source: int, target: int) -> list[tuple[int, int]]:
    if target >= source:
        return [(v, v + 1) for v in range(source, target)]
    return [(v, v - 1) for v in range(source, target, -1)]


def _changes(op: Op, a: int, b: int) -> int | None:
    """The since_version at which ``op``'s schema changes on the step a -> b, or None."""
    high = max(a, b)
    if not schemas.has_schema(op.op_type, op.domain):
        return None
    try:
        since = schemas.since_version(op.op_type, high, op.domain)
    except OnnxForgeError:
        return high  # no schema at the higher opset: only an adapter can cross
    return high if since == high else None


class _Run:
    """One conversion of one graph tree (the main graph or a function body) at one opset."""

    def __init__(self, pass_: ConvertOpsetPass, model: Model, dry_run: bool) -> None:
        self.pass_ = pass_
        self.model = model
        self.dry_run = dry_run
        self.steps: list[PlannedStep] = []
        self.failed: set[Op] = set()
        report = infer(model)
        self.static_values = report.static_values
        self.known_values = report.known_values

    def convert_tree(self, root: Graph, where: str, source: int, target: int) -> None:
        for a, b in _steps(source, target):
            ctx = ConvertContext(
                a,
                b,
                allow_cast=self.pass_.allow_cast,
                static_values=self.static_values,
                known_values=self.known_values,
            )
            for graph in list(walk_graphs(root)):
                for op in graph.ops:
                    if op.domain not in _DEFAULT or op in self.failed or op._graph is not graph:
                        continue
                    version = _changes(op, a, b)
                    if version is not None:
                        self.step(op, graph, ctx, version, where)

    def step(self, op: Op, graph: Graph, ctx: ConvertContext, version: int, where: str) -> None:
        a, b = ctx.from_opset, ctx.to_opset
        label = node_label(op)
        if schemas.runtime_defined(op.op_type, a, op.domain) and (
            schemas.runtime_defined(op.op_type, b, op.domain)
            or schemas.has_schema_at(op.op_type, b, op.domain)
        ):  # onnxruntime's own LayerNormalization: the same node before and at ONNX's 17
            self.steps.append(PlannedStep(where, label, op.op_type, a, b, "automatic"))
            return
        fn = find_adapter(op.op_type, a, b, op.domain)
        if fn is None:
            problem = automatic_problem(op, graph, ctx, version)
            if problem is None:
                self.steps.append(PlannedStep(where, label, op.op_type, a, b, "automatic"))
                return
            self.failed.add(op)
            self.steps.append(PlannedStep(where, label, op.op_type, a, b, "", problem))
            return
        self.steps.append(PlannedStep(where, label, op.op_type, a, b, fn.__name__))
        if self.dry_run:
            return
        try:
            fn(op, graph, ctx)
        except AdapterError as exc:
            self.failed.add(op)
            reason = str(exc).removeprefix(str(ctx.fail(op, "")))  # the step names the node
            self.steps[-1] = PlannedStep(where, label, op.op_type, a, b, fn.__name__, reason)

    @property
    def problems(self) -> list[PlannedStep]:
        return [s for s in self.steps if s.problem]


def _ir_floor(model: Model) -> int:
    """The lowest IR version the model's own features need."""
    floor = 3
    if any(v not in model.graph.inputs for v in model.graph.initializers):
        floor = 4  # initializers that are not graph inputs
    if any(isinstance(v.const, SparseTensor) for g in model.graphs() for v in g.initializers):
        floor = max(floor, 6)
    if model.functions:
        floor = max(floor, 8)
    if any(op.metadata_props for _, op in model.ops()) or model.graph.metadata_props:
        floor = max(floor, 10)
    return floor


@register_pass
class ConvertOpsetPass(Pass):
    """Bring every default-domain node to ``opset``, up or down, one opset step at a time.

    1. A step where the op's schema changes and an adapter exists: the adapter rewrites it.
    2. No adapter, and the node is valid and means the same under the new schema: kept as is.
    3. Otherwise the node blocks; every blocking node is listed in one AdapterError and the
       model must be discarded (it is converted in place).
    The main graph, its subgraphs and every local function are converted; opset_import and
    ir_version (the lowest the target opset and the model's features need) are updated.
    """

    name = "convert-opset"
    summary = "Bring every default-domain node to the --opset version, one opset step at a time."

    def __init__(self, opset: int, *, allow_cast: bool = False) -> None:
        self.opset = opset
        self.allow_cast = allow_cast

    def requires(self, model: Model) -> None:
        latest = schemas.latest_opset()
        if not 1 <= self.opset <= latest:
            raise AdapterError(f"opset {self.opset} does not exist (1..{latest})")

    def plan(self, model: Model, *, apply: bool = False) -> list[PlannedStep]:
        """What each node needs on the way (``--dry-run``), without changing the model; only
        the automatic check finds problems then. With ``apply`` the adapters run as well, so
        their refusals are listed too, and ``model`` is converted in place: discard it."""
        run = self._run(model, dry_run=not apply)
        return run.steps

    def call(self, model: Model) -> PassResult:
        result = PassResult(model)
        untyped = {v for g in model.graphs() for v in g.values() if v.type is None}
        run = self._run(model, dry_run=False)
        for graph in model.graphs():  # conversion adds no value_info (inference typed these)
            interface = set(graph.inputs) | set(graph.outputs)
            for value in graph.values():
                if value in untyped and value not in interface:
                    value.type = None
        if run.problems:
            lines = "\n".join(f"  {s}" for s in run.problems)
            raise AdapterError(
                f"cannot convert to opset {self.opset}; {len(run.problems)} blocking node(s):\n"
                f"{lines}"
            )
        for s in run.steps:
            result.note(s.how if s.how == "automatic" else f"adapted.{s.how}", s.node)
        self._update_imports(model)
        result.modified = bool(run.steps) or result.modified
        return result

    def _run(self, model: Model, *, dry_run: bool) -> _Run:
        self.requires(model)
        run = _Run(self, model, dry_run)
        source = _default_opset(model.opset_imports)
        if source is not None:
            run.convert_tree(model.graph, "", source, self.opset)
        for fn in model.functions:
            fn_source = _default_opset(fn.opset_imports) or source
            if fn_source is not None:
                run.convert_tree(fn.graph, f"function {fn.name}", fn_source, self.opset)
        return run

    def _update_imports(self, model: Model) -> None:
        for imports in [model.opset_imports] + [fn.opset_imports for fn in model.functions]:
            for key in _DEFAULT:
                if key in imports:
                    imports[key] = self.opset
        model.ir_version = max(schemas.min_ir_version(model.opset_imports), _ir_floor(model))


def _default_opset(imports: dict[str, int]) -> int | None:
    for key in _DEFAULT:
        if key in imports:
            return imports[key]
    return None


def convert(model: Model, opset: int, *, allow_cast: bool = False) -> PassResult:
    """Convert ``model`` in place to ``opset`` (raises AdapterError listing blocking nodes)."""
    return ConvertOpsetPass(opset, allow_cast=allow_cast)(model)
