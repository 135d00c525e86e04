"""The pre-deployment gate (`onnxforge check`): every problem a model has, as data."""

from __future__ import annotations

__all__ = [
    "CODES",
    "RUNTIMES",
    "SEVERITIES",
    "WARNINGS",
    "Problem",
    "RuntimeLimits",
    "RuntimeUnavailableError",
    "check",
    "onnxruntime_limits",
    "require_runtime",
]

import functools
import hashlib
import importlib.util
import logging
import math
import os
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from onnxforge import opset as schemas
from onnxforge._cleanup import temporary_folder
from onnxforge._runtime_child import run_in_child
from onnxforge._validate import model_problems
from onnxforge.api.compare import MAX_INPUT_ELEMENTS
from onnxforge.errors import ModelReadError, OnnxForgeError
from onnxforge.io import checker_problems, load, negative_dims, save, to_proto
from onnxforge.ir import Dim, DType, Graph, Model, Op, Tensor, TensorType, Value, walk_graphs
from onnxforge.shape_infer import infer

logger = logging.getLogger(__name__)

RUNTIMES = ("onnxruntime", "openvino")
"""The runtimes ``verify`` can load a model in."""
_EXTRA = {"onnxruntime": "onnxforge[onnxruntime]", "openvino": "onnxforge[openvino]"}
_ONNX_DOMAINS = frozenset({"", "ai.onnx", "ai.onnx.ml", "ai.onnx.preview.training"})
MIN_DUPLICATE_BYTES = 64
"""Initializers smaller than this are not compared (shared small constants are harmless)."""


class RuntimeUnavailableError(OnnxForgeError):
    """A runtime that was asked for is not installed; the CLI exits 2 (a usage error)."""

    exit_code = 2


SEVERITIES = ("warning", "error")
"""Ascending: ``--fail-on warning`` fails on both, ``--fail-on error`` on errors only."""
WARNINGS = frozenset(
    {"stale-shape", "negative-dim", "unused-input", "duplicate-initializer", "shadowed-name"}
)
"""Codes of models that run but could trip a consumer; every other code is an error."""
CODES = {
    "checker": "onnx's checker refuses the model",
    "graph": "the graph is invalid (cycles, undefined names, ops against their schemas)",
    "shape": "shape inference finds the model inconsistent",
    "shape-internal": "an onnxforge shape rule failed (please report it)",
    "opset": "an opset the target does not support",
    "ir-version": "an IR version the target does not support",
    "split-sizes": "a Split-18 whose output sizes are not defined",
    "split-num-outputs": "a Split-18 whose num_outputs is not its output count",
    "custom-domain": "an op of a domain neither ONNX, the runtime nor a local function defines",
    "verify": "the runtime fails to load or run the model",
    "stale-shape": "a declared shape contradicts what the graph computes",
    "negative-dim": "a declared dim is negative (read as unknown)",
    "unused-input": "a graph input nothing reads",
    "duplicate-initializer": "two initializers hold the same data",
    "shadowed-name": "a subgraph defines a name its enclosing graph uses",
    "worker": "the check of this file crashed or ran out of time",
}
"""Every code, with what it means (SARIF rules, docs)."""


@dataclass(frozen=True)
class Problem:
    """One reason the model is not fit to ship, or (severity ``warning``) something a
    consumer could trip on although the model runs.

    ``node`` labels the node (``Split 'split_0'``, or ``Split (output 'y')`` when it has no
    name), empty for problems of the whole model; ``code`` is a stable kebab-case kind (see
    CODES); ``severity`` is ``error`` or ``warning`` (see WARNINGS).
    """

    file: str
    node: str
    code: str
    message: str
    severity: str = ""

    def __post_init__(self) -> None:
        if not self.severity:
            severity = "warning" if self.code in WARNINGS else "error"
            object.__setattr__(self, "severity", severity)

    def __str__(self) -> str:
        where = f"{self.file}: {self.node}: " if self.node else f"{self.file}: "
        return f"{where}{self.message} [{self.code}, {self.severity}]"

    def to_json(self) -> dict[str, str]:
        return asdict(self)

    def fails(self, fail_on: str) -> bool:
        """Whether this problem fails a run with ``--fail-on fail_on``."""
        return SEVERITIES.index(self.severity) >= SEVERITIES.index(fail_on)


