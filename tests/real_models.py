"""Real models for tests: the exported ones (ONNXFORGE_EXPORT_DIR), random inputs for them
and runs on onnxruntime with its own optimizations off."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import onnx

EXPORT_DIR = os.environ.get("ONNXFORGE_EXPORT_DIR")


def exported_models(max_bytes: int) -> list[Path]:
    """The exported models smaller than ``max_bytes``; none when the variable is unset."""
    if not EXPORT_DIR or not Path(EXPORT_DIR).is_dir():
        return []
    return [p for p in sorted(Path(EXPORT_DIR).glob("*.onnx")) if p.stat().st_size < max_bytes]


def random_inputs(path: Path, *, batch: int = 2, other: int = 5) -> dict[str, np.ndarray]:
    """Random inputs: dynamic dim 0 ``batch``, other dynamic dims ``other``; integer inputs
    (ids, masks) in [0, 2)."""
    proto = onnx.load(path, load_external_data=False)
    initialized = {t.name for t in proto.graph.initializer}
    rng = np.random.default_rng(0)
    feeds = {}
    for vi in proto.graph.input:
        if vi.name in initialized:
            continue
        tt = vi.type.tensor_type
        shape = [
            d.dim_value if d.HasField("dim_value") else (batch if i == 0 else other)
            for i, d in enumerate(tt.shape.dim)
        ]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)
        if dtype == np.bool_ or dtype.kind in "iu":
            feeds[vi.name] = rng.integers(0, 2, shape).astype(dtype)
        else:
            feeds[vi.name] = rng.standard_normal(shape).astype(dtype)
    return feeds


def run_unoptimized(path: Path, feeds: dict[str, np.ndarray]) -> list[Any]:
    """The model's outputs on onnxruntime's CPU provider, its graph optimizations off."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)
