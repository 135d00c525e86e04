"""Scale: onnxforge on synthetic graphs of 10k to 1M nodes against the tools users would run.

    python benchmarks/scale.py [--sizes 10000,100000,1000000] [--families chain,blocks,control]
                               [--timeout 600] [--work DIR] [--out benchmarks/results/scale.md]

Families (``scale_graphs.py``): ``chain`` (Add/Mul/Relu/Sub on x[N, 8]: nothing to simplify),
``blocks`` (transformer-style blocks on x[B, S, 64]), ``control`` (the chain with If and Loop
bodies). Each tool runs in its own process, timed from start to exit (imports included, as a
user waits for them), its peak RSS (VmHWM) reset as the interpreter starts and read at exit
(a forked child's ru_maxrss would count the parent's memory). A run past ``--timeout`` is
killed and reported as "> T". Measured, per graph:

- infer: ``onnxforge infer`` against onnx's C++ inference (``infer_shapes(data_prop=True)``,
  load and save included) and onnxruntime's symbolic shape inference (auto_merge);
- optimize: ``onnxforge optimize`` against onnxsim and onnxslim, and whether onnxruntime
  computes the same from our output (``--check-up-to``, default the 10k graphs);
- load+save: ``onnxforge.load`` + ``save`` against ``onnx.load`` + ``onnx.save``, and the peak
  RSS of ``onnx.load`` alone (the memory yardstick of optimize).
"""

from __future__ import annotations

__all__ = ["TOOLS", "main", "run"]

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "scale.md"
PY = sys.executable

_WRAP = """
import atexit, runpy, sys
report, kind, target = sys.argv.pop(1), sys.argv.pop(1), sys.argv.pop(1)

def _peak():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                with open(report, "w") as out:
                    out.write(line.split()[1])

atexit.register(_peak)
with open("/proc/self/clear_refs", "w") as refs:
    refs.write("5")
if kind == "module":
    sys.argv[0] = target
    runpy.run_module(target, run_name="__main__", alter_sys=True)
else:
    sys.argv[0] = "-c"
    exec(compile(target, "<tool>", "exec"), {"__name__": "__main__"})
"""
"""Runs a tool in this process with its peak RSS reset first and written at exit: a forked
child's ru_maxrss counts the parent's memory at the fork."""
_LOAD_SAVE_OURS = "import sys, onnxforge; onnxforge.save(onnxforge.load(sys.argv[1]), sys.argv[2])"
_LOAD_SAVE_ONNX = "import sys, onnx; onnx.save(onnx.load(sys.argv[1]), sys.argv[2])"
_LOAD_ONNX = "import sys, onnx; onnx.load(sys.argv[1])"
_INFER_ONNX = (
    "import sys, onnx; m = onnx.load(sys.argv[1]); "
    "onnx.save(onnx.shape_inference.infer_shapes(m, data_prop=True), sys.argv[2])"
)
_INFER_ORT = (
    "import sys, onnx; from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference;"
    " m = SymbolicShapeInference.infer_shapes(onnx.load(sys.argv[1]), auto_merge=True);"
    " onnx.save(m, sys.argv[2])"
)
_ONNXSIM = (
    "import sys, onnx, onnxsim; m, ok = onnxsim.simplify(onnx.load(sys.argv[1]));"
    " onnx.save(m, sys.argv[2])"
)
_ONNXSLIM = "import sys, onnxslim; onnxslim.slim(sys.argv[1], sys.argv[2])"
TOOLS: dict[str, list[str]] = {
    "onnxforge infer": ["module", "onnxforge", "infer", "{src}", "-o", "{out}"],
    "onnx infer": ["code", _INFER_ONNX, "{src}", "{out}"],
    "ort symbolic": ["code", _INFER_ORT, "{src}", "{out}"],
    "onnxforge optimize": ["module", "onnxforge", "optimize", "{src}", "-o", "{out}"],
    "onnxsim": ["code", _ONNXSIM, "{src}", "{out}"],
    "onnxslim": ["code", _ONNXSLIM, "{src}", "{out}"],
    "onnxforge load+save": ["code", _LOAD_SAVE_OURS, "{src}", "{out}"],
    "onnx load+save": ["code", _LOAD_SAVE_ONNX, "{src}", "{out}"],
    "onnx load": ["code", _LOAD_ONNX, "{src}"],
}


