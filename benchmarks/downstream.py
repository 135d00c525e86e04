"""Whether the next tool in the chain takes each model: the original, onnxsim's, onnxslim's and
onnxforge's output, converted by downstream toolchains and run on the same inputs.

    python benchmarks/downstream.py setup [--toolchains a,b]
    python benchmarks/downstream.py run [--models GLOB,...] [--toolchains a,b] [--limit N]
                                        [--jobs N] [--timeout S] [--mem-limit GiB] [--force]
                                        [--variants a,b]
                                        [--out benchmarks/results/downstream.md]
    python benchmarks/downstream.py report [--out benchmarks/results/downstream.md]

Models: the wild corpus models onnxruntime runs (``results/wild.json``: ``steps.observe.loads``)
and ``tests/data/exporters/**/*.onnx`` (ids ``exporters/<path>``). Feeds and the reference: the
first feeds of ``wild.observe_with`` (the wild data file's hints for the wild models), the
original's outputs on onnxruntime (CPU, optimizations off) and its noise floor, as ``wild.py``
computes them. Variants: the original, ``onnxsim.simplify`` and ``onnxslim.slim`` with their
defaults (``fold.child``, as ``fold.py`` runs them), ``onnxforge optimize`` on the command line,
and ``onnxforge optimize --for TOOLCHAIN`` when ``optimize --help`` lists ``--for`` (with
``--input-shape`` of the feeds for the toolchains that convert with static shapes: pnnx and
onnx2tf, ``shapes`` in the data file).

Toolchains (``downstream_toolchains.toml``: pinned packages; one virtual environment each under
``~/.cache/onnxforge/downstream/venvs``): onnxruntime, OpenVINO (``convert_model`` +
``compile_model`` on CPU), pnnx to ncnn (the ``pnnx`` executable with the feeds' shapes, run
with the ``ncnn`` package), MNN (its converter, run with ``nn.load_module_from_file``),
onnx2torch, and onnx2tf to TFLite (only with ``--toolchains onnx2tf``, on its subset). Each
conversion and run is a child process with ``--timeout`` and an address-space limit; a cell is
ok when the toolchain converts the variant, runs it and computes the original's outputs within
``wild._differs``'s tolerance (rtol 1e-3, atol 1e-4 + 4x the noise floor). The stage that fails
(convert, run, compare) and its first error line are kept. Results: ``downstream.json``
(resumable: a later run skips the cells it holds unless --force) and ``downstream.md``.

This file is also the runner inside each toolchain's environment (``_toolchain``): its module
level imports only the standard library and numpy.
"""

from __future__ import annotations

__all__ = ["TOOLCHAINS", "Toolchain", "load_toolchains", "main", "setup", "write_report"]

import argparse
import concurrent.futures
import contextlib
import fnmatch
import json
import os
import pickle
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import warnings
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = None  # type: ignore[assignment]

ROOT = Path(__file__).resolve().parents[1]
BENCH = Path(__file__).resolve().parent
DATA = BENCH / "downstream_toolchains.toml"
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "downstream.md"
WILD_JSON = ROOT / "benchmarks" / "results" / "wild.json"
FIXTURES = ROOT / "tests" / "data" / "exporters"
CACHE = Path("~/.cache/onnxforge/downstream").expanduser()
VARIANTS = ("original", "onnxsim", "onnxslim", "onnxforge", "onnxforge --for")
TOOLCHAINS = ("onnxruntime", "openvino", "pnnx", "mnn", "onnx2torch", "onnx2tf")
STAGES = ("variant", "convert", "run", "compare")


# -- the data file and the environments -----------------------------------------------------------
@dataclass(frozen=True)
class Toolchain:
    """One toolchain: its pinned packages, the name ``--for`` takes, whether it runs by
    default, and the models it runs on when none are named."""

    name: str
    packages: tuple[str, ...]
    no_deps: tuple[str, ...] = ()
    for_name: str = ""
    default: bool = True
    models: tuple[str, ...] = ()
    shapes: bool = False  # converts with the feeds' shapes: --for gets them as --input-shape

    @property
    def venv(self) -> Path:
        return CACHE / "venvs" / self.name

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"


def load_toolchains(path: Path = DATA) -> dict[str, Toolchain]:
    with path.open("rb") as f:
        data = tomllib.load(f)
    found = {}
    for name, t in data["toolchains"].items():
        found[name] = Toolchain(
            name=name,
            packages=tuple(t.get("packages", ())),
            no_deps=tuple(t.get("no_deps", ())),
            for_name=t.get("for", name),
            default=t.get("default", True),
            models=tuple(t.get("models", ())),
            shapes=t.get("shapes", False),
        )
    return found


def _pinned_names(tc: Toolchain) -> list[str]:
    return [re.split(r"[=<>!~\[]", p)[0].lower() for p in (*tc.packages, *tc.no_deps)]


KEY_DEPS = ("numpy", "onnx", "torch", "torchvision", "tensorflow", "tf-keras", "onnxruntime",
            "onnxsim", "ai-edge-litert", "protobuf")  # fmt: skip
"""Dependencies whose versions the results name beside the pinned packages."""


def setup(tc: Toolchain, *, force: bool = False) -> dict[str, Any]:
    """Create (or reuse) the toolchain's virtual environment and install its packages; the
    record of it (versions, seconds, bytes, or the error) is ``.setup.json`` in it."""
    record_file = tc.venv / ".setup.json"
    wanted = sorted([*tc.packages, *(f"--no-deps {p}" for p in tc.no_deps)])
    if record_file.exists() and not force:
        record = json.loads(record_file.read_text())
        if record.get("requested") == wanted and record.get("ok"):
            return record
    shutil.rmtree(tc.venv, ignore_errors=True)
    tc.venv.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    record: dict[str, Any] = {"requested": wanted, "ok": False}
    base = getattr(sys, "_base_executable", sys.executable)
    steps = [[base, "-m", "venv", str(tc.venv)]]
    pip = [str(tc.python), "-m", "pip", "install", "--no-input", "--progress-bar", "off"]
    if tc.packages:
        steps.append([*pip, *tc.packages])
    if tc.no_deps:
        steps.append([*pip, "--no-deps", *tc.no_deps])
    log = tc.venv.parent / f"{tc.name}.setup.log"
    with log.open("w") as out:
        for cmd in steps:
            out.write(f"$ {' '.join(cmd)}\n")
            out.flush()
            try:
                done = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, timeout=3600,
                                      check=False)  # fmt: skip
            except subprocess.TimeoutExpired:
                record["error"] = f"timeout after 3600 s: {' '.join(cmd[-3:])}"
                break
            if done.returncode:
                tail = log.read_text().strip().splitlines() or ["?"]
                errors = [ln for ln in tail if "ERROR" in ln or "error" in ln]
                record["error"] = (errors or tail)[-1][:300]
                break
        else:
            record["ok"] = True
    record["seconds"] = round(time.monotonic() - started, 1)
    if record["ok"]:
        listed = subprocess.run([str(tc.python), "-m", "pip", "list", "--format", "json"],
                                capture_output=True, text=True, check=False)  # fmt: skip
        versions = {p["name"].lower(): p["version"] for p in json.loads(listed.stdout or "[]")}
        keep = set(_pinned_names(tc)) | set(KEY_DEPS)
        record["versions"] = {k: v for k, v in sorted(versions.items()) if k in keep}
        record["packages_installed"] = len(versions)
    record["bytes"] = sum(p.stat().st_size for p in tc.venv.rglob("*") if p.is_file()
                          and not p.is_symlink())  # fmt: skip
    if tc.venv.exists():
        record_file.write_text(json.dumps(record, indent=1))
    return record


