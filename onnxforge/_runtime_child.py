"""Run a model in a runtime in a child process: `check --verify` and `optimize --check` use it.

A runtime that aborts (onnxruntime does on some invalid models) takes only the child down, and
the runtime's memory goes back to the system when the child ends, so two sessions of a large
model never stack in one process (a 2.3 GB model's --check peaked at 1.5x its size in-process).

``run_in_child`` (the parent's side) runs this file's text with ``python -c SOURCE RUNTIME
MODEL FOLDER`` in FOLDER (so nothing beside it shadows a module, and no onnxforge is
imported). FOLDER holds inputs.npz (every input set's arrays in order) and inputs.json
({"names": [...], "sets": N}); the child writes out_K.npy (every set's outputs in order; an
.npy per array: a zip of gigabytes of exposed values spent a second per gigabyte on checksums)
and prints one JSON line: {"ok": true, "outputs": M} or {"ok": false, "stage": "load" |
"run", "error": message}.
"""

from __future__ import annotations

__all__ = ["RUNTIMES", "ChildResult", "run_in_child"]

import json
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

RUNTIMES = ("onnxruntime", "onnxruntime-unoptimized", "openvino", "reference")
"""onnxruntime-unoptimized: graph optimizations off, so its fusions cannot hide a difference.
reference: onnx's ReferenceEvaluator, numpy computing in each value's own type (a float16
model in float16 throughout, as a GPU does; onnxruntime's CPU widens some half ops)."""


# -- the child ----------------------------------------------------------------------------------
def _one_line(exc: BaseException) -> str:
    lines = (line.strip() for line in str(exc).splitlines())
    return " ".join(line for line in lines if line)[:2000] or type(exc).__name__


def _onnxruntime(
    model: str, sets: list[dict[str, np.ndarray]], *, optimized: bool = True
) -> tuple[dict[str, Any], list[np.ndarray]]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    if not optimized:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    try:
        session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001  (any failure is the answer)
        return {"ok": False, "stage": "load", "error": _one_line(exc)}, []
    outputs: list[np.ndarray] = []
    try:
        for feeds in sets:
            outputs.extend(np.asarray(o) for o in session.run(None, feeds))
    except Exception as exc:  # noqa: BLE001
        return {"ok": False, "stage": "run", "error": _one_line(exc)}, []
    return {"ok": True, "outputs": len(session.get_outputs())}, outputs


def _openvino(
    model: str, sets: list[dict[str, np.ndarray]]
) -> tuple[dict[str, Any], list[np.ndarray]]:
    import openvino as ov

    core = ov.Core()
    try:
        compiled = core.compile_model(model, "CPU")
    except Exception as exc:  # noqa: BLE001
        return {"ok": False, "stage": "load", "error": _one_line(exc)}, []
    outputs: list[np.ndarray] = []
    try:
        request = compiled.create_infer_request()
        for feeds in sets:
            result = request.infer(feeds)
            outputs.extend(np.asarray(result[o]) for o in compiled.outputs)
    except Exception as exc:  # noqa: BLE001
        return {"ok": False, "stage": "run", "error": _one_line(exc)}, []
    return {"ok": True, "outputs": len(compiled.outputs)}, outputs


