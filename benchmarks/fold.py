"""Benchmark constant folding: onnxforge's fold (load + fold-constants + dead code + save) against
onnxsim's simplify and onnxslim's slim (each with its defaults, load and save included), on the
same models: time, peak memory, nodes removed, output size, and whether the output still
computes what the original does on onnxruntime."""

from __future__ import annotations

__all__ = ["TOOLS", "Case", "Result", "main"]

# Only the standard library at module level: a --child process imports the one tool it
# measures, before its baseline, so no tool pays for another's imports.
import argparse
import contextlib
import json
import logging
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

MIB = 1 << 20
GIB = 1 << 30
LARGE_BYTES = 1 << 30  # models with more weight than this: one run per tool, no ORT check
PROTOBUF_LIMIT = (1 << 31) - 1
DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "fold.md"
TOOLS = ("onnxforge", "onnxsim", "onnxslim")
RTOL, ATOL = 1e-4, 1e-5
BATCH, OTHER_DIM = 2, 5


@dataclass(frozen=True)
class Case:
    """One source model (read in place), its size with external data, and its nodes."""

    name: str
    path: Path
    nbytes: int
    external: bool
    nodes: int
    ops: dict[str, int]
    dead: int


@dataclass
class Result:
    """Best time, median peak RSS above the post-import baseline (MiB), what the last run
    wrote (nodes, op types, bytes) and whether it computes the same; or why the tool failed."""

    seconds: float = 0.0
    delta: float = 0.0
    nodes: int = 0
    ops: dict[str, int] = field(default_factory=dict)
    dead: int = 0
    out_bytes: int = 0
    same: str = ""
    notes: str = ""
    error: str = ""


# -- measuring, in the child ---------------------------------------------------------------------
def _vm_bytes(field_name: str) -> int | None:
    """A ``Vm*`` line of /proc/self/status in bytes; None off Linux."""
    with contextlib.suppress(OSError), open("/proc/self/status") as f:
        return next((int(ln.split()[1]) * 1024 for ln in f if ln.startswith(field_name)), None)
    return None


def _rss_now() -> int:
    """Current RSS in bytes; on Linux also resets the peak to it, so the imports' peak is gone."""
    with contextlib.suppress(OSError), open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return _vm_bytes("VmRSS:") or _rss_peak()


def _rss_peak() -> int:
    """Peak RSS in bytes: VmHWM, as Linux's ru_maxrss inherits the parent's across exec."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return _vm_bytes("VmHWM:") or (peak if sys.platform == "darwin" else peak * 1024)


def _initializer_bytes(model: Any) -> int:
    """Bytes of the main graph's initializers (external or not), without serializing."""
    import onnx

    total = 0
    for t in model.graph.initializer:
        if t.data_location == onnx.TensorProto.EXTERNAL:
            total += next((int(e.value) for e in t.external_data if e.key == "length"), 0)
        else:
            total += len(t.raw_data) or t.ByteSize()
    return total


THEIR_FOLD_LIMIT = 1536 << 20
"""--their-policy: onnxsim's default cap on a folded tensor (1.5 GB)."""


