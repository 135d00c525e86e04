"""Converting the ONNX backend node suite to every opset from 7 to the newest, and checking
each result against the case's stored outputs: what test_node_suite.py, node_suite_table.py
and benchmarks/convert.py share.

Targets are grouped into classes: two targets are equivalent for a case when every op of the
case (and every op the conversion added) selects the same schema version (and function-body
version) at both, so the converted models differ only in their opset_import. One
representative per class is converted and run (the pending target nearest the case's own
opset, whose conversion path the others extend); the class is then every pending target on
which the original ops and those of the representative's result select the same versions as
on the representative.
"""

from __future__ import annotations

import functools
import re
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import onnx
from onnx import numpy_helper

from onnxforge import opset as schemas
from onnxforge.errors import OnnxForgeError
from onnxforge.io import from_proto, to_proto
from onnxforge.passes.convert import convert

EXCLUDED_FILE = Path(__file__).with_name("node_suite_excluded.txt")
TABLE_FILE = Path(__file__).with_name("node_suite_results.md")
FIRST_TARGET = 7
_DEFAULT = ("", "ai.onnx")

Status = Literal["pass", "refused", "wrong", "unchecked"]


@functools.cache
def ort_latest() -> int:
    """The newest default-domain opset the installed onnxruntime loads (probed)."""
    from onnxforge.api._check import onnxruntime_limits

    return int(onnxruntime_limits().max_opset[""])


def targets() -> range:
    """7 to the newest opset onnx defines; beyond onnxruntime's, onnx.reference runs them."""
    return range(FIRST_TARGET, schemas.latest_opset() + 1)


@dataclass(frozen=True, slots=True)
class Outcome:
    """What converting a case to one target gave. ``runner`` is what ran the result
    ("onnxruntime", or "reference" where onnxruntime cannot run it); ``target`` is the class
    representative that was converted and run for this target."""

    status: Status
    detail: str = ""
    runner: str = ""
    target: int = 0

    def cell(self) -> str:
        if self.status == "pass":
            return "pass" if self.runner == "onnxruntime" else "pass (ref)"
        return self.status


# -- the model's ops ---------------------------------------------------------------------------
def source_opset(proto: onnx.ModelProto) -> int | None:
    return next((o.version for o in proto.opset_import if o.domain in _DEFAULT), None)


def _graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    yield graph
    for node in graph.node:
        for attr in node.attribute:
            if attr.HasField("g"):
                yield from _graphs(attr.g)
            for sub in attr.graphs:
                yield from _graphs(sub)


def _nodes(proto: onnx.ModelProto) -> Iterator[onnx.NodeProto]:
    for graph in _graphs(proto.graph):
        yield from graph.node
    for fn in proto.functions:
        yield from fn.node


def default_ops(proto: onnx.ModelProto) -> frozenset[str]:
    """Op types of the default domain, in every graph, subgraph and local function."""
    return frozenset(n.op_type for n in _nodes(proto) if n.domain in _DEFAULT)


def signature(ops: frozenset[str], target: int) -> tuple[tuple[int | None, int | None], ...]:
    """Per op, the schema version ``target`` selects (None: no schema there) and the version
    of its function body (MeanVarianceNormalization-13 has bodies for opsets 13 and 18, which
    onnx's checker and runtimes without a kernel expand)."""
    return tuple(_selected(op_type, target) for op_type in sorted(ops))


@functools.cache
def _selected(op_type: str, target: int) -> tuple[int | None, int | None]:
    try:
        since = schemas.since_version(op_type, target)
    except OnnxForgeError:
        return None, None
    schema = onnx.defs.get_schema(op_type, target)
    bodies = [
        *schema.function_opset_versions,
        *schema.context_dependent_function_opset_versions,
    ]
    return since, max((v for v in bodies if v <= target), default=None)


# -- inputs, outputs, comparison -----------------------------------------------------------
def _data(value: Any) -> Any:
    if isinstance(value, onnx.TensorProto):
        return numpy_helper.to_array(value)
    if isinstance(value, list):
        return [_data(v) for v in value]
    return value if value is None else np.asarray(value)  # numpy scalars: 0-d arrays