@dataclass(frozen=True)
class RuntimeLimits:
    """What a runtime accepts: the newest opset per domain, the newest IR version, and the
    domains (with their op types, where known) it implements besides the ONNX ones."""

    name: str
    max_opset: Mapping[str, int]
    max_ir: int | None
    domains: Mapping[str, frozenset[str]] = field(default_factory=dict)


def require_runtime(name: str) -> None:
    """Raise RuntimeUnavailableError unless ``name`` (onnxruntime or openvino) is installed."""
    if name not in RUNTIMES:
        raise OnnxForgeError(f"unknown runtime {name!r}; choose one of {', '.join(RUNTIMES)}")
    if importlib.util.find_spec(name) is None:
        raise RuntimeUnavailableError(f"{name} is not installed: install {_EXTRA[name]}")


def _probe_bytes(opsets: dict[str, int], ir_version: int) -> bytes:
    graph = Graph("probe")
    x = graph.add_value("x", TensorType(DType.FLOAT, (1,)))
    graph.inputs.append(x)
    op = graph.add_op("Identity", [x], output_names=["y"])
    y = graph.outputs_of(op)[0]
    assert y is not None
    y.type = TensorType(DType.FLOAT, (1,))
    graph.outputs.append(y)
    model = Model(graph, ir_version=ir_version, opset_imports=opsets)
    return bytes(to_proto(model).SerializeToString())


@functools.cache
def onnxruntime_limits() -> RuntimeLimits:
    """What the installed onnxruntime accepts, found by asking it.

    onnxruntime has no API for its newest opset or IR version, and the table in its docs
    stops at the release it was written for (and was wrong for some). So each limit is
    probed: a one-Identity model is loaded (InferenceSession, CPU) with IR version 3, 4, ...
    until one is refused ("Unsupported model IR version"), then with ai.onnx opset 7, 8, ...
    and ai.onnx.ml opset 1, 2, ... until one is refused ("opset N is under development").
    Each probe is a few hundred bytes and takes about a millisecond; a refusal is onnxruntime
    rejecting the model's header, the same check a real model meets, so the limits are the
    installed build's own whatever its version. Acceptance is monotone in each number (every
    release supports all older opsets), so the first refusal ends the walk.

    The op types of the non-ONNX domains come from onnxruntime's schema registry
    (``get_all_operator_schema``); only com.microsoft is taken as public.
    """
    require_runtime("onnxruntime")
    import onnxruntime as ort
    from onnxruntime.capi import _pybind_state

    options = ort.SessionOptions()
    options.log_severity_level = 3

    def loads(opsets: dict[str, int], ir_version: int) -> bool:
        try:
            ort.InferenceSession(
                _probe_bytes(opsets, ir_version), options, providers=["CPUExecutionProvider"]
            )
        except (
            _pybind_state.Fail,
            _pybind_state.InvalidGraph,
            _pybind_state.InvalidArgument,
        ) as exc:
            logger.debug("onnxruntime refuses opsets %s IR %d: %s", opsets, ir_version, exc)
            return False
        return True

    def newest(start: int, accepts: Any) -> int:
        value = start
        while value < start + 100 and accepts(value + 1):
            value += 1
        return value

    max_ir = newest(3, lambda ir: loads({"": 7}, ir))
    max_opset = newest(7, lambda n: loads({"": n}, max_ir))
    max_ml = newest(1, lambda n: loads({"": max_opset, "ai.onnx.ml": n}, max_ir))
    ops: dict[str, set[str]] = {}
    for schema in _pybind_state.get_all_operator_schema():
        if schema.domain == "com.microsoft":
            ops.setdefault(schema.domain, set()).add(schema.name)
    return RuntimeLimits(
        name=f"onnxruntime {ort.__version__}",
        max_opset={"": max_opset, "ai.onnx.ml": max_ml},
        max_ir=max_ir,
        domains={d: frozenset(names) for d, names in ops.items()},
    )


# -- walking the model ------------------------------------------------------------------------
@dataclass
class _Place:
    graph: Graph
    where: str  # "" for the main graph, else "in ...: " for messages
    opsets: dict[str, int]


def _opset(opsets: Mapping[str, int], domain: str) -> int | None:
    if domain in ("", "ai.onnx"):
        return opsets.get("", opsets.get("ai.onnx"))
    return opsets.get(domain)