def reference_evaluator(proto: Any) -> Any:
    """onnx's ReferenceEvaluator for ``proto``, its gaps filled: GatherElements gathers with
    ``np.choose``, which takes 64 choices at most (a YOLO's top 300 of 8,400 boxes fails
    there, on the original as on any conversion); DequantizeLinear has no implementation
    before version 19 (onnx 1.23: "found 19, 21, ..."), so below opset 19 the latest runs
    it: its added attributes (block_size, output_dtype) default to versions 10 and 13's
    computation, and an unversioned op is given the latest schema's defaults; Loop joins
    its scan outputs with ``np.vstack``, a concatenation, where the spec stacks them on a
    new first axis (a TF while loop's [batch, units] per step came out [steps*batch,
    units]), so each is given that axis before it joins; BatchNormalization before version
    14 normalizes by the batch's own statistics whenever ``momentum`` is set, and the
    schema's default sets it (version 9), or whenever ``is_test`` is not (6 and 7): with one
    output (inference, as the spec has it) it normalizes by the stored ones (every Keras
    model exported at opsets 9 to 13 came out wrong: a captcha reader 0.12 of the range off
    at its first BatchNormalization); Resize-11's ``tf_half_pixel_for_nn`` (TF's nearest
    neighbour, tf2onnx's Keras UpSampling2D) is not known (``_tf_nearest``). Ops that sum
    many terms compute half inputs in float32 (``ACCUMULATING``)."""
    from onnx.reference import ReferenceEvaluator  # noqa: TID251
    from onnx.reference.op_run import OpRun  # noqa: TID251
    from onnx.reference.ops import (  # noqa: TID251
        op_batch_normalization,
        op_conv_transpose,
        op_dequantize_linear,
        op_loop,
        op_resize,
    )

    latest = max(
        (c for n, c in vars(op_dequantize_linear).items() if n.startswith("DequantizeLinear_")),
        key=lambda c: int(c.__name__.rsplit("_", 1)[1]),
    )

    class GatherElements(OpRun):
        op_domain = ""

        def _run(self, data, indices, axis=None):  # type: ignore[no-untyped-def]
            at = 0 if axis is None else int(axis) % max(data.ndim, 1)
            where = np.where(indices < 0, indices + data.shape[at], indices)
            return (np.take_along_axis(data, where, axis=at),)

    class DequantizeLinear(latest):  # type: ignore[misc,valid-type]
        op_domain = ""

    class Loop(op_loop.Loop):  # type: ignore[misc]
        op_domain = ""

        def __init__(self, onnx_node: Any, run_params: Any) -> None:
            super().__init__(onnx_node, run_params)
            body: Any = self._run_body  # type: ignore[has-type]  # OpRun sets it for the graph
            scans = self.K

            def stacked(*args: Any, **kwargs: Any) -> Any:
                outputs = list(body(*args, **kwargs))
                for k in range(len(outputs) - scans, len(outputs)):
                    outputs[k] = np.expand_dims(outputs[k], 0)
                return outputs

            self._run_body = stacked

    class BatchNormalization(OpRun):
        op_domain = ""

        def _run(self, x, scale, bias, mean, var, **attributes):  # type: ignore[no-untyped-def]
            epsilon = attributes.get("epsilon")
            epsilon = 1e-5 if epsilon is None else epsilon
            outputs = len(self.onnx_node.output)
            if outputs == 1 or attributes.get("is_test"):
                normalize = op_batch_normalization._batchnorm_test_mode
                return (normalize(x, scale, bias, mean, var, epsilon=epsilon),)
            momentum = attributes.get("momentum")
            train = op_batch_normalization._batchnorm_training_mode
            y, saved_mean, saved_var, mean, var = train(
                x, scale, bias, mean, var, 0.9 if momentum is None else momentum, epsilon
            )
            return (y, mean, var, saved_mean, saved_var)[:outputs]

    class Resize(op_resize.Resize):  # type: ignore[misc]
        op_domain = ""

        def _run(self, x, roi, scales=None, sizes=None, **attributes):  # type: ignore[no-untyped-def]
            mode = attributes.get("coordinate_transformation_mode")
            nearest = attributes.get("nearest_mode") or "round_prefer_floor"
            verified = ("floor", "round_prefer_floor", b"floor", b"round_prefer_floor")
            if mode not in ("tf_half_pixel_for_nn", b"tf_half_pixel_for_nn") or (
                nearest not in verified
            ):
                return super()._run(x, roi, scales, sizes, **attributes)
            return (_tf_nearest(x, scales, sizes, attributes),)

    opset = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), 0)
    added = [GatherElements, Loop, Resize, *([DequantizeLinear] if opset < 19 else [])]
    added += [BatchNormalization] if opset < 14 else []

    class ConvTranspose(op_conv_transpose.ConvTranspose):  # type: ignore[misc]
        op_domain = ""

        def _run(self, x, w, b=None, **attributes):  # type: ignore[no-untyped-def]
            return (_conv_transpose(x, w, b, attributes),)

    own = {"ConvTranspose": ConvTranspose}
    widened = [_accumulating_in_float32(t, opset, OpRun, own.get(t)) for t in ACCUMULATING]
    imports = {o.domain: o.version for o in proto.opset_import}
    alone = [_alone_in_onnxruntime(*key, imports, OpRun) for key in sorted(_foreign(proto))]
    return ReferenceEvaluator(proto, new_ops=[*added, *widened, *alone])


