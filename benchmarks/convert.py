"""Benchmark version conversion: onnxforge's convert against onnx.version_converter on the same
models and target opsets, each timed as load + convert + save; a conversion succeeds when the
result loads in onnxruntime and computes what the original does."""

from __future__ import annotations

__all__ = ["TOOLS", "main"]

# Only the standard library at module level: a child process imports the one converter it
# measures (and onnxruntime for the check, after the timing).
import argparse
import json
import pickle
import re
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "results" / "convert.md"
TOOLS = ("onnxforge", "onnx")
RTOL, ATOL = 1e-4, 1e-5
MAX_BYTES = 300 << 20  # exported models above this (external data) are left out


@dataclass(frozen=True)
class Job:
    """One model converted to one target: ``data`` is a pickle of (feeds, outputs, rtol,
    atol), the inputs and the outputs the original gives on onnxruntime."""

    group: str
    name: str
    src: str
    own: int
    target: int
    data: str


# -- in the child ----------------------------------------------------------------------------
def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    line = next((ln for ln in text.splitlines() if ln.strip()), "")
    return f"{type(e).__name__}: {line}"[:200]


def _convert(tool: str, src: str, dst: str, target: int) -> tuple[float, str]:
    """Load, convert, save with ``tool``; the seconds taken and "" or why it failed."""
    start = time.perf_counter()
    try:
        if tool == "onnxforge":
            from onnxforge.io import load, save
            from onnxforge.passes.convert import convert

            model = load(src)
            convert(model, target)
            save(model, dst)
        else:
            import onnx
            from onnx import version_converter

            proto = onnx.load(src)
            proto = version_converter.convert_version(proto, target)
            onnx.save(proto, dst)
    except Exception as e:  # a converter's failure is a result
        frames = traceback.extract_tb(e.__traceback__)
        where = f" ({Path(frames[-1].filename).name}:{frames[-1].lineno})" if frames else ""
        kind = "refused" if type(e).__name__ == "AdapterError" else "error"
        message = _first_line(e)
        if kind == "refused":  # the first blocking node, not the header
            lines = [ln.strip() for ln in str(e).splitlines()[1:] if ln.strip()]
            message = (lines[0] if lines else message)[:200]
            message += f" (+{len(lines) - 1} more)" if len(lines) > 1 else ""
        return (
            time.perf_counter() - start,
            f"{kind}: {message}{'' if kind == 'refused' else where}",
        )
    return time.perf_counter() - start, ""


def _run(path: str, feeds: dict[str, Any]) -> list[Any]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = 1
    options.log_severity_level = 4
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _verify(dst: str, data: str) -> str:
    """ "ok", or why the converted model does not compute the original's outputs on
    onnxruntime or does not pass onnx's full check."""
    import numpy as np

    with open(data, "rb") as f:
        feeds, want, rtol, atol, checked = pickle.load(f)
    try:
        got = _run(dst, feeds)
    except Exception as e:
        message = re.sub(r"Load model from \S+ failed:", "", _first_line(e))
        return f"invalid: onnxruntime refuses it: {message}"
    if len(got) != len(want):
        return f"wrong: {len(got)} outputs, {len(want)} expected"
    for i, (have, expected) in enumerate(zip(got, want, strict=True)):
        g, w = np.asarray(have), np.asarray(expected)
        if g.shape != w.shape or g.dtype != w.dtype:
            return f"wrong: output {i} is {g.dtype}{list(g.shape)}, not {w.dtype}{list(w.shape)}"
        if w.dtype.kind in "OUS":
            same = np.array_equal(g.astype(object), w.astype(object))
        else:
            same = np.allclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
        if not same:
            return f"wrong: output {i} differs"
    import onnx

    if not checked:
        return "ok"  # the original fails onnx's full check too (test_mvn: onnx's function body)
    try:
        onnx.checker.check_model(dst, full_check=True)
    except Exception as e:  # right outputs on onnxruntime, but not a valid model
        return f"invalid: onnx's full check: {_first_line(e)}"
    return "ok"


