"""Benchmark shape inference: onnxforge (load + infer) against onnx's C++ inference with data
propagation and onnxruntime's symbolic shape inference, on the same models."""

from __future__ import annotations

__all__ = ["TOOLS", "Case", "Result", "main"]

# Only the standard library at module level: a --child process imports the one tool it
# measures, before its baseline, so no tool pays for another's imports.
import argparse
import contextlib
import json
import logging
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

MIB = 1 << 20
LARGE_BYTES = 1 << 30  # models with more weight than this are measured once per tool
DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "infer.md"
TOOLS = ("onnxforge", "onnx", "symbolic")
LABELS = {
    "onnxforge": "onnxforge",
    "onnx": "onnx C++ (data_prop)",
    "symbolic": "ORT symbolic (auto_merge)",
}
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.:]*")
_FUNCTIONS = {"floor", "ceil", "Max", "Min", "Mod", "Abs", "Floor", "Ceiling", "Piecewise"}


@dataclass(frozen=True)
class Case:
    """One model; ``path`` is its stripped copy (no value_info, no output shapes)."""

    name: str
    path: Path
    nbytes: int


@dataclass(frozen=True)
class Result:
    """Best time, median peak RSS (absolute and above the post-import baseline) in MiB, the
    value counts of the last run, or why the tool failed."""

    seconds: float = 0.0
    infer_seconds: float = 0.0
    peak: float = 0.0
    delta: float = 0.0
    values: int = 0
    ranked: int = 0
    full: int = 0
    notes: str = ""
    error: str = ""


# -- measuring, in the child ---------------------------------------------------------------------
def _vm_bytes(field: str) -> int | None:
    """A ``Vm*`` line of /proc/self/status in bytes; None off Linux."""
    with contextlib.suppress(OSError), open("/proc/self/status") as f:
        return next((int(ln.split()[1]) * 1024 for ln in f if ln.startswith(field)), None)
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


def closed(dim: str, symbols: set[str]) -> bool:
    """A symbolic dim written only in the main graph inputs' symbols (``2*seq``,
    ``floor(seq/2)``, ``Max(1, s50)``): not a fresh unknown (``unk__3``, ``Reshape_7_o0__d1``)."""
    if dim in symbols:
        return True
    names = set(_NAME.findall(dim)) - _FUNCTIONS
    return bool(names) and names <= symbols


def _proto_graphs(graph: Any) -> Iterator[Any]:
    yield graph
    for node in graph.node:
        for attr in node.attribute:
            if attr.HasField("g"):
                yield from _proto_graphs(attr.g)
            for sub in attr.graphs:
                yield from _proto_graphs(sub)


def _count_proto(model: Any) -> tuple[int, int, int]:
    """(values, with a rank, with a full shape) over the node outputs of every graph of an
    inferred ModelProto (function bodies not included)."""
    symbols = {
        d.dim_param for v in model.graph.input for d in v.type.tensor_type.shape.dim if d.dim_param
    }
    names: list[str] = []
    types: dict[str, Any] = {}
    for graph in _proto_graphs(model.graph):
        names += [name for node in graph.node for name in node.output if name]
        for info in (*graph.value_info, *graph.output):
            types[info.name] = info.type
    ranked = full = 0
    for name in names:
        t = types.get(name)
        if t is None or not t.HasField("tensor_type") or not t.tensor_type.HasField("shape"):
            continue
        ranked += 1
        full += all(
            d.HasField("dim_value") or (d.dim_param and closed(d.dim_param, symbols))
            for d in t.tensor_type.shape.dim
        )
    return len(names), ranked, full


def _count_ours(model: Any) -> tuple[int, int, int]:
    """The same counts over an inferred onnxforge model."""
    from onnxforge.ir import TensorType

    symbols = {
        d for v in model.graph.inputs if isinstance(v.type, TensorType) and v.type.shape
        for d in v.type.shape if isinstance(d, str)
    }  # fmt: skip
    values = ranked = full = 0
    for graph in model.graphs(functions=False):
        for op in graph.ops:
            for value in graph.outputs_of(op):
                if value is None:
                    continue
                values += 1
                t = value.type
                if not isinstance(t, TensorType) or t.shape is None:
                    continue
                ranked += 1
                full += all(
                    isinstance(d, int) or (isinstance(d, str) and closed(d, symbols))
                    for d in t.shape
                )
    return values, ranked, full


