"""Boundary fuzz of shape inference: small models whose constant inputs take boundary values,
inferred by onnxforge and run in onnxruntime at sizes of their symbolic input dims.

Shared by ``tests/property/test_boundary_fuzz.py`` (a bounded, derandomized CI run) and
``benchmarks/boundary_fuzz.py`` (a long run that collects and shrinks every distinct failure).

A case is one to three ops (Slice, Pad, Range, Resize, Reshape, Expand, Tile, Gather, TopK,
Split, Squeeze, Unsqueeze, ConstantOfShape, OneHot, CumSum, ReduceSum/ReduceMean, Trilu,
GatherElements, ScatterND, Shape with start/end) on inputs with symbolic dims; each constant
input (an initializer, or an attribute where the op's version took one) is a boundary value:
INT64 min/max, INT32 max, 1e9, -1, 0, 1, negative indices, empty tensors. Some constants are
computed from the inputs' dims instead (Shape -> Gather/Slice -> Add/Sub/Mul/Div -> Concat),
so symbolic arithmetic is exercised. Every node output is a graph output.

``check`` infers the case (``onnxforge.io.from_proto`` + ``onnxforge.shape_infer.infer``),
runs it in onnxruntime at each binding of the symbols (``OrtWorker``: a child process with a
memory cap, so a 1e9-element constant or a runtime abort costs only that run) and returns every
root failure: a written dim (int or expression; fresh ``unk__N`` dims and None are allowed) or
a known element of a small integer tensor that does not evaluate to what onnxruntime computed,
a rank that differs, a negative written dim, a fresh dim that takes two sizes in one run, a
rule that crashed, or a ShapeError on a model onnxruntime runs at every binding tried. Where
onnxruntime departs from the spec and onnxforge follows the spec (``departure``), and where a
dim was written under an assumption inference states (``assumed: N == M``) that the run
breaks, the failure is listed apart (``Outcome.departures``).
"""

from __future__ import annotations

__all__ = [
    "EXTREMES",
    "GENERATORS",
    "Case",
    "Failure",
    "OrtWorker",
    "Outcome",
    "cases",
    "check",
    "departure",
    "examples",
    "repro_text",
]

import os
import pickle
import select
import struct
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1
I32_MIN, I32_MAX = -(1 << 31), (1 << 31) - 1
EXTREMES = (
    I64_MIN,
    I64_MIN + 1,
    I32_MIN,
    -(10**9),
    10**9,
    I32_MAX,
    I32_MAX + 1,
    I64_MAX - 1,
    I64_MAX,
)
"""The boundary values beside small integers (shrinking goes to the small ones)."""
SYMBOLS = ("N", "M", "K")
OPSETS = (18, 18, 18, 13, 11, 10, 9)
"""Opset 18 mostly; 13, 11, 10 and 9 where an op's constants were attributes or its inputs
had another form (Slice-1/10, Pad-2/11, TopK-1/10, Split-11/13, Squeeze-11, Resize-11)."""

F, I64, I32 = TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT32
INTEGER_TYPES = (TensorProto.INT64, TensorProto.INT32, TensorProto.INT8, TensorProto.UINT8)


# -- boundary values --------------------------------------------------------------------------
def bound() -> st.SearchStrategy[int]:
    """A small integer or an extreme one."""
    return st.one_of(st.integers(-3, 4), st.integers(-3, 4), st.sampled_from(EXTREMES))


def small_or_bound() -> st.SearchStrategy[int]:
    """Mostly small (sizes, pads, repeats): extremes only now and then."""
    return st.one_of(
        st.integers(0, 3), st.integers(-1, 3), st.integers(-3, 5), st.sampled_from(EXTREMES)
    )


def _mostly(small: Sequence[int], extremes: Sequence[int] = EXTREMES) -> st.SearchStrategy[int]:
    """One of ``small`` two times in three, else an extreme."""
    return st.one_of(st.sampled_from(small), st.sampled_from(small), st.sampled_from(extremes))


# -- building a case --------------------------------------------------------------------------
@dataclass
class Val:
    """A value of the case being built: its element type and rank (None once the builder
    cannot tell, after an invalid op)."""

    name: str
    dtype: int
    rank: int | None


@dataclass
class Case:
    """A generated model: every node output is a graph output (untyped)."""

    model: onnx.ModelProto
    symbols: tuple[str, ...]
    ops: tuple[str, ...]

    @property
    def opset(self) -> int:
        return next(o.version for o in self.model.opset_import if o.domain in ("", "ai.onnx"))