# -- the runner inside a toolchain's environment --------------------------------------------------
Outputs = list[tuple[str, Any]]
"""A toolchain's outputs: name (the model's where the toolchain keeps it) and array."""
Stage = Callable[[str], None]
"""Called with the stage a runner enters (convert, run)."""

BOILERPLATE = re.compile(
    r"^(Check '.*' failed at \S+|Exception from \S+|Traceback .*|in user code:"
    r"|File \".*\", line \d+.*|lambda \*inputs : .*|return .*|\w+ = .*)$"
)
"""Lines of a message that say where, not what (OpenVINO's first lines, TensorFlow's stack)."""


def _first_line(exc: BaseException) -> str:
    """The exception's first informative lines (up to three, 300 characters)."""
    lines = [re.sub(r"^\S+\.py:\d+:\d+: ", "", ln.strip()) for ln in str(exc).splitlines()]
    lines = [ln for ln in lines if ln and not re.fullmatch(r"[\^~ ]*|main\(\)", ln)]
    lines = [ln for ln in lines if not BOILERPLATE.match(ln)] or lines
    return f"{type(exc).__name__}: {' | '.join(lines[:3])[:300]}"


def _run_onnxruntime(model: Path, job: Mapping[str, Any], feeds: dict[str, np.ndarray],
                     work: Path, stage: Stage) -> Outputs:  # fmt: skip
    """onnxruntime's CPU provider with its default graph optimizations, one thread."""
    import onnxruntime as ort

    stage("convert")
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    stage("run")
    names = [i.name for i in session.get_inputs()]
    outputs = session.run(None, {n: feeds[n] for n in names})
    return [(o.name, v) for o, v in zip(session.get_outputs(), outputs, strict=True)]


def _run_openvino(model: Path, job: Mapping[str, Any], feeds: dict[str, np.ndarray],
                  work: Path, stage: Stage) -> Outputs:  # fmt: skip
    """``openvino.convert_model(path)``, ``compile_model(m, "CPU")`` (one thread, float32:
    the default on a CPU with AMX or AVX512-BF16 is bfloat16, which no model here passes),
    infer."""
    import openvino as ov

    stage("convert")
    converted = ov.convert_model(str(model))
    compiled = ov.compile_model(
        converted, "CPU", {"INFERENCE_NUM_THREADS": 1, "INFERENCE_PRECISION_HINT": "f32"}
    )
    stage("run")
    given = {}
    for port in compiled.inputs:
        names = port.get_names()
        name = next((n for n in job["inputs"] if n in names), None)
        if name is None:
            raise KeyError(f"input {sorted(names)} has no feed")
        given[port] = feeds[name]
    result = compiled.create_infer_request().infer(given)
    found = []
    for port in compiled.outputs:
        names = port.get_names()
        name = next((n for n in job["outputs"] if n in names), port.get_any_name())
        found.append((name, np.asarray(result[port])))
    return found


NCNN_DTYPES = {"float32": "f32", "float64": "f64", "float16": "f16", "int64": "i64",
               "int32": "i32", "int16": "i16", "int8": "i8", "uint8": "u8",
               "bool": "u8"}  # fmt: skip
"""pnnx's type suffixes in ``inputshape=``."""


def _run_pnnx(model: Path, job: Mapping[str, Any], feeds: dict[str, np.ndarray],
              work: Path, stage: Stage) -> Outputs:  # fmt: skip
    """``pnnx model.onnx inputshape=[...]f32,...`` (the feeds' shapes) writes ncnn's param and
    bin; the ncnn package runs them as pnnx's generated ``*_ncnn.py`` does (blobs in0.. and
    out0.., the batch axis given as ``batch_index`` where the script does)."""
    import importlib.util

    import ncnn

    stage("convert")
    spec = importlib.util.find_spec("pnnx")  # the executable; importing pnnx imports torch
    exe = Path(next(iter(spec.submodule_search_locations or []))) / "pnnx"
    arrays = [feeds[n] for n in job["inputs"]]
    shapes = ",".join(
        f"[{','.join(str(d) for d in a.shape)}]{NCNN_DTYPES.get(str(a.dtype), 'f32')}"
        for a in arrays
    )
    stem = work / "m"
    outs = {"pnnxparam": "m.pnnx.param", "pnnxbin": "m.pnnx.bin", "pnnxpy": "m_pnnx.py",
            "pnnxonnx": "m.pnnx.onnx", "ncnnparam": "m.ncnn.param", "ncnnbin": "m.ncnn.bin",
            "ncnnpy": "m_ncnn.py"}  # fmt: skip
    cmd = [str(exe), str(model), f"inputshape={shapes}"]
    cmd += [f"{k}={work / v}" for k, v in outs.items()] + ["fp16=0"]
    # from the model's folder, as a user runs it: pnnx loads the model into onnxruntime from
    # bytes, which finds external data only relative to the working directory
    done = subprocess.run(cmd, cwd=model.parent, capture_output=True, text=True, check=False)
    (work / "pnnx.log").write_text(done.stdout[-20000:] + done.stderr[-20000:])
    param, script = work / outs["ncnnparam"], work / outs["ncnnpy"]
    if done.returncode or not param.exists():
        lines = [ln for ln in (done.stderr + done.stdout).splitlines() if ln.strip()]
        bad = [ln for ln in lines if re.search(r"error|fail|not supported|unsupported|abort",
                                               ln, re.I)]  # fmt: skip
        raise RuntimeError(f"pnnx exit {done.returncode}: " + (bad or lines or ["?"])[0][:300])
    text = script.read_text() if script.exists() else ""
    stage("run")
    net = ncnn.Net()
    net.opt.use_vulkan_compute = False
    net.opt.num_threads = 1
    for flag in (
        "use_fp16_packed",
        "use_fp16_storage",
        "use_fp16_arithmetic",
        "use_bf16_storage",
    ):  # float32 throughout, as pnnx's fp16=0 weights
        if hasattr(net.opt, flag):
            setattr(net.opt, flag, False)
    layers = [ln.split()[0] for ln in param.read_text().splitlines()[2:] if ln.strip()]
    missing = sorted({t for t in layers if ncnn.layer_to_index(t) < 0})
    if missing:
        raise RuntimeError(f"ncnn has no layer {', '.join(missing)}")
    if net.load_param(str(param)) or net.load_model(str(stem) + ".ncnn.bin"):
        raise RuntimeError("ncnn cannot load the param/bin pnnx wrote")
    blobs_in = re.findall(r'ex\.input\("(\w+)",\s*([^\n]*)', text)
    blobs_out = re.findall(r'ex\.extract\("(\w+)"\)', text)
    if len(blobs_in) != len(arrays):
        raise RuntimeError(f"pnnx wrote {len(blobs_in)} inputs, the model has {len(arrays)}")
    found = []
    with net.create_extractor() as ex:
        for (blob, how), array in zip(blobs_in, arrays, strict=True):
            kind = np.int32 if array.dtype.kind in "biu" else np.float32  # as *_ncnn.py feeds
            a = np.ascontiguousarray(array.astype(kind))
            batch = re.search(r"batch_index=(\d+)", how)
            mat = ncnn.Mat(a, batch_index=int(batch.group(1))) if batch else ncnn.Mat(a)
            ex.input(blob, mat.clone())
        for k, blob in enumerate(blobs_out):
            ret, mat = ex.extract(blob)
            if ret:
                raise RuntimeError(f"ncnn extract {blob} returned {ret}")
            batch = re.search(rf"\b{blob}\.numpy\(batch_index=(\d+)\)", text)
            out = mat.numpy(batch_index=int(batch.group(1))) if batch else mat.numpy()
            name = job["outputs"][k] if k < len(job["outputs"]) else blob
            found.append((name, np.array(out)))
    return found