def feeds(case: Any, proto: onnx.ModelProto) -> dict[str, Any]:
    """The case's stored inputs by graph input name (initializers are not fed)."""
    inits = {t.name for t in proto.graph.initializer}
    names = [i.name for i in proto.graph.input if i.name not in inits]
    return {n: _data(v) for n, v in zip(names, case.data_sets[0][0], strict=False)}


RANDOM_OPS = frozenset(
    {"Bernoulli", "Multinomial", "RandomNormal", "RandomNormalLike", "RandomUniform",
     "RandomUniformLike"}
)  # fmt: skip
"""Ops whose output values are drawn at random: only shapes and types are compared."""


def _compare_one(
    want: Any, have: Any, rtol: float, atol: float, where: str, *, values: bool = True
) -> list[str]:
    if want is None or have is None:
        return [] if want is None and have is None else [f"{where}: {have!r} vs {want!r}"]
    if isinstance(want, list):
        if not isinstance(have, list) or len(have) != len(want):
            return [f"{where}: sequence of {len(want)} expected"]
        out: list[str] = []
        for i, (w, h) in enumerate(zip(want, have, strict=True)):
            out += _compare_one(w, h, rtol, atol, f"{where}[{i}]", values=values)
        return out
    want = np.asarray(want)
    have = np.asarray(have)
    if have.shape != want.shape:
        return [f"{where}: shape {have.shape}, expected {want.shape}"]
    if want.dtype.kind in "OUS":
        same = np.array_equal(have.astype(object), want.astype(object))
        return [] if same else [f"{where}: values differ"]
    if have.dtype == np.uint8 and want.dtype.itemsize == 1 and want.dtype.kind not in "iub":
        have = have.view(want.dtype)  # onnxruntime returns float8/float4 as their bits
    if have.dtype != want.dtype:
        return [f"{where}: dtype {have.dtype}, expected {want.dtype}"]
    if not values:
        return []
    if want.dtype.kind == "V" or want.dtype.itemsize == 1 and want.dtype.kind not in "iub":
        want, have = want.astype(np.float64), have.astype(np.float64)  # float8, float4, ...
    try:
        np.testing.assert_allclose(have, want, rtol=rtol, atol=atol, equal_nan=True)
    except AssertionError as e:
        lines = [ln for ln in str(e).strip().splitlines() if ln.strip()]
        return [f"{where}: {' '.join(lines[1:3])}"]
    except TypeError:
        return [] if np.array_equal(have, want) else [f"{where}: values differ"]
    return []


def compare(case: Any, got: Sequence[Any]) -> list[str]:
    """Problems of ``got`` against the case's stored outputs (its rtol/atol; shapes and types
    only where a random op makes the values)."""
    expected = case.data_sets[0][1]
    if len(got) != len(expected):
        return [f"{len(got)} outputs, expected {len(expected)}"]
    values = not default_ops(case.model) & RANDOM_OPS
    problems: list[str] = []
    for i, (stored, result) in enumerate(zip(expected, got, strict=True)):
        want = _data(stored)
        problems += _compare_one(want, result, case.rtol, case.atol, f"output {i}", values=values)
    return problems


# -- running -----------------------------------------------------------------------------------
class _Beyond(Exception):
    """The target is newer than onnxruntime's opset."""


class Unrunnable(Exception):
    """Neither onnxruntime nor onnx.reference can run the model."""


def split_18_problem(proto: onnx.ModelProto) -> str | None:
    """A Split-18 whose num_outputs differs from its output count: onnxruntime aborts the
    whole process on it, so such a model must never reach it."""
    opset = source_opset(proto)
    if opset is None or opset < 18:
        return None
    for node in _nodes(proto):
        if node.op_type != "Split" or node.domain not in _DEFAULT:
            continue
        n = next((a.i for a in node.attribute if a.name == "num_outputs"), None)
        if n is not None and n != len(node.output):
            return f"Split node {node.name!r}: num_outputs {n}, {len(node.output)} outputs"
    return None