def _places(model: Model) -> Iterator[_Place]:
    roots = [(model.graph, "", dict(model.opset_imports))]
    for fn in model.functions:
        opsets = dict(fn.opset_imports) or dict(model.opset_imports)
        roots.append((fn.graph, f"function {fn.domain}::{fn.name}", opsets))
    for root, scope, opsets in roots:
        for graph in walk_graphs(root):
            parts = [scope] if scope else []
            if graph.owner is not None:
                parts.append(f"{_label(graph.owner)} body {graph.name!r}")
            yield _Place(graph, f"in {' > '.join(parts)}: " if parts else "", opsets)


def _label(op: Op) -> str:
    kind = f"{op.domain}::{op.op_type}" if op.domain else op.op_type
    if op.name:
        return f"{kind} {op.name!r}"
    first = next((v.name for v in op._outputs if v is not None), None)
    return f"{kind} (output {first!r})" if first is not None else f"{kind} (unnamed)"


# -- the checks ---------------------------------------------------------------------------------
def _opset_problems(
    model: Model, file: str, limits: RuntimeLimits | None, max_opset: int | None
) -> list[Problem]:
    found = []
    imports = [("model", dict(model.opset_imports))]
    imports += [(f"function {f.domain}::{f.name}", dict(f.opset_imports)) for f in model.functions]
    latest = schemas.latest_opset()
    for owner, opsets in imports:
        for domain, version in sorted(opsets.items()):
            name = domain or "ai.onnx"
            key = "" if domain == "ai.onnx" else domain
            bounds: list[tuple[int, str]] = []
            if key == "":
                bounds.append((latest, f"the newest onnx defines is {latest}"))
                if max_opset is not None:
                    bounds.append((max_opset, f"--max-opset is {max_opset}"))
            if limits is not None and key in limits.max_opset:
                bounds.append(
                    (
                        limits.max_opset[key],
                        f"{limits.name} supports up to {limits.max_opset[key]}",
                    )
                )
            broken = [why for bound, why in bounds if version > bound]
            if broken:
                found.append(
                    Problem(
                        file,
                        "",
                        "opset",
                        f"the {owner} imports {name} opset {version}; {'; '.join(broken)}",
                    )
                )
    return found


def _ir_problems(
    model: Model, file: str, limits: RuntimeLimits | None, max_ir: int | None
) -> list[Problem]:
    bounds = []
    if max_ir is not None:
        bounds.append((max_ir, f"--max-ir is {max_ir}"))
    if limits is not None and limits.max_ir is not None:
        bounds.append((limits.max_ir, f"{limits.name} supports up to {limits.max_ir}"))
    broken = [why for bound, why in bounds if model.ir_version > bound]
    if not broken:
        return []
    message = f"the model has IR version {model.ir_version}; {'; '.join(broken)}"
    return [Problem(file, "", "ir-version", message)]


def _split_problems(model: Model, file: str) -> tuple[list[Problem], set[str]]:
    """Split-18 needs its sizes: the split input or num_outputs, one of them, and num_outputs
    must be the node's output count (onnxruntime aborts the process when it is not). Also
    returns the names of the nodes found, whose inference errors say the same."""
    found: list[Problem] = []
    names: set[str] = set()
    for place in _places(model):
        for op in place.graph.ops:
            if op.op_type != "Split" or op.domain not in ("", "ai.onnx"):
                continue
            version = _opset(place.opsets, op.domain)
            try:
                if version is None or schemas.since_version("Split", version) < 18:
                    continue
            except OnnxForgeError:
                continue  # no schema at that opset: the checker says so
            has_split = len(op._inputs) > 1 and op._inputs[1] is not None
            num_outputs = op.attr("num_outputs")
            outputs = len(op._outputs)
            label = _label(op)
            before = len(found)
            if not has_split and num_outputs is None:
                message = (
                    "Split-18 has neither the split input nor num_outputs: the sizes of its "
                    f"{outputs} outputs are not defined"
                )
                found.append(Problem(file, label, "split-sizes", place.where + message))
            elif has_split and num_outputs is not None:
                message = "Split-18 has both the split input and num_outputs; give only one"
                found.append(Problem(file, label, "split-sizes", place.where + message))
            elif num_outputs is not None and int(num_outputs) != outputs:
                message = (
                    f"Split-18 num_outputs is {num_outputs}, but the node has {outputs} "
                    "outputs (onnxruntime aborts the process on this)"
                )
                found.append(Problem(file, label, "split-num-outputs", place.where + message))
            if len(found) > before:
                names.add(op.name)
    return found, names