def child(tool: str, src: str) -> None:
    """Load ``src`` and infer its shapes once with ``tool``; print time, RSS, counts as JSON."""
    if tool == "onnxforge":
        import onnxforge.io
        import onnxforge.shape_infer
        import onnxforge.shape_infer._onnx_fallback  # imported on first use otherwise
    elif tool == "onnx":
        import onnx
        import onnx.shape_inference
    else:
        import onnx
        from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference
    baseline = _rss_now()
    notes = ""
    start = time.perf_counter()
    try:
        if tool == "onnxforge":
            model = onnxforge.io.load(src)
            loaded = time.perf_counter()
            report = onnxforge.shape_infer.infer(model)
        elif tool == "onnx":
            proto = onnx.load(src)
            loaded = time.perf_counter()
            model = onnx.shape_inference.infer_shapes(proto, data_prop=True)
        else:
            proto = onnx.load(src)
            loaded = time.perf_counter()
            model = SymbolicShapeInference.infer_shapes(proto, auto_merge=True)
        end = time.perf_counter()
    except Exception as e:  # a tool's failure on a model is a result, not a crash
        message = str(e).strip().splitlines()[0] if str(e).strip() else ""
        print(json.dumps({"error": f"{type(e).__name__}: {message}"[:300]}))
        return
    peak = _rss_peak()
    if tool == "onnxforge":
        counts = _count_ours(model)
        if report.errors:
            notes = f"{len(report.errors)} inference errors, first: {report.errors[0]}"
    elif model is None:  # symbolic returns None below opset 7
        print(json.dumps({"error": "returned no model (opset < 7)"}))
        return
    else:
        counts = _count_proto(model)
    values, ranked, full = counts
    seconds, infer_seconds = end - start, end - loaded
    result = {"seconds": seconds, "infer_seconds": infer_seconds, "notes": notes}
    result |= {"baseline": baseline, "peak": peak}
    print(json.dumps(result | {"values": values, "ranked": ranked, "full": full}))


# -- the parent ----------------------------------------------------------------------------------
def measure(tool: str, case: Case, repeat: int, timeout: float) -> Result:
    """Run ``repeat`` fresh child processes (each in its own working directory: onnxruntime's
    symbolic inference writes a file there when it fails)."""
    runs = []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory(prefix="onnxforge-bench-") as cwd:
            cmd = [sys.executable, str(Path(__file__).resolve()), "--child", tool, str(case.path)]
            try:
                done = subprocess.run(
                    cmd, capture_output=True, text=True, check=False, cwd=cwd, timeout=timeout
                )
            except subprocess.TimeoutExpired:
                return Result(error=f"timeout after {timeout:.0f} s")
        lines = done.stdout.strip().splitlines()
        if done.returncode or not lines:
            tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
            return Result(error=f"crashed (exit {done.returncode}): {tail[:200]}")
        run = json.loads(lines[-1])
        if "error" in run:
            return Result(error=run["error"])
        runs.append(run)
    last = runs[-1]
    return Result(
        seconds=min(r["seconds"] for r in runs),
        infer_seconds=min(r["infer_seconds"] for r in runs),
        peak=statistics.median(r["peak"] for r in runs) / MIB,
        delta=statistics.median(max(0, r["peak"] - r["baseline"]) for r in runs) / MIB,
        values=last["values"],
        ranked=last["ranked"],
        full=last["full"],
        notes=last["notes"],
    )


def strip(source: Path, target: Path) -> tuple[int, int]:
    """Copy ``source`` to ``target`` without value_info and output shapes (so every tool infers,
    none copies), external data copied beside it. Returns (bytes with external data, main-graph
    nodes)."""
    import onnx

    model = onnx.load(source, load_external_data=False)
    files = set()
    for tensor in model.graph.initializer:
        for entry in tensor.external_data:
            if entry.key == "location":
                files.add(entry.value)
    for graph in _proto_graphs(model.graph):
        del graph.value_info[:]
        for output in graph.output:
            if output.type.HasField("tensor_type"):
                output.type.tensor_type.ClearField("shape")
    onnx.save(model, target)
    for name in files:  # copied: the tools refuse symbolic links and multiply linked files
        (target.parent / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source.parent / name, target.parent / name)
    nbytes = source.stat().st_size + sum((source.parent / f).stat().st_size for f in files)
    return nbytes, len(model.graph.node)


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