@dataclass(frozen=True)
class Run:
    """Seconds from start to exit, peak RSS in MiB, the output's node count; or why not."""

    seconds: float = 0.0
    peak_mib: float = 0.0
    nodes: int | None = None
    error: str = ""

    def cell(self, timeout: float) -> str:
        if self.error == "timeout":
            return f"> {timeout:.0f} s"
        if self.error:
            return f"failed: {self.error[:60]}"
        return f"{self.seconds:.2f} s, {self.peak_mib:.0f} MiB"


def run(tool: str, src: Path, out: Path, timeout: float) -> Run:
    """Run one tool once in a fresh process."""
    peak_file = out.with_suffix(".peak")
    peak_file.unlink(missing_ok=True)
    args = [PY, "-c", _WRAP, str(peak_file)] + [
        a.format(src=src, out=out) if a.startswith("{") else a for a in TOOLS[tool]
    ]
    out.unlink(missing_ok=True)
    start = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=err, cwd=out.parent)
        deadline = start + timeout
        while True:
            pid, status, _ = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                proc.kill()
                os.wait4(proc.pid, 0)
                return Run(seconds=timeout, error="timeout")
            time.sleep(0.01)
        seconds = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode:
            err.seek(0)
            tail = err.read().decode(errors="replace").strip().splitlines()[-1:] or ["?"]
            return Run(error=f"exit {proc.returncode}: {tail[0]}")
    peak = int(peak_file.read_text()) / 1024 if peak_file.exists() else 0.0
    return Run(seconds, peak, _nodes(out) if out.exists() else None)


def _nodes(path: Path) -> int:
    import onnx

    return len(onnx.load(path, load_external_data=False).graph.node)


def same_outputs(original: Path, optimized: Path) -> str:
    """onnxruntime on both with the same random inputs: "same" or how they differ."""
    import numpy as np
    import onnxruntime as ort

    options = ort.SessionOptions()  # its own graph optimizations take minutes on 100k nodes
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sessions = [
        ort.InferenceSession(str(p), options, providers=["CPUExecutionProvider"])
        for p in (original, optimized)
    ]
    rng = np.random.default_rng(0)
    feeds = {}
    for i in sessions[0].get_inputs():
        shape = [d if isinstance(d, int) else 3 for d in i.shape]
        feeds[i.name] = (
            np.array(True)
            if i.type == "tensor(bool)"
            else rng.standard_normal(shape).astype(np.float32)
        )
    want, got = (s.run(None, feeds) for s in sessions)
    if not all(np.isfinite(a).all() for a in want):
        return "not comparable: the original's outputs are not finite"
    for a, b in zip(want, got, strict=True):
        if a.shape != b.shape or not np.allclose(a, b, rtol=1e-4, atol=1e-5):
            return "differ"
    return "same"