_REFERENCE_DOMAINS = frozenset({"", "ai.onnx", "ai.onnx.ml", "ai.onnx.preview.training"})


def _foreign(proto: Any) -> set[tuple[str, str]]:
    """(domain, op type) of the nodes, in every graph, of domains onnx implements none of
    (com.microsoft's fused ops) and that no model-local function defines."""
    functions = {(f.domain, f.name) for f in proto.functions}
    found: set[tuple[str, str]] = set()
    graphs = [proto.graph, *proto.functions]
    while graphs:
        graph = graphs.pop()
        for node in graph.node:
            key = (node.domain, node.op_type)
            if node.domain not in _REFERENCE_DOMAINS and key not in functions:
                found.add(key)
            for attribute in node.attribute:
                graphs.extend([attribute.g] if attribute.HasField("g") else attribute.graphs)
    return found


def _alone_in_onnxruntime(
    domain: str, op_type: str, imports: Mapping[str, int], base: type
) -> type:
    """A reference op class for an op of another domain (com.microsoft's SkipLayerNormalization,
    Attention, DynamicQuantizeLSTM): each node runs alone in onnxruntime on what the evaluator
    computed for its inputs. A conversion keeps such ops float32 (no schema says what else
    they take), so onnxruntime computes them as the converted model has them; every op of
    onnx's own domains stays the evaluator's."""

    class Alone(base):  # type: ignore[misc,valid-type]
        op_domain = domain

        def __init__(self, onnx_node: Any, run_params: Any) -> None:
            super().__init__(onnx_node, run_params)
            self.sessions: dict[tuple[Any, ...], Any] = {}

        def run(self, *args: Any, **kwargs: Any) -> Any:
            arrays = [None if a is None else np.asarray(a) for a in args]
            key = tuple(None if a is None else (a.dtype.str, a.shape) for a in arrays)
            if key not in self.sessions:
                self.sessions[key] = _one_node_session(self.onnx_node, arrays, imports)
            feeds = {f"in{i}": a for i, a in enumerate(arrays) if a is not None}
            made = iter(self.sessions[key].run(None, feeds))
            return tuple(next(made) if name else None for name in self.onnx_node.output)

        def _run(self, *args: Any, **kwargs: Any) -> Any:  # run() does not call it
            raise NotImplementedError

    Alone.__name__ = Alone.__qualname__ = op_type
    return Alone