def _size(nbytes: int) -> str:
    size = float(nbytes)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            break
        size /= 1024
    return f"{nbytes} B" if unit == "B" else f"{size:.1f} {unit}"


def _ratio(ours: Result, theirs: Result, what: str = "seconds") -> float | None:
    if ours.error or theirs.error or getattr(theirs, what) <= 0:
        return None
    return float(getattr(ours, what) / getattr(theirs, what))


def _cell(result: Result, what: str) -> str:
    if result.error:
        return "failed" if what == "seconds" else "—"
    if what in ("seconds", "infer_seconds"):
        return f"{getattr(result, what):.3f}"
    if what == "delta":
        return f"{result.delta:.1f}"
    return str(getattr(result, what))


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def table(rows: list[tuple[Case, int, dict[str, Result]]], notes: list[str]) -> str:
    """The Markdown report: times and full shapes per model, medians, counts and memory,
    failures and method."""
    ours = "onnxforge"
    head = ["Model", "Size", "Nodes", "Values"]
    head += [f"{LABELS[t]} (s)" for t in TOOLS]
    head += ["ours / C++", "ours / symbolic"]
    head += [f"full: {t}" for t in TOOLS]
    lines = ["# Shape inference: load + infer", "", _row(head), _row(["---"] * len(head))]
    ratios: dict[str, list[float]] = {"onnx": [], "symbolic": []}
    failures = []
    for case, nodes, results in rows:
        values = next((r.values for r in results.values() if not r.error), 0)
        cells = [case.name, _size(case.nbytes), str(nodes), str(values)]
        cells += [_cell(results[t], "seconds") for t in TOOLS]
        for other in ("onnx", "symbolic"):
            ratio = _ratio(results[ours], results[other])
            cells.append("n/a" if ratio is None else f"{ratio:.2f}x")
            if ratio is not None:
                ratios[other].append(ratio)
        cells += [_cell(results[t], "full") for t in TOOLS]
        lines.append(_row(cells))
        for tool in TOOLS:
            if results[tool].error:
                failures.append(f"{case.name}, {LABELS[tool]}: {results[tool].error}")
            if results[tool].notes:
                failures.append(f"{case.name}, {LABELS[tool]}: {results[tool].notes}")
    lines += ["", "## Medians", ""]
    for other, label in (("onnx", "onnx C++ (data_prop)"), ("symbolic", "ORT symbolic")):
        found = ratios[other]
        median = f"{statistics.median(found):.2f}x" if found else "n/a"
        alone = [_ratio(r[2][ours], r[2][other], "infer_seconds") for r in rows]
        bare = [x for x in alone if x is not None]
        median_bare = f"{statistics.median(bare):.2f}x" if bare else "n/a"
        lines.append(
            f"- time, onnxforge / {label}: **{median}** load + infer, {median_bare} infer "
            f"only, over {len(found)} models"
        )
    for tool in TOOLS:
        ok = [r[2][tool] for r in rows if not r[2][tool].error]
        share = [r.full / r.values for r in ok if r.values]
        median = f"{100 * statistics.median(share):.1f}%" if share else "n/a"
        total = f"{sum(r.full for r in ok)} / {sum(r.values for r in ok)}"
        lines.append(
            f"- {LABELS[tool]}: median {median} of values with a full shape per model "
            f"({total} values over the {len(ok)} models it ran on)"
        )
    head = ["Model"] + [f"infer only (s): {t}" for t in TOOLS]
    head += [f"ranked: {t}" for t in TOOLS] + [f"peak Δ MiB: {t}" for t in TOOLS]
    lines += ["", "## Inference without the load; values with a rank; peak memory", ""]
    lines += [_row(head), _row(["---"] * len(head))]
    for case, _, results in rows:
        cells = [case.name]
        for what in ("infer_seconds", "ranked", "delta"):
            cells += [_cell(results[t], what) for t in TOOLS]
        lines.append(_row(cells))
    if failures:
        lines += ["", "## Failures and inference errors", ""]
        lines += [f"- {f}" for f in failures]
    lines += ["", "## Method", ""] + [f"- {note}" for note in notes]
    return "\n".join(lines) + "\n"