def child(
    tool: str, src: str, dst: str, external: bool, pipeline: str = "fold", *, their: bool = False
) -> None:
    """Load ``src``, fold/simplify it, save it to ``dst`` once with ``tool``; print time, RSS
    and the tool's own notes as JSON."""
    if tool == "onnxforge":
        import onnxforge.io
        import onnxforge.kernels._reference  # imported on first use otherwise (onnx.reference)
        import onnxforge.shape_infer._onnx_fallback
        from onnxforge.api._optimize import OptimizeOptions, optimize_model, pin_input_defaults
        from onnxforge.passes import fold_pipeline
    elif tool == "onnxsim":
        import onnx
        import onnxruntime  # noqa: F401  (onnxsim folds with it; imported before the baseline)
        import onnxsim
    else:
        import onnx
        import onnxruntime  # noqa: F401  (onnxslim's folding runs it)
        import onnxslim
        import onnxslim.utils
    baseline = _rss_now()
    notes = ""
    start = time.perf_counter()
    try:
        if tool == "onnxforge":
            model = onnxforge.io.load(src)
            parts = []
            limit = {"limit_bytes": THEIR_FOLD_LIMIT} if their else {}
            if their:  # what onnxsim and onnxslim do by default
                pin_input_defaults(model)
            if pipeline == "optimize":  # what `onnxforge optimize` runs
                options = OptimizeOptions(fold_limit=limit.get("limit_bytes"))
                report = optimize_model(model, options)
                for row in report.rows:
                    if row.pass_name.startswith("  ") and row.ops_after != row.ops_before:
                        parts.append(f"{row.pass_name.strip()} {row.ops_before - row.ops_after}")
            else:
                manager = fold_pipeline(**limit)  # `onnxforge fold`: fold, then dead code
                manager.run(model)
                for p in manager.results:
                    prefix = "" if p is manager.results[0] else "dead code: "
                    for key, count in sorted(p.stats.items()):
                        if count:
                            parts.append(f"{prefix}{key.removeprefix('not_folded.')} {count}")
            onnxforge.io.save(model, dst)  # keeps external data when the source had it
            notes = ", ".join(parts)
        elif tool == "onnxsim":
            proto = onnx.load(src)
            proto, ok = onnxsim.simplify(proto)
            big = external or _initializer_bytes(proto) > PROTOBUF_LIMIT - (64 << 20)
            location = f"{os.path.basename(dst)}.data" if big else None
            onnx.save(proto, dst, save_as_external_data=big, location=location)
            notes = "" if ok else "simplify returned check_ok=False"
        else:
            proto = onnx.load(src)
            proto = onnxslim.slim(proto)
            if proto is None:
                raise RuntimeError("slim returned None")
            onnxslim.utils.save(proto, dst)  # external data past 2 GB of initializers
        seconds = time.perf_counter() - start
    except Exception as e:  # a tool's failure on a model is a result, not a crash
        message = str(e).strip().splitlines()[0] if str(e).strip() else ""
        frames = traceback.extract_tb(e.__traceback__)
        where = f" (at {Path(frames[-1].filename).name}:{frames[-1].lineno})" if frames else ""
        print(json.dumps({"error": f"{type(e).__name__}: {message[:250]}{where}"}))
        return
    print(
        json.dumps({"seconds": seconds, "baseline": baseline, "peak": _rss_peak(), "notes": notes})
    )


# -- checking on onnxruntime, in another child ---------------------------------------------------
def _feeds(model: Any, seed: int = 0) -> dict[str, Any]:
    """Random inputs: the first axis (batch) 2, other dynamic dims 5 (a symbol keeps the value
    it got first), integers in [0, 2), floats standard normal, booleans random."""
    import numpy as np
    from onnx import helper

    rng = np.random.default_rng(seed)
    inits = {t.name for t in model.graph.initializer}
    symbols: dict[str, int] = {}
    feeds = {}
    for info in model.graph.input:
        if info.name in inits:
            continue  # IR < 4: initializers listed as inputs are defaults, not fed
        tt = info.type.tensor_type
        shape = []
        for axis, d in enumerate(tt.shape.dim):
            if d.HasField("dim_value"):
                shape.append(d.dim_value)
                continue
            size = BATCH if axis == 0 else OTHER_DIM
            shape.append(symbols.setdefault(d.dim_param, size) if d.dim_param else size)
        dtype = helper.tensor_dtype_to_np_dtype(tt.elem_type)
        if dtype == np.bool_:
            feeds[info.name] = rng.integers(0, 2, size=shape).astype(bool)
        elif np.issubdtype(dtype, np.integer):
            feeds[info.name] = rng.integers(0, 2, size=shape).astype(dtype)
        else:
            feeds[info.name] = rng.standard_normal(shape).astype(dtype)
    return feeds