def _run_mnn(model: Path, job: Mapping[str, Any], feeds: dict[str, np.ndarray],
             work: Path, stage: Stage) -> Outputs:  # fmt: skip
    """MNN's converter (``_tools.mnnconvert``, what ``mnnconvert -f ONNX --modelFile
    --MNNModel --bizCode`` calls, without the script's logging), then
    ``MNN.nn.load_module_from_file`` run on the feeds (integers as int32, as MNN takes them)."""
    stage("convert")
    out = work / "m.mnn"
    import _tools

    _tools.mnnconvert(["mnnconvert", "-f", "ONNX", "--modelFile", str(model),
                       "--MNNModel", str(out), "--bizCode", "biz"])  # fmt: skip
    if not out.exists() or out.stat().st_size == 0:
        raise RuntimeError("mnnconvert wrote nothing")
    stage("run")
    import MNN
    import MNN.expr as F

    module = MNN.nn.load_module_from_file(str(out), list(job["inputs"]), list(job["outputs"]))
    given = []
    for name in job["inputs"]:
        a = feeds[name]
        if a.dtype.kind == "f":
            given.append(F.const(a.astype(np.float32), list(a.shape), F.NCHW, F.float))
        else:
            given.append(F.const(a.astype(np.int32), list(a.shape), F.NCHW, F.int))
    results = module.forward(given)
    if not isinstance(results, list | tuple):
        results = [results]
    found = []
    for name, var in zip(job["outputs"], results, strict=False):
        plain = F.convert(var, F.NCHW) if var.data_format == F.NC4HW4 else var
        found.append((name, np.array(plain.read())))
    return found


def _run_onnx2torch(model: Path, job: Mapping[str, Any], feeds: dict[str, np.ndarray],
                    work: Path, stage: Stage) -> Outputs:  # fmt: skip
    """``onnx2torch.convert(onnx.load(path))``, called on the feeds as torch tensors."""
    import onnx
    import torch
    from onnx2torch import convert

    torch.set_num_threads(1)
    stage("convert")
    module = convert(onnx.load(str(model)))
    module.eval()
    stage("run")
    with torch.no_grad():
        result = module(*[torch.from_numpy(np.ascontiguousarray(feeds[n])) for n in job["inputs"]])
    flat: list[Any] = []

    def walk(x: Any) -> None:
        if isinstance(x, list | tuple):
            for y in x:
                walk(y)
        elif isinstance(x, dict):
            for y in x.values():
                walk(y)
        else:
            flat.append(x.detach().numpy() if hasattr(x, "detach") else np.asarray(x))

    walk(result)
    return [(job["outputs"][k] if k < len(job["outputs"]) else f"out{k}", a)
            for k, a in enumerate(flat)]  # fmt: skip


def _run_onnx2tf(model: Path, job: Mapping[str, Any], feeds: dict[str, np.ndarray],
                 work: Path, stage: Stage) -> Outputs:  # fmt: skip
    """``onnx2tf.convert`` with the feeds' shapes (``overwrite_input_shape``) to the float32
    TFLite model, run by TensorFlow's interpreter through its signature; 4-D and wider feeds
    are moved to channels-last where the TFLite input asks for it."""
    stage("convert")
    import onnx2tf
    import onnx2tf.onnx2tf as entry
    import onnx2tf.utils.common_functions as common

    # onnx2tf fetches sample images from GitHub for the dummy inference of 4-D models unless
    # the file is in the working directory: give it local random images, never the network
    rng = np.random.default_rng(0)
    sample = rng.random((20, 128, 128, 3), dtype=np.float32)
    np.save(work / "calibration_image_sample_data_20x128x128x3_float32.npy", sample)
    common.download_test_image_data = entry.download_test_image_data = lambda: sample
    onnx2tf.convert(
        input_onnx_file_path=str(model), output_folder_path=str(work / "tf"),
        overwrite_input_shape=[f"{n}:{','.join(str(d) for d in feeds[n].shape)}"
                               for n in job["inputs"]],
        non_verbose=True,
    )  # fmt: skip
    found_files = sorted((work / "tf").glob("*_float32.tflite"))
    if not found_files:
        raise RuntimeError("onnx2tf wrote no *_float32.tflite")
    stage("run")
    import tensorflow as tf

    interpreter = tf.lite.Interpreter(model_path=str(found_files[0]), num_threads=1)
    runner = interpreter.get_signature_runner()
    details = runner.get_input_details()
    given = {}

    def norm(s: str) -> str:
        return re.sub(r"[^0-9a-z]", "_", s.lower())

    for name in job["inputs"]:
        key = next((k for k in details if norm(k) == norm(name)), None)
        if key is None:
            raise KeyError(f"no TFLite input for {name!r} (has {sorted(details)})")
        a = feeds[name]
        want = tuple(details[key]["shape"])
        if a.ndim >= 3 and tuple(a.shape) != want:
            last = np.moveaxis(a, 1, -1)
            if tuple(last.shape) == want:
                a = last
        given[key] = a.astype(details[key]["dtype"])
    result = runner(**given)
    found = []
    for k, name in enumerate(job["outputs"]):
        key = next((o for o in result if norm(o) == norm(name)), None)
        if key is None:
            key = list(result)[k] if k < len(result) else None
        if key is not None:
            found.append((name, np.asarray(result[key])))
    return found


RUNNERS: dict[str, Callable[..., Outputs]] = {
    "onnxruntime": _run_onnxruntime, "openvino": _run_openvino, "pnnx": _run_pnnx,
    "mnn": _run_mnn, "onnx2torch": _run_onnx2torch, "onnx2tf": _run_onnx2tf,
}  # fmt: skip