def child(tool: str, jobs_file: str, out_dir: str, repeat: int) -> None:
    """Convert every job of ``jobs_file`` with ``tool`` ``repeat`` times and check the result;
    one JSON line each: the first (cold) and the best time, and the verdict."""
    if tool == "onnxforge":
        import onnxforge.io
        import onnxforge.passes.convert  # noqa: F401
    else:
        import onnx.version_converter  # noqa: F401
    import onnxruntime  # noqa: F401  (the check, after the timing)

    jobs = [Job(**j) for j in json.loads(Path(jobs_file).read_text())]
    for i, job in enumerate(jobs):
        dst = str(Path(out_dir) / f"{i}.onnx")
        print(json.dumps({"i": i, "started": True}), flush=True)
        times = []
        for _ in range(repeat):
            seconds, problem = _convert(tool, job.src, dst, job.target)
            times.append(seconds)
            if problem:
                break
        status = problem or _verify(dst, job.data)
        row = {"i": i, "cold": times[0], "seconds": min(times), "status": status}
        print(json.dumps(row), flush=True)
        Path(dst).unlink(missing_ok=True)
        for extra in Path(out_dir).glob(f"{i}.onnx*"):
            extra.unlink()


# -- in the parent: the jobs -----------------------------------------------------------------
def _passes_check(path: Path) -> bool:
    import onnx

    try:
        onnx.checker.check_model(str(path), full_check=True)
    except Exception:
        return False
    return True


def _node_suite() -> Any:
    """tests/convert/node_suite.py (by path: this script is also named ``convert``)."""
    import importlib.util

    tests = HERE.parent / "tests"
    if str(tests) not in sys.path:
        sys.path.insert(0, str(tests))  # suites.py, real_models.py
    if "node_suite" not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            "node_suite", tests / "convert" / "node_suite.py"
        )
        module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        sys.modules["node_suite"] = module
        spec.loader.exec_module(module)  # type: ignore[union-attr]
    return sys.modules["node_suite"]


def _targets(own: int, latest: int) -> list[int]:
    wanted = {13, 18, latest} | ({own - 1} if own - 1 >= 7 else set())
    return sorted(t for t in wanted if t != own)


def _real_models(export_dir: str | None) -> Iterator[tuple[str, str, Path]]:
    import onnx

    light = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
    for path in sorted(light.glob("*.onnx")):
        yield "zoo", path.stem.removeprefix("light_"), path
    if export_dir and Path(export_dir).is_dir():
        for path in sorted(Path(export_dir).glob("*.onnx")):
            if path.stat().st_size < MAX_BYTES:
                yield "exported", path.stem, path


def _own(proto: Any) -> int:
    return next(o.version for o in proto.opset_import if o.domain in ("", "ai.onnx"))


def jobs(export_dir: str | None, work: Path, latest: int, node_every: int) -> list[Job]:
    """Every model's conversions, with its inputs and the original's outputs pickled."""
    import numpy as np
    import onnx

    _node_suite()
    from real_models import random_inputs, run_unoptimized

    found: list[Job] = []
    for group, name, path in _real_models(export_dir):
        feeds = random_inputs(path)
        data = work / f"{name}.pkl"
        want = run_unoptimized(path, feeds)
        data.write_bytes(pickle.dumps((feeds, want, RTOL, ATOL, _passes_check(path))))
        own = _own(onnx.load(path, load_external_data=False))
        for target in _targets(own, latest):
            found.append(Job(group, name, str(path), own, target, str(data)))
    if node_every <= 0:
        return found
    ns = _node_suite()
    for i, (name, case) in enumerate(ns.suite_cases().items()):
        own = ns.source_opset(case.model) or 0
        if i % node_every or own > latest or ns.ort_baseline(name) is not None:
            continue  # onnxruntime must give the case's stored outputs unconverted
        if ns.default_ops(case.model) & ns.RANDOM_OPS:
            continue
        feeds = ns.feeds(case, case.model)
        if any(not isinstance(v, np.ndarray) for v in feeds.values()):
            continue  # sequences and optionals: not through this check
        path = work / f"{name}.onnx"
        onnx.save(case.model, path)
        want = [ns._data(o) for o in case.data_sets[0][1]]
        if any(not isinstance(v, np.ndarray) for v in want):
            continue
        data = work / f"{name}.pkl"
        checked = _passes_check(path)
        data.write_bytes(pickle.dumps((feeds, want, case.rtol, case.atol, checked)))
        for target in _targets(own, latest):
            found.append(Job("node suite", name, str(path), own, target, str(data)))
    return found


