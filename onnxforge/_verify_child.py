"""Load a model in one runtime and run it once, in a child process of onnxforge check.

onnxforge check runs this file's text with ``python -c SOURCE RUNTIME MODEL INPUTS NAMES`` in
an empty folder (so nothing beside it shadows a module, and no onnxforge is imported): a
runtime that aborts takes only the child down. INPUTS is an .npz of positional arrays, NAMES
a JSON list of their input names. Prints one JSON line: {"ok": true}, or {"ok": false,
"stage": "load" | "run", "error": message}.
"""

from __future__ import annotations

__all__: list[str] = []

import json
import sys
from typing import Any

import numpy as np


def _one_line(exc: BaseException) -> str:
    lines = (line.strip() for line in str(exc).splitlines())
    return " ".join(line for line in lines if line)[:2000] or type(exc).__name__


def _onnxruntime(model: str, feeds: dict[str, np.ndarray]) -> dict[str, Any]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    try:
        session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001  (any failure is the answer)
        return {"ok": False, "stage": "load", "error": _one_line(exc)}
    try:
        session.run(None, feeds)
    except Exception as exc:  # noqa: BLE001
        return {"ok": False, "stage": "run", "error": _one_line(exc)}
    return {"ok": True}


def _openvino(model: str, feeds: dict[str, np.ndarray]) -> dict[str, Any]:
    import openvino as ov

    core = ov.Core()
    try:
        compiled = core.compile_model(model, "CPU")
    except Exception as exc:  # noqa: BLE001
        return {"ok": False, "stage": "load", "error": _one_line(exc)}
    try:
        compiled.create_infer_request().infer(feeds)
    except Exception as exc:  # noqa: BLE001
        return {"ok": False, "stage": "run", "error": _one_line(exc)}
    return {"ok": True}


def main(argv: list[str]) -> int:
    runtime, model, inputs, names = argv
    with open(names, encoding="utf-8") as f:
        order = json.load(f)
    with np.load(inputs, allow_pickle=True) as data:  # written by onnxforge check itself
        feeds = {name: data[f"arr_{i}"] for i, name in enumerate(order)}
    run = {"onnxruntime": _onnxruntime, "openvino": _openvino}[runtime]
    print(json.dumps(run(model, feeds)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