def _toolchain_child(args: argparse.Namespace) -> None:
    """In the toolchain's environment: convert and run one variant, writing the stage it is
    in, then the outputs (``outputs.npz``) or the stage's first error line, to ``result.json``."""
    work = Path(args.work)
    job = json.loads(Path(args.job).read_text())
    result: dict[str, Any] = {"stage": "start"}
    result_file = work / "result.json"
    times: dict[str, float] = {}
    started = [time.monotonic()]

    def stage(name: str) -> None:
        now = time.monotonic()
        times[result["stage"]] = round(now - started[0], 2)
        started[0] = now
        result["stage"] = name
        result_file.write_text(json.dumps(result))

    with np.load(args.feeds, allow_pickle=True) as data:
        feeds = {name: data[f"i{k}"] for k, name in enumerate(job["all_inputs"])}
    try:
        outputs = RUNNERS[args.toolchain](Path(args.model), job, feeds, work, stage)
    except BaseException as exc:  # noqa: BLE001  (the toolchain's failure is the result)
        result["error"] = _first_line(exc)
        result["traceback"] = traceback.format_exc()[-2000:]
    else:
        if len(outputs) < len(job["outputs"]):  # a run that lost outputs failed to run
            result["error"] = (f"the toolchain gave {len(outputs)} outputs, the model has "
                               f"{len(job['outputs'])}")  # fmt: skip
        else:
            result["outputs"] = [n for n, _ in outputs]
            arrays = {f"o{k}": np.asarray(a) for k, (_, a) in enumerate(outputs)}
            np.savez(work / "outputs.npz", **arrays)
            stage("done")
    times[result["stage"]] = round(time.monotonic() - started[0], 2)
    result["seconds"] = times
    result_file.write_text(json.dumps(result))


# -- processes with a time and memory limit -------------------------------------------------------
LIVE: set[int] = set()
"""The process groups of the children running now, ended with the run."""


STOPPING = threading.Event()
"""Set when the run is stopped: no child starts after it."""


def _stop(signum: int, _frame: Any) -> None:
    STOPPING.set()
    for pid in list(LIVE):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
    raise SystemExit(128 + signum)


LIMITED = (
    "import os, resource, sys; n = int(sys.argv[1]); "
    "resource.setrlimit(resource.RLIMIT_AS, (n, n)); os.execvp(sys.argv[2], sys.argv[2:])"
)
"""Run argv[2:] with an address-space limit of argv[1] bytes."""


def _spawn(cmd: list[str], *, timeout: float, mem_gib: float, cwd: Path | None = None,
           env: Mapping[str, str] | None = None) -> dict[str, Any]:  # fmt: skip
    """Run ``cmd`` in its own process group with an address-space limit; its exit code, output,
    seconds, and whether it was killed after ``timeout``."""
    if STOPPING.is_set():
        raise RuntimeError("the run was stopped")
    limit = int(mem_gib * (1 << 30))
    if limit > 0:  # set in the child before exec (a preexec_fn is unsafe with threads)
        cmd = [sys.executable, "-c", LIMITED, str(limit), *cmd]
    started = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=cwd, env=dict(env or os.environ), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, errors="replace",
                            start_new_session=True)  # fmt: skip
    LIVE.add(proc.pid)
    timed_out = False
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
    finally:
        LIVE.discard(proc.pid)
        with contextlib.suppress(ProcessLookupError):  # what the child left running
            os.killpg(proc.pid, signal.SIGKILL)
    return {"exit": proc.returncode, "stdout": out or "", "stderr": err or "",
            "timeout": timed_out, "seconds": round(time.monotonic() - started, 1)}  # fmt: skip


def _error_line(text: str, exit_code: int | None = None) -> str:
    """The line of a child's output that says what went wrong."""
    lines = [ln.strip(" │╭╰─") for ln in text.splitlines() if ln.strip(" │╭╰─")]
    pattern = r"Error|Exception|error:|Abort|Assert|terminate|Segmentation|Killed|what\(\)"
    bad = [ln for ln in lines if re.search(pattern, ln)]
    line = (bad or lines or [f"exit {exit_code}"])[-1][:300]
    oom = ("MemoryError", "bad_alloc", "Cannot allocate memory", "out of memory")
    if any(o in text for o in oom):
        line = f"out of memory (address-space limit): {line}"
    elif exit_code is not None and exit_code < 0:
        line = f"killed by signal {-exit_code}: {line}"
    return line


# -- the models, their feeds and reference outputs ------------------------------------------------
def models(cache: Path) -> list[dict[str, Any]]:
    """The wild models onnxruntime runs (per ``wild.json``) and the exporter fixtures: id and
    file."""
    found = []
    if WILD_JSON.exists():
        results = json.loads(WILD_JSON.read_text())["models"]
        manifest = json.loads((cache / "manifest.json").read_text())
        for m in manifest["models"]:
            if results.get(m["id"], {}).get("steps", {}).get("observe", {}).get("loads"):
                found.append({"id": m["id"], "file": str(cache / m["file"]), "wild": True,
                              "producer": f"{m['producer_name']} {m['producer_version']}".strip(),
                              "flags": m["flags"]})  # fmt: skip
    for path in sorted(FIXTURES.rglob("*.onnx")):
        found.append({"id": f"exporters/{path.relative_to(FIXTURES).as_posix()}",
                      "file": str(path), "wild": False, "producer": "", "flags": []})  # fmt: skip
    return found


def _prepare_child(args: argparse.Namespace) -> None:
    """In this environment: the feeds (first of ``wild.observe_with``), the original's outputs
    on onnxruntime and its noise floor, as ``wild.measure_model`` computes them."""
    import onnx
    import wild

    work = Path(args.work)
    path = Path(args.model)
    _, tables = wild.load_data()
    spec = wild.feed_spec(args.id, tables) if args.wild else wild.FeedSpec()
    proto = onnx.load(path)
    observation = wild.observe_with(proto, path, spec)
    info: dict[str, Any] = {"loads": False}
    if isinstance(observation, str):
        info["error"] = observation
        (work / "prepare.json").write_text(json.dumps(info))
        return
    observed, exposed_outputs = observation
    feeds = observed.feeds[0]
    session = wild._session(path)
    want = session.run(None, feeds)
    noise, optimized_error = 0.0, ""
    try:
        fast = wild._session(path, optimized=True).run(None, feeds)
        noise = max((wild._float_diff(a, b) for a, b in zip(want, fast, strict=True)), default=0)
    except Exception as exc:  # noqa: BLE001
        optimized_error = wild._first_line(exc)
    exposed = max((wild._float_diff(a, b) for a, b in zip(want, exposed_outputs, strict=False)),
                  default=0)  # fmt: skip
    floor = max(noise, exposed)
    names = list(feeds)
    np.savez(work / "feeds.npz", **{f"i{k}": feeds[n] for k, n in enumerate(names)})
    with (work / "want.pkl").open("wb") as f:
        pickle.dump(want, f)
    info.update({
        "loads": True,
        "inputs": [[n, list(feeds[n].shape), str(feeds[n].dtype)] for n in names],
        "outputs": [o.name for o in session.get_outputs()],
        "bindings": observed.bindings[0] if observed.bindings else {},
        "noise": floor if np.isfinite(floor) else None,
        "optimized_error": optimized_error,
        "feed_spec": spec.to_json(),
    })  # fmt: skip
    (work / "prepare.json").write_text(json.dumps(info))


def _variant_child(args: argparse.Namespace) -> None:
    """In this environment: onnxsim's or onnxslim's output, as ``fold.py`` makes it."""
    import fold

    fold.child(args.tool, args.model, args.dst, args.external)