def _run_chunk(
    tool: str, chunk: list[Job], work: Path, timeout: float, repeat: int
) -> list[dict[str, Any]]:
    """One child runs ``chunk`` in order; one that crashes is restarted after the job it
    was on, which is recorded as a crash."""
    results: list[dict[str, Any]] = [{} for _ in chunk]
    start = 0
    while start < len(chunk):
        rest = chunk[start:]
        jobs_file = work / f"{tool}-jobs.json"
        jobs_file.write_text(json.dumps([j.__dict__ for j in rest]))
        out_dir = Path(tempfile.mkdtemp(prefix=f"{tool}-", dir=work))
        cmd = [sys.executable, str(Path(__file__).resolve()), "--repeat", str(repeat)]
        cmd += ["--child", tool]
        try:
            done = subprocess.run(
                [*cmd, str(jobs_file), str(out_dir)],
                capture_output=True,
                text=True,
                check=False,
                timeout=timeout,
            )
            stdout, stderr, code = done.stdout, done.stderr, done.returncode
        except subprocess.TimeoutExpired as e:
            stdout = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            stderr, code = f"timeout after {timeout:.0f} s", -1
        last = -1
        for line in stdout.splitlines():
            row = json.loads(line)
            last = row["i"]
            if "status" in row:
                results[start + row["i"]] = row
        if code == 0 and last == len(rest) - 1:
            break
        tail = (stderr.strip().splitlines() or ["no output"])[-1][:160]
        crashed = max(last, 0)
        nan = float("nan")
        results[start + crashed] = {
            "seconds": nan,
            "cold": nan,
            "status": f"crash: {code}: {tail}",
        }
        start += crashed + 1
    return results


def run_tool(
    tool: str, todo: list[Job], work: Path, timeout: float, repeat: int
) -> list[dict[str, Any]]:
    """Every real-model conversion in a fresh child process; the node-suite ones in one."""
    results: list[dict[str, Any]] = []
    real = [j for j in todo if j.group != "node suite"]
    for job in real:
        results += _run_chunk(tool, [job], work, timeout, repeat)
        print(f"{tool} {job.name} -> {job.target}: {results[-1]['status'][:100]}", file=sys.stderr)
    node = [j for j in todo if j.group == "node suite"]
    results += _run_chunk(tool, node, work, timeout, repeat)
    return results


# -- the report ------------------------------------------------------------------------------
def _kind(status: str) -> str:
    return status.split(":", maxsplit=1)[0]


def _median(values: list[float]) -> str:
    return f"{statistics.median(values):.4f}" if values else "n/a"


