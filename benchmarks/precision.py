"""How well float32 models survive a conversion to half precision: onnxforge's ``convert --dtype
float16|bfloat16`` and ``--weights float16`` against onnxconverter-common and onnxslim, on real
models.

    python benchmarks/precision.py run [--models GLOB,...] [--modes a,b] [--jobs N] [--force]
                                       [--limit N] [--timeout S] [--amp-timeout S]
                                       [--judge-timeout S] [--mem-limit GiB] [--subset TEXT]
                                       [--out benchmarks/results/precision.md]
    python benchmarks/precision.py report [--out benchmarks/results/precision.md]

Models: those of ``downstream.models`` (the wild corpus models onnxruntime runs per
``results/wild.json``, the onnx zoo's light models among them, and
``tests/data/exporters/**/*.onnx``) that hold float32 weights: a float32 initializer or Constant
of 16 elements or more (what ``--weights`` stores as float16), in any graph, or a float32
ConstantOfShape fill (how the zoo's light models generate theirs).

Modes (``MODES``), each a child process with a timeout, so a crash is a result: onnxforge's three
on the command line (from a copy of the code made at the start, ``wild.snapshot``, so edits
during the run are not measured); onnxconverter-common's ``convert_float_to_float16`` and
``auto_convert_mixed_precision`` (its validation: every output within ``HALF_TOLERANCE`` of its
range on the first input set), both with ``keep_io_types=True``; ``onnxslim IN OUT --dtype fp16``
(which slims, then calls onnxconverter-common without keep_io_types: its inputs and outputs
become float16 and are fed and read as such).

Judging: five input sets (``wild``'s feeds with the data file's hints at the first size plan
the original runs with: valid ids where random ones would not be), the original's outputs on
onnxruntime (CPU, optimizations off, one thread) as the reference. Each output is run on
onnxruntime as a user loads it (default graph optimizations, one thread); one onnxruntime does
not load or run (most bfloat16 models: its CPU provider has few bfloat16 kernels) or crashes
on is run by ``onnx.reference.ReferenceEvaluator`` instead, whose own error on the original
(first input set) is kept beside it (the judge's floor); both within ``--judge-timeout``. Per
output: ``compare.range_error`` (the largest absolute difference over the float32 output's
range), its largest over the sets, and NaN/Inf where the original is finite. A model with
decisions (a comparison, ArgMax, TopK's picks) runs with the original's picks in place of its
own and its decided-on values are judged as outputs (``_decided``, ``_pinned``), as --check
judges it; the flipped picks are recorded. Results:
``precision.json`` (resumable: a later run redoes only the model/mode cells it lacks, or all
with --force) and ``precision.md``.
"""

from __future__ import annotations

__all__ = ["MODES", "main", "measure_model", "write_report"]

import argparse
import concurrent.futures
import fnmatch
import json
import math
import os
import pickle
import platform
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import downstream
import numpy as np
import wild

ROOT = Path(__file__).resolve().parents[1]
ME = str(Path(__file__).resolve())
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "precision.md"
CACHE = Path("~/.cache/onnxforge/precision").expanduser()
MODES = {
    "float16": "onnxforge convert --dtype float16",
    "bfloat16": "onnxforge convert --dtype bfloat16",
    "weights": "onnxforge convert --weights float16",
    "occ": "onnxconverter-common convert_float_to_float16(keep_io_types=True)",
    "occ-amp": "onnxconverter-common auto_convert_mixed_precision(keep_io_types=True)",
    "onnxslim": "onnxslim --dtype fp16",
}
OURS = ("float16", "bfloat16", "weights")
PEERS = ("occ", "occ-amp", "onnxslim")
RUNS = 5
"""Input sets each output is judged on."""
TOLERANCE = 1e-2
"""``onnxforge.api.compare.HALF_TOLERANCE``, the budget of a half-precision conversion (a
constant here so the parent need not import onnxforge)."""
WEIGHTS_TOLERANCE = 1e-3
"""``--weights float16`` computes in float32 from rounded weights: within 1e-3 of the range."""
BFLOAT16_TOLERANCE = 8e-2
"""``onnxforge.api.compare.BFLOAT16_TOLERANCE``: bfloat16 rounds 8 times coarser."""


def budget(mode: str) -> float:
    """The tolerance a mode's outputs are held to (its CLI default)."""
    return {"weights": WEIGHTS_TOLERANCE, "bfloat16": BFLOAT16_TOLERANCE}.get(mode, TOLERANCE)


WEIGHT_ELEMENTS = 16
"""The size from which ``--weights`` stores a float32 tensor as float16: a weight."""
SIZE_BAR, WEIGHT_SHARE = 0.55, 0.9
"""The issue's size figure: a float16 file at most 0.55x the original where float32 weights
are at least 90% of it."""
PROTOBUF_LIMIT = (1 << 31) - 1


# -- children: prepare, convert, judge ------------------------------------------------------------
def _float32_weights(proto: Any) -> tuple[int, int, int]:
    """Bytes of the float32 weights (initializers and Constant values of WEIGHT_ELEMENTS or
    more, every graph), how many, and how many float32 ConstantOfShape fills."""
    from onnx.external_data_helper import _get_all_tensors

    big = [t for t in _get_all_tensors(proto)
           if t.data_type == 1 and math.prod(t.dims) >= WEIGHT_ELEMENTS]  # fmt: skip
    fills = 0
    for graph in wild._graphs(proto.graph):
        for node in graph.node:
            if node.op_type == "ConstantOfShape" and any(
                a.name == "value" and a.t.data_type == 1 for a in node.attribute
            ):
                fills += 1
    return sum(4 * math.prod(t.dims) for t in big), len(big), fills


def _feed_sets(proto: Any, path: Path, spec: wild.FeedSpec) -> tuple[list, list, dict] | str:
    """RUNS input sets at the first of ``wild``'s size plans the original runs with (seeds 0,
    1, ...; a set it does not run is skipped), its outputs on each, and the sizes; or why
    none ran."""
    session = wild._session(path)
    named = wild._name_dims(proto)
    error = ""
    for plan in wild._plans(named, spec, image=wild._image_like(proto)):
        sets, want, bindings = [], [], {}
        for seed in range(2 * RUNS):
            try:
                feeds, bindings = wild._feeds(named, plan, spec, seed)
                want.append(session.run(None, feeds))
            except Exception as exc:  # noqa: BLE001  (a plan or seed the model cannot take)
                error = wild._first_line(exc)
                if not sets:
                    break
                continue
            sets.append(feeds)
            if len(sets) == RUNS:
                break
        if sets:
            return sets, want, bindings
    return f"onnxruntime runs it at no size tried: {error}"