def _run(path: str, feeds: dict[str, Any]) -> dict[str, Any]:
    import onnx
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    wanted = {i.name for i in session.get_inputs()}
    inits = {t.name for t in onnx.load(path, load_external_data=False).graph.initializer}
    missing = wanted - set(feeds) - inits
    if missing:
        raise RuntimeError(f"needs inputs the original does not have: {sorted(missing)}")
    names = [o.name for o in session.get_outputs()]
    results = session.run(None, {k: v for k, v in feeds.items() if k in wanted})
    return dict(zip(names, results, strict=True))


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0] if text else ''}"[:200]


def check(src: str, outputs: list[str]) -> None:
    """Run the original and each output on onnxruntime with the same random inputs; print one
    verdict per output as JSON: "yes", or what differs / fails."""
    import numpy as np
    import onnx

    feeds = _feeds(onnx.load(src, load_external_data=False))
    try:
        reference = _run(src, feeds)
    except Exception as e:
        print(json.dumps([f"n/a (original fails on ORT: {_first_line(e)})"] * len(outputs)))
        return
    verdicts = []
    for path in outputs:
        try:
            got = _run(path, feeds)
        except Exception as e:
            verdicts.append(f"fails on ORT: {_first_line(e)}")
            continue
        if set(got) != set(reference):
            verdicts.append(f"outputs differ: {sorted(set(reference) ^ set(got))}")
            continue
        bad = []
        for name, want in reference.items():
            have = got[name]
            if have.shape != want.shape:
                bad.append(f"{name}: shape {have.shape} != {want.shape}")
            elif not np.allclose(have, want, rtol=RTOL, atol=ATOL, equal_nan=True):
                diff = np.abs(have.astype(np.float64) - want.astype(np.float64))
                bad.append(f"{name}: max |diff| {np.nanmax(diff):.3g}")
        verdicts.append("no (" + "; ".join(bad) + ")" if bad else "yes")
    print(json.dumps(verdicts))


# -- the parent ----------------------------------------------------------------------------------
def _limit_memory(limit: int) -> Any:
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return apply if limit > 0 else None


def _failure(done: subprocess.CompletedProcess[str], limit: int) -> str:
    tail = (done.stderr.strip().splitlines() or ["no output"])[-1][:200]
    oom = ("MemoryError", "bad_alloc", "Cannot allocate memory", "out of memory")
    if done.returncode == -9 or any(s in done.stderr[-3000:] for s in oom):
        where = f"address space limit {limit / GIB:.0f} GiB; exit {done.returncode}"
        return f"out of memory ({where}): {tail}"
    return f"crashed (exit {done.returncode}): {tail}"


def measure(
    tool: str,
    case: Case,
    *,
    repeat: int,
    timeout: float,
    limit: int,
    work: Path,
    pipeline: str = "fold",
    their: bool = False,
) -> tuple[Result, Path | None]:
    """Run ``repeat`` fresh child processes, each in its own directory (its working directory:
    the tools may leave files there); keep the last run's output for the checks."""
    runs = []
    kept: Path | None = None
    for _ in range(repeat):
        if kept is not None:
            shutil.rmtree(kept.parent.parent, ignore_errors=True)
            kept = None
        run_dir = Path(tempfile.mkdtemp(prefix=f"{tool}-", dir=work))
        (run_dir / "out").mkdir()
        dst = run_dir / "out" / "m.onnx"
        cmd = [sys.executable, str(Path(__file__).resolve()), "--child", tool, str(case.path)]
        cmd += [str(dst), "--pipeline", pipeline] + (["--external"] if case.external else [])
        cmd += ["--their-policy"] if their else []
        try:
            done = subprocess.run(
                cmd,
                capture_output=True,
                text=True,
                check=False,
                cwd=run_dir,
                timeout=timeout,
                preexec_fn=_limit_memory(limit),
            )
        except subprocess.TimeoutExpired:
            shutil.rmtree(run_dir, ignore_errors=True)
            return Result(error=f"timeout after {timeout:.0f} s"), None
        lines = done.stdout.strip().splitlines()
        if done.returncode or not lines:
            shutil.rmtree(run_dir, ignore_errors=True)
            return Result(error=_failure(done, limit)), None
        try:
            run = json.loads(lines[-1])
        except json.JSONDecodeError:
            shutil.rmtree(run_dir, ignore_errors=True)
            return Result(error=f"no result line: {lines[-1][:200]}"), None
        if "error" in run:
            shutil.rmtree(run_dir, ignore_errors=True)
            return Result(error=run["error"]), None
        runs.append(run)
        kept = dst
    assert kept is not None
    nodes, ops, dead = count_nodes(kept)
    out_bytes = sum(f.stat().st_size for f in kept.parent.rglob("*") if f.is_file())
    result = Result(
        seconds=min(r["seconds"] for r in runs),
        delta=statistics.median(max(0, r["peak"] - r["baseline"]) for r in runs) / MIB,
        nodes=nodes,
        ops=ops,
        dead=dead,
        out_bytes=out_bytes,
        notes=runs[-1]["notes"],
    )
    return result, kept


