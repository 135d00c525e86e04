"""Automatic mixed precision: which ops stay float32 when a model goes to float16 or bfloat16,
and which weights stay float32 when the weights alone are stored in the half type."""

from __future__ import annotations

__all__ = [
    "DEFAULT_CALIBRATION_RUNS",
    "DEFAULT_MAX_ROUNDS",
    "MEMORY_BUDGET",
    "WEIGHTS_TOLERANCE",
    "Calibration",
    "MixedPrecision",
    "choose_float32_ops",
    "choose_float32_weights",
    "load_calibration",
]

import logging
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from onnxforge._cleanup import temporary_folder
from onnxforge.api._mixed_ops import (
    _Chooser,
    choose_float32_ops,
)
from onnxforge.api._mixed_runs import (
    DEFAULT_MAX_ROUNDS,
    MEMORY_BUDGET,
    MixedPrecision,
    UnrunnableError,
)
from onnxforge.api._mixed_weights import (
    WEIGHTS_TOLERANCE,
    choose_float32_weights,
)
from onnxforge.api.compare import (
    InputSizes,
    half_tolerance,
    random_inputs,
    sizes_fixed_by_weights,
)
from onnxforge.errors import OnnxForgeError
from onnxforge.ir import (
    DType,
    Model,
)

logger = logging.getLogger(__name__)

DEFAULT_CALIBRATION_RUNS = 5
"""Random input sets the automatic mixed precision runs by default (--calibrate N)."""

CALIBRATION_SIZES = (InputSizes(), InputSizes(side=32, first=16, other=16))
"""The unknown dims of the random calibration sets, in turn (``random_inputs``): --check's
sizes, then an image's sides of 32 and other dims of 16. What a half op's error is depends
on the size: ch_PP-OCRv2_rec, calibrated at 64 x 64, was 1.2e-2 off at 32 x 32; madmom's
LSTM, calibrated on 2 frames, was 1.1e-3 off on 16. A model that does not run at one of
them is calibrated at the other alone. Each size is drawn twice in turn, as noise and
then, for an image, as a scene (``_recipes``)."""

MARGIN = 0.5
"""A calibration aims at this share of the budget, and accepts up to all of it: its input
sets are not those the model will see (g2p-id's BERT met 6.7e-3 on the calibration's five,
and was 1.8e-2 on --check's five others)."""


class Chosen(dict[str, str]):
    """What a calibration keeps float32 (key -> why), whether the weights of those ops
    are stored in the half type but ``float32_weights``, and which it keeps because
    onnxruntime fails on them in it (``ConvertPrecisionPass`` reads ``store_kept_weights``,
    ``float32_weights`` and ``runtime_kept``)."""

    def __init__(
        self,
        keep: Mapping[str, str],
        *,
        store_kept_weights: bool = False,
        float32_weights: Mapping[str, str] | None = None,
        runtime_kept: Collection[str] = (),
    ) -> None:
        super().__init__(keep)
        self.store_kept_weights = store_kept_weights
        self.float32_weights = dict(float32_weights or {})
        self.runtime_kept = frozenset(runtime_kept)


def _recipes(sizes: Sequence[InputSizes]) -> tuple[InputSizes, ...]:
    """``sizes`` as noise, then as scenes: an image's random calibration sets alternate
    the two (a model without an image input gets noise of the same sizes in both)."""
    return (*sizes, *(one._replace(scene=True) for one in sizes))


def load_calibration(folder: Path) -> list[dict[str, np.ndarray]]:
    """The input sets of a --calibration folder: one .npz file each, an array per graph
    input named as the input, in file-name order."""
    files = sorted(folder.glob("*.npz")) if folder.is_dir() else []
    if not files:
        raise OnnxForgeError(f"--calibration {folder}: no .npz files there (one per input set)")
    sets = []
    for path in files:
        try:
            with np.load(path, allow_pickle=False) as data:
                sets.append({k: data[k] for k in data.files})
        except (OSError, ValueError) as exc:
            raise OnnxForgeError(
                f"--calibration {path}: not a readable .npz file ({exc})"
            ) from None
    return sets