def _as_inference(path: Path, copy: Path) -> tuple[Path, dict[str, float], bool]:
    """The model to run (``copy`` of it with its Dropouts as inference computes them, where
    it has one in training mode: its outputs are random, and every conversion is judged as
    inference computes it, as ``--check`` does), its outputs' scales (``output_scales``),
    and whether it had such a Dropout."""
    from onnxforge import io
    from onnxforge.api.compare import output_scales
    from onnxforge.passes.toolchain_forms import dropout_as_inference

    model = io.load(path)
    scales = output_scales(model)
    if not dropout_as_inference(model):
        return path, scales, False
    io.save(model, copy)
    return copy, scales, True


def _decided(path: Path, sets: list[dict[str, np.ndarray]], scratch: Path) -> dict[str, Any]:
    """The original's decisions (``onnxforge.api._decisions``: comparisons, ArgMax, TopK's
    picks), as ``--check`` judges them: ``picks``, per set, what it picked (every conversion
    is run with them in place of its own); ``judged``, the values they are made on (name ->
    which decision), ``judged_want`` their values per set, and their ``scales``. Empty
    without decisions."""
    from onnxforge import io
    from onnxforge.api._decisions import expose, find_decisions
    from onnxforge.api.compare import output_scales
    from onnxforge.shape_infer import infer

    model = io.load(path)
    infer(model, verify=False)
    decisions = find_decisions(model)
    if not decisions:
        return {}
    listed = {v.name for v in model.graph.outputs}
    judged = {n: why for n, why in decisions.judged.items() if n not in listed}
    names = [*judged, *decisions.picks]
    model.graph.outputs.clear()
    expose(model, names)
    io.save(model, scratch)
    session = wild._session(scratch)
    runs = [dict(zip(names, session.run(None, f), strict=True)) for f in sets]
    return {
        "picks": [{n: r[n] for n in decisions.picks} for r in runs],
        "judged": judged,
        "judged_want": [[r[n] for n in judged] for r in runs],
        "scales": output_scales(model, also=judged),
    }


def _pinned(model: Path, data: Mapping[str, Any], scratch: Path) -> tuple[Path, list, dict]:
    """``model`` with the original's picks in place of its own (``_decisions.pin``) and the
    values they are made on exposed after its outputs, then its own picks: the file to run,
    the judged names it exposes, and pick -> its own pick's name; ``model`` as it is when
    it makes none of the picks (a tool renamed them)."""
    from onnxforge import io
    from onnxforge.api._decisions import pin_exposing, pinnable

    if not data.get("picks"):
        return model, [], {}
    converted = io.load(model)
    picks = pinnable(converted, data["picks"][0])
    if not picks:
        return model, [], {}
    graph = converted.graph
    values = {v.name for v in graph.values() if v._graph is graph}
    judged = [n for n in data["judged"] if n in values]
    own = pin_exposing(converted, picks, judged)
    io.save(converted, scratch)
    return scratch, judged, own


def _prepare_child(args: argparse.Namespace) -> None:
    """The model's size and float32 weights; where it holds some, the input sets and the
    original's outputs (``data.pkl``). ``prepare.json`` says which."""
    import onnx

    path, work = Path(args.model), Path(args.work)
    proto = onnx.load(path, load_external_data=False)
    total = path.stat().st_size + sum(
        (path.parent / loc).stat().st_size for loc in wild._external_locations(proto)
    )
    weights, count, fills = _float32_weights(proto)
    info: dict[str, Any] = {"bytes": total, "weights_bytes": weights, "weights": count,
                            "fills": fills, "weights_share": weights / total}  # fmt: skip
    if not count and not fills:
        info["skip"] = "no float32 weights"
        (work / "prepare.json").write_text(json.dumps(info))
        return
    _, tables = wild.load_data()
    spec = wild.feed_spec(args.id, tables) if args.wild else wild.FeedSpec()
    run_as, info["scales"], dropout = _as_inference(path, work / "original.onnx")
    found = _feed_sets(proto, run_as, spec)
    if isinstance(found, str):
        info["error"] = found
    else:
        sets, want, bindings = found
        decided = _decided(run_as, sets, work / "decided.onnx")
        info["scales"].update(decided.pop("scales", {}))
        with (work / "data.pkl").open("wb") as f:
            pickle.dump({"feeds": sets, "want": want, "dropout": dropout, **decided}, f)
        inputs = [[n, list(a.shape), str(a.dtype)] for n, a in sets[0].items()]
        info.update({"sets": len(sets), "bindings": bindings, "inputs": inputs})
    (work / "prepare.json").write_text(json.dumps(info))


def _validate(want: list[Any], got: list[Any]) -> bool:
    """auto_convert_mixed_precision's check: every output within the half budget."""
    from onnxforge.api.compare import HALF_TOLERANCE, range_error

    return all(range_error(w, g)[1] <= HALF_TOLERANCE for w, g in zip(want, got, strict=True))


def _convert_child(args: argparse.Namespace) -> None:
    """onnxconverter-common on one model, the result saved to ``--dst`` (nothing on failure)."""
    import onnx

    model = onnx.load(args.model)
    if args.mode == "occ":
        from onnxconverter_common.float16 import convert_float_to_float16

        result = convert_float_to_float16(model, keep_io_types=True)
    else:
        from onnxconverter_common.auto_mixed_precision import auto_convert_mixed_precision

        with Path(args.data).open("rb") as f:
            feeds = pickle.load(f)["feeds"][0]
        result = auto_convert_mixed_precision(model, feeds, _validate, keep_io_types=True)
    large = result.ByteSize() > PROTOBUF_LIMIT - (64 << 20)
    onnx.save_model(result, args.dst, save_as_external_data=large)