def _git_version() -> str:
    cmd = ["git", "-C", str(Path(__file__).parent), "describe", "--always", "--dirty"]
    with contextlib.suppress(OSError):
        return subprocess.run(cmd, capture_output=True, text=True, check=False).stdout.strip()
    return ""


def _versions() -> str:
    cmd = [sys.executable, "-c", "import onnx, onnxruntime, sympy; print(onnx.__version__, "
           "onnxruntime.__version__, sympy.__version__)"]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode:
        return "onnx/onnxruntime/sympy versions unknown (import failed)"
    onnx_v, ort_v, sympy_v = done.stdout.split()
    return f"onnx {onnx_v}, onnxruntime {ort_v}, sympy {sympy_v}"


def main(argv: list[str] | None = None) -> int:
    """Parse the command line; run the benchmark (or one --child measurement)."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="Markdown file to write")
    parser.add_argument("--repeat", type=int, default=3, help="runs per tool; best time is kept")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per run")
    parser.add_argument("--only", nargs="*", help="model names to run (default: all)")
    parser.add_argument(
        "--export-dir",
        default=os.environ.get("ONNXFORGE_EXPORT_DIR"),
        help="exported models to add (default: $ONNXFORGE_EXPORT_DIR)",
    )
    parser.add_argument("--child", nargs=2, metavar=("TOOL", "SRC"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(*args.child)
        return 0
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    notes = [
        "Every model is first copied without value_info and without graph-output shapes "
        "(external data copied beside it), so every tool infers every shape; each tool loads the "
        "copy.",
        f"Time: load + infer only (not imports), best of {args.repeat} fresh processes (1 for "
        "models over 1 GiB). onnxforge: `onnxforge.io.load` + `shape_infer.infer`; onnx C++: "
        "`onnx.load` + `onnx.shape_inference.infer_shapes(model, data_prop=True)`; ORT "
        "symbolic: `onnx.load` + `SymbolicShapeInference.infer_shapes(model, auto_merge=True)`.",
        "Values: outputs of the nodes of every graph (subgraphs included, function bodies not). "
        "Ranked: the tool gives the value a rank. Full: a rank and every dim static or an "
        "expression in the main graph inputs' symbols only; fresh unknowns (onnxforge's "
        "`unk__N`, ORT's `Op_7_o0__d1`) and missing dims are not full.",
        "Infer only: the same runs' time after the load (best of them); onnx's load reads "
        "every weight, onnxforge's maps the file.",
        "Peak Δ: VmHWM (peak RSS) minus the RSS right after imports (peak reset there), median "
        "over the runs.",
        f"{_versions()}, Python {sys.version.split()[0]}, {sys.platform}, "
        f"onnxforge {_git_version() or '(no git)'}, {os.cpu_count()} CPUs.",
    ]
    rows = []
    with tempfile.TemporaryDirectory(prefix="onnxforge-bench-") as tmp:
        for name, source in sources(args.export_dir):
            if args.only and name not in args.only:
                continue
            folder = Path(tmp) / name
            folder.mkdir()
            nbytes, nodes = strip(source, folder / source.name)
            case = Case(name, folder / source.name, nbytes)
            repeat = 1 if nbytes > LARGE_BYTES else args.repeat
            logger.info("%s: %s, %d nodes, %d run(s)/tool", name, _size(nbytes), nodes, repeat)
            results = {tool: measure(tool, case, repeat, args.timeout) for tool in TOOLS}
            for tool, result in results.items():
                shown = result.error or f"{result.seconds:.3f} s, {result.full}/{result.values}"
                logger.info("  %-10s %s", tool, shown)
            rows.append((case, nodes, results))
            shutil.rmtree(folder)
    report = table(rows, notes)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report)
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