def _graph_io(path: Path) -> tuple[list[str], list[str]]:
    """A model's graph inputs (without initializers) and outputs, its weights not read."""
    import onnx

    proto = onnx.load(str(path), load_external_data=False)
    inits = {t.name for t in proto.graph.initializer}
    return ([i.name for i in proto.graph.input if i.name not in inits],
            [o.name for o in proto.graph.output])  # fmt: skip


def _copy_model(src: Path, dst: Path) -> None:
    """Copy a model with the external data files it names."""
    import onnx
    import wild

    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)
    for location in wild._external_locations(onnx.load(str(src), load_external_data=False)):
        target = dst.parent / location
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src.parent / location, target)


def _has_for() -> bool:
    """Whether ``onnxforge optimize --help`` lists ``--for``."""
    import wild

    done = subprocess.run([*wild._cli(), "optimize", "--help"], capture_output=True, text=True,
                          check=False, env={**os.environ, "COLUMNS": "200"})  # fmt: skip
    return re.search(r"--for(?![\w-])", done.stdout + done.stderr) is not None


# -- comparing ------------------------------------------------------------------------------------
LAYOUTS = frozenset({"pnnx", "onnx2tf"})
"""Toolchains whose outputs come in their own layout (ncnn: no batch axis; TFLite:
channels-last), read back in the original's shape where the element count allows."""


def _compare(want: list[Any], got: list[tuple[str, np.ndarray]], names: list[str],
             noise: float, toolchain: str) -> tuple[bool, str, list[str]]:  # fmt: skip
    """Whether ``got`` computes ``want`` (``wild._differs``), why not, and what was adapted:
    outputs matched by name where every name matches, else by position; integer and
    boolean outputs cast to the original's type, float ones to it where it is wider or
    narrower (MNN computes int64 as int32); for ncnn and TFLite, whose tensors have no batch
    axis or are channels-last, an output with the original's element count is reshaped to
    its shape, a channels-last one moved back. Elsewhere a shape must match."""
    import wild

    notes: list[str] = []
    by_name = dict(got)
    if all(n in by_name for n in names):
        pairs = [(n, w, by_name[n]) for n, w in zip(names, want, strict=True)]
    else:
        if len(got) != len(want):
            return False, f"{len(got)} outputs, the original {len(want)}", notes
        pairs = [(n, w, g) for n, w, (_, g) in zip(names, want, got, strict=True)]
    worst, why = 0.0, ""
    for name, w, given in pairs:
        if not isinstance(w, np.ndarray):
            return False, f"{name}: the original's output is a {type(w).__name__}", notes
        g = np.asarray(given)
        if g.dtype != w.dtype and g.dtype.kind in "biuf" and w.dtype.kind in "biuf":
            notes.append(f"{name}: {g.dtype} as {w.dtype}")
            g = np.rint(g).astype(w.dtype) if w.dtype.kind in "biu" and g.dtype.kind == "f" \
                else g.astype(w.dtype)  # fmt: skip
        if g.shape != w.shape and toolchain in LAYOUTS:
            moved = np.moveaxis(g, -1, 1) if g.ndim >= 3 else g
            if g.ndim == w.ndim and moved.shape == w.shape:
                notes.append(f"{name}: channels-last {list(g.shape)}")
                g = moved
            elif g.size == w.size:
                notes.append(f"{name}: shape {list(g.shape)} read as {list(w.shape)}")
                g = g.reshape(w.shape)
        with warnings.catch_warnings():  # all-NaN outputs
            warnings.simplefilter("ignore", RuntimeWarning)
            excess, reason = wild._differs(w, g, noise)
        if excess > worst or (reason and not why):
            worst, why = excess, f"{name}: {reason}"
    return not why, why, notes


# -- one model ------------------------------------------------------------------------------------
@dataclass
class Context:
    toolchains: dict[str, Toolchain]
    chosen: list[str]
    variants: list[str]
    timeout: float
    mem_gib: float
    force: bool
    stored: dict[str, Any]
    lock: threading.Lock
    on_save: Callable[[], None]
    env: dict[str, str] = field(default_factory=dict)
    code: str = ""  # the commit (and files modified) of the snapshot the onnxforge commands run


def measure_model(entry: Mapping[str, Any], ctx: Context) -> None:
    """Every cell (toolchain x variant) of one model that the results do not hold yet."""
    with ctx.lock:
        result = ctx.stored["models"].setdefault(entry["id"], {"id": entry["id"]})
        result.update({"producer": entry["producer"], "flags": entry["flags"]})
        cells = result.setdefault("cells", {})
    code = ctx.code
    wanted = [(t, v) for t in ctx.chosen for v in ctx.variants]
    todo = [(t, v) for t, v in wanted if ctx.force or v not in cells.get(t, {})]
    if not todo:
        return
    work = CACHE / "work" / re.sub(r"[^\w.-]+", "_", entry["id"])
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    py = sys.executable
    me = str(Path(__file__).resolve())
    try:
        ran = _spawn([py, me, "_prepare", "--id", entry["id"], "--model", entry["file"],
                      "--work", str(work)] + (["--wild"] if entry["wild"] else []),
                     timeout=ctx.timeout, mem_gib=ctx.mem_gib, env=ctx.env)  # fmt: skip
        if STOPPING.is_set():
            return
        prep_file = work / "prepare.json"
        info = json.loads(prep_file.read_text()) if prep_file.exists() else {
            "loads": False, "error": "timeout" if ran["timeout"] else
            _error_line(ran["stderr"], ran["exit"])}  # fmt: skip
        with ctx.lock:
            result["prepare"] = {k: info.get(k) for k in
                                 ("loads", "error", "inputs", "bindings", "noise")}  # fmt: skip
            ctx.on_save()
        if not info.get("loads"):
            return
        with (work / "want.pkl").open("rb") as f:
            want = pickle.load(f)
        noise = info.get("noise") or 0.0
        made: dict[str, dict[str, Any]] = result.setdefault("variants", {})
        paths: dict[str, Path] = {}

        def variant(name: str, tc: Toolchain) -> Path | None:
            key = name if name != "onnxforge --for" else f"onnxforge --for {tc.for_name}"
            if key in paths:
                return paths[key]
            dst = work / re.sub(r"\W+", "_", key) / "model.onnx"
            dst.parent.mkdir(parents=True, exist_ok=True)
            record: dict[str, Any] = {}
            src = Path(entry["file"])
            if name == "original":
                _copy_model(src, dst)
                ran = None
            elif name in ("onnxsim", "onnxslim"):
                ran = _spawn([py, me, "_variant", "--tool", name, "--model", str(src),
                              "--dst", str(dst)], timeout=ctx.timeout, mem_gib=ctx.mem_gib,
                             env=ctx.env)  # fmt: skip
                lines = [ln for ln in ran["stdout"].splitlines() if ln.startswith("{")]
                told = json.loads(lines[-1]) if lines else {}
                if told.get("error"):
                    record["error"] = told["error"]
                if told.get("notes"):
                    record["notes"] = told["notes"]
            else:
                import wild

                argv = [*wild._cli(), "optimize", str(src), "-o", str(dst)]
                if name == "onnxforge --for":
                    argv += ["--for", tc.for_name]
                    for n, shape, _ in info["inputs"] if tc.shapes else ():
                        argv += ["--input-shape", f"{n}={','.join(str(d) for d in shape)}"]
                ran = _spawn(argv, timeout=ctx.timeout, mem_gib=ctx.mem_gib, env=ctx.env)
                if ran["exit"]:
                    record["error"] = _error_line(ran["stderr"], ran["exit"])
            if ran is not None:
                record["seconds"] = ran["seconds"]
                if ran["timeout"]:
                    record["error"] = f"timeout after {ctx.timeout:.0f} s"
                elif not dst.exists() and "error" not in record:
                    record["error"] = _error_line(ran["stderr"] + ran["stdout"], ran["exit"])
            record["made"] = dst.exists() and "error" not in record
            record["code"] = code
            with ctx.lock:
                made[key] = record
            paths[key] = dst if record["made"] else None
            return paths[key]

        for tc_name, var in todo:
            tc = ctx.toolchains[tc_name]
            cell = _cell_run(tc, var, variant(var, tc), made=made, work=work, info=info,
                             want=want, noise=noise, ctx=ctx)  # fmt: skip
            if STOPPING.is_set():  # the child was killed by the stop, not by the toolchain
                return
            cell["code"] = code
            with ctx.lock:
                cells.setdefault(tc_name, {})[var] = cell
                ctx.on_save()
    finally:
        shutil.rmtree(work, ignore_errors=True)