def _proto_graphs(graph: Any) -> Iterator[Any]:
    yield graph
    for node in graph.node:
        for attr in node.attribute:
            if attr.HasField("g"):
                yield from _proto_graphs(attr.g)
            for sub in attr.graphs:
                yield from _proto_graphs(sub)


def count_nodes(path: Path) -> tuple[int, dict[str, int], int]:
    """Nodes of the main graph and every subgraph (If/Loop/Scan bodies; function bodies not
    counted), their op types (``domain:Op`` outside the default domain), and how many are
    dead: nothing reads them, directly or through other dead nodes."""
    import onnx

    model = onnx.load(path, load_external_data=False)
    ops: Counter[str] = Counter()
    nodes = []
    for graph in _proto_graphs(model.graph):
        for node in graph.node:
            default = node.domain in ("", "ai.onnx")
            ops[node.op_type if default else f"{node.domain}:{node.op_type}"] += 1
            nodes.append(node)
    # A node is live when a graph (or subgraph) output or a live node reads one of its outputs
    # (by name: a body reads enclosing values by name). Nodes read their subgraphs' captures.
    outputs = {o.name for graph in _proto_graphs(model.graph) for o in graph.output}
    reads = [
        {name for g in _proto_graphs_of(node) for n in g.node for name in n.input if name}
        | {name for name in node.input if name}
        for node in nodes
    ]
    live = [any(o in outputs for o in node.output) for node in nodes]
    producer = {o: i for i, node in enumerate(nodes) for o in node.output if o}
    todo = [i for i, alive in enumerate(live) if alive]
    while todo:
        for name in reads[todo.pop()]:
            j = producer.get(name)
            if j is not None and not live[j]:
                live[j] = True
                todo.append(j)
    return sum(ops.values()), dict(ops), live.count(False)


def _proto_graphs_of(node: Any) -> Iterator[Any]:
    """Every graph inside ``node``'s attributes, nested ones included."""
    for attr in node.attribute:
        if attr.HasField("g"):
            yield from _proto_graphs(attr.g)
        for sub in attr.graphs:
            yield from _proto_graphs(sub)


def describe(name: str, path: Path) -> Case:
    """Size with external data (every file a tensor of any graph points to) and nodes."""
    import onnx

    model = onnx.load(path, load_external_data=False)
    files = set()
    for graph in _proto_graphs(model.graph):
        for tensor in graph.initializer:
            for entry in tensor.external_data:
                if entry.key == "location":
                    files.add(entry.value)
    nbytes = path.stat().st_size + sum((path.parent / f).stat().st_size for f in files)
    nodes, ops, dead = count_nodes(path)
    return Case(name, path, nbytes, bool(files), nodes, ops, dead)


def run_check(case: Case, outputs: dict[str, Path], timeout: float, limit: int) -> dict[str, str]:
    """Verdicts of the ORT check for each tool's output (one child for all of them)."""
    tools = list(outputs)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--check", str(case.path)]
    cmd += [str(outputs[t]) for t in tools]
    with tempfile.TemporaryDirectory(prefix="onnxforge-check-") as cwd:
        try:
            done = subprocess.run(
                cmd,
                capture_output=True,
                text=True,
                check=False,
                cwd=cwd,
                timeout=timeout,
                preexec_fn=_limit_memory(limit),
            )
        except subprocess.TimeoutExpired:
            return dict.fromkeys(tools, f"n/a (check timed out after {timeout:.0f} s)")
    lines = done.stdout.strip().splitlines()
    if done.returncode or not lines:
        return dict.fromkeys(tools, f"n/a (check {_failure(done, limit)})")
    return dict(zip(tools, json.loads(lines[-1]), strict=True))