def _domain_problems(model: Model, file: str, limits: RuntimeLimits | None) -> list[Problem]:
    """Ops of a domain neither ONNX nor the runtime defines, and no local function."""
    local = {(f.domain, f.name, f.overload) for f in model.functions}
    found = []
    for place in _places(model):
        for op in place.graph.ops:
            if op.domain in _ONNX_DOMAINS or (op.domain, op.op_type, op.overload) in local:
                continue
            known = limits.domains.get(op.domain) if limits is not None else None
            if known is not None and op.op_type in known:
                continue
            if known is not None:
                message = f"{limits.name} has no {op.domain}::{op.op_type}"  # type: ignore[union-attr]
            else:
                runtime = limits.name if limits is not None else "ONNX"
                message = (
                    f"custom domain {op.domain!r}: neither {runtime} nor a local function of "
                    f"the model defines {op.op_type}"
                )
            found.append(Problem(file, _label(op), "custom-domain", place.where + message))
    return found


def _shape_problems(model: Model, file: str, skip: set[str]) -> list[Problem]:
    found = []
    report = infer(model)
    for stale in report.stale:  # onnxruntime runs these: a warning, as `infer` prints it
        op_type = stale.op.rsplit("-", 1)[0]
        label = f"{op_type} {stale.node!r}" if stale.node else f"{op_type} (output {stale.name!r})"
        found.append(Problem(file, label, "stale-shape", str(stale)))
    for error in report.errors:
        if error.op == "Split-18" and error.node in skip and "num_outputs" in error.reason:
            continue  # the Split-18 check named it already
        op_type = error.op.rsplit("-", 1)[0]
        label = f"{op_type} {error.node!r}" if error.node else f"{op_type} (unnamed)"
        inputs = ", ".join(error.inputs)
        message = f"{error.where}{error.op} inputs ({inputs}): {error.reason}"
        if error.internal:
            message += " (an onnxforge shape rule failed: please report it)"
        found.append(
            Problem(file, label, "shape-internal" if error.internal else "shape", message)
        )
    return found


def _hygiene_problems(model: Model, file: str) -> list[Problem]:
    """Warnings: graph inputs nothing reads, initializers with the same data, subgraph names
    that shadow a name of an enclosing graph."""
    found = []
    graph = model.graph
    outputs = set(graph.outputs)
    for value in graph.inputs:
        if value.const is None and not graph.consumers(value) and value not in outputs:
            found.append(
                Problem(file, "", "unused-input", f"graph input {value.name!r} is never read")
            )
    groups: dict[tuple[int, tuple[int, ...], int], list[Value]] = {}
    for g in walk_graphs(graph):
        for value in g.initializers:
            if isinstance(value.const, Tensor) and value.const.nbytes >= MIN_DUPLICATE_BYTES:
                key = (value.const.dtype, tuple(value.const.shape), value.const.nbytes)
                groups.setdefault(key, []).append(value)
    for members in groups.values():
        by_digest: dict[bytes, list[str]] = {}
        for value in members if len(members) > 1 else []:
            data = np.ascontiguousarray(value.const.numpy())  # type: ignore[union-attr]
            digest = hashlib.blake2b(data.view(np.uint8).data).digest()  # no copy
            by_digest.setdefault(digest, []).append(value.name)
        for same in by_digest.values():
            if len(same) > 1:
                message = f"initializers {', '.join(map(repr, same))} hold the same data"
                found.append(Problem(file, "", "duplicate-initializer", message))
    for place in _places(model):
        inner = place.graph
        if inner.parent is None:
            continue
        outer: set[str] = set()
        parent: Graph | None = inner.parent
        while parent is not None:
            outer |= {v.name for v in parent.values() if v.graph is parent}
            parent = parent.parent
        shadowed = sorted({v.name for v in inner.values() if v.graph is inner} & outer)
        if shadowed:
            names = ", ".join(map(repr, shadowed[:10]))
            message = f"{place.where}the body defines {names}, also defined outside it"
            found.append(Problem(file, "", "shadowed-name", message))
    return found


