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
    units]), so each is given that axis before it joins."""
    from onnx.reference import ReferenceEvaluator  # noqa: TID251
    from onnx.reference.op_run import OpRun  # noqa: TID251
    from onnx.reference.ops import op_dequantize_linear, op_loop  # noqa: TID251

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

    opset = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), 0)
    added = [GatherElements, Loop, *([DequantizeLinear] if opset < 19 else [])]
    return ReferenceEvaluator(proto, new_ops=added)


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