def sources(export_dir: str | None) -> Iterable[tuple[str, Path]]:
    """The zoo models in onnx's wheel, then the exported models under ``export_dir``."""
    import onnx

    light = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
    for path in sorted(light.glob("*.onnx")):
        yield path.stem.removeprefix("light_"), path
    if export_dir and Path(export_dir).is_dir():
        found = sorted(Path(export_dir).glob("*.onnx")) + sorted(Path(export_dir).glob("*/*.onnx"))
        for path in found:
            yield path.stem, path


# -- the report ----------------------------------------------------------------------------------
def _size(nbytes: int) -> str:
    size = float(nbytes)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            break
        size /= 1024
    return f"{nbytes} B" if unit == "B" else f"{size:.1f} {unit}"


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _ratio(ours: Result, theirs: Result) -> float | None:
    if ours.error or theirs.error or theirs.seconds <= 0:
        return None
    return ours.seconds / theirs.seconds


def _times(ratio: float) -> str:
    return f"{ratio:.2f}x" if ratio >= 0.1 else f"{ratio:.3f}x"


def _growth(ratio: float) -> str:
    return f"{ratio:.4f}x" if ratio < 100 else f"{ratio:,.0f}x"


def _median(values: Sequence[float], fmt: str) -> str:
    return format(statistics.median(values), fmt) if values else "n/a"


def op_changes(before: dict[str, int], after: dict[str, int]) -> str:
    """``Constant -35, Identity -4, Gemm +3``: op types whose count changed, most removed first."""
    diff = {op: after.get(op, 0) - before.get(op, 0) for op in set(before) | set(after)}
    changed = sorted((d, op) for op, d in diff.items() if d)
    return ", ".join(f"{op} {d:+d}" for d, op in changed) or "none"