# -- running the model ----------------------------------------------------------------------------
CANDIDATE_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 224, 256, 320, 512, 640)
"""Sizes ``--verify`` gives the symbolic dims, in order, until the model runs: 1 is cheap;
strided convolutions with a Concat of feature maps (YOLO) need 32 or 64; a reflect Pad over
audio needs 2 and more; image models know 224 to 640."""
_MASK = ("mask",)
_IDS = ("id", "token", "index", "indices", "position", "label")


def _random_input(
    value: Value, shapes: Mapping[str, Sequence[int]], plan: SizePlan, rng: np.random.Generator
) -> np.ndarray | str:
    """An array for a graph input, symbolic and unknown dims sized by ``plan``, or why none can
    be made.

    Integers are small and non-negative: masks are ones, ids and tokens 0 or 1 (valid for any
    vocabulary), other integers zeros."""
    t = value.type
    if not isinstance(t, TensorType):
        return f"input {value.name!r} is not a tensor ({t}); give the model tensor inputs"
    if value.name in shapes:
        dims = list(shapes[value.name])
    elif t.shape is None:
        return f"input {value.name!r} has no shape; give one with --input-shape {value.name}=..."
    else:
        dims = [d if isinstance(d, int) else plan.size(d, axis) for axis, d in enumerate(t.shape)]
    if math.prod(dims) > MAX_INPUT_ELEMENTS:
        return (
            f"input {value.name!r} of shape {dims} has {math.prod(dims)} elements, more than "
            f"--verify makes ({MAX_INPUT_ELEMENTS}); give a smaller one with --input-shape"
        )
    if t.dtype == DType.STRING:
        return np.full(dims, "", dtype=object)
    name = value.name.lower()
    if t.dtype == DType.BOOL:
        return np.ones(dims, dtype=bool) if any(m in name for m in _MASK) else np.zeros(dims, bool)
    np_dtype = DType(t.dtype).numpy if t.dtype in DType._value2member_map_ else None
    if np_dtype is None:
        return f"input {value.name!r} is {t}: no numpy type to feed it from Python"
    if np_dtype.kind == "f":
        return rng.standard_normal(dims).astype(np_dtype)
    if np_dtype.kind == "c":
        return (rng.standard_normal(dims) + 1j * rng.standard_normal(dims)).astype(np_dtype)
    if any(m in name for m in _MASK):
        return np.ones(dims, dtype=np_dtype)
    if any(m in name for m in _IDS):
        return rng.integers(0, 2, dims).astype(np_dtype)
    return np.zeros(dims, dtype=np_dtype)


@dataclass(frozen=True)
class SizePlan:
    """The sizes --verify gives symbolic dims: ``size`` for all, except that with ``batch_one``
    a dim at axis 0 (and every dim of the same name) is 1. A symbol's size is the same
    everywhere, so dims the model relates stay equal."""

    every: int
    batch_one: frozenset[str] | None = None

    def size(self, dim: Dim, axis: int) -> int:
        if self.batch_one is not None and (axis == 0 or dim in self.batch_one):
            return 1
        return self.every

    def __str__(self) -> str:
        return f"{self.every}" if self.batch_one is None else f"{self.every} (batch 1)"


def _plans(
    model: Model, shapes: Mapping[str, Sequence[int]], sizes: Sequence[int]
) -> list[SizePlan]:
    """One size for every symbolic dim, in the order of ``sizes``; then, for models that take
    only one sample (a batch of 1) but larger other dims, batch 1 with each larger size."""
    if not _symbolic(model, shapes):
        return [SizePlan(sizes[0])]
    batch = frozenset(
        v.type.shape[0]
        for v in model.graph.inputs
        if v.const is None and v.name not in shapes and isinstance(v.type, TensorType)
        and v.type.shape and isinstance(v.type.shape[0], str)
    )  # fmt: skip
    plans = [SizePlan(size) for size in sizes]
    if batch:
        plans += [SizePlan(size, batch) for size in sizes if size > 1]
    return plans