GENERIC = frozenset({"RuntimeError: ncnn cannot load the param/bin pnnx wrote",
                     "RuntimeError: mnnconvert wrote nothing"})  # fmt: skip
"""Runner errors whose reason only the toolchain's own output on stderr gives."""


def _cell_run(tc: Toolchain, var: str, model: Path | None, *,
              made: Mapping[str, Any], work: Path, info: Mapping[str, Any], want: list[Any],
              noise: float, ctx: Context) -> dict[str, Any]:  # fmt: skip
    """One toolchain on one variant: status ok or the failing stage, its first error line."""
    if model is None:
        key = var if var != "onnxforge --for" else f"onnxforge --for {tc.for_name}"
        return {"status": "variant", "error": made.get(key, {}).get("error", "not written")}
    cell_dir = work / (tc.name + "-" + re.sub(r"\W+", "_", var))
    shutil.rmtree(cell_dir, ignore_errors=True)
    cell_dir.mkdir()
    inputs, outputs = _graph_io(model)
    all_inputs = [n for n, _, _ in info["inputs"]]
    job = {"inputs": [n for n in inputs if n in all_inputs], "outputs": outputs,
           "all_inputs": all_inputs}  # fmt: skip
    (cell_dir / "job.json").write_text(json.dumps(job))
    ran = _spawn([str(tc.python), str(Path(__file__).resolve()), "_toolchain", "--toolchain",
                  tc.name, "--model", str(model), "--feeds", str(work / "feeds.npz"),
                  "--job", str(cell_dir / "job.json"), "--work", str(cell_dir)],
                 timeout=ctx.timeout, mem_gib=ctx.mem_gib, cwd=cell_dir, env=ctx.env)  # fmt: skip
    result_file = cell_dir / "result.json"
    told = json.loads(result_file.read_text()) if result_file.exists() else {"stage": "convert"}
    cell: dict[str, Any] = {"seconds": ran["seconds"]}
    stage = told.get("stage", "convert")
    stage = "convert" if stage == "start" else stage
    if stage != "done":
        cell["status"] = stage
        if ran["timeout"]:
            cell["error"] = f"timeout after {ctx.timeout:.0f} s"
        elif told.get("error"):
            cell["error"] = told["error"]
            native = [ln for ln in (ran["stdout"] + "\n" + ran["stderr"]).splitlines()
                      if re.search(r"fail|error|not support|unsupport", ln, re.I)
                      and not re.search(r"Converted Failed|^Traceback|^  ", ln)]  # fmt: skip
            if told["error"] in GENERIC and native:  # what the C++ side printed
                cell["error"] += f" ({native[-1].strip()[:200]})"
        else:
            cell["error"] = _error_line(ran["stderr"] + "\n" + ran["stdout"], ran["exit"])
        if ran["exit"] and not told.get("error"):
            cell["crash"] = ran["exit"]
        shutil.rmtree(cell_dir, ignore_errors=True)
        return cell
    with np.load(cell_dir / "outputs.npz", allow_pickle=True) as data:
        got = [(n, data[f"o{k}"]) for k, n in enumerate(told["outputs"])]
    shutil.rmtree(cell_dir, ignore_errors=True)
    same, why, notes = _compare(want, got, info["outputs"], noise, tc.name)
    cell["status"] = "ok" if same else "compare"
    if why:
        cell["error"] = why
    if notes:
        cell["notes"] = notes[:5]
    return cell


# -- the report -----------------------------------------------------------------------------------
def _short(text: Any) -> str:
    """Paths shortened to their file names."""
    return re.sub(r"(?<![\w.])/(?:[\w.+-]+/)+([\w.+-]+)", r"\1", str(text))


def _cell(text: Any, width: int = 220) -> str:
    """Text for a table cell or list item: one line, paths shortened to their file names."""
    return _short(text).replace("|", "\\|").replace("\n", " ")[:width]


def _reason(text: str) -> str:
    """A failure's message without names and numbers, to count alike failures together."""
    text = re.sub(r"^error: [\w.+-]+: ", "", _short(text))
    text = re.sub(r"'[^']*'|\"[^\"]*\"|`[^`]*`", "'…'", text)
    text = re.sub(r"\[[^\]]*\]", "[…]", text)
    text = re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "N", text)
    return text[:140]


def _codes(results: Mapping[str, Any]) -> str:
    """The code the onnxforge variants were made with, and how many models each."""
    found: Counter[str] = Counter()
    for r in results.values():
        found[
            r.get("variants", {})
            .get("onnxforge", {})
            .get("code", "not recorded (runs before the code was kept per model)")
        ] += 1
    return "; ".join(f"{c} ({n} models)" for c, n in found.most_common())


