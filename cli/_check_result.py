"""--check of `convert` and `optimize`: the staged result against the original before it is
published, on random inputs; a difference past the budget is exit 1 with nothing written."""

from __future__ import annotations

__all__ = ["CHECK_SEED", "check_result", "float_inputs"]

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import typer

from onnxforge._cleanup import temporary_folder
from onnxforge.api._mixed_precision import WEIGHTS_TOLERANCE
from onnxforge.api._optimize import fix_input_shapes
from onnxforge.api.compare import (
    CHECK_SCENES,
    CHECK_SIZES,
    DEFAULT_ATOL,
    DEFAULT_RTOL,
    compare_on_onnxruntime,
    compare_within,
    half_tolerance,
    output_scales,
    random_inputs,
)
from onnxforge.cli._app import clip, errors, note
from onnxforge.cli._progress import progress
from onnxforge.io import load, save
from onnxforge.ir import DType, Model, TensorType
from onnxforge.passes.convert_precision import HALVES
from onnxforge.passes.toolchain_forms import dropout_as_inference

CHECK_SEED = 1
"""--check's inputs after a precision conversion differ from its calibration's (seed 0): the
proof is not the fit."""
_FLOATS = frozenset({DType.FLOAT, *HALVES})


def float_inputs(model: Model) -> dict[str, np.dtype]:
    """The numpy type of each float graph input (the result's, read before it is released:
    with --no-keep-io-types they differ from the original's)."""
    found: dict[str, np.dtype] = {}
    for v in model.graph.inputs:
        if isinstance(v.type, TensorType) and v.type.dtype in _FLOATS:
            dtype = DType(v.type.dtype).numpy
            if dtype is not None:
                found[v.name] = dtype
    return found


def check_result(
    source: Path,
    name: str,
    staged: Path,
    *,
    runs: int,
    tolerance: float | None,
    result_inputs: Mapping[str, np.dtype],
    precision: str | None = None,
    shapes: Mapping[str, Sequence[int]] | None = None,
) -> list[dict[str, Any]]:
    """--check: the staged result against the original on ``runs`` random input sets. After
    a precision conversion (``precision``: "float16", "bfloat16" or "float32" for --dtype,
    "weights" for --weights), each output's largest difference over its range, by
    onnxruntime and by the reference evaluator, must be within ``tolerance`` (default
    ``half_tolerance``, WEIGHTS_TOLERANCE after --weights); else onnxruntime's outputs must agree
    to its rounding. Past it: exit 1, nothing written. Returns what was measured (json)."""
    if tolerance is None and precision is not None:
        tolerance = WEIGHTS_TOLERANCE if precision == "weights" else half_tolerance(precision)
    judges = "onnxruntime" if precision is None else "onnxruntime and the reference evaluator"
    with progress(f"checking on {judges} ({runs} input sets)", expected_long=True):
        original = load(source)
        if shapes:
            fix_input_shapes(original, shapes)
        seed, sizes = (0, CHECK_SIZES) if precision is None else (CHECK_SEED, CHECK_SCENES)
        feeds = random_inputs(original, runs, seed=seed, sizes=sizes)
        names = [v.name for v in original.graph.outputs]
        scales = output_scales(original)
        before = {
            v.name: DType(v.type.dtype).numpy
            for v in original.graph.inputs
            if isinstance(v.type, TensorType)
        }
        changed = {k: t for k, t in result_inputs.items() if before.get(k) != t}
        with temporary_folder("onnxforge-check-") as folder:
            source, staged = _deterministic(original, source, staged, folder)
            del original
            found = _measure(
                source,
                staged,
                name,
                feeds=feeds,
                names=names,
                changed=changed,
                precision=precision,
                tolerance=tolerance,
                scales=scales,
            )
    return found


def _deterministic(original: Model, source: Path, staged: Path, folder: Path) -> tuple[Path, Path]:
    """The two models to compare: a Dropout left in training mode draws a new mask each run
    (no two runs agree), so where the original has one, both are compared as inference
    computes them (copies in ``folder``; the result written keeps its Dropouts)."""
    if not dropout_as_inference(original):
        return source, staged
    result = load(staged)
    dropout_as_inference(result)
    save(original, folder / "original.onnx")
    save(result, folder / "result.onnx")
    return folder / "original.onnx", folder / "result.onnx"


def _measure(
    source: Path,
    staged: Path,
    name: str,
    *,
    feeds: list[dict[str, np.ndarray]],
    names: list[str],
    changed: Mapping[str, np.dtype],
    precision: str | None,
    tolerance: float | None,
    scales: Mapping[str, float],
) -> list[dict[str, Any]]:
    """The comparison check_result describes; past the budget, exit 1."""
    bfloat16 = precision == "bfloat16"
    if precision is None:
        rtol = DEFAULT_RTOL if tolerance is None else tolerance
        atol = DEFAULT_ATOL if tolerance is None else tolerance
        problems = compare_on_onnxruntime(source, staged, feeds, names, rtol=rtol, atol=atol)
        found: list[dict[str, Any]] = [{"judge": "onnxruntime", "problem": p} for p in problems]
    else:
        assert tolerance is not None
        measured = compare_within(
            source,
            staged,
            feeds,
            names,
            input_dtypes=changed,
            tolerance=tolerance,
            scales=scales,
        )
        found = [e.to_json() for e in measured]
        problems = []
        for e in measured:
            if e.problem is not None and e.judge == "onnxruntime" and not bfloat16:
                problems.append(f"onnxruntime cannot run the result: {e.problem}")
            elif e.problem is not None:  # onnxruntime's CPU lacks most bfloat16 kernels
                note(f"{name}: --check: {e.judge} cannot run the result: {e.problem}")
            elif e.flipped is not None:
                if e.flipped[0]:
                    note(
                        f"{name}: --check: {e.judge}: {e.flipped[0]} of {e.flipped[1]} picks "
                        f"{e.output!r} differ from the original's, near ties of values "
                        "within the budget; the outputs were compared with the original's picks"
                    )
            elif e.relative > tolerance:
                what = f"value {e.output!r} ({e.read_by})" if e.read_by else f"output {e.output!r}"
                problems.append(
                    f"{what} ({e.judge}): largest difference {e.largest:.3g}, "
                    f"{e.relative:.3g} of its range, past --tolerance {tolerance:g}"
                )
        if all(e.problem is not None for e in measured):
            problems.append("no judge could run the result")
    if problems:
        for line in problems:
            errors.print(clip(f"{name}: {line}"), markup=False)
        errors.print(
            f"{name}: the result differs from the original; nothing written", markup=False
        )
        raise typer.Exit(code=1)
    return found