class Builder:
    """Nodes, initializers and inputs of one case; names are fresh per case."""

    def __init__(self, opset: int) -> None:
        self.opset = opset
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.inputs: list[onnx.ValueInfoProto] = []
        self.data: list[Val] = []  # tensors an op may take as its data input
        self.ops: list[str] = []
        self.symbols: list[str] = []
        self.dims: list[tuple[str, int]] = []  # (input name, axis) of each symbolic dim
        self.input_ranks: dict[str, int] = {}
        self.count = 0

    def fresh(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def const(self, array: np.ndarray, prefix: str = "c") -> str:
        name = self.fresh(prefix)
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def i64(self, values: Sequence[int] | int | np.ndarray, prefix: str = "c") -> str:
        return self.const(np.array(values, dtype=np.int64), prefix)

    def node(self, op_type: str, inputs: Sequence[str], n_out: int = 1, **attrs: Any) -> list[str]:
        outs = [self.fresh(op_type.lower()[:5]) for _ in range(n_out)]
        attrs = {k: v for k, v in attrs.items() if v is not None}
        name = f"n{len(self.nodes)}_{op_type}"
        node = helper.make_node(op_type, list(inputs), outs, name=name)
        for key, value in attrs.items():
            if isinstance(value, list) and not value:  # an empty list has no type to infer
                node.attribute.append(
                    helper.make_attribute(key, value, attr_type=onnx.AttributeProto.INTS)
                )
            else:
                node.attribute.append(helper.make_attribute(key, value))
        self.nodes.append(node)
        return outs

    def add_input(self, dims: Sequence[int | str], dtype: int = F) -> Val:
        name = f"x{len(self.inputs)}"
        self.inputs.append(helper.make_tensor_value_info(name, dtype, list(dims)))
        for axis, d in enumerate(dims):
            if isinstance(d, str):
                self.dims.append((name, axis))
                if d not in self.symbols:
                    self.symbols.append(d)
        self.input_ranks[name] = len(dims)
        val = Val(name, dtype, len(dims))
        self.data.append(val)
        return val

    def case(self) -> Case:
        outputs = [onnx.ValueInfoProto(name=o) for n in self.nodes for o in n.output if o]
        graph = helper.make_graph(self.nodes, "fuzz", self.inputs, outputs, self.inits)
        model = helper.make_model(
            graph, opset_imports=[helper.make_opsetid("", self.opset)], ir_version=8
        )
        return Case(model, tuple(self.symbols), tuple(self.ops))


Draw = Callable[[st.SearchStrategy[Any]], Any]


# -- integer elements computed from the inputs' dims ------------------------------------------
def _dim_element(draw: Draw, b: Builder, scalar: bool = False) -> str:
    """A 1-element int64 vector (or a scalar) computed from an input's dim: Shape -> Gather,
    then sometimes one arithmetic op with a constant."""
    if b.dims and draw(st.booleans()):
        name, axis = draw(st.sampled_from(b.dims))
    else:
        name = draw(st.sampled_from(sorted(b.input_ranks)))
        rank = b.input_ranks[name]
        if rank == 0:
            return b.i64(1 if scalar else [1])
        axis = draw(st.integers(0, rank - 1))
    rank = b.input_ranks[name]
    (shape,) = b.node("Shape", [name])
    index = draw(st.sampled_from([axis, axis - rank]))
    (out,) = b.node("Gather", [shape, b.i64(index if scalar else [index])], axis=0)
    arith = draw(st.sampled_from(["", "", "Add", "Sub", "Mul", "Div", "Neg"]))
    if arith == "Neg":
        (out,) = b.node("Neg", [out])
    elif arith:
        c = draw(st.integers(-2, 3) if arith != "Div" else st.integers(1, 3))
        (out,) = b.node(arith, [out, b.i64(c if scalar else [c])])
    return out


def int_vector(
    draw: Draw, b: Builder, length: int, element: st.SearchStrategy[int], symbolic: float = 0.3
) -> str:
    """An int64 vector of ``length`` elements: one initializer of drawn values, or (with
    probability ``symbolic``) a Concat of constants, input dims and slices of Shape."""
    if length == 0 or not draw(st.floats(0, 1)) < symbolic:
        return b.i64(draw(st.lists(element, min_size=length, max_size=length)))
    parts: list[str] = []
    filled = 0
    while filled < length:
        kinds = ["const", "dim", "dim", "shape_slice"] if b.opset >= 10 else ["const", "dim"]
        kind = draw(st.sampled_from(kinds))
        if kind == "const":
            parts.append(b.i64([draw(element)]))
            filled += 1
        elif kind == "dim":
            parts.append(_dim_element(draw, b))
            filled += 1
        else:
            name = draw(st.sampled_from(sorted(b.input_ranks)))
            rank = b.input_ranks[name]
            (shape,) = b.node("Shape", [name])
            start, end = draw(bound()), draw(bound())
            step = draw(st.sampled_from([1, 1, -1, 2, -2, I64_MAX, I64_MIN]))
            got = len(range(*slice(start, end, step).indices(rank)))
            if got == 0 or filled + got > length:
                continue
            (part,) = b.node(
                "Slice", [shape, b.i64([start]), b.i64([end]), b.i64([0]), b.i64([step])]
            )
            parts.append(part)
            filled += got
    if len(parts) == 1:
        return parts[0]
    (out,) = b.node("Concat", parts, axis=0)
    return out


def int_scalar(draw: Draw, b: Builder, element: st.SearchStrategy[int], rank1: bool) -> str:
    """A scalar (or 1-element vector) constant or input dim."""
    if draw(st.floats(0, 1)) < 0.3:
        return _dim_element(draw, b, scalar=not rank1)
    value = draw(element)
    return b.i64([value] if rank1 else value)


def _axes(draw: Draw, rank: int, min_size: int = 1, max_size: int | None = None) -> list[int]:
    """Distinct axes of a rank-``rank`` tensor, some negative; sometimes out of range or
    repeated (an invalid model: inference must not crash)."""
    if rank == 0 or draw(st.integers(0, 15)) == 0:
        return draw(st.lists(st.integers(-rank - 1, rank), min_size=min_size, max_size=3))
    chosen = draw(
        st.lists(
            st.integers(0, rank - 1),
            min_size=min(min_size, rank),
            max_size=min(rank, max_size if max_size is not None else rank),
            unique=True,
        )
    )
    return [a - rank if draw(st.booleans()) else a for a in chosen]


def _axis(draw: Draw, rank: int) -> int:
    if rank == 0 or draw(st.integers(0, 15)) == 0:
        return draw(st.sampled_from([rank, -rank - 1, I64_MAX, I64_MIN]))
    return draw(st.integers(-rank, rank - 1))


# -- the ops ----------------------------------------------------------------------------------
Gen = Callable[[Draw, Builder, Val], list[Val]]
GENERATORS: dict[str, tuple[int, Gen]] = {}
"""op family -> (lowest opset, generator): a generator adds nodes reading ``src``."""


def _gen(family: str, min_opset: int = 1) -> Callable[[Gen], Gen]:
    def register(fn: Gen) -> Gen:
        GENERATORS[family] = (min_opset, fn)
        return fn

    return register


@_gen("Slice")
def _slice(draw: Draw, b: Builder, src: Val) -> list[Val]:
    rank = src.rank or 0
    if rank == 0:
        return []
    axes = _axes(draw, rank)
    n = len(axes)
    if b.opset < 10:  # Slice-1: starts, ends and axes are attributes
        starts = draw(st.lists(bound(), min_size=n, max_size=n))
        ends = draw(st.lists(bound(), min_size=n, max_size=n))
        with_axes = draw(st.booleans()) or n != rank
        (out,) = b.node(
            "Slice", [src.name], starts=starts, ends=ends, axes=axes if with_axes else None
        )
        return [Val(out, src.dtype, rank)]
    starts_ = int_vector(draw, b, n, bound())
    ends_ = int_vector(draw, b, n, bound())
    inputs = [src.name, starts_, ends_]
    if draw(st.booleans()) or n != rank:
        inputs.append(b.i64(axes))
        if draw(st.booleans()):
            step = _mostly([1, -1, 2, -2, 3, -3], EXTREMES)
            inputs.append(b.i64(draw(st.lists(step, min_size=n, max_size=n))))
    (out,) = b.node("Slice", inputs)
    return [Val(out, src.dtype, rank)]


@_gen("Pad", min_opset=2)
def _pad(draw: Draw, b: Builder, src: Val) -> list[Val]:
    rank = src.rank or 0
    modes = ["constant", "constant", "reflect", "edge"] + (["wrap"] if b.opset >= 19 else [])
    mode = draw(st.sampled_from(modes))
    pad = st.one_of(st.integers(-2, 3), st.sampled_from(EXTREMES))
    if b.opset < 11:  # Pad-2: pads is an attribute
        pads = draw(st.lists(pad, min_size=2 * rank, max_size=2 * rank))
        (out,) = b.node("Pad", [src.name], pads=pads, mode=mode)
        return [Val(out, src.dtype, rank)]
    axes = _axes(draw, rank) if b.opset >= 18 and rank and draw(st.booleans()) else None
    n = rank if axes is None else len(axes)
    inputs = [src.name, int_vector(draw, b, 2 * n, pad)]
    if axes is not None or draw(st.booleans()):
        value = draw(st.sampled_from([0.0, 1.5]))
        inputs.append(b.const(np.array(value).astype(helper.tensor_dtype_to_np_dtype(src.dtype))))
    if axes is not None:
        inputs.append(b.i64(axes))
    (out,) = b.node("Pad", inputs, mode=mode)
    return [Val(out, src.dtype, rank)]


@_gen("Range", min_opset=11)
def _range(draw: Draw, b: Builder, src: Val) -> list[Val]:
    dtype = draw(st.sampled_from(["int64", "int64", "int32", "float32"]))
    parts = []
    for role in ("start", "limit", "delta"):
        if draw(st.floats(0, 1)) < 0.35:
            part = _dim_element(draw, b, scalar=True)
            if dtype != "int64":
                to = I32 if dtype == "int32" else F
                (part,) = b.node("Cast", [part], to=to)
            parts.append(part)
            continue
        value: int | float = draw(
            bound() if role != "delta" else st.one_of(st.sampled_from([1, -1, 2, -3, 0]), bound())
        )
        if dtype == "int32":
            value = int(np.int64(value).astype(np.int32))
        elif dtype == "float32":
            value = draw(st.sampled_from([value, 0.5, -1.5, 2.5, 1e9]))
        parts.append(b.const(np.array(value, dtype=dtype)))
    (out,) = b.node("Range", parts)
    return [Val(out, {"int64": I64, "int32": I32, "float32": F}[dtype], 1)]


SCALES = (0.5, 1.0, 2.0, 1.5, 3.0, 0.25, 1 / 3, 0.7, 0.0, -1.0, 1e9, 1.0001, 0.9999)


@_gen("Resize", min_opset=11)
def _resize(draw: Draw, b: Builder, src: Val) -> list[Val]:
    rank = src.rank or 0
    if src.dtype != F or rank == 0:
        return []
    axes = _axes(draw, rank) if b.opset >= 18 and draw(st.booleans()) else None
    n = rank if axes is None else len(axes)
    empty = b.const(np.zeros(0, np.float32))
    roi = empty if b.opset < 13 else ""
    if draw(st.booleans()):
        scales = draw(st.lists(st.sampled_from(SCALES), min_size=n, max_size=n))
        inputs = [src.name, roi, b.const(np.array(scales, np.float32))]
    else:
        sizes = int_vector(draw, b, n, small_or_bound(), symbolic=0.5)
        inputs = [src.name, roi, empty if b.opset < 13 else "", sizes]
    attrs: dict[str, Any] = {"mode": "nearest"}
    if axes is not None:
        attrs["axes"] = axes
    if b.opset >= 18 and len(inputs) == 4 and draw(st.integers(0, 3)) == 0:
        attrs["keep_aspect_ratio_policy"] = draw(st.sampled_from(["not_larger", "not_smaller"]))
    (out,) = b.node("Resize", inputs, **attrs)
    return [Val(out, F, rank)]


def _reshape_target(draw: Draw, b: Builder, src: Val) -> tuple[str, int]:
    """A target that fits by construction: groups of the input's dims (each as 0, the dim
    read from Shape, or -1 once), or drawn elements."""
    rank = src.rank or 0
    if draw(st.integers(0, 3)) == 0 or src.name not in b.input_ranks:
        length = draw(st.integers(0, 4))
        element = _mostly([0, -1, 1, 2, 3, 6], EXTREMES)
        return int_vector(draw, b, length, element, symbolic=0.5), length
    cuts = sorted(draw(st.sets(st.integers(1, max(rank - 1, 1)), max_size=rank)))
    groups = [list(range(a, z)) for a, z in zip([0, *cuts], [*cuts, rank], strict=False) if z > a]
    used_minus_one = False
    parts: list[str] = []
    for i, group in enumerate(groups):
        choice = draw(st.sampled_from(["shape", "minus_one", "zero"]))
        if choice == "minus_one" and not used_minus_one:
            used_minus_one = True
            parts.append(b.i64([-1]))
        elif choice == "zero" and group == [i]:
            parts.append(b.i64([0]))
        else:
            (shape,) = b.node("Shape", [src.name])
            (dims,) = b.node("Gather", [shape, b.i64(group)], axis=0)
            if len(group) > 1 and b.opset >= 18:
                (dims,) = b.node("ReduceProd", [dims, b.i64([0])], keepdims=1)
            elif len(group) > 1:
                (dims,) = b.node("ReduceProd", [dims], keepdims=1, axes=[0])
            parts.append(dims)
    if draw(st.booleans()):
        parts.insert(draw(st.integers(0, len(parts))), b.i64([1]))
    if not parts:
        return b.i64(np.zeros(0, np.int64)), 0
    (out,) = b.node("Concat", parts, axis=0) if len(parts) > 1 else (parts[0],)
    return out, len(parts)


@_gen("Reshape", min_opset=5)
def _reshape(draw: Draw, b: Builder, src: Val) -> list[Val]:
    target, length = _reshape_target(draw, b, src)
    allowzero = draw(st.sampled_from([None, 0, 1])) if b.opset >= 14 else None
    (out,) = b.node("Reshape", [src.name, target], allowzero=allowzero)
    return [Val(out, src.dtype, length)]


@_gen("Expand", min_opset=8)
def _expand(draw: Draw, b: Builder, src: Val) -> list[Val]:
    rank = src.rank or 0
    length = draw(st.integers(0, rank + 2))
    element = _mostly([1, 1, 0, 2, 3, -1], EXTREMES)
    target = int_vector(draw, b, length, element, symbolic=0.5)
    (out,) = b.node("Expand", [src.name, target])
    return [Val(out, src.dtype, max(rank, length))]


@_gen("Tile", min_opset=6)
def _tile(draw: Draw, b: Builder, src: Val) -> list[Val]:
    rank = src.rank or 0
    if rank == 0:
        return []
    element = _mostly([1, 2, 0, 3, -1], EXTREMES)
    (out,) = b.node("Tile", [src.name, int_vector(draw, b, rank, element)])
    return [Val(out, src.dtype, rank)]


@_gen("Gather")
def _gather(draw: Draw, b: Builder, src: Val) -> list[Val]:
    rank = src.rank or 0
    if rank == 0:
        return []
    axis = _axis(draw, rank)
    index = _mostly([0, -1, 1, -2, 2, 3, -4], EXTREMES)
    shape = draw(st.sampled_from([(), (1,), (2,), (0,), (2, 2), (1, 0)]))
    values = draw(st.lists(index, min_size=int(np.prod(shape)), max_size=int(np.prod(shape))))
    indices = b.const(np.array(values, np.int64).reshape(shape))
    (out,) = b.node("Gather", [src.name, indices], axis=axis)
    return [Val(out, src.dtype, rank - 1 + len(shape))]


@_gen("TopK")
def _topk(draw: Draw, b: Builder, src: Val) -> list[Val]:
    rank = src.rank or 0
    if rank == 0 or src.dtype not in (F, I64, I32):
        return []
    axis = _axis(draw, rank) if draw(st.booleans()) else None
    k_value = st.one_of(st.sampled_from([1, 0, 2, 3]), bound())
    if b.opset < 10:  # TopK-1: k is an attribute
        k = draw(k_value)
        values, indices = b.node("TopK", [src.name], n_out=2, axis=axis, k=k)
    else:
        k_input = int_scalar(draw, b, k_value, rank1=True)
        largest = draw(st.sampled_from([None, 0])) if b.opset >= 11 else None
        values, indices = b.node("TopK", [src.name, k_input], n_out=2, axis=axis, largest=largest)
    return [Val(values, src.dtype, rank), Val(indices, I64, rank)]


@_gen("Split", min_opset=2)
def _split(draw: Draw, b: Builder, src: Val) -> list[Val]:
    rank = src.rank or 0
    if rank == 0:
        return []
    axis = _axis(draw, rank) if draw(st.booleans()) else None
    n_out = draw(st.integers(1, 3))
    size = _mostly([1, 2, 0, 3, -1], EXTREMES)
    how = draw(st.sampled_from(["sizes", "equal", "num_outputs"]))
    if b.opset < 13:  # Split-2/11: split is an attribute
        split = draw(st.lists(size, min_size=n_out, max_size=n_out)) if how == "sizes" else None
        outs = b.node("Split", [src.name], n_out=n_out, axis=axis, split=split)
    elif how == "sizes" or (how == "num_outputs" and b.opset < 18):
        sizes = int_vector(draw, b, n_out, size, symbolic=0.4)
        outs = b.node("Split", [src.name, sizes], n_out=n_out, axis=axis)
    elif how == "num_outputs":
        outs = b.node("Split", [src.name], n_out=n_out, axis=axis, num_outputs=n_out)
    else:
        if b.opset >= 18:
            return []  # Split-18 needs split or num_outputs (onnxruntime aborts without)
        outs = b.node("Split", [src.name], n_out=n_out, axis=axis)
    return [Val(o, src.dtype, rank) for o in outs]


@_gen("Squeeze")
def _squeeze(draw: Draw, b: Builder, src: Val) -> list[Val]:
    rank = src.rank or 0
    axes = _axes(draw, rank, min_size=0) if draw(st.integers(0, 4)) else None
    if axes is None:
        (out,) = b.node("Squeeze", [src.name])
        return [Val(out, src.dtype, None)]
    if b.opset < 13:
        (out,) = b.node("Squeeze", [src.name], axes=axes or None)
    else:
        (out,) = b.node("Squeeze", [src.name, b.i64(np.array(axes, np.int64))])
    return [Val(out, src.dtype, rank - len(axes))]


@_gen("Unsqueeze")
def _unsqueeze(draw: Draw, b: Builder, src: Val) -> list[Val]:
    rank = src.rank or 0
    k = draw(st.integers(1, 2))
    axes = _axes(draw, rank + k, min_size=k, max_size=k)
    if b.opset < 13:
        (out,) = b.node("Unsqueeze", [src.name], axes=axes)
    else:
        (out,) = b.node("Unsqueeze", [src.name, b.i64(axes)])
    return [Val(out, src.dtype, rank + len(axes))]


@_gen("ConstantOfShape", min_opset=9)
def _constant_of_shape(draw: Draw, b: Builder, src: Val) -> list[Val]:
    length = draw(st.integers(0, 3))
    element = _mostly([1, 2, 0, 3], [-1, *EXTREMES])
    target = int_vector(draw, b, length, element, symbolic=0.5)
    value = helper.make_tensor("value", F, [1], [1.0]) if draw(st.booleans()) else None
    (out,) = b.node("ConstantOfShape", [target], value=value)
    return [Val(out, F, length)]


@_gen("OneHot", min_opset=9)
def _one_hot(draw: Draw, b: Builder, src: Val) -> list[Val]:
    rank = src.rank or 0
    axis = draw(st.integers(-rank - 1, rank)) if draw(st.booleans()) else None
    depth_value = st.one_of(st.sampled_from([1, 2, 3, 0, -1]), bound())
    depth = int_scalar(draw, b, depth_value, rank1=draw(st.booleans()))
    values = b.const(np.array([0.0, 1.0], np.float32))
    indices = src.name
    if src.dtype != I64:  # onnxruntime has int64 indices with int64 depth and float values
        (indices,) = b.node("Cast", [src.name], to=I64)
    (out,) = b.node("OneHot", [indices, depth, values], axis=axis)
    return [Val(out, F, rank + 1)]


@_gen("CumSum", min_opset=11)
def _cumsum(draw: Draw, b: Builder, src: Val) -> list[Val]:
    rank = src.rank or 0
    axis = _axis(draw, rank)
    dtype = draw(st.sampled_from([np.int64, np.int32]))
    axis_c = b.const(np.array(int(np.int64(axis).astype(dtype)), dtype))
    reverse = draw(st.sampled_from([None, 1]))
    (out,) = b.node("CumSum", [src.name, axis_c], reverse=reverse)
    return [Val(out, src.dtype, rank)]


@_gen("Reduce", min_opset=1)
def _reduce(draw: Draw, b: Builder, src: Val) -> list[Val]:
    rank = src.rank or 0
    op = draw(st.sampled_from(["ReduceSum", "ReduceMean"]))
    from_input = b.opset >= (13 if op == "ReduceSum" else 18)
    keepdims = draw(st.sampled_from([None, 0, 1]))
    kind = draw(st.sampled_from(["axes", "axes", "none", "empty"]))
    axes = _axes(draw, rank) if kind == "axes" else None
    if not from_input:
        (out,) = b.node(op, [src.name], axes=axes, keepdims=keepdims)
    else:
        inputs = [src.name]
        if kind != "none":
            inputs.append(b.i64(np.array(axes or [], np.int64)))
        noop = draw(st.sampled_from([None, 0, 1]))
        (out,) = b.node(op, inputs, keepdims=keepdims, noop_with_empty_axes=noop)
    kept = keepdims is None or keepdims == 1
    return [Val(out, src.dtype, rank if kept else rank - len(set(axes or [])))]


@_gen("Trilu", min_opset=14)
def _trilu(draw: Draw, b: Builder, src: Val) -> list[Val]:
    rank = src.rank or 0
    if rank < 2:
        return []
    inputs = [src.name]
    if draw(st.integers(0, 3)):
        inputs.append(int_scalar(draw, b, bound(), rank1=False))
    (out,) = b.node("Trilu", inputs, upper=draw(st.sampled_from([None, 0])))
    return [Val(out, src.dtype, rank)]


@_gen("GatherElements", min_opset=11)
def _gather_elements(draw: Draw, b: Builder, src: Val) -> list[Val]:
    rank = src.rank or 0
    if rank == 0:
        return []
    axis = _axis(draw, rank)
    shape = draw(st.lists(st.integers(0, 2), min_size=rank, max_size=rank))
    index = _mostly([0, -1, 1], EXTREMES)
    size = int(np.prod(shape))
    values = draw(st.lists(index, min_size=size, max_size=size))
    indices = b.const(np.array(values, np.int64).reshape(shape))
    (out,) = b.node("GatherElements", [src.name, indices], axis=axis)
    return [Val(out, src.dtype, rank)]


@_gen("ScatterND", min_opset=11)
def _scatter_nd(draw: Draw, b: Builder, src: Val) -> list[Val]:
    rank = src.rank or 0
    if rank == 0 or src.dtype != F:
        return []
    k = draw(st.integers(0, 2))
    index = _mostly([0, -1, 1], EXTREMES)
    values = draw(st.lists(index, min_size=k * rank, max_size=k * rank))
    indices = b.const(np.array(values, np.int64).reshape(k, rank))
    updates = b.const(np.ones(k, np.float32))
    (out,) = b.node("ScatterND", [src.name, indices, updates])
    return [Val(out, F, rank)]


@_gen("Shape", min_opset=15)
def _shape(draw: Draw, b: Builder, src: Val) -> list[Val]:
    start = draw(bound()) if draw(st.booleans()) else None
    end = draw(bound()) if draw(st.booleans()) else None
    (out,) = b.node("Shape", [src.name], start=start, end=end)
    return [Val(out, I64, 1)]


# -- whole cases ------------------------------------------------------------------------------
@st.composite
def _input_dims(draw: Draw) -> list[int | str]:
    rank = draw(st.sampled_from([1, 2, 2, 3, 3, 4, 0]))
    dim = st.one_of(st.sampled_from(SYMBOLS), st.sampled_from([1, 2, 3, 0, 5]))
    return draw(st.lists(dim, min_size=rank, max_size=rank))


@st.composite
def cases(draw: Draw, families: Sequence[str] | None = None) -> Case:
    """A model of one to three ops of ``families`` (default: all), opset drawn from OPSETS."""
    opset = draw(st.sampled_from(OPSETS))
    b = Builder(opset)
    b.add_input(draw(_input_dims()))
    if draw(st.integers(0, 3)) == 0:
        b.add_input(draw(_input_dims()))
    names = sorted(f for f in families or GENERATORS if GENERATORS[f][0] <= opset)
    if not names:
        names = ["Gather"]
    steps = draw(st.integers(1, 3))
    for _ in range(steps):
        family = draw(st.sampled_from(names))
        candidates = [v for v in b.data if v.rank is not None]
        # the last op's output most of the time, so ops chain
        src = candidates[-1] if draw(st.integers(0, 2)) else draw(st.sampled_from(candidates))
        outs = GENERATORS[family][1](draw, b, src)
        for v in outs:  # a rank the builder got wrong (invalid axes) is no rank
            if v.rank is not None and v.rank < 0:
                v.rank = None
        if outs:
            b.ops.append(family)
            b.data.extend(outs)
    if not b.nodes:
        (out,) = b.node("Identity", [b.data[0].name])
    return b.case()


@st.composite
def examples(
    draw: Draw, families: Sequence[str] | None = None, runs: int = 3
) -> tuple[Case, list[dict[str, int]]]:
    """A case and ``runs`` bindings of its symbols to sizes 0..7."""
    case = draw(cases(families))
    size = st.one_of(st.integers(1, 3), st.integers(0, 7))
    bindings = [{s: draw(size) for s in case.symbols} if case.symbols else {} for _ in range(runs)]
    return case, bindings


# -- onnxruntime in a child -------------------------------------------------------------------
_CHILD = r"""
import os, pickle, resource, struct, sys
limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
import numpy as np
import onnxruntime as ort

inp, out = sys.stdin.buffer, sys.stdout.buffer
def answer(obj):
    data = pickle.dumps(obj)
    out.write(struct.pack("<Q", len(data)) + data)
    out.flush()

def summary(array):
    array = np.asarray(array)
    values = None
    if array.dtype.kind in "iu" and array.size <= 64:
        values = [int(v) for v in array.reshape(-1)]
    return tuple(int(d) for d in array.shape), values

answer("ready")
while True:
    head = inp.read(8)
    if len(head) < 8:
        break
    model, sets = pickle.loads(inp.read(struct.unpack("<Q", head)[0]))
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 4
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    try:
        session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    except Exception as exc:
        answer(("load", str(exc).splitlines()[0] if str(exc) else type(exc).__name__))
        continue
    names = [o.name for o in session.get_outputs()]
    results = []
    for feeds in sets:
        try:
            arrays = session.run(names, feeds)
            results.append({n: summary(a) for n, a in zip(names, arrays)})
        except Exception as exc:
            results.append(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
    del session
    answer(("ran", results))
"""

Observation = dict[str, tuple[tuple[int, ...], list[int] | None]]
"""Output name -> (shape, elements of a small integer tensor or None)."""


class OrtWorker:
    """onnxruntime in a child process (graph optimizations off, one thread, address space
    capped at ``memory`` bytes): a model whose constants ask for 1e9 elements fails to
    allocate there, and an abort or a run past ``timeout`` seconds restarts the child."""

    def __init__(self, memory: int = 3 << 30, timeout: float = 30.0) -> None:
        self.memory = memory
        self.timeout = timeout
        self.proc: subprocess.Popen[bytes] | None = None
        self.restarts = 0

    def _start(self) -> subprocess.Popen[bytes]:
        env = dict(os.environ, OMP_NUM_THREADS="1")
        proc = subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(self.memory)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        self.proc = proc
        if self._read(proc, 120.0) != "ready":
            raise RuntimeError("the onnxruntime child did not start")
        return proc

    def _read(self, proc: subprocess.Popen[bytes], timeout: float) -> Any:
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        buf = b""
        need = 8
        size = None
        while len(buf) < need:
            ready, _, _ = select.select([fd], [], [], timeout)
            if not ready:
                raise TimeoutError
            chunk = os.read(fd, max(need - len(buf), 1 << 16))
            if not chunk:
                raise EOFError
            buf += chunk
            if size is None and len(buf) >= 8:
                size = struct.unpack("<Q", buf[:8])[0]
                need = 8 + size
        return pickle.loads(buf[8:need])

    def close(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def run(
        self, model: bytes, sets: Sequence[Mapping[str, np.ndarray]]
    ) -> tuple[str | None, list[Observation | str]]:
        """(why the model did not load, or None; per input set its outputs or its error)."""
        proc = self.proc if self.proc is not None and self.proc.poll() is None else None
        if proc is None:
            proc = self._start()
        assert proc.stdin is not None
        data = pickle.dumps((model, [dict(s) for s in sets]))
        try:
            proc.stdin.write(struct.pack("<Q", len(data)) + data)
            proc.stdin.flush()
            stage, result = self._read(proc, self.timeout)
        except (TimeoutError, EOFError, BrokenPipeError) as exc:
            self.close()
            self.restarts += 1
            what = "timed out" if isinstance(exc, TimeoutError) else "died"
            return f"onnxruntime {what}", []
        if stage == "load":
            return str(result), []
        return None, result


# -- checking a case --------------------------------------------------------------------------
@dataclass
class Failure:
    kind: str  # wrong-dim, wrong-rank, wrong-value, fresh-dim, negative-dim, over-strict, internal
    op: str  # "Slice-13"
    node: str
    value: str
    detail: str
    written: str = ""  # "int" or "expr": how the wrong dim was written
    run: int | None = None  # the run (binding) it failed at

    @property
    def signature(self) -> tuple[str, str, str]:
        return (self.op, self.kind, self.written)

    def __str__(self) -> str:
        return f"{self.op} {self.kind} at {self.value!r} (node {self.node!r}): {self.detail}"


@dataclass
class Outcome:
    failures: list[Failure] = field(default_factory=list)
    ran: int = 0  # bindings onnxruntime ran
    load_error: str | None = None
    run_errors: list[str] = field(default_factory=list)
    inference_errors: list[str] = field(default_factory=list)
    assumptions: list[str] = field(default_factory=list)
    departures: list[str] = field(default_factory=list)  # see departure()
    compared: int = 0  # dims and elements compared
    secondary: int = 0  # failures that follow from a failure upstream (not reported)


def feeds_for(model: onnx.ModelProto, binding: Mapping[str, int], seed: int) -> dict:
    rng = np.random.default_rng(seed)
    feeds = {}
    for vi in model.graph.input:
        dims = [
            binding[d.dim_param] if d.dim_param else d.dim_value
            for d in vi.type.tensor_type.shape.dim
        ]
        elem = vi.type.tensor_type.elem_type
        if elem in INTEGER_TYPES:
            feeds[vi.name] = rng.integers(-3, 4, size=dims).astype(
                helper.tensor_dtype_to_np_dtype(elem)
            )
        else:
            feeds[vi.name] = rng.standard_normal(dims).astype(np.float32)
    return feeds


def _since(op_type: str, opset: int) -> str:
    try:
        return f"{op_type}-{onnx.defs.get_schema(op_type, opset).since_version}"
    except onnx.defs.SchemaError:
        return op_type


def _fmt(dims: Sequence[Any] | None) -> str:
    if dims is None:
        return "?"
    return "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"


def check(case: Case, bindings: Sequence[Mapping[str, int]], worker: OrtWorker) -> Outcome:
    """Infer ``case``, run it at each binding, and list the root failures: those of an op
    whose inputs inference got right (a wrong dim downstream of a wrong dim is counted in
    ``secondary``). onnxruntime's departures from the spec (``departure``) and dims written
    under an assumption inference states (``assumed: N == M`` of broadcasting) that the
    binding breaks are listed apart, in ``departures``."""
    from onnxforge.errors import OnnxForgeError
    from onnxforge.io import from_proto
    from onnxforge.ir import TensorType
    from onnxforge.shape_infer import infer
    from onnxforge.shape_infer.symbolic import evaluate, is_unknown_symbol

    out = Outcome()
    proto = case.model
    producer: dict[str, onnx.NodeProto] = {o: n for n in proto.graph.node for o in n.output}
    sets = [feeds_for(proto, b, seed) for seed, b in enumerate(bindings)]
    out.load_error, results = worker.run(proto.SerializeToString(), sets)
    runs: list[tuple[Mapping[str, int], Observation]] = []
    for binding, feeds, result in zip(bindings, sets, results, strict=False):
        if isinstance(result, str):
            out.run_errors.append(result)
            continue
        observed = dict(result)
        for name, array in feeds.items():
            observed[name] = (tuple(array.shape), None)
        for t in proto.graph.initializer:
            array = numpy_helper.to_array(t)
            values = [int(v) for v in array.reshape(-1)] if array.dtype.kind in "iu" else None
            observed[t.name] = (tuple(array.shape), values)
        runs.append((binding, observed))
    out.ran = len(runs)
    ran_everywhere = out.load_error is None and out.ran == len(bindings)

    try:
        model = from_proto(onnx.ModelProto.FromString(proto.SerializeToString()))
        report = infer(model)
    except OnnxForgeError as exc:
        if ran_everywhere:
            out.failures.append(Failure("over-strict", "load", "", "", str(exc)))
        out.inference_errors.append(str(exc))
        return out
    except Exception as exc:  # noqa: BLE001  (a crash is the finding)
        out.failures.append(Failure("internal", "infer", "", "", f"{type(exc).__name__}: {exc}"))
        return out
    out.assumptions = [str(a) for a in report.assumptions]

    types: dict[str, tuple[Any, ...]] = {}
    for value in model.graph.values():
        if isinstance(value.type, TensorType) and value.type.shape is not None:
            types[value.name] = value.type.shape
    known = {v.name: k for v, k in report.known_values.items()}

    def mismatch(
        dims: Sequence[Any],
        actual: Sequence[int],
        binding: Mapping[str, int],
        seen: dict[str, int],
    ) -> str | None:
        """How the written dims (or elements) differ from the actual ones, or None."""
        for d, a in zip(dims, actual, strict=True):
            if d is None:
                continue
            out.compared += 1
            if isinstance(d, str) and is_unknown_symbol(d):
                if seen.setdefault(d, a) != a:
                    return "fresh-dim"
                continue
            value = evaluate(d, binding)
            if value is not None and value != a:
                return "expr" if isinstance(d, str) else "int"
        return None

    wrong: dict[str, Failure] = {}
    fresh: list[dict[str, int]] = [{} for _ in runs]
    for name in [o for n in proto.graph.node for o in n.output if o]:
        node = producer[name]
        t, k = types.get(name), known.get(name)
        if t is not None and any(isinstance(d, int) and d < 0 for d in t):
            told = f"inferred {_fmt(t)}: no tensor has a negative dim"
            wrong[name] = Failure("negative-dim", "", node.name, name, told, "int")
            wrong[name].op = _since(node.op_type, case.opset)
            continue
        for index, ((binding, observed), seen) in enumerate(zip(runs, fresh, strict=True)):
            if name not in observed:
                continue
            shape, elements = observed[name]
            at = ", ".join(f"{s}={v}" for s, v in binding.items()) or "static"
            failure = None
            if t is not None:
                told = f"inferred {_fmt(t)}, onnxruntime {list(shape)} at {at}"
                how = "rank" if len(t) != len(shape) else mismatch(t, shape, binding, seen)
                if how == "rank":
                    written = "expr" if any(isinstance(d, str) for d in t) else "int"
                    failure = Failure("wrong-rank", "", node.name, name, told, written)
                elif how == "fresh-dim":
                    failure = Failure("fresh-dim", "", node.name, name, told, "expr")
                elif how is not None:
                    failure = Failure("wrong-dim", "", node.name, name, told, how)
            if failure is None and k is not None and elements is not None:
                told = f"inferred elements {_fmt(k)}, onnxruntime {elements} at {at}"
                if len(k) != len(elements):
                    failure = Failure("wrong-value", "", node.name, name, told, "length")
                else:
                    how = mismatch(k, elements, binding, seen)
                    if how is not None:
                        failure = Failure("wrong-value", "", node.name, name, told, how)
            if failure is not None:
                failure.op = _since(node.op_type, case.opset)
                failure.run = index
                wrong[name] = failure
                break

    for error in report.errors:
        out.inference_errors.append(str(error))
        if error.internal:
            out.failures.append(Failure("internal", error.op, error.node, "", error.reason))
        elif ran_everywhere:
            out.failures.append(Failure("over-strict", error.op, error.node, "", error.reason))
    nodes = {n.name: n for n in proto.graph.node}
    out.failures += wrong.values()
    kept = []
    for failure in out.failures:
        at_node = nodes.get(failure.node)
        if at_node is not None and any(i in wrong for i in at_node.input):
            out.secondary += 1
            continue
        observed = runs[failure.run][1] if failure.run is not None else {}
        binding = runs[failure.run][0] if failure.run is not None else {}
        reason = None if at_node is None else departure(at_node, failure, observed)
        if reason is None and failure.run is not None:
            reason = _broken_assumption(report.assumptions, failure.node, binding)
        if reason is None:
            kept.append(failure)
        else:
            out.departures.append(reason)
    out.failures = kept
    return out


RELATIONS: dict[str, Callable[[int, int], bool]] = {
    "==": int.__eq__,
    "!=": int.__ne__,
    ">=": int.__ge__,
    "<=": int.__le__,
    ">": int.__gt__,
    "<": int.__lt__,
}


def _broken_assumption(
    assumptions: Sequence[Any], node: str, binding: Mapping[str, int]
) -> str | None:
    """An assumption of ``node`` that the binding breaks (README: "An assumption ... is kept
    as a fact only where the model cannot run without it", e.g. two broadcast symbols taken
    as equal): the dims written under it are listed apart, not held against the run."""
    from onnxforge.shape_infer.symbolic import evaluate

    for a in assumptions:
        if a.node != node or a.relation not in RELATIONS:
            continue
        x, y = evaluate(a.a, binding), evaluate(a.b, binding)
        if x is not None and y is not None and not RELATIONS[a.relation](x, y):
            return f"{a.op}: a dim written under a stated assumption ({a.relation}) the run breaks"
    return None


REDUCE_OPS = frozenset({"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd"})


def departure(node: onnx.NodeProto, failure: Failure, observed: Observation) -> str | None:
    """Why onnxruntime's answer differs where onnxforge follows the spec on purpose
    (tests/shape_infer/test_split.py's ``ort_departs`` lists Split's) or a bound the README
    documents (Slice's 2**31-1); None otherwise. ``observed``: shapes and small integer
    elements of the failing run."""
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}

    def elements(index: int) -> list[int] | None:
        if index >= len(node.input) or not node.input[index]:
            return None
        return observed.get(node.input[index], ((), None))[1]

    if failure.kind == "over-strict" and failure.op == "Split-2" and attrs.get("axis", 0) < 0:
        return "Split-2 with a negative axis runs in onnxruntime (the spec allows it from 11)"
    if failure.kind == "over-strict" and node.op_type == "TopK" and "axis" in failure.detail:
        return (
            "TopK with an axis out of range runs in onnxruntime when the input's shape is known "
            "only at run time (an invalid model; the kernel reads past the dims)"
        )
    if failure.kind not in ("wrong-dim", "wrong-rank", "wrong-value"):
        return None
    if (
        node.op_type == "Slice"
        and max(observed.get(node.input[0], ((), None))[0] or (0,)) >= I32_MAX
    ):
        return (
            "Slice of a dim past 2**31-1 (an empty tensor's): README's one bound for Slice, "
            "a bound at 2**31-1 or past reaches the end"
        )
    if node.op_type == "Slice" and failure.op != "Slice-1":
        ends, steps = elements(2) or [], elements(4) or []
        if any(s < 0 for s in steps) and any(e in (I32_MAX, I64_MAX) for e in ends):
            return (
                "Slice with a negative step and end INT32_MAX or INT64_MAX: onnxruntime slices "
                "to the beginning (the spec clamps end to dim-1)"
            )
    if node.op_type in REDUCE_OPS:
        shape = observed.get(node.input[0], ((1,), None))[0]
        axes = attrs.get("axes") or elements(1) or []
        if 0 in shape and any(a < 0 for a in axes):
            return (
                "a reduction with a negative axis of an empty input: onnxruntime returns the "
                "input's shape"
            )
    policy = attrs.get("keep_aspect_ratio_policy", b"stretch")
    if node.op_type == "Resize" and policy != b"stretch" and min(attrs.get("axes", [0])) < 0:
        return (
            "Resize with keep_aspect_ratio_policy and a negative axis: onnxruntime leaves the "
            "input's dims"
        )
    if node.op_type == "Squeeze" and failure.op != "Squeeze-1" and elements(1) == []:
        return "Squeeze with an empty axes tensor: onnxruntime squeezes every 1 (spec: none)"
    return None


def repro_text(case: Case, bindings: Sequence[Mapping[str, int]], outcome: Outcome) -> str:
    """What went wrong, the bindings, and the case as ONNX text: its outputs are untyped, so
    read it with ``onnxforge.io.from_proto(onnx.parser.parse_model(text))`` (onnx's checker,
    which ``model_from_text`` runs, wants typed outputs)."""
    lines = [f"# ops: {', '.join(case.ops)}; opset {case.opset}"]
    for f in outcome.failures:
        lines.append(f"# FAILURE {f}")
    for a in outcome.assumptions:
        lines.append(f"# assumed: {a}")
    for e in outcome.inference_errors:
        lines.append(f"# inference error: {e}")
    if outcome.load_error:
        lines.append(f"# onnxruntime load: {outcome.load_error}")
    for e in outcome.run_errors:
        lines.append(f"# onnxruntime run: {e}")
    lines.append(f"# bindings: {list(bindings)}")
    lines.append(onnx.printer.to_text(case.model))
    return "\n".join(lines) + "\n"