def _symbolic(model: Model, shapes: Mapping[str, Sequence[int]]) -> bool:
    """Whether an input has a dim --verify chooses (not static, not fixed by --input-shape)."""
    return any(
        isinstance(v.type, TensorType)
        and v.type.shape is not None
        and v.name not in shapes
        and not all(isinstance(d, int) for d in v.type.shape)
        for v in model.graph.inputs
        if v.const is None
    )


def _verify(
    model: Model,
    path: Path | None,
    file: str,
    runtimes: Sequence[str],
    shapes: Mapping[str, Sequence[int]],
    *,
    sizes: Sequence[int] = CANDIDATE_SIZES,
    ran_with: dict[str, dict[str, list[int]]] | None = None,
    given: Mapping[str, np.ndarray] | None = None,
) -> list[Problem]:
    """Load and run the model in each runtime, in a child process (a runtime that aborts, as
    onnxruntime does on some invalid models, is a problem, not the end of the check). Every
    symbolic dim takes the same size, so dims the model relates (one symbol) stay equal; the
    candidate sizes are tried in order and the first that runs wins. Only a model that fails
    on every size is a problem, and its message names the sizes tried."""
    given = dict(given or {})
    inputs = {v.name for v in model.graph.inputs}
    found = [
        Problem(file, "", "verify", f"--input-shape names {name!r}, not an input")
        for name in sorted(set(shapes) - inputs)
    ]
    found += [
        Problem(file, "", "verify", f"--inputs holds {name!r}, not an input")
        for name in sorted(set(given) - inputs)
    ]
    shapes = {**shapes, **{name: list(array.shape) for name, array in given.items()}}
    if found:
        return found
    candidates = _plans(model, shapes, sizes)
    with temporary_folder("onnxforge-check-") as folder:
        if path is None:
            path = folder / "model.onnx"
            save(model, path)
        for runtime in runtimes:
            tried: list[SizePlan] = []
            seen: set[tuple[tuple[int, ...], ...]] = set()
            last = ""
            for plan in candidates:
                rng = np.random.default_rng(0)
                feeds: dict[str, np.ndarray] = {}
                made: np.ndarray | str | None = None  # a str: why an input cannot be made
                for value in model.graph.inputs:
                    if value.const is not None and value.name not in given:
                        continue  # an initializer that is also an input: its value is used
                    if value.name in given:
                        feeds[value.name] = given[value.name]
                        continue
                    made = _random_input(value, shapes, plan, rng)
                    if isinstance(made, str):
                        break
                    feeds[value.name] = made
                if isinstance(made, str):
                    last = made
                    if not tried:  # no input can be made at all: name it
                        found.append(Problem(file, "", "verify", f"cannot run the model: {made}"))
                    break
                shapes_fed = tuple(a.shape for a in feeds.values())
                if shapes_fed in seen:
                    continue  # batch 1 of a model whose only symbol is the batch: tried
                seen.add(shapes_fed)
                tried.append(plan)
                last = run_in_child(runtime, path, [feeds], folder).error or ""
                if not last:
                    logger.info("%s runs %s with symbolic dims %s", runtime, file, plan)
                    if ran_with is not None:
                        ran_with[runtime] = {k: list(v.shape) for k, v in feeds.items()}
                    break
            else:
                if len(tried) > 1:
                    same = ", ".join(str(p.every) for p in tried if p.batch_one is None)
                    ones = ", ".join(str(p.every) for p in tried if p.batch_one is not None)
                    also = f", and batch 1 with the others {ones}" if ones else ""
                    last += (
                        f" (tried with symbolic dims {same}{also}; set the sizes with "
                        "--input-shape NAME=D1,D2,...)"
                    )
                found.append(Problem(file, "", "verify", last))
    return found


def _given_inputs(
    inputs: Mapping[str, np.ndarray] | str | os.PathLike[str] | None,
) -> dict[str, np.ndarray]:
    """The arrays of ``check(inputs=...)``: a mapping as it is, or the arrays of an .npz file
    (ModelReadError, exit 2, when it cannot be read)."""
    if inputs is None:
        return {}
    if not isinstance(inputs, str | os.PathLike):
        return {name: np.asarray(array) for name, array in inputs.items()}
    try:
        with np.load(os.fspath(inputs), allow_pickle=False) as data:
            arrays = {name: data[name] for name in data.files}
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise ModelReadError(inputs, f"cannot read the inputs: {exc}") from None
    # strings come as numpy str arrays (object arrays need pickle); runtimes take object ones
    return {k: a.astype(object) if a.dtype.kind == "U" else a for k, a in arrays.items()}