def write_report(stored: Mapping[str, Any], out: Path) -> None:
    """``downstream.md``: per toolchain and variant the models that convert and compute the
    same, onnxforge's failures where another variant passes, then every failure."""
    meta = stored.get("meta", {})
    results = {k: v for k, v in stored.get("models", {}).items()
               if v.get("prepare", {}).get("loads")}  # fmt: skip
    not_loading = {k: v for k, v in stored.get("models", {}).items() if k not in results}
    tcs = [t for t in TOOLCHAINS if any(t in r.get("cells", {}) for r in results.values())]
    variants = [v for v in VARIANTS if any(v in c for r in results.values()
                                           for c in r.get("cells", {}).values())]  # fmt: skip
    lines = [
        "# Downstream toolchains: does the next tool take the model?",
        "",
        f"`python benchmarks/downstream.py run` (see the README). {meta.get('subset', '')}",
        "",
        f"{len(results)} models measured. onnxforge: {_codes(results)}. Tolerance: rtol 1e-3, "
        "atol 1e-4 + 4x the model's noise floor (`wild._differs`), against the original's "
        "outputs on onnxruntime (CPU, optimizations off) with the first feeds of "
        "`wild.observe_with`. A cell is ok when the toolchain converts the variant, runs it "
        "and computes those outputs; integer outputs "
        "may come back narrower (MNN), and ncnn's and TFLite's may drop the batch axis or be "
        "channels-last (all adapted, noted in the json).",
        "",
        "Settings: one thread each; float32 wherever a toolchain would otherwise pick less "
        "(OpenVINO's CPU default on this AMX machine is bfloat16: `INFERENCE_PRECISION_HINT` "
        "f32; pnnx `fp16=0` and ncnn's fp16/bf16 storage and arithmetic off; onnx2tf's "
        "`*_float32.tflite`); MNN at its default precision (High gives the same digits). pnnx "
        "and onnx2tf get the feeds' shapes; pnnx and onnx2tf simplify the model themselves "
        "(pnnx's own passes, onnx2tf runs onnxsim first), so their variants differ less.",
        "",
        "| toolchain | environment (pip, pinned in `downstream_toolchains.toml`) | installed "
        "| set up in | runs on |",
        "| --- | --- | --- | --- | --- |",
    ]
    data = load_toolchains() if DATA.exists() else {}
    for t in tcs:
        rec = meta.get("toolchains", {}).get(t, {})
        versions = ", ".join(f"{k} {v}" for k, v in rec.get("versions", {}).items())
        subset = data[t].models if t in data else ()
        runs_on = ("only " + ", ".join(f"`{g}`" for g in subset)) if subset else "every model"
        lines.append(f"| {t} | {versions} | {rec.get('bytes', 0) / 1e9:.2f} GB "
                     f"| {rec.get('seconds', 0):.0f} s | {runs_on} |")  # fmt: skip
    lines += [
        "",
        "## Models that convert and compute the same",
        "",
        "| toolchain | models | " + " | ".join(variants) + " |",
        "| --- | --- | " + " | ".join("---" for _ in variants) + " |",
    ]
    for t in tcs:
        rows = [r for r in results.values() if t in r.get("cells", {})]
        cells = []
        for v in variants:
            had = [r["cells"][t][v] for r in rows if v in r["cells"][t]]
            ok = sum(c["status"] == "ok" for c in had)
            cells.append(f"{ok}/{len(had)}" if had else "-")
        lines.append(f"| {t} | {len(rows)} | " + " | ".join(cells) + " |")
    made = Counter()
    tried = Counter()
    for r in results.values():
        for key, rec in r.get("variants", {}).items():
            base = "onnxforge --for" if key.startswith("onnxforge --for") else key
            tried[base] += 1
            made[base] += bool(rec.get("made"))
    lines += [
        "| *variant written* | | " + " | ".join(f"{made[v]}/{tried[v]}" for v in variants)
        + " |",
        "",
        "A cell counts the models of its row whose variant was written; a variant the tool "
        "did not write counts as a failure at stage `variant`. `onnxforge --for` is made per "
        "toolchain (`--for` ncnn for pnnx, torch for onnx2torch, tflite for onnx2tf, else the "
        "toolchain's name), with `--input-shape` of the feeds for pnnx and onnx2tf, which "
        "convert with static shapes (OpenVINO 2026.4 computes traceforge's T5 decoder wrong "
        "once its inputs are static, even when only onnx set them); its *variant written* "
        "counts every toolchain's.",
        "",
        "## onnxforge fails where another variant passes",
        "",
        "The toolchain takes the original, onnxsim's or onnxslim's output and computes the same, "
        "but not onnxforge's (the bugs to fix next):",
        "",
    ]  # fmt: skip
    regressions = []
    wins = []
    for t in tcs:
        for mid, r in results.items():
            c = r.get("cells", {}).get(t, {})
            for ours in ("onnxforge", "onnxforge --for"):
                if ours not in c:
                    continue
                passing = [v for v in ("original", "onnxsim", "onnxslim")
                           if c.get(v, {}).get("status") == "ok"]  # fmt: skip
                if c[ours]["status"] != "ok" and passing:
                    regressions.append(
                        f"- **{t}** `{mid}` ({ours}; passes: {', '.join(passing)}): "
                        f"{c[ours]['status']}: {_cell(c[ours].get('error', ''), 300)}"
                    )
                if c[ours]["status"] == "ok" and c.get("original", {}).get("status") not in (
                        None, "ok"):  # fmt: skip
                    wins.append(f"- **{t}** `{mid}` ({ours}): the original fails at "
                                f"{c['original']['status']}: "
                                f"{_cell(c['original'].get('error', ''), 200)}")  # fmt: skip
    lines += regressions or ["- none"]
    lines += ["", "## onnxforge's output passes where the original fails", ""]
    lines += wins or ["- none"]
    lines += ["", "## Failures by toolchain", ""]
    for t in tcs:
        failures = []
        reasons: Counter[str] = Counter()
        for mid, r in results.items():
            for v in variants:
                c = r.get("cells", {}).get(t, {}).get(v)
                if c and c["status"] != "ok":
                    failures.append(f"- `{mid}` **{v}** {c['status']}: "
                                    f"{_cell(c.get('error', ''), 300)}")  # fmt: skip
                    reasons[f"{c['status']}: {_reason(c.get('error', ''))}"] += 1
        lines += [f"### {t}: {len(failures)} failing cells", ""]
        if reasons:
            lines += ["| stage: reason | cells |", "| --- | --- |"]
            lines += [f"| {_cell(k, 200)} | {n} |" for k, n in reasons.most_common(15)]
            lines.append("")
        lines += failures or ["- none"]
        lines.append("")
    lines += ["## Per model", "",
              "Cells: ok, or the failing stage (variant, convert, run, compare).", "",
              "| model | producer | flags | " + " | ".join(f"{t}" for t in tcs) + " |",
              "| --- | --- | --- | " + " | ".join("---" for _ in tcs) + " |"]  # fmt: skip
    short = {"ok": "ok", "variant": "var", "convert": "conv", "run": "run", "compare": "cmp"}
    for mid, r in sorted(results.items()):
        row = []
        for t in tcs:
            c = r.get("cells", {}).get(t, {})
            row.append(" ".join(short.get(c[v]["status"], c[v]["status"]) if v in c else "-"
                                for v in variants))  # fmt: skip
        lines.append(
            f"| `{_cell(mid, 90)}` | {_cell(r.get('producer', ''), 30)} | "
            f"{_cell(','.join(r.get('flags', [])), 40)} | " + " | ".join(row) + " |"
        )
    lines += ["", f"Per-model cells list the variants in order: {', '.join(variants)}.", ""]
    if not_loading:
        lines += ["## Not measured: onnxruntime does not run the original with the feeds", ""]
        lines += [f"- `{k}`: {_cell(v.get('prepare', {}).get('error', ''), 240)}"
                  for k, v in sorted(not_loading.items())]  # fmt: skip
        lines.append("")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")


# -- the parent -----------------------------------------------------------------------------------
def _save_json(path: Path, data: Any) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str))
    tmp.replace(path)