def table(
    rows: list[tuple[Case, dict[str, Result]]], notes: list[str], pipeline: str = "fold"
) -> str:
    """The Markdown report: times and nodes per model, medians, memory, sizes and checks, op
    types removed, findings, failures and method."""
    ours = "onnxforge"
    head = ["Model", "Size", "Nodes"] + [f"{t} (s)" for t in TOOLS]
    head += ["ours / onnxsim", "ours / onnxslim"]
    head += [f"nodes after: {t}" for t in TOOLS] + [f"removed: {t}" for t in TOOLS]
    title = {"fold": "Constant folding: load + fold + save"}.get(
        pipeline, "Optimize: load + optimize + save"
    )
    lines = [f"# {title}", ""]
    lines += [_row(head), _row(["---"] * len(head))]
    ratios: dict[str, list[float]] = {"onnxsim": [], "onnxslim": []}
    removed: dict[str, list[int]] = {t: [] for t in TOOLS}
    failures, fewer, differ, grow, dead = [], [], [], [], []
    for case, results in rows:
        cells = [case.name, _size(case.nbytes), str(case.nodes)]
        cells += ["failed" if results[t].error else f"{results[t].seconds:.3f}" for t in TOOLS]
        for other in ("onnxsim", "onnxslim"):
            ratio = _ratio(results[ours], results[other])
            cells.append("n/a" if ratio is None else _times(ratio))
            if ratio is not None:
                ratios[other].append(ratio)
        cells += ["—" if results[t].error else str(results[t].nodes) for t in TOOLS]
        for tool in TOOLS:
            r = results[tool]
            cells.append("—" if r.error else str(case.nodes - r.nodes))
            if r.error:
                failures.append(f"{case.name}, {tool}: {r.error}")
                continue
            removed[tool].append(case.nodes - r.nodes)
            if r.same and r.same != "yes" and not r.same.startswith("skipped"):
                differ.append(f"{case.name}, {tool}: {r.same}")
            if r.dead > case.dead:
                dead.append(f"{case.name}, {tool}: {r.dead} (input: {case.dead})")
            if r.out_bytes > case.nbytes:
                grow.append(
                    f"{case.name}, {tool}: {case.nbytes} -> {r.out_bytes} bytes "
                    f"(+{r.out_bytes - case.nbytes}, {_growth(r.out_bytes / case.nbytes)})"
                )
        mine = results[ours]
        if not mine.error:
            beaten = [
                f"{t} removes {case.nodes - results[t].nodes}"
                for t in ("onnxsim", "onnxslim")
                if not results[t].error and results[t].nodes < mine.nodes
            ]
            if beaten:
                mine_removed = case.nodes - mine.nodes
                fewer.append(
                    f"{case.name}: onnxforge removes {mine_removed}; " + ", ".join(beaten)
                )
        lines.append(_row(cells))
    lines += ["", "## Medians", ""]
    for other in ("onnxsim", "onnxslim"):
        found = ratios[other]
        median = _times(statistics.median(found)) if found else "n/a"
        lines.append(
            f"- time, onnxforge / {other}: **{median}** over the {len(found)} models both ran on"
        )
    for tool in TOOLS:
        got = removed[tool]
        lines.append(
            f"- nodes removed, {tool}: median **{_median(got, 'g')}** per model, "
            f"{sum(got)} in total over the {len(got)} models it ran on"
        )
    all_ran = [(c, rs) for c, rs in rows if not any(rs[t].error for t in TOOLS)]
    if len(all_ran) < len(rows):
        parts = [
            f"{t} {_median([float(c.nodes - rs[t].nodes) for c, rs in all_ran], 'g')}"
            for t in TOOLS
        ]
        lines.append(
            f"- nodes removed over the {len(all_ran)} models all three ran on, medians: "
            + ", ".join(parts)
        )
    head = ["Model", "Input bytes"] + [f"peak Δ MiB: {t}" for t in TOOLS]
    head += [f"output bytes (ratio): {t}" for t in TOOLS] + [f"same on ORT: {t}" for t in TOOLS]
    lines += ["", "## Peak memory, output size, same results on onnxruntime", ""]
    lines += [_row(head), _row(["---"] * len(head))]
    for case, results in rows:
        cells = [case.name, str(case.nbytes)]
        cells += ["—" if results[t].error else f"{results[t].delta:.1f}" for t in TOOLS]
        for tool in TOOLS:
            r = results[tool]
            cells.append("—" if r.error else f"{r.out_bytes} ({r.out_bytes / case.nbytes:.3f}x)")
        for tool in TOOLS:
            r = results[tool]
            same = r.same if r.same in ("yes", "") else r.same.split(" ")[0]
            cells.append("—" if r.error else same or "—")
        lines.append(_row(cells))
    lines += ["", "## Op types removed (-) and added (+), all graphs; dead nodes left", ""]
    head = ["Model"] + list(TOOLS) + ["onnxforge: folded / refused / dead code removed"]
    lines += [_row(head), _row(["---"] * len(head))]
    for case, results in rows:
        cells = [case.name]
        for tool in TOOLS:
            r = results[tool]
            left = f" ({r.dead} dead left)" if r.dead else ""
            cells.append("—" if r.error else op_changes(case.ops, r.ops) + left)
        cells.append(results[ours].notes or "—")
        lines.append(_row(cells))
    lines += ["", "## Findings", ""]
    lines += ["Models where onnxforge removes fewer nodes than another tool:", ""]
    lines += [f"- {f}" for f in fewer] or ["- none"]
    lines += ["", "Outputs that compute other results than the original on onnxruntime:", ""]
    lines += [f"- {d}" for d in differ] or ["- none"]
    lines += ["", "Outputs larger than the input:", ""]
    lines += [f"- {g}" for g in grow] or ["- none"]
    lines += ["", "Outputs with dead nodes (nothing reads them, directly or through others):", ""]
    lines += [f"- {d}" for d in dead] or ["- none"]
    if failures:
        lines += ["", "## Failures", ""]
        lines += [f"- {f}" for f in failures]
    lines += ["", "## Method", ""] + [f"- {note}" for note in notes]
    return "\n".join(lines) + "\n"