def check(
    model: Model | str | os.PathLike[str],
    *,
    runtime: str | None = None,
    max_opset: int | None = None,
    max_ir: int | None = None,
    verify: Sequence[str] = (),
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    ran_with: dict[str, dict[str, list[int]]] | None = None,
    inputs: Mapping[str, np.ndarray] | str | os.PathLike[str] | None = None,
) -> list[Problem]:
    """Every problem that would stop ``model`` from being deployed; empty when it is fit.

    Checks, in order: onnx's checker (on the path when given one, so external data is never
    read into memory); the validity every command checks (``_validate.model_problems``: the
    graph's invariants, ops against their schemas, element types, tensor data against its
    dims, code ``graph``); strict shape inference, every error at once; the opset and IR version
    against ``max_opset`` / ``max_ir`` and ``runtime``'s limits (``"onnxruntime"``: the
    installed version, see onnxruntime_limits); Split-18 nodes without their sizes or with a
    num_outputs that is not their output count; ops of domains that neither ONNX, the
    runtime (com.microsoft for onnxruntime) nor a local function defines.

    Warnings (severity ``warning``: the model runs, a consumer could trip): declared shapes
    that contradict inference, negative declared dims, unused graph inputs, initializers with
    the same data, subgraph names that shadow outer ones.

    ``verify``: runtimes (onnxruntime, openvino) to load the model in and run, each in a child
    process, on random floats, small non-negative integers (masks ones, ids 0 or 1) and every
    symbolic dim one size from CANDIDATE_SIZES, tried in order until one runs (or
    ``input_shapes[name]``); ``ran_with`` (a dict) gets each runtime's input shapes that ran.
    ``inputs`` (arrays by input name, or an .npz file of them) are fed as they are, for models
    whose inputs must hold particular values (lengths, ids, durations that agree).
    It runs only when no error but the checker's was found (a model with errors may crash the
    runtime); when every runtime runs the model, the checker's findings become warnings. A Model
    object is checked as it is (the checker sees a copy with every weight embedded) and, as
    shape_infer.infer does, gets its inferred types.

    Raises ModelReadError for an unreadable file, RuntimeUnavailableError when a runtime
    asked for is not installed.
    """
    for name in verify:
        require_runtime(name)
    limits = None
    if runtime is not None:
        if runtime != "onnxruntime":
            raise OnnxForgeError(f"--runtime knows onnxruntime only, not {runtime!r}")
        limits = onnxruntime_limits()
    path = None if isinstance(model, Model) else Path(model)
    file = str(path) if path is not None else "<model>"
    loaded = load(path) if path is not None else model
    assert isinstance(loaded, Model)
    found = [
        Problem(file, "", "checker", message)
        for message in checker_problems(path if path is not None else loaded)
    ]
    found += [Problem(file, "", "graph", message) for message in model_problems(loaded)]
    found += _opset_problems(loaded, file, limits, max_opset)
    found += _ir_problems(loaded, file, limits, max_ir)
    splits, split_nodes = _split_problems(loaded, file)
    found += splits
    found += _domain_problems(loaded, file, limits)
    if path is not None:
        found += [Problem(file, "", "negative-dim", m) for m in negative_dims(path)]
    if not any(p.code == "graph" for p in found):  # inference needs a sound graph
        found += _shape_problems(loaded, file, split_nodes)
        found += _hygiene_problems(loaded, file)
    # onnx's checker is stricter than the runtimes (a graph output without a shape): what it
    # alone finds does not stop the run, and when every runtime runs the model it is a warning.
    if verify and not any(p.severity == "error" and p.code != "checker" for p in found):
        given = _given_inputs(inputs)
        failed = _verify(
            loaded, path, file, verify, input_shapes or {}, ran_with=ran_with, given=given
        )
        if not failed:
            names = " and ".join(verify)
            found = [
                Problem(p.file, p.node, p.code, f"{p.message} ({names} runs the model)", "warning")
                if p.code == "checker"
                else p
                for p in found
            ]
        found += failed
    return found