@dataclass
class Calibration:
    """ConvertPrecisionPass's ``choose``: the automatic mixed precision (``choose_float32_ops``)
    on ``feeds``, or on ``runs`` random input sets made for the model it is given (after any
    opset conversion and folding, as it will be converted); with ``weights_only``, the
    weights that stay float32 (``choose_float32_weights``, for
    ``ConvertPrecisionPass(weights_only=True)``). ``tolerance`` None is ``half_tolerance``,
    or ``WEIGHTS_TOLERANCE`` with ``weights_only``. ``result`` keeps what the last call
    found; a budget it cannot meet is an error saying what to change."""

    dtype: str
    runs: int = DEFAULT_CALIBRATION_RUNS
    feeds: Sequence[Mapping[str, np.ndarray]] | None = None
    tolerance: float | None = None
    keep_io_types: bool = True
    keep_float32: Mapping[str, str] = field(default_factory=dict)
    weights_only: bool = False
    max_rounds: int = DEFAULT_MAX_ROUNDS
    result: MixedPrecision | None = None
    skipped: str | None = None
    """Why the last call chose nothing: random inputs the model does not run on (a detector
    whose sides must be multiples of 32 gets 5); real ones (``feeds``) must run."""

    @property
    def budget(self) -> float:
        """The tolerance this calibration holds the outputs to."""
        if self.tolerance is not None:
            return self.tolerance
        return WEIGHTS_TOLERANCE if self.weights_only else half_tolerance(self.dtype)

    def __call__(self, model: Model) -> dict[str, str]:
        feeds = self.feeds
        if feeds is None:
            return self._calibrate_on_random(model)
        names = {v.name for v in model.graph.inputs if v.const is None}
        for i, given in enumerate(feeds):
            missing = sorted(names - set(given))
            if missing:
                raise OnnxForgeError(
                    f"calibration input set {i} has no array for {', '.join(missing)}"
                )
        self.result = self._choose(model, feeds)
        return self._judge()

    def _calibrate_on_random(self, model: Model) -> dict[str, str]:
        """Calibrate on random sets of CALIBRATION_SIZES in turn, else of each alone (a
        window of 40 needs 64; PP-OCR's recognizer squeezes a height of exactly 32); where
        none runs, nothing is chosen and a note says why."""
        first: UnrunnableError | None = None
        tried: set[frozenset[tuple[tuple[str, tuple[int, ...]], ...]]] = set()
        fixed = sizes_fixed_by_weights(model)  # once: it infers shapes on a copy
        for sizes in (CALIBRATION_SIZES, *((one,) for one in CALIBRATION_SIZES)):
            feeds = random_inputs(model, self.runs, seed=0, sizes=_recipes(sizes), fixed=fixed)
            shapes = frozenset(tuple((n, a.shape) for n, a in f.items()) for f in feeds)
            if shapes in tried:
                continue  # no image sides, or one set: the same sizes fail the same way
            tried.add(shapes)
            try:
                self.result = self._choose(model, feeds)
            except UnrunnableError as exc:
                first = first or exc
                continue
            return self._judge()
        self.skipped = f"{first}; give --calibration DIR with input sets it runs on"
        return self._load_guard(model)

    def _load_guard(self, model: Model) -> dict[str, str]:
        """Without a calibration, a float16 conversion still keeps what onnxruntime crashes
        loading (``_Chooser.load_guard``)."""
        if self.weights_only or self.dtype != "float16":
            return {}
        with temporary_folder("onnxforge-mixed-") as folder:
            chooser = _Chooser(
                model, DType.FLOAT16, [{}], folder, tolerance=self.budget,
                keep_io_types=self.keep_io_types,
            )  # fmt: skip
            keep = chooser.load_guard(dict(self.keep_float32))
        self.result = MixedPrecision(keep, {}, 0, self.budget)
        return Chosen(keep, runtime_kept=keep)

    def _choose(self, model: Model, feeds: Sequence[Mapping[str, np.ndarray]]) -> MixedPrecision:
        if self.weights_only:
            return choose_float32_weights(
                model,
                self.dtype,
                feeds,
                tolerance=self.budget * MARGIN,
                keep_float32=self.keep_float32,
                max_rounds=self.max_rounds,
            )
        return choose_float32_ops(
            model,
            self.dtype,
            feeds,
            tolerance=self.budget * MARGIN,
            keep_io_types=self.keep_io_types,
            keep_float32=self.keep_float32,
            max_rounds=self.max_rounds,
            budget=self.budget,
        )

    def _judge(self) -> Chosen:
        """The keep set, or the error saying what to change when the budget is not met."""
        assert self.result is not None
        errors, estimates = self.result.errors, self.result.estimates
        # the estimates steer the rounds; the outputs (and decided-on values) are judged
        over = {n: e for n, e in errors.items() if not e <= self.budget and n not in estimates}
        if over:
            judged = self.result.judged
            worst = ", ".join(
                f"{name!r} {error:.3g}" + (f" ({judged[name]})" if name in judged else "")
                for name, error in over.items()
            )
            if self.weights_only:
                kept = f"{len(self.result.keep)} weights kept in float32"
                advice = "give a larger --tolerance, or --calibrate 0 to store every weight in "
                advice += f"{self.dtype} as it is"
            else:
                kept = f"{len(self.result.keep)} ops kept in float32"
                advice = (
                    "give a larger --tolerance, --keep-float32 for the ops you know, or convert "
                    "less (--weights float16)"
                )
            raise OnnxForgeError(
                f"mixed precision: after {self.result.rounds} rounds ({kept}) the outputs are "
                f"still past the tolerance {self.budget:g} of their range: {worst}; "
                f"{advice}"
            )
        return Chosen(
            self.result.keep,
            store_kept_weights=self.result.store_kept_weights,
            float32_weights=self.result.float32_weights,
            runtime_kept=self.result.runtime_kept,
        )