def run(args: argparse.Namespace) -> None:
    toolchains = load_toolchains(args.data)
    if args.toolchains:
        chosen = [t for t in args.toolchains.split(",") if t]
        unknown = [t for t in chosen if t not in toolchains]
        if unknown:
            raise SystemExit(f"unknown toolchains {unknown}: the data file has "
                             f"{sorted(toolchains)}")  # fmt: skip
    else:
        chosen = [t for t, tc in toolchains.items() if tc.default]
    json_out = args.out.with_suffix(".json")
    stored = json.loads(json_out.read_text()) if json_out.exists() else {"models": {}}
    meta = stored.setdefault("meta", {})
    for t in chosen:
        started = time.monotonic()
        record = setup(toolchains[t])
        meta.setdefault("toolchains", {})[t] = record
        if not record.get("ok"):
            print(f"{t}: setup failed: {record.get('error')}", file=sys.stderr)
        elif time.monotonic() - started > 1:
            print(f"{t}: set up in {record['seconds']:.0f} s", file=sys.stderr)
    chosen = [t for t in chosen if meta["toolchains"][t].get("ok")]
    variants = [v for v in VARIANTS if v != "onnxforge --for" or _has_for()]
    if args.variants:  # the others' cells stay as the json holds them
        variants = [v for v in variants if v in args.variants.split(",")]
    cache = Path(os.environ.get("ONNXFORGE_WILD_DIR", "~/.cache/onnxforge/wild")).expanduser()
    every = models(cache)
    globs = [g for g in args.models.split(",") if g]
    todo = []
    for m in every:
        named = [t for t in chosen
                 if any(fnmatch.fnmatch(m["id"], g) for g in (globs or
                        toolchains[t].models or ["*"]))]  # fmt: skip
        if named:
            todo.append((m, named))
    if args.limit:
        todo = todo[: args.limit]
    lock = threading.Lock()
    import wild

    # the onnxforge commands import a copy of the code taken now (wild.snapshot): edits to the
    # work tree during a run that takes hours do not change what the later cells measure
    scratch = Path(tempfile.mkdtemp(prefix="onnxforge-downstream-"))
    snap = wild.snapshot(scratch / "code")
    code = snap["commit"] + (f" + modified {', '.join(snap['modified'])}"
                             if snap["modified"] else "")  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(scratch / "code"), str(BENCH)]),
           "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": "",
           **dict.fromkeys(("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"),
                           "http://127.0.0.1:9")}  # fmt: skip
    env["CI"] = "true"  # OpenVINO's convert_model sends telemetry unless it runs in CI
    # a toolchain that reaches for the network anyway (a model zoo, telemetry, sample data)
    # fails at once on the discard port instead of leaving the machine
    meta["code"] = code
    meta.setdefault("runs", []).append({
        "started": time.strftime("%Y-%m-%d %H:%M:%S"), "models": len(todo),
        "toolchains": chosen, "variants": variants, "timeout": args.timeout,
        "mem_limit_gib": args.mem_limit, "models_glob": args.models, "code": meta["code"],
    })  # fmt: skip
    if args.subset:
        meta["subset"] = args.subset

    def save() -> None:
        _save_json(json_out, stored)
        write_report(stored, args.out)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _stop)
    print(f"{len(todo)} models; toolchains {chosen}; variants {variants}", file=sys.stderr)
    started = time.monotonic()
    finished = []

    def one(item: tuple[dict[str, Any], list[str]]) -> None:
        m, named = item
        ctx = Context(toolchains=toolchains, chosen=named, variants=variants,
                      timeout=args.timeout, mem_gib=args.mem_limit, force=args.force,
                      stored=stored, lock=lock, on_save=save, env=env, code=code)  # fmt: skip
        try:
            measure_model(m, ctx)
        except Exception as exc:  # noqa: BLE001  (one model's harness failure is reported)
            if STOPPING.is_set():
                return
            with lock:
                stored["models"].setdefault(m["id"], {})["harness_error"] = _first_line(exc)
            traceback.print_exc()
        with lock:
            finished.append(m["id"])
            r = stored["models"].get(m["id"], {})
            summary = Counter(c["status"] for cs in r.get("cells", {}).values()
                              for c in cs.values())  # fmt: skip
            print(f"[{len(finished)}/{len(todo)} {time.monotonic() - started:.0f}s] {m['id']}: "
                  + (", ".join(f"{k} {n}" for k, n in sorted(summary.items())) or
                     str(r.get("prepare", {}).get("error", "")))[:200],
                  file=sys.stderr, flush=True)  # fmt: skip

    pool = concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs)
    try:
        for future in [pool.submit(one, item) for item in todo]:
            future.result()
    except BaseException:
        STOPPING.set()  # the model running now ends at its next child; the others never start
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
    p = sub.add_parser("setup", help="create the toolchains' virtual environments")
    p.add_argument("--toolchains", default="", help="a,b (default: all in the data file)")
    p.add_argument("--force", action="store_true", help="make them again")
    p.add_argument("--data", type=Path, default=DATA)
    p = sub.add_parser("run", help="convert and run every variant with every toolchain")
    p.add_argument("--models", default="", help="globs on the model ids, a,b,... (default: all; "
                   "a toolchain with a `models` list in the data file: those)")  # fmt: skip
    p.add_argument(
        "--toolchains", default="", help="a,b (default: those not marked default=false)"
    )
    p.add_argument("--limit", type=int, default=0, help="the first N models only")
    p.add_argument("--jobs", type=int, default=1, help="models at a time")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per child process")
    p.add_argument("--mem-limit", type=float, default=8.0, help="GiB of address space per child")
    p.add_argument("--force", action="store_true", help="rerun the cells the json holds")
    p.add_argument("--variants", default="",
                   help="a,b of " + ", ".join(VARIANTS) + " (default: all); with --force, "
                   "the onnxforge ones alone remeasure a code change")  # fmt: skip
    p.add_argument("--subset", default="", help="a sentence for the report: which models")
    p.add_argument("--data", type=Path, default=DATA)
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    p = sub.add_parser("report", help="rewrite the Markdown from the json")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    p = sub.add_parser("_prepare")
    p.add_argument("--id", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--wild", action="store_true")
    p = sub.add_parser("_variant")
    p.add_argument("--tool", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--dst", required=True)
    p.add_argument("--external", action="store_true")
    p = sub.add_parser("_toolchain")
    p.add_argument("--toolchain", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--feeds", required=True)
    p.add_argument("--job", required=True)
    p.add_argument("--work", required=True)
    args = parser.parse_args()
    if args.command == "setup":
        toolchains = load_toolchains(args.data)
        names = [t for t in args.toolchains.split(",") if t] or list(toolchains)
        for name in names:
            record = setup(toolchains[name], force=args.force)
            print(f"{name}: {'ok' if record.get('ok') else 'FAILED ' + str(record.get('error'))}"
                  f" in {record.get('seconds', 0):.0f} s, {record.get('bytes', 0) / 1e6:.0f} MB; "
                  f"{record.get('versions', {})}", file=sys.stderr)  # fmt: skip
    elif args.command == "run":
        run(args)
    elif args.command == "report":
        write_report(json.loads(args.out.with_suffix(".json").read_text()), args.out)
    elif args.command == "_prepare":
        _prepare_child(args)
    elif args.command == "_variant":
        _variant_child(args)
    else:
        _toolchain_child(args)


if __name__ == "__main__":
    main()