def _ratio(ours: Run, theirs: Run) -> str:
    """ours / theirs; against a tool killed at the timeout, an upper bound ("< 0.05x")."""
    if ours.error or not theirs.seconds:
        return "-"
    if theirs.error == "timeout":
        return f"< {ours.seconds / theirs.seconds:.2f}x"
    if theirs.error:
        return "-"
    return f"{ours.seconds / theirs.seconds:.2f}x"


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import scale_graphs

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--families", default=",".join(scale_graphs.FAMILIES))
    parser.add_argument("--tools", default=",".join(TOOLS))
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--work", type=Path, default=None, help="keep the graphs here")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument(
        "--check-up-to",
        type=int,
        default=10_000,
        help="compare outputs on onnxruntime up to this size (its session for a 100k-node "
        "transformer stack takes over 20 minutes to create)",
    )
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    tools = args.tools.split(",")
    work = args.work or Path(tempfile.mkdtemp(prefix="onnxforge-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    rows: list[str] = []
    ratios: list[str] = []
    for family in args.families.split(","):
        for size in sizes:
            src = work / f"{family}_{size}.onnx"
            if not src.exists():
                import onnx

                onnx.save(scale_graphs.FAMILIES[family](size), src)
            import onnx

            nodes = len(onnx.load(src, load_external_data=False).graph.node)
            results: dict[str, Run] = {}
            for tool in tools:
                out = work / f"{family}_{size}.{tool.replace(' ', '_').replace('+', '_')}.onnx"
                results[tool] = run(tool, src, out, args.timeout)
                print(
                    f"{family} {size} {tool}: {results[tool].cell(args.timeout)}", file=sys.stderr
                )
            check = "-"
            ours_opt = work / f"{family}_{size}.onnxforge_optimize.onnx"
            if size <= args.check_up_to and ours_opt.exists():
                check = same_outputs(src, ours_opt)
            cells = [results[t].cell(args.timeout) if t in results else "-" for t in TOOLS]
            rows.append(f"| {family} | {size} | " + " | ".join(cells) + " |")
            get = results.get
            per_node = {
                t: f"{1e6 * results[t].seconds / nodes:.1f}"
                for t in ("onnxforge infer", "onnxforge optimize")
                if t in results and not results[t].error
            }
            opt = get("onnxforge optimize", Run())
            load = get("onnx load", Run())
            ratios.append(
                f"| {family} | {size} | "
                + " | ".join(
                    [
                        _ratio(get("onnxforge infer", Run()), get("onnx infer", Run())),
                        _ratio(get("onnxforge infer", Run()), get("ort symbolic", Run())),
                        _ratio(opt, get("onnxsim", Run())),
                        _ratio(opt, get("onnxslim", Run())),
                        _ratio(get("onnxforge load+save", Run()), get("onnx load+save", Run())),
                        f"{opt.peak_mib / load.peak_mib:.2f}x"
                        if load.peak_mib and opt.peak_mib
                        else "-",
                        per_node.get("onnxforge infer", "-"),
                        per_node.get("onnxforge optimize", "-"),
                        f"{opt.nodes}" if opt.nodes is not None else "-",
                        check,
                    ]
                )
                + " |"
            )
            _write(args, ratios, rows)  # after every graph: a stopped run keeps what it measured
    lines = _write(args, ratios, rows)
    print("\n".join(lines[4 : 8 + len(ratios)]))
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def _write(args: argparse.Namespace, ratios: list[str], rows: list[str]) -> list[str]:
    lines = [
        "# Scale: synthetic graphs of 10k to 1M nodes",
        "",
        f"`python benchmarks/scale.py --sizes {args.sizes} --families {args.families}` "
        f"(timeout {args.timeout:.0f} s). Each tool in a fresh process, imports included; "
        "peak RSS: VmHWM from interpreter start to exit.",
        "",
        "## Ratios (ours / theirs: below 1 we are faster)",
        "",
        "| family | nodes | infer / onnx C++ | infer / ORT symbolic | optimize / onnxsim "
        "| optimize / onnxslim | load+save / onnx | optimize peak RSS / onnx.load | infer µs "
        "per node | optimize µs per node | nodes after optimize | outputs on onnxruntime |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        *ratios,
        "",
        "## Times and peak RSS",
        "",
        "| family | nodes | " + " | ".join(TOOLS) + " |",
        "| --- | --- | " + " | ".join("---" for _ in TOOLS) + " |",
        *rows,
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return lines


if __name__ == "__main__":
    sys.exit(main())