def _one_node_session(node: Any, arrays: Sequence[Any], imports: Mapping[str, int]) -> Any:
    """An onnxruntime session of ``node`` alone, its inputs typed and shaped as ``arrays``
    are (EmbedLayerNormalization's shape inference needs its tables' sizes)."""
    import onnx  # noqa: TID251
    import onnxruntime as ort
    from onnx import helper  # noqa: TID251

    alone = onnx.NodeProto()
    alone.CopyFrom(node)
    del alone.input[:]
    alone.input.extend(f"in{i}" if a is not None else "" for i, a in enumerate(arrays))
    del alone.output[:]
    alone.output.extend(f"out{i}" if name else "" for i, name in enumerate(node.output))
    inputs = [
        helper.make_tensor_value_info(f"in{i}", helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
        for i, a in enumerate(arrays)
        if a is not None
    ]
    outputs = [helper.make_value_info(n, onnx.TypeProto()) for n in alone.output if n]
    graph = helper.make_graph([alone], "alone", inputs, outputs)
    opsets = [helper.make_opsetid(d, v) for d, v in imports.items()]
    model = helper.make_model(graph, opset_imports=opsets)
    # the least the opsets need: onnx's latest IR can be newer than onnxruntime reads
    model.ir_version = helper.find_min_ir_version_for(opsets, ignore_unknown=True)
    options = ort.SessionOptions()
    options.log_severity_level = 3
    return ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


ACCUMULATING = (
    "AveragePool", "Conv", "ConvTranspose", "CumSum", "Einsum", "Gemm",
    "GlobalAveragePool", "GlobalLpPool", "GroupNormalization", "GRU", "InstanceNormalization",
    "LayerNormalization", "LogSoftmax", "LpNormalization", "LpPool", "LSTM", "MatMul",
    "MeanVarianceNormalization", "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp",
    "ReduceMean", "ReduceProd", "ReduceSum", "ReduceSumSquare", "RMSNormalization", "RNN",
    "Softmax",
)  # fmt: skip
"""Ops that sum many terms: the reference evaluator runs them on float16 and bfloat16 inputs
in float32 and rounds what they give to the input's type, as a GPU's kernels accumulate
(and as onnxforge's kernels do). numpy sums bfloat16 in bfloat16: the mean of 4,096 values
near 0.5 comes out 0.0625 (the running sum stops at 256, where adding 0.5 rounds to nothing),
which no device computes; and its bfloat16 matrix products have no BLAS (a ViT's took more
than 300 s)."""

_HALF = ("float16", "bfloat16")


def _accumulating_in_float32(
    op_type: str, opset: int, base: type, implementation: type | None = None
) -> type:
    """A reference op class for ``op_type`` that runs onnx's own implementation (of the
    node's version), or ``implementation``, on its half inputs widened to float32, its
    float32 outputs rounded back to the first half input's type."""
    from onnx.reference.ops import load_op  # noqa: TID251

    class Widened(base):  # type: ignore[misc,valid-type]
        op_domain = ""

        def __init__(self, onnx_node: Any, run_params: Any) -> None:
            super().__init__(onnx_node, run_params)
            version = run_params.get("opsets", {}).get("", opset) or None
            made = implementation or load_op("", op_type, version, node=onnx_node)
            self.inner = made(onnx_node, run_params)

        def run(self, *args: Any, **kwargs: Any) -> Any:
            half = next(
                (a.dtype for a in args if isinstance(a, np.ndarray) and a.dtype.name in _HALF),
                None,
            )
            if half is None:
                return self.inner.run(*args, **kwargs)
            wide = [
                a.astype(np.float32) if isinstance(a, np.ndarray) and a.dtype.name in _HALF else a
                for a in args
            ]
            made = self.inner.run(*wide, **kwargs)
            return tuple(
                m.astype(half) if isinstance(m, np.ndarray) and m.dtype == np.float32 else m
                for m in made
            )

        def _run(self, *args: Any, **kwargs: Any) -> Any:  # run() does not call it
            raise NotImplementedError

    Widened.__name__ = Widened.__qualname__ = op_type
    return Widened


def _conv_transpose(
    x: np.ndarray, w: np.ndarray, b: np.ndarray | None, attributes: Mapping[str, Any]
) -> np.ndarray:
    """ConvTranspose as the spec computes it, one strided slice per kernel position: onnx's
    own scatters through col2im one element at a time in Python (32 of a ViT decoder's 34 s
    per input set, past the judge's timeout). Pads and the output's size as onnx's."""
    spatial = x.shape[2:]
    dims = len(spatial)
    kernel = tuple(attributes.get("kernel_shape") or w.shape[2:])
    strides = list(attributes.get("strides") or [1] * dims)
    dilations = list(attributes.get("dilations") or [1] * dims)
    extra = list(attributes.get("output_padding") or [0] * dims)
    group = int(attributes.get("group") or 1)
    auto_pad = attributes.get("auto_pad") or "NOTSET"
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad
    pads = attributes.get("pads")
    shape = attributes.get("output_shape")
    reach = [(kernel[i] - 1) * dilations[i] + 1 for i in range(dims)]
    full = [strides[i] * (spatial[i] - 1) + extra[i] + reach[i] for i in range(dims)]
    if shape is not None or (pads is None and auto_pad in ("SAME_UPPER", "SAME_LOWER")):
        if shape is None:
            shape = [spatial[i] * strides[i] for i in range(dims)]
        shape = list(shape[-dims:])
        total = [full[i] - shape[i] for i in range(dims)]
        upper = auto_pad == "SAME_UPPER"
        begin = [t // 2 if upper else t - t // 2 for t in total]
    else:
        pads = list(pads or [0] * 2 * dims)
        begin = pads[:dims]
        shape = [full[i] - pads[i] - pads[i + dims] for i in range(dims)]
    work = np.float64 if x.dtype == np.float64 else np.float32
    n, channels = x.shape[:2]
    per_group = w.shape[1]
    grouped_x = x.reshape(n, group, channels // group, *spatial).astype(work)
    grouped_w = w.reshape(group, channels // group, per_group, *kernel).astype(work)
    canvas = [max(full[i], begin[i] + shape[i]) for i in range(dims)]
    out = np.zeros((n, group, per_group, *canvas), work)
    every = (slice(None),) * 3
    for at in np.ndindex(*kernel):
        tap = grouped_w[every + tuple(at)]  # group, in, out
        made = np.einsum("ngc...,gcm->ngm...", grouped_x, tap, optimize=True)
        where = tuple(
            slice(at[i] * dilations[i], at[i] * dilations[i] + (spatial[i] - 1) * strides[i] + 1,
                  strides[i])
            for i in range(dims)
        )  # fmt: skip
        out[every + where] += made
    out = out.reshape(n, group * per_group, *canvas)
    kept = tuple(slice(begin[i], begin[i] + shape[i]) for i in range(dims))
    out = out[every[:2] + kept]
    if b is not None:
        out = out + b.astype(work).reshape(1, -1, *([1] * dims))
    return out.astype(x.dtype)


def _tf_nearest(
    x: np.ndarray, scales: Any, sizes: Any, attributes: Mapping[str, Any]
) -> np.ndarray:
    """Resize-11's nearest neighbour of ``tf_half_pixel_for_nn`` (TF's), as onnxruntime
    computes it: output index i reads input index nearest_mode((i + 0.5) / scale) along each
    resized axis, in float32, clamped to the input; nearest_mode floor (tf2onnx's) or
    round_prefer_floor (onnxruntime's other modes pick otherwise, and no exporter writes
    them: they stay unknown)."""
    axes = list(attributes.get("axes") or range(x.ndim))
    axes = [a % x.ndim for a in axes]
    if sizes is not None and len(sizes):
        out = [int(n) for n in sizes]
        ratio = [np.float32(n / x.shape[a]) for n, a in zip(out, axes, strict=True)]
    else:
        ratio = [np.float32(r) for r in scales]
        out = [int(np.floor(x.shape[a] * r)) for a, r in zip(axes, ratio, strict=True)]
    nearest = attributes.get("nearest_mode") or "round_prefer_floor"
    floor = nearest in ("floor", b"floor")
    for axis, n, r in zip(axes, out, ratio, strict=True):
        where = (np.arange(n, dtype=np.float32) + np.float32(0.5)) / r
        index = np.clip(
            np.floor(where) if floor else np.ceil(where - np.float32(0.5)), 0, x.shape[axis] - 1
        ).astype(np.int64)
        x = np.take(x, index, axis=axis)
    return x


def _reference(
    model: str, sets: list[dict[str, np.ndarray]]
) -> tuple[dict[str, Any], list[np.ndarray]]:
    # the child imports no onnxforge: onnx is the runtime here, as onnxruntime is above
    import onnx  # noqa: TID251

    try:
        proto = onnx.load(model)
        session = reference_evaluator(proto)
    except Exception as exc:  # noqa: BLE001
        return {"ok": False, "stage": "load", "error": _one_line(exc)}, []
    wanted = {
        v.name: onnx.helper.tensor_dtype_to_np_dtype(v.type.tensor_type.elem_type)
        for v in proto.graph.input
        if v.type.HasField("tensor_type") and v.type.tensor_type.elem_type
    }
    outputs: list[np.ndarray] = []
    try:
        for feeds in sets:
            given = {k: v.astype(wanted.get(k, v.dtype)) for k, v in feeds.items()}
            for made in session.run(None, given):
                out = np.asarray(made)
                # npz has no bfloat16 (nor float8): the parent gets what they hold, widened
                outputs.append(
                    out.astype(np.float32)
                    if out.dtype.kind == "V" or out.dtype.name.startswith(("bfloat", "float8"))
                    else out
                )
    except Exception as exc:  # noqa: BLE001
        return {"ok": False, "stage": "run", "error": _one_line(exc)}, []
    return {"ok": True, "outputs": len(proto.graph.output)}, outputs


def main(argv: list[str]) -> int:
    runtime, model, folder = argv[0], argv[1], Path(argv[2])
    spec = json.loads((folder / "inputs.json").read_text(encoding="utf-8"))
    names, count = spec["names"], spec["sets"]
    with np.load(folder / "inputs.npz", allow_pickle=True) as data:  # written by the parent
        arrays = [data[f"arr_{i}"] for i in range(len(names) * count)]
    width = len(names)
    sets = [
        dict(zip(names, arrays[j * width : (j + 1) * width], strict=True)) for j in range(count)
    ]
    if runtime == "openvino":
        result, outputs = _openvino(model, sets)
    elif runtime == "reference":
        result, outputs = _reference(model, sets)
    else:
        result, outputs = _onnxruntime(model, sets, optimized=runtime == "onnxruntime")
    if result["ok"]:
        for index, array in enumerate(outputs):
            np.save(folder / f"out_{index}.npy", array, allow_pickle=True)
    print(json.dumps(result), flush=True)
    return 0


# -- the parent ---------------------------------------------------------------------------------
_SOURCE = Path(__file__) if "__file__" in globals() else Path()
"""What the child runs (a test swaps in one that aborts)."""


@dataclass
class ChildResult:
    """What the child said: ``error`` (None when it loaded and ran the model) and, per input
    set, the outputs in the runtime's order."""

    error: str | None
    outputs: list[list[np.ndarray]] = field(default_factory=list)


def run_in_child(
    runtime: str, model: Path, sets: Sequence[Mapping[str, np.ndarray]], folder: Path
) -> ChildResult:
    """Load ``model`` in ``runtime`` and run it on every input set, in a child process whose
    working folder is ``folder`` (an empty temporary one: its files are overwritten)."""
    names = list(sets[0]) if sets else []
    np.savez(folder / "inputs.npz", *(s[n] for s in sets for n in names))
    spec = {"names": names, "sets": len(sets)}
    (folder / "inputs.json").write_text(json.dumps(spec), encoding="utf-8")
    for stale in folder.glob("out_*.npy"):
        stale.unlink()
    source = _SOURCE.read_text(encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-c", source, runtime, str(model.resolve()), str(folder)],
        capture_output=True,
        text=True,
        check=False,
        cwd=folder,
    )
    result: dict[str, Any] | None = None
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("{"):
            result = json.loads(line)
            break
    if result is not None and result.get("ok"):
        per_set = int(result["outputs"])
        flat = []
        for i in range(per_set * len(sets)):
            path = folder / f"out_{i}.npy"
            flat.append(np.load(path, allow_pickle=True))  # our child wrote it
            path.unlink()
        return ChildResult(None, [flat[j * per_set : (j + 1) * per_set] for j in range(len(sets))])
    if result is not None:
        return ChildResult(f"{runtime} failed to {result['stage']} the model: {result['error']}")
    if done.returncode < 0:
        how = f"signal {signal.Signals(-done.returncode).name}"
    else:
        how = f"exit code {done.returncode}"
    tail = done.stderr.strip().splitlines()[-1:] or ["no message"]
    return ChildResult(f"{runtime} crashed loading or running the model ({how}): {tail[0]}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