def report(todo: list[Job], results: dict[str, list[dict[str, Any]]], seconds: float) -> str:
    ours, theirs = results["onnxforge"], results["onnx"]
    groups = list(dict.fromkeys(j.group for j in todo))
    lines = [
        "# Version conversion: onnxforge vs onnx.version_converter",
        "",
        f"onnxforge {metadata.version('onnxforge')}, onnx {metadata.version('onnx')}, "
        f"onnxruntime {metadata.version('onnxruntime')}; {len(todo)} conversions per tool, "
        f"{seconds:.0f} s in all. Made by `python benchmarks/convert.py`.",
        "",
        "Method: each real model's conversion runs in a fresh process, the node-suite ones in "
        "one process per tool; time is load + convert + save, best of the repeats (and the "
        "first run); the result is then run on onnxruntime (CPU, optimizations off) with the "
        "original's inputs and checked by onnx's full check. See benchmarks/README.md.",
        "",
        "## Success rate",
        "",
        "A conversion succeeds when the result loads in onnxruntime, gives the original's "
        "outputs there and passes onnx's full check. Targets: 13, 18, the newest opset "
        "onnxruntime loads, and one below the model's own opset (not below 7).",
        "",
        "| models | conversions | onnxforge ok | onnx ok | both | only onnxforge | only onnx |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    lost: list[str] = []
    for group in [*groups, "all"]:
        idx = [i for i, j in enumerate(todo) if group in ("all", j.group)]
        a = {i for i in idx if ours[i]["status"] == "ok"}
        b = {i for i in idx if theirs[i]["status"] == "ok"}
        n = len(idx)
        lines.append(
            f"| {group} | {n} | {len(a)} ({len(a) / n:.0%}) | {len(b)} ({len(b) / n:.0%}) | "
            f"{len(a & b)} | {len(a - b)} | {len(b - a)} |"
        )
        if group == "all":
            lost = [f"{todo[i].name} {todo[i].own} -> {todo[i].target}: {ours[i]['status']}"
                    for i in sorted(b - a)]  # fmt: skip
    lines += ["", "Conversions onnx's converter gets right and onnxforge does not: "
              + (f"**{len(lost)}**" if lost else "**none**.")]  # fmt: skip
    lines += [f"- {x}" for x in lost]
    lines += ["", "Why conversions fail, by tool and kind:", ""]
    lines += ["| tool | refused | error | crash | invalid | wrong |", "|---|" + "---:|" * 5]
    for tool, rows in results.items():
        kinds = Counter(_kind(r["status"]) for r in rows)
        cells = " | ".join(
            str(kinds[k]) for k in ("refused", "error", "crash", "invalid", "wrong")
        )
        lines.append(f"| {tool} | {cells} |")
    lines += [
        "",
        "## Time (load + convert + save, seconds)",
        "",
        "Over the conversions where both tools wrote a model (right or not): the median time "
        "of each (best of the repeats) and the median of the per-conversion ratios onnxforge / "
        "onnx, best of the repeats and of the first (cold) runs.",
        "",
        "| models | conversions timed | onnxforge | onnx | ratio | ratio, first runs |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for group in [*groups, "all"]:
        both = [
            i
            for i, j in enumerate(todo)
            if group in ("all", j.group)
            and _kind(ours[i]["status"]) not in ("refused", "error", "crash")
            and _kind(theirs[i]["status"]) not in ("error", "crash")
        ]
        best = [ours[i]["seconds"] / theirs[i]["seconds"] for i in both if theirs[i]["seconds"]]
        cold = [ours[i]["cold"] / theirs[i]["cold"] for i in both if theirs[i]["cold"]]
        lines.append(
            f"| {group} | {len(both)} | {_median([ours[i]['seconds'] for i in both])} | "
            f"{_median([theirs[i]['seconds'] for i in both])} | {_ratio(best)} | {_ratio(cold)} |"
        )
    lines += ["", "## Real models, per conversion", ""]
    lines += [
        "| model | opset | target | onnxforge | s | onnx | s |",
        "|---|---:|---:|---|---:|---|---:|",
    ]
    for i, j in enumerate(todo):
        if j.group == "node suite":
            continue
        a, b = ours[i], theirs[i]
        lines.append(
            f"| {j.name} | {j.own} | {j.target} | {_cell(a['status'])} | {a['seconds']:.3f} | "
            f"{_cell(b['status'])} | {b['seconds']:.3f} |"
        )
    lines += ["", "## Failures of onnx's converter on real models", ""]
    seen: Counter[str] = Counter()
    for i, j in enumerate(todo):
        status = theirs[i]["status"]
        if status != "ok":
            key = re.sub(r"\d+", "N", status)[:150]
            seen[key] += 1
            if j.group != "node suite":
                lines.append(f"- {j.name} {j.own} -> {j.target}: {status}")
    lines += ["", "## onnx's converter failures by message (all models)", ""]
    lines += [f"- {n} x {key}" for key, n in seen.most_common(25)]
    lines += ["", "## Invalid and wrong results, every one", ""]
    for tool, rows in results.items():
        for i, r in enumerate(rows):
            if _kind(r["status"]) in ("invalid", "wrong", "crash"):
                j = todo[i]
                lines.append(f"- {tool}: {j.name} {j.own} -> {j.target}: {r['status']}")
    lines += ["", "## onnxforge's failures (all models)", ""]
    mine: Counter[str] = Counter()
    for i, _ in enumerate(todo):
        if ours[i]["status"] != "ok":
            mine[re.sub(r"'[^']*'", "'…'", re.sub(r"\d+", "N", ours[i]["status"]))[:150]] += 1
    lines += [f"- {n} x {key}" for key, n in mine.most_common(25)]
    return "\n".join(lines) + "\n"


def _ratio(values: list[float]) -> str:
    return f"{statistics.median(values):.2f}x" if values else "n/a"


def _cell(status: str) -> str:
    return "ok" if status == "ok" else _kind(status)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", nargs=3, metavar=("TOOL", "JOBS", "OUT_DIR"))
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--export-dir", default=None)
    parser.add_argument("--node-every", type=int, default=1, help="every Nth node case (0: none)")
    parser.add_argument("--timeout", type=float, default=3600)
    parser.add_argument("--repeat", type=int, default=3, help="conversions per job; best kept")
    args = parser.parse_args(argv)
    if args.child:
        child(*args.child, args.repeat)
        return 0
    import os
    import warnings

    warnings.simplefilter("ignore")  # numpy's, while onnx generates the node-suite cases
    ns = _node_suite()
    export_dir = args.export_dir or os.environ.get("ONNXFORGE_EXPORT_DIR")
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="onnxforge-convert-") as tmp:
        work = Path(tmp)
        todo = jobs(export_dir, work, ns.ort_latest(), args.node_every)
        print(f"{len(todo)} conversions per tool", file=sys.stderr)
        results = {tool: run_tool(tool, todo, work, args.timeout, args.repeat) for tool in TOOLS}
    text = report(todo, results, time.perf_counter() - start)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
