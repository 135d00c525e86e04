"""Benchmark the load+save round trip of onnxforge.io against plain onnx.load + onnx.save."""

from __future__ import annotations

__all__ = ["Case", "Result", "main"]

# Only the standard library at module level: a --child process imports the one library it
# measures, after its baseline, so neither tool pays for the other's imports.
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
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

MIB = 1 << 20
LARGE_BYTES = 3 << 30  # one float32 initializer of 3 GiB
LARGE_MIN_FREE = 10 * 10**9
SYNTH_NODES = 100_000
DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "roundtrip.md"


@dataclass(frozen=True)
class Case:
    """One model to round-trip; ``external`` models are saved with external data."""

    name: str
    path: Path
    external: bool = False


@dataclass(frozen=True)
class Result:
    """Best time and median peak RSS (absolute, and above the post-import baseline) in MiB."""

    seconds: float
    peak: float
    delta: float


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


def child(tool: str, src: str, dst: str, external: bool) -> None:
    """Load ``src`` and save it to ``dst`` once with ``tool``; print time and RSS as JSON."""
    if tool == "onnx":
        import onnx
    else:
        import onnxforge.io
    baseline = _rss_now()
    start = time.perf_counter()
    if tool == "onnx":  # onnx.load reads external data; save it back the same way
        location = f"{os.path.basename(dst)}.data" if external else None
        onnx.save_model(onnx.load(src), dst, save_as_external_data=external, location=location)
    else:  # save keeps external data when the model was loaded with it
        model = onnxforge.io.load(src)
        if tool == "onnxforge-graph":
            _ = model.graph  # what every pass does first: build the networkx graph
        onnxforge.io.save(model, dst)
    seconds = time.perf_counter() - start
    print(json.dumps({"seconds": seconds, "baseline": baseline, "peak": _rss_peak()}))


def measure(tool: str, case: Case, repeat: int, work: Path) -> Result:
    """Run ``repeat`` fresh child processes; each does one load+save into ``work``."""
    runs = []
    for _ in range(repeat):
        out_dir = Path(tempfile.mkdtemp(dir=work))
        cmd = [sys.executable, __file__, "--child", tool, str(case.path), str(out_dir / "m.onnx")]
        cmd += ["--external"] if case.external else []
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        shutil.rmtree(out_dir)
        if done.returncode:
            raise RuntimeError(f"{tool} failed on {case.name}:\n{done.stderr[-2000:]}")
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    return Result(
        seconds=min(r["seconds"] for r in runs),
        peak=statistics.median(r["peak"] for r in runs) / MIB,
        delta=statistics.median(max(0, r["peak"] - r["baseline"]) for r in runs) / MIB,
    )