# onnxruntime refuses a model it has no kernel for (an op, a version, a type): then the
# reference evaluator runs it. Any other refusal of a model onnx's checker accepts is a fault.
_ORT_LACKS = re.compile(
    r"NOT_IMPLEMENTED|Could not find an implementation|not supported|is not a registered|"
    r"Unsupported|unsupported|No Op registered|NotImplemented|does not support"
)


def run_onnxruntime(proto: onnx.ModelProto, inputs: dict[str, Any]) -> list[Any]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 4
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(
        proto.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    return session.run(None, inputs)


def run_reference(proto: onnx.ModelProto, inputs: dict[str, Any]) -> list[Any]:
    from onnx.reference import ReferenceEvaluator

    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")  # numpy's warnings on nan/inf inside the ops
            return list(ReferenceEvaluator(proto).run(None, inputs))
    except Exception as e:  # onnx.reference raises whatever numpy raises
        raise Unrunnable(f"reference: {_first_line(e)}") from None


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    line = next((ln for ln in text.splitlines() if ln.strip()), "")
    return f"{type(e).__name__}: {line}"[:240]


# -- one case, every target ---------------------------------------------------------------
def convert_proto(
    proto: onnx.ModelProto, target: int, *, allow_cast: bool = False
) -> onnx.ModelProto:
    """``proto`` converted by onnxforge (a copy; AdapterError when refused)."""
    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    model = from_proto(copy)
    convert(model, target, allow_cast=allow_cast)
    return to_proto(model)


def check_target(
    case: Any, target: int, *, allow_cast: bool = False
) -> tuple[Outcome, frozenset[str]]:
    """Convert the case to ``target`` and check the result on onnxruntime (onnx.reference where
    onnxruntime lacks a kernel or deviates from the stored outputs); also the op types of the
    result."""
    try:
        converted = convert_proto(case.model, target, allow_cast=allow_cast)
    except OnnxForgeError as e:
        if type(e).__name__ != "AdapterError":
            return Outcome("wrong", f"conversion raised {_first_line(e)}", target=target), (
                frozenset()
            )
        lines = [ln.strip() for ln in str(e).splitlines()[1:] if ln.strip()] or [str(e)]
        return Outcome("refused", "; ".join(lines), target=target), frozenset()
    except Exception as e:  # a crash of the converter is a fault, recorded as such
        return Outcome("wrong", f"conversion crashed: {_first_line(e)}", target=target), (
            frozenset()
        )
    ops = default_ops(converted)
    return verify(case, converted, target), ops


def verify(case: Any, converted: onnx.ModelProto, target: int) -> Outcome:
    """The converted model is valid (onnx's full check, no Split-18 onnxruntime aborts on) and
    gives the stored outputs on onnxruntime. onnx.reference checks it instead where
    onnxruntime cannot: the target is beyond its opsets, it has no kernel or cannot exchange
    the type, or it fails or deviates on the case unconverted too."""
    try:
        onnx.checker.check_model(converted, full_check=True)
    except Exception as e:
        # Some suite models fail the full check as shipped; then the converted one may too.
        if _checker_fails(case.name) is None:
            return Outcome("wrong", f"checker: {_first_line(e)}", target=target)
    split = split_18_problem(converted)
    if split is not None:
        return Outcome("wrong", split, target=target)
    inputs = feeds(case, converted)
    try:
        if target > ort_latest():
            raise _Beyond(f"onnxruntime loads opsets up to {ort_latest()}")
        got = run_onnxruntime(converted, inputs)
    except _Beyond as e:
        ort_problem = str(e)
    except Exception as e:
        ort_problem = _first_line(e)
        excused = _ORT_LACKS.search(ort_problem) or _bad_feed(ort_problem)
        if not excused and ort_baseline(case.name) is None:
            return Outcome("wrong", f"onnxruntime refuses it: {ort_problem}", target=target)
    else:
        problems = compare(case, got)
        if not problems:
            return Outcome("pass", runner="onnxruntime", target=target)
        ort_problem = "onnxruntime deviates: " + "; ".join(problems)[:200]
        source = source_opset(case.model) or 0
        if source <= ort_latest() and ort_baseline(case.name) is None:
            # onnxruntime gets the case right unconverted: the conversion must keep that.
            return Outcome("wrong", ort_problem, target=target)
    try:
        got = run_reference(converted, inputs)
    except Unrunnable as e:
        return Outcome("unchecked", f"{ort_problem}; {e}", target=target)
    problems = compare(case, got)
    if not problems:
        return Outcome("pass", ort_problem, runner="reference", target=target)
    detail = f"{ort_problem}; reference: {'; '.join(problems)}"
    if reference_baseline(case.name) is not None:
        return Outcome("unchecked", f"{detail} (also on the original)", target=target)
    return Outcome("wrong", detail, target=target)


@functools.cache
def reference_baseline(name: str) -> str | None:
    """Why onnx.reference cannot run the case as shipped and give its stored outputs, or None."""
    from suites import node_cases

    case = node_cases()[name]
    try:
        got = run_reference(case.model, feeds(case, case.model))
    except Unrunnable as e:
        return str(e)
    problems = compare(case, got)
    return "; ".join(problems)[:200] if problems else None


@functools.cache
def ort_baseline(name: str) -> str | None:
    """Why onnxruntime cannot run the case as shipped and give its stored outputs, or None when
    it can. A case newer than onnxruntime's opset has no baseline: None."""
    from suites import node_cases

    case = node_cases()[name]
    source = source_opset(case.model) or 0
    if source > ort_latest():
        return None
    try:
        got = run_onnxruntime(case.model, feeds(case, case.model))
    except Exception as e:
        return _first_line(e)
    problems = compare(case, got)
    return "; ".join(problems)[:200] if problems else None


def _bad_feed(message: str) -> bool:
    """onnxruntime's Python API cannot take the input (bfloat16, float8, int4 numpy types)."""
    return any(
        s in message
        for s in (
            "Unexpected input data type",
            "can't be converted to MLDataType",
            "No corresponding Numpy type",
        )
    )


@functools.cache
def _checker_fails(name: str) -> str | None:
    """Why onnx's full check rejects the case as shipped, or None."""
    from suites import node_cases

    try:
        onnx.checker.check_model(node_cases()[name].model, full_check=True)
    except Exception as e:
        return _first_line(e)
    return None


def check_case(case: Any, wanted: Sequence[int] | None = None) -> dict[int, Outcome]:
    """Every target (or those ``wanted``), one conversion per class of equivalent targets."""
    original = default_ops(case.model)
    source = source_opset(case.model) or 0
    pending = list(targets() if wanted is None else wanted)
    results: dict[int, Outcome] = {}
    while pending:
        rep = min(pending, key=lambda t: (abs(t - source), t))
        outcome, added = check_target(case, rep)
        ops = original | added
        key = signature(ops, rep)
        covered = [t for t in pending if signature(ops, t) == key]
        assert rep in covered
        for t in covered:
            results[t] = outcome
        pending = [t for t in pending if t not in covered]
    return results


# -- which cases ---------------------------------------------------------------------------------
def suite_cases() -> dict[str, Any]:
    """Node-suite cases whose default-domain opset is 7 or later."""
    from suites import node_cases

    return {
        name: case
        for name, case in sorted(node_cases().items())
        if (source_opset(case.model) or 0) >= FIRST_TARGET
    }


def excluded() -> list[tuple[str, str]]:
    """``pattern  # reason`` lines: cases that cannot be checked at any target."""
    table = []
    for line in EXCLUDED_FILE.read_text().splitlines():
        pattern, _, reason = line.partition("#")
        if pattern.strip():
            table.append((pattern.strip(), reason.strip()))
    return table


def excluded_reason(name: str) -> str | None:
    return next((r for p, r in excluded() if re.fullmatch(p, name)), None)