def _git_version() -> str:
    cmd = ["git", "-C", str(Path(__file__).parent), "describe", "--always", "--dirty"]
    with contextlib.suppress(OSError):
        return subprocess.run(cmd, capture_output=True, text=True, check=False).stdout.strip()
    return ""


def _versions() -> str:
    found = []
    for name in ("onnx", "onnxsim", "onnxslim", "onnxruntime", "onnxoptimizer"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            found.append(f"{name} {metadata.version(name)}")
    return ", ".join(found)


def _default_limit() -> int:
    """Three quarters of the machine's memory, as an address-space limit per child."""
    with contextlib.suppress(OSError, ValueError):
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") * 3 // 4)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Parse the command line; run the benchmark (or one --child measurement or --check)."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--out", type=Path, help="Markdown file to write (default: results/<pipeline>.md)"
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs per tool; best time is kept")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per run")
    parser.add_argument(
        "--mem-limit",
        type=float,
        default=_default_limit() / GIB,
        help="address-space limit per run, GiB (default: 3/4 of RAM; 0: none)",
    )
    parser.add_argument("--only", nargs="*", help="model names to run (default: all)")
    parser.add_argument(
        "--export-dir",
        default=os.environ.get("ONNXFORGE_EXPORT_DIR"),
        help="exported models to add (default: $ONNXFORGE_EXPORT_DIR)",
    )
    parser.add_argument(
        "--pipeline",
        choices=("fold", "optimize"),
        default="fold",
        help="what onnxforge runs: `fold` (default; results/fold.md) or `optimize` "
        "(results/optimize.md)",
    )
    parser.add_argument(
        "--their-policy",
        action="store_true",
        help="run onnxforge with onnxsim's defaults: initializers listed as graph inputs are "
        "constants (--pin-defaults) and folds up to 1.5 GB (default results file: "
        "results/<pipeline>-their-policy.md)",
    )
    parser.add_argument("--child", nargs=3, metavar=("TOOL", "SRC", "DST"), help=argparse.SUPPRESS)
    parser.add_argument("--external", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--check", nargs="+", metavar="MODEL", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        tool, src, dst = args.child
        child(tool, src, dst, args.external, args.pipeline, their=args.their_policy)
        return 0
    if args.check:
        check(args.check[0], args.check[1:])
        return 0
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    version = _git_version() or "(no git)"  # before the run: others may commit during it
    limit = int(args.mem_limit * GIB)
    load_before = os.getloadavg() if hasattr(os, "getloadavg") else None
    rows = []
    with tempfile.TemporaryDirectory(prefix="onnxforge-bench-") as tmp:
        work = Path(tmp)
        for name, source in sources(args.export_dir):
            if args.only and name not in args.only:
                continue
            case = describe(name, source)
            large = case.nbytes > LARGE_BYTES
            repeat = 1 if large else args.repeat
            logger.info(
                "%s: %s, %d nodes, %d run(s)/tool", name, _size(case.nbytes), case.nodes, repeat
            )
            results, outputs = {}, {}
            for tool in TOOLS:
                result, kept = measure(
                    tool,
                    case,
                    repeat=repeat,
                    timeout=args.timeout,
                    limit=limit,
                    work=work,
                    pipeline=args.pipeline,
                    their=args.their_policy,
                )
                results[tool] = result
                if kept is not None:
                    outputs[tool] = kept
            if large:
                for tool in outputs:
                    results[tool].same = "skipped (over 1 GiB)"
            elif outputs:
                for tool, verdict in run_check(case, outputs, args.timeout, limit).items():
                    results[tool].same = verdict
            for tool, r in results.items():
                shown = r.error or (
                    f"{r.seconds:.3f} s, {case.nodes} -> {r.nodes} nodes, "
                    f"{r.out_bytes / case.nbytes:.3f}x bytes, same: {r.same}"
                )
                logger.info("  %-10s %s", tool, shown)
            for kept in outputs.values():
                shutil.rmtree(kept.parent.parent, ignore_errors=True)
            rows.append((case, results))
    load_after = os.getloadavg() if hasattr(os, "getloadavg") else None
    loads = ""
    if load_before and load_after:
        loads = (
            f" Load average (1 min) {load_before[0]:.1f} at the start, {load_after[0]:.1f} at "
            "the end: other work shared the machine, so times are noisy."
        )
    notes = [
        "onnxforge: `onnxforge.io.load` + `fold_pipeline()` (what `onnxforge fold` runs: "
        "`FoldConstantsPass()`, default limit 1 KiB: a folded constant larger than that and "
        "than the constant inputs only it reads is not made; then `EliminateDeadCodePass()`) + "
        "`onnxforge.io.save` (keeps external data). onnxsim: `onnx.load` + "
        "`onnxsim.simplify(model)` (defaults: also dead-code elimination and onnxoptimizer's "
        "fusions, main graph only, folded tensors up to 1.5 GB) + `onnx.save` "
        "(`save_as_external_data=True` for a source with external data or over 2 GB). "
        "onnxslim: `onnx.load` + `onnxslim.slim(model)` (defaults: folding with no size "
        "limit, dead-code elimination, pattern fusions) + `onnxslim.utils.save` (external "
        "data past 2 GB of initializers).",
        f"Time: load + transform + save (not imports), best of {args.repeat} fresh processes "
        "(1 for models over 1 GiB); ratios are onnxforge / other tool, medians over the models "
        "both ran on. Peak Δ: VmHWM (peak RSS) minus the RSS right after imports (peak reset "
        "there; onnxruntime imported before it for onnxsim and onnxslim, onnx.reference for "
        "onnxforge), median over the runs.",
        "Nodes: every node of the main graph and of every subgraph (If/Loop/Scan bodies); "
        "function bodies not counted (none of these models has any). Constant nodes are nodes, "
        "so turning one into an initializer removes one. Removed = before - after. Dead: nodes "
        "whose outputs nothing reads (no graph output, no live node), which a dead-code "
        "elimination would remove.",
        "Output bytes: every file the tool wrote (model + external data); input bytes: the "
        "model file + the external data files it points to.",
        "Same on ORT: the original and each output run on onnxruntime (CPU, graph "
        "optimizations off, one thread) on the same random inputs (first axis 2, other dynamic "
        f"dims 5, integers in [0, 2), floats standard normal); every output must match with "
        f"rtol {RTOL:g}, atol {ATOL:g}. Skipped for models over 1 GiB.",
        f"Each run has a {args.timeout:.0f} s timeout and an address-space limit of "
        f"{args.mem_limit:.1f} GiB (RLIMIT_AS); a tool that fails, crashes, runs out of "
        "memory or times out is recorded as failed, the other tools still run.",
        f"{_versions()}, Python {sys.version.split()[0]}, {sys.platform}, "
        f"onnxforge {version}, {os.cpu_count()} CPUs.{loads}",
    ]
    if args.pipeline == "optimize":
        notes[0] = (
            "onnxforge: `onnxforge.io.load` + `optimize_model()` (what `onnxforge optimize` runs "
            "with its defaults: infer-shapes, then fold-constants and the cleanup passes to a "
            "fixed point, then infer-shapes) + `onnxforge.io.save`. "
            + notes[0][notes[0].index("onnxsim:") :]
        )
    if args.their_policy:
        notes[0] = (
            "onnxforge with onnxsim's defaults (--their-policy): `pin_input_defaults` (the "
            "initializers IR < 4 lists as graph inputs become constants, as onnxsim and onnxslim "
            "make them) and a fold limit of 1.5 GB. " + notes[0]
        )
    report = table(rows, notes, args.pipeline)
    suffix = "-their-policy" if args.their_policy else ""
    args.out = args.out or DEFAULT_OUT.with_name(f"{args.pipeline}{suffix}.md")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report)
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