def make_chain(path: Path, nodes: int = SYNTH_NODES) -> None:
    """A chain alternating Add(prev, c_i) and Relu, each Add with its own small initializer."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    graph_nodes, inits, prev = [], [], "X"
    for i in range(0, nodes, 2):
        inits.append(numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), f"c{i}"))
        graph_nodes.append(helper.make_node("Add", [prev, f"c{i}"], [f"t{i}"]))
        prev = f"t{i + 1}"
        graph_nodes.append(helper.make_node("Relu", [f"t{i}"], [prev]))
    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 8])
    y = helper.make_tensor_value_info(prev, TensorProto.FLOAT, [1, 8])
    graph = helper.make_graph(graph_nodes, "chain", [x], [y], inits)
    onnx.save_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def make_large(path: Path, nbytes: int = LARGE_BYTES) -> None:
    """Y = Identity(W), W one float32 initializer in ``<name>.data``, written in 64 MiB chunks."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper

    chunk = np.arange(16 * MIB, dtype=np.float32).tobytes()  # 64 MiB, never the whole 3 GiB
    location = f"{path.name}.data"
    with open(path.parent / location, "wb") as f:
        for start in range(0, nbytes, len(chunk)):
            f.write(chunk[: nbytes - start])
    weight = TensorProto(name="W", data_type=TensorProto.FLOAT, dims=[nbytes // 4])
    weight.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", "0"), ("length", str(nbytes))):
        weight.external_data.add(key=key, value=value)
    y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, [nbytes // 4])
    identity = helper.make_node("Identity", ["W"], ["Y"])
    graph = helper.make_graph([identity], "large", [], [y], [weight])
    onnx.save_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def describe(case: Case) -> tuple[int, int]:
    """Size in bytes (external data included) and top-level node count."""
    import onnx

    model = onnx.load(str(case.path), load_external_data=False)
    files = [case.path] + ([case.path.parent / f"{case.path.name}.data"] if case.external else [])
    return sum(f.stat().st_size for f in files), len(model.graph.node)


def _size(nbytes: int) -> str:
    size = float(nbytes)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            break
        size /= 1024
    return f"{nbytes} B" if unit == "B" else f"{size:.1f} {unit}"


def _ratio(ours: float, theirs: float) -> str:
    return f"{ours / theirs:.2f}x" if theirs > 0 else "n/a"


def table(rows: list[tuple[Case, int, int, Result, Result, Result]], notes: list[str]) -> str:
    """The Markdown report: one row per model, then notes (skipped cases, method)."""
    head = ["Model", "Size", "Nodes", "onnx time (ms)", "onnxforge time (ms)", "Time ratio"]
    head += ["onnx peak RSS (MiB)", "onnxforge peak RSS (MiB)", "onnx peak Δ (MiB)"]
    head += ["onnxforge peak Δ (MiB)", "Memory ratio (Δ)"]
    head += ["graph built: time (ms)", "time ratio", "peak Δ (MiB)", "memory ratio"]
    cells = [head, ["---"] * len(head)]
    for case, nbytes, nodes, theirs, ours, built in rows:
        cells.append([case.name, _size(nbytes), str(nodes), f"{1e3 * theirs.seconds:.2f}"])
        cells[-1] += [f"{1e3 * ours.seconds:.2f}", _ratio(ours.seconds, theirs.seconds)]
        cells[-1] += [f"{x:.1f}" for x in (theirs.peak, ours.peak, theirs.delta, ours.delta)]
        cells[-1].append(_ratio(ours.delta, theirs.delta))
        cells[-1] += [f"{1e3 * built.seconds:.2f}", _ratio(built.seconds, theirs.seconds)]
        cells[-1] += [f"{built.delta:.1f}", _ratio(built.delta, theirs.delta)]
    lines = ["# Round trip: load + save", "", *("| " + " | ".join(c) + " |" for c in cells), ""]
    return "\n".join(lines + [f"- {note}" for note in notes]) + "\n"


def _git_version() -> str:
    cmd = ["git", "-C", str(Path(__file__).parent), "describe", "--always", "--dirty"]
    with contextlib.suppress(OSError):
        return subprocess.run(cmd, capture_output=True, text=True, check=False).stdout.strip()
    return ""


def main(argv: list[str] | None = None) -> int:
    """Parse the command line; run the benchmark (or one --child measurement)."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="Markdown file to write")
    parser.add_argument("--skip-large", action="store_true", help="skip the 3 GiB model")
    parser.add_argument(
        "--repeat",
        type=int,
        default=10,
        help="runs per tool; best time is kept (a 1 ms round trip varies by 30%% between "
        "fresh processes)",
    )
    parser.add_argument("--child", nargs=3, metavar=("TOOL", "SRC", "DST"), help=argparse.SUPPRESS)
    parser.add_argument("--external", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        tool, src, dst = args.child
        child(tool, src, dst, args.external)
        return 0
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    import onnx

    light = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
    with tempfile.TemporaryDirectory(prefix="onnxforge-bench-") as tmp:
        work = Path(tmp)
        cases = [Case(p.stem.removeprefix("light_"), p) for p in sorted(light.glob("*.onnx"))]
        notes = [
            f"Time: best of {args.repeat} fresh processes (1 for the 3 GiB model), load+save "
            "only. Peak RSS: VmHWM (ru_maxrss off Linux), median over those runs; Δ is the peak "
            "minus the RSS right after imports (peak reset there). Ratios: onnxforge / onnx.",
            "onnxforge builds the networkx graph on first use, so a plain load+save writes the "
            "parsed protobuf back; the 'graph built' columns force the build (what every pass "
            "and command does) and measure the cost of the IR itself.",
            f"onnx {onnx.__version__}, Python {sys.version.split()[0]}, {sys.platform}, "
            f"onnxforge {_git_version() or '(no git)'}, {os.cpu_count()} CPUs.",
        ]
        logger.info("generating the %d-node chain", SYNTH_NODES)
        make_chain(work / "chain.onnx")
        cases.append(Case(f"synthetic chain {SYNTH_NODES // 1000}k", work / "chain.onnx"))
        free, reason = shutil.disk_usage(work).free, "--skip-large" if args.skip_large else ""
        if not reason and free < LARGE_MIN_FREE:
            reason = f"{free / 1e9:.1f} GB free in {work}, needs 10 GB"
        if reason:
            print(f"3 GiB external-data model skipped: {reason}")
            notes.append(f"3 GiB external-data model skipped: {reason}.")
        else:
            logger.info("generating the 3 GiB external-data model")
            make_large(work / "large.onnx")
            cases.append(Case("external 3 GiB", work / "large.onnx", external=True))
        rows = []
        for case in cases:
            repeat = 1 if case.external else args.repeat
            size, nodes = describe(case)
            logger.info("%s: %s, %d nodes, %d run(s)/tool", case.name, _size(size), nodes, repeat)
            theirs, ours, built = (
                measure(tool, case, repeat, work)
                for tool in ("onnx", "onnxforge", "onnxforge-graph")
            )
            rows.append((case, size, nodes, theirs, ours, built))
    report = table(rows, notes)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report)
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
