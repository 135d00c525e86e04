"""The precision options `convert` and `optimize` share (--keep-float32, --calibrate,
--calibration) and the automatic mixed precision they set up."""

from __future__ import annotations

__all__ = [
    "Calibrate",
    "CalibrationDir",
    "KeepFloat32",
    "calibration_for",
    "calibration_json",
    "defaults_note",
    "keep_list",
]

import importlib.util
from pathlib import Path
from typing import Annotated, Any

import typer

from onnxforge.api._mixed_precision import (
    DEFAULT_CALIBRATION_RUNS,
    Calibration,
    load_calibration,
)
from onnxforge.cli._app import note
from onnxforge.ir import DType, Model, Tensor
from onnxforge.passes.convert_precision import MIN_WEIGHT_ELEMENTS

KeepFloat32 = Annotated[
    str,
    typer.Option(
        "--keep-float32",
        metavar="OPS",
        help="With --dtype: comma-separated node names, output names or op types that stay "
        "float32 (with --weights: weight names). Default: none beyond what the conversion "
        "finds.",
        show_default=False,
    ),
]
Calibrate = Annotated[
    int,
    typer.Option(
        "--calibrate",
        metavar="N",
        help="With --dtype float16/bfloat16: run the float32 model on N random input sets "
        "(onnxruntime) and keep in float32 the ops whose values leave the half type's range or "
        "whose error grows past --tolerance (with --weights: the weights whose rounding moves "
        "the outputs past it); 0 converts by the schemas alone. "
        f"Default: {DEFAULT_CALIBRATION_RUNS}.",
        show_default=False,
    ),
]
CalibrationDir = Annotated[
    Path | None,
    typer.Option(
        "--calibration",
        metavar="DIR",
        help="Calibrate on real data: one .npz file per input set in DIR, an array per graph "
        "input. Default: --calibrate's random input sets.",
        show_default=False,
    ),
]


def keep_list(text: str) -> list[str]:
    return [n.strip() for n in text.split(",") if n.strip()]


def calibration_for(
    name: str,
    dtype: str | None,
    *,
    runs: int,
    folder: Path | None,
    tolerance: float | None,
    keep_io_types: bool,
    keep: list[str],
    weights: str | None = None,
) -> Calibration | None:
    """The automatic mixed precision the options ask for (None: the schemas alone); with
    ``weights`` (--weights), the weights whose half rounding moves the outputs past the
    budget stay float32. Without onnxruntime it is skipped with a note: the conversion still
    holds every type rule."""
    if runs < 0:
        raise typer.BadParameter("must be 0 or more", param_hint="'--calibrate'")
    if dtype not in ("float16", "bfloat16") and weights is None:
        if folder is not None:
            raise typer.BadParameter(
                "needs --dtype float16|bfloat16 or --weights", param_hint="'--calibration'"
            )
        return None
    if runs == 0 and folder is None:
        return None
    if importlib.util.find_spec("onnxruntime") is None:
        note(
            f"{name}: no calibration (onnxruntime is not installed: pip install onnxruntime); "
            "ops whose values leave the half type's range are not found"
        )
        return None
    return Calibration(
        weights or dtype or "float16",
        runs=runs,
        feeds=None if folder is None else load_calibration(folder),
        tolerance=tolerance,
        keep_io_types=keep_io_types,
        keep_float32=dict.fromkeys(keep, "asked (--keep-float32)"),
        weights_only=weights is not None,
    )


def calibration_json(calibration: Calibration | None, name: str) -> dict[str, Any] | None:
    """What the automatic mixed precision measured, for --json; a calibration skipped (the
    model does not run on random inputs) is said in a note too."""
    if calibration is not None and calibration.skipped is not None:
        note(f"{name}: no calibration: {calibration.skipped}")
        guarded = calibration.result.keep if calibration.result is not None else {}
        return {"skipped": calibration.skipped, "kept_float32": guarded}
    if calibration is None or calibration.result is None:
        return None
    found = calibration.result
    hidden = {
        output: error
        for output, error in found.close_calls.items()
        if error > calibration.budget >= found.errors.get(output, 0.0)
    }
    if hidden:
        measured = max(found.errors.get(output, 0.0) for output in hidden)
        them = "it" if len(hidden) == 1 else "them"
        moves = ", ".join(f"{output!r} {error:.2g}" for output, error in hidden.items())
        note(
            f"{name}: at a close call between two classes the result would move {moves} "
            f"(past {calibration.budget:g}: a Softmax input's error where two classes are "
            f"nearest, over 4); the calibration's input sets made no such call (they moved "
            f"{them} {measured:.2g} at most): calibrate on inputs that do (--calibration DIR) "
            f"to hold {them} there"
        )
    return {
        "input_sets": len(calibration.feeds) if calibration.feeds else calibration.runs,
        "rounds": found.rounds,
        "tolerance": calibration.budget,
        "aim": found.tolerance,
        "weights_only": calibration.weights_only,
        "errors": found.errors,
        "decided_on": {n: w for n, w in found.judged.items() if n not in found.estimates},
        "estimated": {n: w for n, w in found.judged.items() if n in found.estimates},
        "picks_flipped": {name: list(n) for name, n in found.flipped.items() if n[0]},
        "close_calls": found.close_calls,
        "kept_float32": found.keep,
        # the kept ops' weights: stored in the half type, but those listed here
        "kept_weights_stored": found.store_kept_weights,
        "kept_weights_float32": found.float32_weights,
    }


def defaults_note(model: Model, what: str) -> str | None:
    """The line saying that the float32 weights ``model`` (converted by ``what``) still lists
    as graph inputs kept their type, as every input does (a caller may override them; an
    older exporter lists every weight so), and that --pin-defaults makes them constants that
    convert; None when there are none."""
    inputs = set(model.graph.inputs)
    kept = [
        v.const
        for v in model.graph.initializers
        if v in inputs
        and isinstance(v.const, Tensor)
        and v.const.dtype == DType.FLOAT
        and v.const.size >= MIN_WEIGHT_ELEMENTS
    ]
    if not kept:
        return None
    size = sum(t.nbytes for t in kept) / 1e6
    return (
        f"{len(kept)} float32 weights ({size:.1f} MB) are also graph inputs, defaults a caller "
        f"may override, and stay float32 after {what}; --pin-defaults makes them constants "
        "that convert"
    )