def _as_declared(proto: Any, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The feeds cast to the converted model's declared input types where a tool retyped an
    input (onnxslim's float16 inputs)."""
    from onnx.helper import tensor_dtype_to_np_dtype

    given = dict(feeds)
    for vi in proto.graph.input:
        elem = vi.type.tensor_type.elem_type if vi.type.HasField("tensor_type") else 0
        if vi.name in given and elem:
            dtype = tensor_dtype_to_np_dtype(elem)
            a = given[vi.name]
            if a.dtype != dtype and a.dtype.kind == "f" and np.dtype(dtype).kind == "f":
                given[vi.name] = a.astype(dtype)
    return given


def _reference_run(path: str, feeds: list[dict[str, np.ndarray]]) -> list[list[Any]]:
    import onnx

    from onnxforge._runtime_child import reference_evaluator

    evaluator = reference_evaluator(onnx.load(path))
    return [evaluator.run(None, f) for f in feeds]


def _errors(want: list[list[Any]], got: list[list[Any]], names: list[str]) -> list[dict]:
    """Per output: the largest ``range_error`` (absolute, over the range) over the input sets,
    the elements NaN or infinite where the original's are finite, and for an integer or bool
    output the elements that changed and of how many (its error: their share over the sets,
    as range_error measures one set)."""
    from onnxforge.api.compare import range_error

    found = []
    for k, name in enumerate(names):
        worst_abs = worst_rel = 0.0
        new_nonfinite, changed, total, note, shape = 0, 0, 0, "", ""
        for w_set, g_set in zip(want, got, strict=True):
            w, g = w_set[k], g_set[k]
            if not isinstance(w, np.ndarray) or not isinstance(g, np.ndarray):
                note = "not a tensor: not compared"
                continue
            if g.dtype.name.startswith(("bfloat", "float8")):  # a decided-on value, in half
                g = g.astype(np.float32)
            if w.dtype.kind not in "biufc" or g.dtype.kind not in "biufc":
                same = w.shape == g.shape and bool(np.all(w == g))
                a = r = 0.0 if same else math.inf
            else:
                a, r = range_error(w, g)
                if w.shape != g.shape and not shape:
                    shape = f"shape {list(g.shape)}, the original's {list(w.shape)}"
                if w.shape == g.shape and w.dtype.kind in "biu":
                    changed, total = changed + int(np.sum(w != g)), total + w.size
                if w.shape == g.shape and w.dtype.kind in "fc":
                    with np.errstate(invalid="ignore"):
                        bad = np.isfinite(w) & ~np.isfinite(g.astype(np.float64))
                    new_nonfinite += int(bad.sum())
            worst_abs, worst_rel = max(worst_abs, a), max(worst_rel, r)
        dtype = str(got[0][k].dtype) if hasattr(got[0][k], "dtype") else type(got[0][k]).__name__
        entry = {"name": name, "dtype": dtype, "abs": worst_abs, "rel": worst_rel,
                 "new_nonfinite": new_nonfinite}  # fmt: skip
        if total:
            entry["changed"] = [changed, total]
            if not shape:  # range_error's measure of an integer output: the share that moved
                entry["rel"] = changed / total
        if shape:
            entry["shape"] = shape
        if note:
            entry["note"] = note
        found.append(entry)
    return found


def _judge_child(args: argparse.Namespace) -> None:
    """Run a converted model on the input sets, on onnxruntime unless ``--reference`` (then,
    or where onnxruntime fails, on onnx's reference evaluator); write its errors against
    the original's outputs to ``--out``, the stage it is in first (so a crash is placed).
    A model with decisions runs with the original's picks in place of its own (``_pinned``);
    the values they are made on are judged beside the outputs."""
    import onnx

    from onnxforge.api._decisions import tally_flips

    out = Path(args.out)
    record: dict[str, Any] = {}

    def stage(name: str) -> None:
        record["stage"] = name
        out.write_text(json.dumps(record, default=str))

    with Path(args.data).open("rb") as f:
        data = pickle.load(f)
    proto = onnx.load(args.model, load_external_data=False)
    if data.get("dropout"):  # the original was run as inference computes it: so is this
        args.model = str(_as_inference(Path(args.model), Path(args.out).with_name("as.onnx"))[0])
    feeds = [_as_declared(proto, s) for s in data["feeds"]]
    names = [o.name for o in proto.graph.output]
    record["retyped"] = sorted(
        {n for s in feeds for n in s if s[n].dtype != data["feeds"][0][n].dtype}
    )
    stage("pin")  # decisions judged as --check judges them: the original's picks in place
    run, judged, own = _pinned(Path(args.model), data, Path(args.out).with_name("pinned.onnx"))
    args.model = str(run)
    if own:
        feeds = [
            {**f, **{p: picks[p] for p in own}}
            for f, picks in zip(feeds, data["picks"], strict=True)
        ]
        record["pinned"] = len(own)
    got = None
    if not args.reference:
        stage("onnxruntime load")
        try:
            session = wild._session(Path(args.model), optimized=True)
        except Exception as exc:  # noqa: BLE001  (not loading is the result)
            record.update(ort_loads=False, ort_error=wild._first_line(exc))
        else:
            record["ort_loads"] = True
            stage("onnxruntime run")
            try:
                got = [session.run(None, f) for f in feeds]
                record.update(ort_runs=True, judge="onnxruntime")
            except Exception as exc:  # noqa: BLE001
                record.update(ort_runs=False, ort_error=wild._first_line(exc))
    if got is None:
        stage("reference")
        try:
            got = _reference_run(args.model, feeds)
            record["judge"] = "reference"
        except Exception as exc:  # noqa: BLE001  (the reference evaluator lacks an op)
            record["judge_error"] = f"reference evaluator: {wild._first_line(exc)}"
        stage("reference floor")  # the judge's own error on the original, first input set
        try:
            original = Path(args.out).with_name("original.onnx") if data.get("dropout") \
                else args.original  # fmt: skip
            # with the picks in place, as the output is judged: near ties are not its error
            scratch = Path(args.out).with_name("original-pinned.onnx")
            path, _, picked = _pinned(Path(original), data, scratch)
            fed = [{**f, **{p: data["picks"][0][p] for p in picked}} for f in data["feeds"][:1]]
            ran = _reference_run(str(path), fed)
            floor = _errors(data["want"][:1], [r[: len(names)] for r in ran], names)
            record["floor"] = max((e["rel"] for e in floor), default=0.0)
        except Exception as exc:  # noqa: BLE001
            record["floor_error"] = f"reference evaluator: {wild._first_line(exc)}"
    if got is not None:
        if any(len(g) != len(data["want"][0]) + len(judged) + len(own) for g in got):
            record["judge_error"] = f"{len(got[0])} outputs, the original has {len(names)}"
        else:
            at = [list(data["judged"]).index(n) for n in judged]
            want = data["want"]
            if judged:
                pairs = zip(data["want"], data["judged_want"], strict=True)
                want = [[*w, *(j[i] for i in at)] for w, j in pairs]
            mine = len(names) + len(judged)
            record["outputs"] = _errors(want, [g[:mine] for g in got], [*names, *judged])
            for entry in record["outputs"][len(names) :]:
                entry["read_by"] = data["judged"][entry["name"]]
            flips = tally_flips(
                (pick, picks[pick], mine_pick)
                for g, picks in zip(got, data["picks"] if own else got, strict=True)
                for pick, mine_pick in zip(own, g[mine:], strict=True)
            )
            if flips:
                record["flipped"] = {pick: list(n) for pick, n in flips.items()}
    stage("done")


# -- the parent: one model ------------------------------------------------------------------------
@dataclass
class Context:
    modes: list[str]
    timeout: float
    amp_timeout: float
    judge_timeout: float
    mem_gib: float
    force: bool
    stored: dict[str, Any]
    lock: threading.Lock
    on_save: Callable[[], None]
    env: dict[str, str]
    code: str


def _command(mode: str, src: Path, dst: Path, work: Path) -> list[str]:
    """The conversion's command line."""
    if mode in OURS:
        how = ["--weights", "float16"] if mode == "weights" else ["--dtype", mode]
        return [*wild._cli(), "convert", str(src), *how, "-o", str(dst), "-q",
                "--json", str(work / f"{mode}.report.json")]  # fmt: skip
    if mode == "onnxslim":
        return [str(Path(sys.executable).parent / "onnxslim"), str(src), str(dst), "--dtype",
                "fp16"]  # fmt: skip
    return [sys.executable, ME, "_convert", "--mode", mode, "--model", str(src), "--dst",
            str(dst), "--data", str(work / "data.pkl")]  # fmt: skip


def _our_notes(report: Path) -> dict[str, Any]:
    """What onnxforge's --json report says it kept float32 and clamped."""
    if not report.exists():
        return {}
    precision = json.loads(report.read_text()).get("precision") or {}
    return {"stats": precision.get("stats", {}),
            "kept_float32": precision.get("kept_float32", [])[:5],
            "constants_clamped": precision.get("constants_clamped", [])[:5]}  # fmt: skip


def _judge(dst: Path, src: Path, work: Path, ctx: Context) -> dict[str, Any]:
    """The judge child's record (``--judge-timeout``); after a crash in onnxruntime, again with
    the reference evaluator alone."""
    record: dict[str, Any] = {}
    for reference in (False, True):
        out = work / "judge.json"
        out.unlink(missing_ok=True)
        cmd = [sys.executable, ME, "_judge", "--model", str(dst), "--original", str(src),
               "--data", str(work / "data.pkl"), "--out", str(out)]  # fmt: skip
        ran = downstream._spawn(cmd + (["--reference"] if reference else []), cwd=work,
                                timeout=ctx.judge_timeout, mem_gib=ctx.mem_gib,
                                env=ctx.env)  # fmt: skip
        told = json.loads(out.read_text()) if out.exists() else {"stage": "start"}
        record.update({k: v for k, v in told.items() if k != "stage"})
        record["judge_seconds"] = record.get("judge_seconds", 0) + ran["seconds"]
        if told.get("stage") == "done":
            return record
        why = (f"timeout after {ctx.judge_timeout:.0f} s" if ran["timeout"]
               else downstream._error_line(ran["stderr"], ran["exit"]))  # fmt: skip
        where = told.get("stage", "start")
        if where.startswith("onnxruntime") and not reference:
            record.update(ort_error=f"{where}: {why}", ort_crash=not ran["timeout"])
            record["ort_loads"] = where == "onnxruntime run"
            if not ran["timeout"]:  # the reference evaluator is slower: not after a timeout
                continue
        record["judge_error"] = f"{where}: {why}"
        return record
    return record


def _convert(mode: str, src: Path, work: Path, info: Mapping[str, Any], ctx: Context) -> dict:
    """One mode on one model: the conversion's record, then the judge's."""
    out_dir = work / mode
    shutil.rmtree(out_dir, ignore_errors=True)
    out_dir.mkdir(parents=True)
    dst = out_dir / "model.onnx"
    timeout = ctx.amp_timeout if mode == "occ-amp" else ctx.timeout
    ran = downstream._spawn(_command(mode, src, dst, work), cwd=work, timeout=timeout,
                            mem_gib=ctx.mem_gib, env=ctx.env)  # fmt: skip
    record: dict[str, Any] = {"seconds": ran["seconds"], "exit": ran["exit"], "code": ctx.code}
    if mode in OURS:
        record.update(_our_notes(work / f"{mode}.report.json"))
    if ran["timeout"]:
        record["error"] = f"timeout after {timeout:.0f} s"
        record["timeout"] = True
    elif ran["exit"] or not dst.exists():
        record["error"] = downstream._error_line(ran["stderr"] + "\n" + ran["stdout"],
                                                 ran["exit"])  # fmt: skip
        if ran["exit"] and ran["exit"] < 0:
            record["crash"] = ran["exit"]
    record["written"] = "error" not in record
    if record["written"]:
        record["bytes"] = sum(p.stat().st_size for p in out_dir.iterdir() if p.is_file())
        record["size_ratio"] = record["bytes"] / info["bytes"]
        record.update(_judge(dst, src, work, ctx))
    shutil.rmtree(out_dir, ignore_errors=True)
    return record


def measure_model(entry: Mapping[str, Any], ctx: Context) -> None:
    """Every mode of one model that the results do not hold yet (all with --force)."""
    with ctx.lock:
        result = ctx.stored["models"].setdefault(entry["id"], {"id": entry["id"]})
        result.update({"producer": entry["producer"], "flags": entry["flags"]})
        modes = result.setdefault("modes", {})
    todo = [m for m in ctx.modes if ctx.force or m not in modes]
    if not todo and "prepare" in result:
        return
    work = CACHE / "work" / re.sub(r"[^\w.-]+", "_", entry["id"])
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    src = Path(entry["file"])
    try:
        ran = downstream._spawn(
            [sys.executable, ME, "_prepare", "--id", entry["id"], "--model", str(src), "--work",
             str(work)] + (["--wild"] if entry["wild"] else []),
            cwd=work, timeout=ctx.timeout, mem_gib=ctx.mem_gib, env=ctx.env,
        )  # fmt: skip
        prep = work / "prepare.json"
        if prep.exists():
            info = json.loads(prep.read_text())
        elif ran["timeout"]:
            info = {"error": f"timeout after {ctx.timeout:.0f} s"}
        else:
            info = {"error": downstream._error_line(ran["stderr"], ran["exit"])}
        with ctx.lock:
            result["prepare"] = info
            ctx.on_save()
        if "skip" in info or "error" in info:
            return
        for mode in todo:
            record = _convert(mode, src, work, info, ctx)
            if downstream.STOPPING.is_set():
                return
            with ctx.lock:
                modes[mode] = record
                ctx.on_save()
    finally:
        shutil.rmtree(work, ignore_errors=True)


# -- verdicts and the report ----------------------------------------------------------------------
def worst(record: Mapping[str, Any], floats: bool = False) -> tuple[float, str]:
    """The largest error over the range of any output (of any float output), and that
    output's name."""
    outputs = [
        {**o, "rel": o["changed"][0] / o["changed"][1]}
        if "changed" in o and "shape" not in o and o["changed"][1]
        else o
        for o in record.get("outputs", [])
        if "note" not in o
    ]  # an integer output judged before its error was the share that moved: the same here
    if floats:
        outputs = [o for o in outputs if "float" in o["dtype"]]
    if not outputs:
        return math.nan, ""
    top = max(outputs, key=lambda o: o["rel"])
    return top["rel"], top["name"]


def verdict(record: Mapping[str, Any] | None, tolerance: float = TOLERANCE) -> tuple[str, str]:
    """A cell's status (ok, over, nan, judge-fail, unjudged, not-written, timeout, crash, or -
    when not run) and its detail. Whether onnxruntime loads it is apart (``in_ort``).
    *unjudged*: onnxruntime does not run the output and the reference evaluator does not run
    the original either, or computes it past ``tolerance`` (its limit, not the conversion's)."""
    if record is None:
        return "-", ""
    if not record.get("written"):
        kind = "timeout" if record.get("timeout") else "crash" if record.get("crash") \
            else "not-written"  # fmt: skip
        return kind, record.get("error", "")
    if "outputs" not in record:
        if "floor_error" in record:
            return "unjudged", f"{record.get('judge_error', '')}; on the original too"
        return "judge-fail", record.get("judge_error", "")
    floor = record.get("floor")
    if record.get("judge") == "reference" and floor is not None and floor > tolerance:
        return "unjudged", (f"the reference evaluator is {_g(floor)} of the range off on the "
                            f"original (the output: {_g(worst(record)[0])})")  # fmt: skip
    bad = [o for o in record["outputs"] if o["new_nonfinite"]]
    if bad:
        found = ", ".join(f"{o['name']}: {o['new_nonfinite']} NaN/Inf" for o in bad[:3])
        return "nan", found + _by(record)
    rel, name = worst(record)
    if rel > tolerance:
        top = next(o for o in record["outputs"] if o["name"] == name)
        moved = f", {top['changed'][0]} of {top['changed'][1]} changed" if "changed" in top else ""
        moved += f", {top['shape']}" if "shape" in top else ""
        return "over", (f"{name} ({top['dtype']}): {_g(rel)} of the range (abs {_g(top['abs'])}"
                        f"{moved})" + _by(record))  # fmt: skip
    return "ok", ""


def _by(record: Mapping[str, Any]) -> str:
    if record.get("judge") != "reference":
        return ""
    floor = record.get("floor")
    return f"; reference evaluator, its floor {_g(floor) if floor is not None else '?'}"


def in_ort(record: Mapping[str, Any] | None) -> bool:
    """Whether onnxruntime loads and runs the converted model."""
    return bool(record) and record.get("judge") == "onnxruntime"


def passes(record: Mapping[str, Any] | None) -> bool:
    """Written, runs in onnxruntime, no new NaN/Inf, within the half budget."""
    return in_ort(record) and verdict(record)[0] == "ok"


def _brief(record: Mapping[str, Any] | None, mode: str) -> str:
    """A cell's status by its mode's budget, ``*`` where onnxruntime does not run it, and its
    largest error."""
    status, _ = verdict(record, budget(mode))
    if not record or not record.get("written"):
        return status
    return f"{status}{'' if in_ort(record) else '*'} {_g(worst(record)[0])}"


def _g(x: float | None) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return "inf" if math.isinf(x) else "0" if x == 0 else f"{x:.1e}"


def _median(xs: list[float]) -> float:
    return float(np.median(xs)) if xs else math.nan


def _ort_line(record: Mapping[str, Any]) -> str:
    return downstream._cell(record.get("ort_error", "") or "", 240)


def _summary_rows(results: Mapping[str, Any], modes: list[str]) -> list[str]:
    rows = ["| mode | models | written | loads + runs in ORT | judged (ORT / reference) "
            "| no new NaN/Inf | within budget | (float outputs) | median error | worst error "
            "| median size | conversion time |",
            "|" + " --- |" * 12]  # fmt: skip
    for mode in modes:
        recs = [r["modes"][mode] for r in results.values() if mode in r.get("modes", {})]
        written = [r for r in recs if r.get("written")]
        judged = [r for r in written if "outputs" in r]
        by_ref = sum(r.get("judge") == "reference" for r in judged)
        finite = [r for r in judged if not any(o["new_nonfinite"] for o in r["outputs"])]
        within = [r for r in finite if worst(r)[0] <= budget(mode)]
        floats = [r for r in finite if not worst(r, floats=True)[0] > budget(mode)]
        errors = [worst(r)[0] for r in judged if not math.isnan(worst(r)[0])]
        sizes = [r["size_ratio"] for r in written]
        rows.append(
            f"| {mode} | {len(recs)} | {len(written)} | {sum(in_ort(r) for r in recs)} "
            f"| {len(judged) - by_ref} / {by_ref} | {len(finite)} | {len(within)} "
            f"| {len(floats)} "
            f"| {_g(_median(errors))} | {_g(max(errors, default=math.nan))} "
            f"| {_median(sizes):.3f}x | {sum(r.get('seconds', 0) for r in recs):.0f} s |"
        )
    return rows


def _versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for name in ("onnx", "onnxruntime", "onnxconverter-common", "onnxslim", "numpy",
                 "ml_dtypes", "protobuf"):  # fmt: skip
        found[name] = wild._version(name)
    return found


def _codes(meta: Mapping[str, Any], results: Mapping[str, Any]) -> str:
    """The code the onnxforge cells were measured with, grouped by snapshot (commits that
    differ only outside the code share one), and how many cells each."""
    snapshots = {r["code"]: r["snapshot"] for r in meta.get("runs", [])}
    cells: Counter[str] = Counter()
    commits: dict[str, set[str]] = {}
    for r in results.values():
        for mode in OURS:
            code = r.get("modes", {}).get(mode, {}).get("code")
            if code:
                snap = snapshots.get(code, "?")
                cells[snap] += 1
                commits.setdefault(snap, set()).add(code)
    return "; ".join(f"{', '.join(sorted(commits[s]))} (snapshot {s}): {n} cells"
                     for s, n in cells.most_common()) or "-"  # fmt: skip


def _left_out(stored: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """The wild models onnxruntime does not run (per wild.json) and the models without
    float32 weights or feeds, each with why."""
    not_run = []
    if downstream.WILD_JSON.exists():
        for mid, r in json.loads(downstream.WILD_JSON.read_text())["models"].items():
            observe = r.get("steps", {}).get("observe", {})
            if not observe.get("loads"):
                not_run.append(f"- `{mid}`: {downstream._cell(observe.get('error', '?'), 200)}")
    other = []
    for mid, r in sorted(stored.get("models", {}).items()):
        prep = r.get("prepare", {})
        if "skip" in prep or "error" in prep:
            other.append(f"- `{mid}`: {downstream._cell(prep.get('skip') or prep['error'], 200)}")
    return sorted(not_run), other


def _on_scale(result: Mapping[str, Any]) -> dict[str, Any]:
    """``result`` with each bounded float output's error over the larger of its range and its
    scale (``prepare``'s ``output_scales``), as ``range_error(scale=)`` measures it: the
    judge records the error over the range alone."""
    scales = result.get("prepare", {}).get("scales") or {}
    if not scales:
        return dict(result)
    modes = {}
    for mode, record in result.get("modes", {}).items():
        outputs = [
            {**o, "rel": min(o["rel"], o["abs"] / scales[o["name"]])}
            if o.get("name") in scales and "float" in o.get("dtype", "") and "shape" not in o
            else o
            for o in record.get("outputs", [])
        ]  # fmt: skip
        modes[mode] = {**record, "outputs": outputs} if "outputs" in record else record
    return {**result, "modes": modes}


def write_report(stored: Mapping[str, Any], out: Path) -> None:
    """``precision.md``: the environment, a summary per mode, the issue's figures, the models
    where onnxforge fails and a peer passes, every onnxforge failure, then one row per model."""
    meta = stored.get("meta", {})
    results = {k: _on_scale(v) for k, v in stored.get("models", {}).items()
               if v.get("prepare", {}).get("sets")}  # fmt: skip
    modes = [m for m in MODES if any(m in r.get("modes", {}) for r in results.values())]
    wild_n = sum(not k.startswith("exporters/") for k in results)
    not_run, other = _left_out(stored)
    versions = ", ".join(f"{k} {v}" for k, v in meta.get("versions", {}).items())
    codes = _codes(meta, results)
    lines = [
        "# Half precision: onnxforge convert --dtype / --weights against onnxconverter-common "
        "and onnxslim",
        "",
        "`python benchmarks/precision.py run` (see the README and the script's docstring). "
        f"Environment: {versions}. onnxforge measured: {codes}.",
        "",
        f"{len(results)} models: {wild_n} of the wild corpus (onnxruntime runs them and they "
        f"hold float32 weights) and {len(results) - wild_n} of `tests/data/exporters`. "
        f"{meta.get('subset', '')}",
        "",
        f"Error: `onnxforge.api.compare.range_error`, the largest absolute difference from the "
        f"original's output over that output's range (over its scale where the op making it "
        "bounds it and that is larger: a Sigmoid's 1, `output_scales`), the largest over the "
        f"outputs and {RUNS} "
        "input sets (the wild data file's feeds); the original runs on onnxruntime with "
        "optimizations off, each conversion on onnxruntime with its defaults (one thread), "
        "or, where onnxruntime does not load or run it, on `onnx.reference.ReferenceEvaluator` "
        "(its own error on the original, the *floor*, is given with its failures). A model "
        "with decisions (`onnxforge.api._decisions`: comparisons, ArgMax, TopK's picks, a Cast "
        "to an integer) runs with the original's picks in place of its own, and the values "
        "they are made on are judged beside the outputs, as `--check` judges them; the picks "
        "a conversion made otherwise (near ties) are counted, not judged. Budget: "
        f"{TOLERANCE:g} (`HALF_TOLERANCE`; occ, occ-amp and onnxslim too), "
        f"{BFLOAT16_TOLERANCE:g} for bfloat16 (`BFLOAT16_TOLERANCE`), {WEIGHTS_TOLERANCE:g} for "
        "`weights`; the verdicts use each mode's. Sizes: the files written (external data "
        "included) over the original's. Time: each conversion's process, imports included.",
        "",
        "## Summary",
        "",
        *_summary_rows(results, modes),
        "",
        "Modes: " + "; ".join(f"`{m}`: {MODES[m]}" for m in modes) + ".",
        "",
        "## The issue's figures",
        "",
        f"### Size: at most {SIZE_BAR}x where float32 weights are at least "
        f"{WEIGHT_SHARE:.0%} of the file",
        "",
    ]
    heavy = {k: r for k, r in results.items()
             if r["prepare"]["weights_share"] >= WEIGHT_SHARE}  # fmt: skip
    lines += ["| mode | models | at most 0.55x | larger | not written | median size |",
              "| --- | --- | --- | --- | --- | --- |"]  # fmt: skip
    too_big = []
    for mode in modes:
        recs = {k: r["modes"][mode] for k, r in heavy.items() if mode in r.get("modes", {})}
        small = [k for k, r in recs.items() if r.get("written") and r["size_ratio"] <= SIZE_BAR]
        large = [k for k, r in recs.items() if r.get("written") and r["size_ratio"] > SIZE_BAR]
        sizes = [r["size_ratio"] for r in recs.values() if r.get("written")]
        unwritten = len(recs) - len(small) - len(large)
        lines.append(f"| {mode} | {len(recs)} | {len(small)} | {len(large)} | {unwritten} "
                     f"| {_median(sizes):.3f}x |")  # fmt: skip
        if mode in ("float16", "weights"):
            for k in large:
                mb, of = recs[k]["bytes"] / 1e6, heavy[k]["prepare"]["bytes"] / 1e6
                ratio = recs[k]["size_ratio"]  # past the bar by less than 0.0005: 4 digits
                shown = f"{ratio:.3f}" if round(ratio, 3) > SIZE_BAR else f"{ratio:.4f}"
                too_big.append(f"- **{mode}** `{k}`: {shown}x ({mb:.1f} MB of {of:.1f}, "
                               f"{recs[k]['bytes']:,} bytes)")  # fmt: skip
    lines += ["", "`float16` and `weights` outputs larger than 0.55x there (bfloat16 keeps "
              "float32 the weights of ops whose version has no bfloat16, Conv before opset 22):",
              "", *(too_big or ["- none"])]  # fmt: skip
    weights = {k: r["modes"]["weights"] for k, r in results.items()
               if "weights" in r.get("modes", {})}  # fmt: skip
    weights_bad = [(k, verdict(r, WEIGHTS_TOLERANCE)) for k, r in weights.items()]
    weights_bad = [(k, v) for k, v in weights_bad if v[0] != "ok" or not in_ort(weights[k])]
    lines += [
        "",
        f"### `--weights float16`: within {WEIGHTS_TOLERANCE:g} of each output's range",
        "",
        f"{len(weights) - len(weights_bad)} of {len(weights)} models (written, run by "
        f"onnxruntime, every output within {WEIGHTS_TOLERANCE:g}); largest error "
        f"{_g(max((worst(r)[0] for r in weights.values() if 'outputs' in r), default=math.nan))}.",
        "",
        *[f"- `{k}`: {s}: {downstream._cell(d or _ort_line(weights[k]), 300)}"
          for k, (s, d) in weights_bad],
        "",
        "### onnxconverter-common's output loads in onnxruntime, `--dtype float16`'s does not",
        "",
    ]  # fmt: skip
    ort_gap = []
    for k, r in results.items():
        m = r.get("modes", {})
        peers = [p for p in ("occ", "occ-amp") if in_ort(m.get(p))]
        if "float16" in m and peers and not in_ort(m["float16"]):
            ours = m["float16"]
            why = ours.get("error") if not ours.get("written") else _ort_line(ours)
            ort_gap.append(f"- `{k}` (loads: {', '.join(peers)}): "
                           f"{downstream._cell(why, 300)}")  # fmt: skip
    lines += ort_gap or ["- none"]
    lines += ["", "## onnxforge fails where a peer passes", "",
              "A peer (onnxconverter-common, its auto mixed precision, onnxslim) writes the "
              "model, onnxruntime runs it, no new NaN/Inf, within 1e-2; onnxforge's mode does "
              "not:", ""]  # fmt: skip
    regressions = []
    for mode in ("float16", "weights"):
        for k, r in sorted(results.items()):
            m = r.get("modes", {})
            peers = [p for p in PEERS if passes(m.get(p))]
            if mode in m and peers and not passes(m[mode]):
                status, detail = verdict(m[mode])
                if status == "ok":
                    status, detail = "not in onnxruntime", _ort_line(m[mode])
                regressions.append(f"- **{mode}** `{k}` (passes: {', '.join(peers)}): {status}: "
                                   f"{downstream._cell(detail, 300)}")  # fmt: skip
    lines += regressions or ["- none"]
    lines += ["", "## Every onnxforge failure", "",
              "Not written, NaN/Inf, error above the mode's budget, an output the "
              "reference evaluator cannot run where it runs the original, or (float16, weights) "
              "not run by onnxruntime. bfloat16 outputs onnxruntime does not load are judged by "
              "the reference evaluator; why onnxruntime refuses them is counted apart. In "
              "brackets, the other modes on the same model (as in the per-model table): where "
              "`weights` (float32 compute, weights rounded to float16) is over too, the model "
              "amplifies the rounding of its weights alone; an integer output's count says how "
              "many indices moved (near ties).",
              ""]  # fmt: skip
    ort_bf16: Counter[str] = Counter()
    unjudged = []
    for mode in OURS:
        found = []
        for k, r in sorted(results.items()):
            rec = r.get("modes", {}).get(mode)
            status, detail = verdict(rec, budget(mode))
            parts = []
            if rec and rec.get("written") and not in_ort(rec):
                if mode == "bfloat16":
                    ort_bf16[downstream._reason(rec.get("ort_error", ""))] += 1
                else:
                    parts.append(f"not in onnxruntime: {_ort_line(rec)}")
            if status == "unjudged":
                unjudged.append(f"- **{mode}** `{k}`: {downstream._cell(detail, 300)}")
            elif status not in ("ok", "-"):
                parts.append(f"{status}: {downstream._cell(detail, 300)}")
            if parts:
                others = ", ".join(
                    f"{m} {_brief(c, m)}" for m, c in r["modes"].items() if m != mode
                )
                found.append(f"- `{k}`: " + "; ".join(parts) + f" [{others}]")
        lines += [f"### {mode}: {len(found)}", "", *(found or ["- none"]), ""]
    lines += [f"### Not judged: onnxruntime does not run the output, and the reference evaluator "
              f"does not run or reproduce the original: {len(unjudged)}", "",
              *(unjudged or ["- none"]), ""]  # fmt: skip
    lines += ["### Why onnxruntime does not run the bfloat16 outputs: "
              f"{sum(ort_bf16.values())}", ""]  # fmt: skip
    lines += [f"- {downstream._cell(k, 200)}: {n}" for k, n in ort_bf16.most_common()] or [
        "- none"
    ]
    lines += ["", "## Peers' failures", "",
              "By reason; an output onnxruntime does not run counts under onnxruntime's error "
              "(the reference evaluator's judgement of it is in the per-model table).",
              ""]  # fmt: skip
    for mode in PEERS:
        reasons: Counter[str] = Counter()
        for r in results.values():
            rec = r.get("modes", {}).get(mode)
            status, detail = verdict(rec)
            if rec and rec.get("written") and not in_ort(rec):
                status, detail = "not in onnxruntime", rec.get("ort_error", "")
            if status not in ("ok", "-"):
                reasons[f"{status}: {downstream._reason(detail)}"] += 1
        lines += [f"### {mode}: {sum(reasons.values())}", ""]
        lines += [f"- {downstream._cell(k, 220)}: {n}" for k, n in reasons.most_common()] or [
            "- none"
        ]
        lines.append("")
    lines += [
        "## Per model",
        "",
        "Cells: status (ok, over, nan, not-written, timeout, crash, judge-fail), `*` where "
        "onnxruntime does not run it (reference evaluator), the largest error over the range, "
        "the size ratio. Weights: the float32 weights' share of the original's bytes.",
        "",
        "| model | MB | weights | " + " | ".join(modes) + " |",
        "| --- | --- | --- | " + " | ".join("---" for _ in modes) + " |",
    ]
    for k, r in sorted(results.items()):
        cells = []
        for mode in modes:
            rec = r.get("modes", {}).get(mode)
            size = f" {rec['size_ratio']:.2f}x" if rec and rec.get("written") else ""
            cells.append(_brief(rec, mode) + size)
        p = r["prepare"]
        lines.append(f"| `{downstream._cell(k, 90)}` | {p['bytes'] / 1e6:.1f} "
                     f"| {p['weights_share']:.0%} | " + " | ".join(cells) + " |")  # fmt: skip
    lines += ["", "## Left out", "", f"### onnxruntime does not run them (wild.json): "
              f"{len(not_run)}", "", *(not_run or ["- none"]), "",
              f"### No float32 weights, or no feeds the original runs with: {len(other)}", "",
              *(other or ["- none"]), ""]  # fmt: skip
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")


# -- the parent -----------------------------------------------------------------------------------
def run(args: argparse.Namespace) -> None:
    modes = [m for m in args.modes.split(",") if m] if args.modes else list(MODES)
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        raise SystemExit(f"unknown modes {unknown}: {', '.join(MODES)}")
    json_out = args.out.with_suffix(".json")
    stored = json.loads(json_out.read_text()) if json_out.exists() else {"models": {}}
    meta = stored.setdefault("meta", {})
    cache = wild.cache_dir(None)
    globs = [g for g in args.models.split(",") if g] or ["*"]
    todo = [m for m in downstream.models(cache)
            if any(fnmatch.fnmatch(m["id"], g) for g in globs)]  # fmt: skip
    if args.limit:
        todo = todo[: args.limit]
    scratch = Path(tempfile.mkdtemp(prefix="onnxforge-precision-"))
    snap = wild.snapshot(scratch / "code")
    code = snap["commit"] + (f" + modified {', '.join(snap['modified'])}"
                             if snap["modified"] else "")  # fmt: skip
    path = os.pathsep.join([str(scratch / "code"), str(downstream.BENCH)])
    env = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "1000", "PYTHONPATH": path}
    meta["versions"] = _versions()
    if args.subset:
        meta["subset"] = args.subset
    meta.setdefault("runs", []).append({
        "started": time.strftime("%Y-%m-%d %H:%M:%S"), "models": len(todo), "modes": modes,
        "jobs": args.jobs, "code": code, "snapshot": snap["code_sha1"], "models_glob": args.models,
    })  # fmt: skip
    lock = threading.Lock()

    def save() -> None:
        downstream._save_json(json_out, stored)
        write_report(stored, args.out)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, downstream._stop)
    print(f"{len(todo)} models; modes {modes}; code {code}", file=sys.stderr)
    started = time.monotonic()
    finished: list[str] = []

    def one(entry: dict[str, Any]) -> None:
        ctx = Context(modes=modes, timeout=args.timeout, amp_timeout=args.amp_timeout,
                      judge_timeout=args.judge_timeout,
                      mem_gib=args.mem_limit, force=args.force, stored=stored, lock=lock,
                      on_save=save, env=env, code=code)  # fmt: skip
        try:
            measure_model(entry, ctx)
        except Exception as exc:  # noqa: BLE001  (one model's harness failure is reported)
            if downstream.STOPPING.is_set():
                return
            with lock:
                stored["models"].setdefault(entry["id"], {})["harness_error"] = (
                    downstream._first_line(exc))  # fmt: skip
            traceback.print_exc()
        with lock:
            finished.append(entry["id"])
            r = _on_scale(stored["models"].get(entry["id"], {}))
            cells = ", ".join(f"{m} {verdict(r['modes'][m], budget(m))[0]}" for m in modes
                              if m in r.get("modes", {}))  # fmt: skip
            prep = r.get("prepare", {})
            print(f"[{len(finished)}/{len(todo)} {time.monotonic() - started:.0f}s] "
                  f"{entry['id']}: {cells or prep.get('skip') or prep.get('error', '')}"[:300],
                  file=sys.stderr, flush=True)  # fmt: skip

    pool = concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs)
    try:
        for future in [pool.submit(one, e) for e in todo]:
            future.result()
    except BaseException:
        downstream.STOPPING.set()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        meta["runs"][-1]["seconds"] = round(time.monotonic() - started, 1)
        with lock:
            save()
        shutil.rmtree(scratch, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run", help="convert every model in every mode and judge the outputs")
    p.add_argument("--models", default="", help="globs on the model ids, a,b,... (default: all)")
    p.add_argument("--modes", default="", help="a,b of " + ", ".join(MODES) + " (default: all)")
    p.add_argument("--limit", type=int, default=0, help="the first N models only")
    p.add_argument("--jobs", type=int, default=1, help="models at a time")
    p.add_argument("--timeout", type=float, default=900.0,
                   help="seconds per conversion and preparation")  # fmt: skip
    p.add_argument("--amp-timeout", type=float, default=600.0,
                   help="seconds for auto_convert_mixed_precision")  # fmt: skip
    p.add_argument("--judge-timeout", type=float, default=300.0,
                   help="seconds to run an output on the input sets (onnxruntime, then the "
                   "reference evaluator where onnxruntime fails)")  # fmt: skip
    p.add_argument("--mem-limit", type=float, default=8.0, help="GiB of address space per child")
    p.add_argument("--force", action="store_true", help="redo the cells the json holds")
    p.add_argument("--subset", default="", help="a sentence for the report: which models")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    p = sub.add_parser("report", help="rewrite the Markdown from the json")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    p = sub.add_parser("_prepare")
    p.add_argument("--id", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--wild", action="store_true")
    p = sub.add_parser("_convert")
    p.add_argument("--mode", required=True, choices=("occ", "occ-amp"))
    p.add_argument("--model", required=True)
    p.add_argument("--dst", required=True)
    p.add_argument("--data", required=True)
    p = sub.add_parser("_judge")
    p.add_argument("--model", required=True)
    p.add_argument("--original", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--reference", action="store_true", help="skip onnxruntime")
    args = parser.parse_args()
    if args.command == "run":
        run(args)
    elif args.command == "report":
        write_report(json.loads(args.out.with_suffix(".json").read_text()), args.out)
    elif args.command == "_prepare":
        _prepare_child(args)
    elif args.command == "_convert":
        _convert_child(args)
    else:
        _judge_child(args)


if __name__ == "__main__":
    main()
