"""Shape rules for convolution, pooling, reductions and Constant: the ops of CNNs and
transformers that onnx's per-node inference (the fallback) otherwise handled, at about half of
inference's time on mobilenetv3 and ViT. Unusual cases (ceil_mode, sizes that come out below 1)
go to that fallback, so its errors stay the authority there. ConvInteger and QLinearConv, the
quantized convolutions, are Conv's shape with their own element type; ``window_dims``,
``conv_shape`` and ``reduced_shape`` are shared with com.microsoft's quantized twins (contrib)."""

from __future__ import annotations

__all__: list[str] = []

from collections.abc import Sequence

from onnxforge.ir import (
    Dim,
    DType,
    Op,
    Shape,
    SparseTensor,
    Tensor,
    TensorType,
    constant_tensor,
)
from onnxforge.opset import REDUCE_OPS, schema_versions
from onnxforge.shape_infer.engine import InferContext, shape_rule
from onnxforge.shape_infer.symbolic import dim_add, dim_ceildiv, dim_floordiv, dim_min, dim_mul

Inputs = Sequence[TensorType | None]

POOL_OPS = ("MaxPool", "AveragePool", "LpPool")
GLOBAL_POOL_OPS = ("GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool")


def _fallback(op: Op, inputs: Inputs, ctx: InferContext) -> list[TensorType | None]:
    from onnxforge.shape_infer import _onnx_fallback  # noqa: PLC0415  (imports onnx)

    return _onnx_fallback.infer_node(op, list(inputs), ctx)  # type: ignore[return-value]


# -- Constant -----------------------------------------------------------------------------------
@shape_rule("Constant", versions=schema_versions("Constant"))
def infer_constant(op: Op, inputs: Inputs, ctx: InferContext) -> list[TensorType | None]:
    tensor = constant_tensor(op)
    if isinstance(tensor, Tensor):
        return [TensorType(tensor.dtype, tuple(tensor.shape))]
    sparse = op.attr("sparse_value")
    if isinstance(sparse, SparseTensor):
        return [TensorType(sparse.values.dtype, tuple(sparse.dims))]
    if op.attr("value_string") is not None:
        return [TensorType(DType.STRING, ())]
    strings = op.attr("value_strings")
    if strings is not None:
        return [TensorType(DType.STRING, (len(strings),))]
    return _fallback(op, inputs, ctx)


# -- convolution and pooling --------------------------------------------------------------------
def window_dims(op: Op, spatial: Sequence[Dim], kernel: Sequence[int]) -> list[Dim] | None:
    """Output sizes of a sliding window over ``spatial``; None where onnx should decide."""
    n = len(spatial)
    strides = [int(s) for s in (op.attr("strides") or [1] * n)]
    dilations = [int(d) for d in (op.attr("dilations") or [1] * n)]
    pads = [int(p) for p in (op.attr("pads") or [0] * (2 * n))]
    auto_pad = op.attr("auto_pad", "NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else str(auto_pad)
    if len(strides) != n or len(dilations) != n or len(pads) != 2 * n or len(kernel) != n:
        return None
    if min(strides, default=1) < 1 or min(dilations, default=1) < 1:
        return None
    ceil_mode = bool(op.attr("ceil_mode", 0))
    if ceil_mode and auto_pad != "NOTSET":
        return None
    out: list[Dim] = []
    for i, size in enumerate(spatial):
        reach = dilations[i] * (kernel[i] - 1) + 1
        if ceil_mode:
            out.append(_ceil_window(size, pads[i], pads[i + n], reach, strides[i]))
            continue
        if not isinstance(size, int):  # symbolic: the same formula, written out
            out.append(_symbolic_window(size, auto_pad, pads[i] + pads[i + n], reach, strides[i]))
            continue
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            result = -(-size // strides[i])
        elif auto_pad == "VALID":
            result = -(-(size - reach + 1) // strides[i])
        elif auto_pad == "NOTSET":
            total = pads[i] + pads[i + n]
            result = (size + total - reach) // strides[i] + 1
        else:
            return None
        if result < 1:
            return None
        out.append(result)
    return out


def _ceil_window(size: Dim, begin: int, end: int, reach: int, stride: int) -> Dim:
    """Pooling with ceil_mode: ``ceil((S+p-k)/s)+1`` windows, less a last one that would start
    in the end padding (onnxruntime's and onnx's rule). The windows that start inside
    ``S + begin`` number ``ceil((S+begin)/s)``; when the end padding is no wider than a window
    the correction is the min of the two."""
    if isinstance(size, int):
        result = -(-(size + begin + end - reach) // stride) + 1
        if (result - 1) * stride >= size + begin:
            result -= 1
        return result if result >= 1 else None
    if end > reach:
        return None
    windows = dim_add(dim_ceildiv(dim_add(size, begin + end - reach), stride), 1)
    return dim_min(windows, dim_ceildiv(dim_add(size, begin), stride))


def _symbolic_window(size: Dim, auto_pad: str, total: int, reach: int, stride: int) -> Dim:
    """Windows over a symbolic size: ``ceil(S/s)`` (SAME), ``ceil((S-k+1)/s)`` (VALID),
    ``floor((S+p-k)/s)+1`` (explicit pads); onnxruntime fails when the size is too small."""
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        return dim_ceildiv(size, stride)
    if auto_pad == "VALID":
        return dim_ceildiv(dim_add(size, 1 - reach), stride)
    if auto_pad == "NOTSET":
        return dim_add(dim_floordiv(dim_add(size, total - reach), stride), 1)
    return None


def conv_shape(op: Op, x: TensorType | None, w: TensorType | None) -> Shape | None:
    """Conv's output shape for data ``x`` [N, C, *spatial] and weights ``w`` [M, C/group,
    *kernel]: [N, M, *windows]. None where onnx should decide (or name the error)."""
    if x is None or x.shape is None or len(x.shape) < 3:
        return None
    rank = len(x.shape)
    kernel = op.attr("kernel_shape")
    channels: Dim = None
    if w is not None and w.shape is not None:
        if len(w.shape) != rank:
            return None  # onnx names the mismatch
        channels = w.shape[0]
        if kernel is None and all(isinstance(d, int) for d in w.shape[2:]):
            kernel = w.shape[2:]
    if kernel is None:
        return (x.shape[0], channels) + (None,) * (rank - 2)
    spatial = window_dims(op, x.shape[2:], [int(k) for k in kernel])
    if spatial is None:
        return None
    return (x.shape[0], channels, *spatial)


def _input(inputs: Inputs, index: int) -> TensorType | None:
    return inputs[index] if index < len(inputs) else None


@shape_rule("Conv", versions=schema_versions("Conv"))
def infer_conv(op: Op, inputs: Inputs, ctx: InferContext) -> list[TensorType | None]:
    x = inputs[0]
    shape = conv_shape(op, x, _input(inputs, 1))
    if x is None or shape is None:
        return _fallback(op, inputs, ctx)
    if x.shape is not None:  # onnxruntime refuses an empty map and a window it cannot fit
        ctx.positive(*x.shape[2:], *shape[2:])
        _must_equal(x.shape[1], _input(inputs, 1), 1, ctx, int(op.attr("group", 1)))
    return [TensorType(x.dtype, shape)]


# onnxruntime aborts the process (std::terminate) on an LSTM of batch 0 and a GRU of batch
# or sequence 0 (1.31, measured): like Conv's window, sizes a model cannot run without.
_RECURRENT_POSITIVE = {"LSTM": ("batch",), "GRU": ("seq", "batch")}


@shape_rule("LSTM", versions=schema_versions("LSTM"))
@shape_rule("GRU", versions=schema_versions("GRU"))
def infer_recurrent(op: Op, inputs: Inputs, ctx: InferContext) -> list[TensorType | None]:
    """onnx's shapes, the sizes onnxruntime needs (``_RECURRENT_POSITIVE``) as facts, and
    X's input_size taken equal to W's [num_directions, gates*hidden, input_size]."""
    x = inputs[0]
    if x is not None and x.shape is not None and len(x.shape) == 3:
        axes = {"seq": 0, "batch": 1} if not op.attr("layout", 0) else {"seq": 1, "batch": 0}
        ctx.positive(*(x.shape[axes[k]] for k in _RECURRENT_POSITIVE[op.op_type]))
        _must_equal(x.shape[2], _input(inputs, 1), 2, ctx)
    return _fallback(op, inputs, ctx)


def _must_equal(
    dim: Dim, w: TensorType | None, axis: int, ctx: InferContext, scale: int = 1
) -> None:
    """Record that a data dim must equal a weight's (times ``scale``: Conv's group) where
    the data's is symbolic (a model's name or an unnamed input dim) and the weight's known:
    a size the weights fix (madmom's feature count, 138), which random inputs then take."""
    if w is None or w.shape is None or len(w.shape) <= axis:
        return
    size = w.shape[axis]
    if isinstance(size, int) and isinstance(dim, str):
        ctx.assume(dim, size * scale)


@shape_rule("ConvInteger", versions=schema_versions("ConvInteger"))
def infer_conv_integer_10(op: Op, inputs: Inputs, ctx: InferContext) -> list[TensorType | None]:
    """x, w, x_zero_point, w_zero_point: Conv's shape, int32 accumulators."""
    shape = conv_shape(op, inputs[0], _input(inputs, 1))
    if shape is None:
        return _fallback(op, inputs, ctx)
    return [TensorType(DType.INT32, shape)]


@shape_rule("QLinearConv", versions=schema_versions("QLinearConv"))
def infer_qlinear_conv_10(op: Op, inputs: Inputs, ctx: InferContext) -> list[TensorType | None]:
    """x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B: Conv's
    shape of x and w, y_zero_point's element type (0, unknown, while that type is)."""
    shape = conv_shape(op, inputs[0], _input(inputs, 3))
    if shape is None:
        return _fallback(op, inputs, ctx)
    zero = _input(inputs, 7)
    return [TensorType(DType.UNDEFINED if zero is None else zero.dtype, shape)]


@shape_rule("ConvTranspose", versions=schema_versions("ConvTranspose"))
def infer_conv_transpose(op: Op, inputs: Inputs, ctx: InferContext) -> list[TensorType | None]:
    """[N, W.shape[1] * group, *spatial] with each spatial dim ``s*(S-1) + output_padding +
    d*(k-1) + 1 - pads`` (``S*s`` under SAME auto_pad), symbolic sizes written out (PP-OCR's
    detection heads upsample ``[N, C, H/4, W/4]`` by 2 twice); ``output_shape`` sets them."""
    x, w = inputs[0], _input(inputs, 1)
    if x is None or x.shape is None or len(x.shape) < 3:
        return _fallback(op, inputs, ctx)
    n = len(x.shape) - 2
    group = int(op.attr("group", 1))
    channels: Dim = None
    kernel = op.attr("kernel_shape")
    if w is not None and w.shape is not None and len(w.shape) == n + 2:
        channels = dim_mul(w.shape[1], group)
        if kernel is None and all(isinstance(d, int) for d in w.shape[2:]):
            kernel = w.shape[2:]
    strides = [int(v) for v in (op.attr("strides") or [1] * n)]
    dilations = [int(v) for v in (op.attr("dilations") or [1] * n)]
    extra = [int(v) for v in (op.attr("output_padding") or [0] * n)]
    pads = [int(v) for v in (op.attr("pads") or [0] * (2 * n))]
    auto_pad = op.attr("auto_pad", "NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else str(auto_pad)
    output_shape = op.attr("output_shape")
    if kernel is None or not (
        len(kernel) == len(strides) == len(dilations) == len(extra) == n and len(pads) == 2 * n
    ):
        return _fallback(op, inputs, ctx)
    if output_shape is not None:
        sizes = [int(v) for v in output_shape][-n:]
        if len(sizes) != n:
            return _fallback(op, inputs, ctx)
        return [TensorType(x.dtype, (x.shape[0], channels, *sizes))]
    spatial: list[Dim] = []
    for i, size in enumerate(x.shape[2:]):
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            spatial.append(dim_mul(size, strides[i]))
        elif auto_pad in ("NOTSET", "VALID"):
            reach = dilations[i] * (int(kernel[i]) - 1) + 1
            taken = 0 if auto_pad == "VALID" else pads[i] + pads[i + n]
            grown = dim_mul(dim_add(size, -1), strides[i])
            spatial.append(dim_add(grown, extra[i] + reach - taken))
        else:
            return _fallback(op, inputs, ctx)
    if any(isinstance(d, int) and d < 1 for d in spatial):
        return _fallback(op, inputs, ctx)  # onnx names the error
    return [TensorType(x.dtype, (x.shape[0], channels, *spatial))]


def _infer_pool(op: Op, inputs: Inputs, ctx: InferContext) -> list[TensorType | None]:
    x = inputs[0]
    kernel = op.attr("kernel_shape")
    if x is None or x.shape is None or len(x.shape) < 3 or kernel is None:
        return _fallback(op, inputs, ctx)
    spatial = window_dims(op, x.shape[2:], [int(k) for k in kernel])
    if spatial is None:
        return _fallback(op, inputs, ctx)
    shape = (*x.shape[:2], *spatial)
    results: list[TensorType | None] = [TensorType(x.dtype, shape)]
    if op.op_type == "MaxPool" and len(ctx.scope.graph.outputs_of(op)) > 1:
        results.append(TensorType(DType.INT64, shape))  # Indices
    return results


def _infer_global_pool(op: Op, inputs: Inputs, ctx: InferContext) -> list[TensorType | None]:
    x = inputs[0]
    if x is None or x.shape is None or len(x.shape) < 3:
        return _fallback(op, inputs, ctx)
    return [TensorType(x.dtype, (*x.shape[:2], *(1,) * (len(x.shape) - 2)))]


for _name in POOL_OPS:
    shape_rule(_name, versions=schema_versions(_name))(_infer_pool)
for _name in GLOBAL_POOL_OPS:
    shape_rule(_name, versions=schema_versions(_name))(_infer_global_pool)


# -- reductions ---------------------------------------------------------------------------------
def _axes_from_input(name: str, version: int) -> bool:
    """ReduceSum reads its axes from an input since 13, the other reductions since 18."""
    return version >= (13 if name == "ReduceSum" else 18)


def reduced_shape(shape: Shape, axes: Sequence[int], keep: bool) -> Shape | None:
    """``shape`` reduced over ``axes`` (none: every axis); None when an axis is out of range."""
    rank = len(shape)
    if any(not -rank <= a < rank for a in axes):
        return None
    reduced = {a + rank if a < 0 else a for a in axes} if axes else set(range(rank))
    if keep:
        return tuple(1 if i in reduced else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in reduced)


def _infer_reduce(op: Op, inputs: Inputs, ctx: InferContext) -> list[TensorType | None]:
    x = inputs[0]
    if x is None:
        return [None]
    keep = bool(op.attr("keepdims", 1))
    if x.shape is None:
        return [TensorType(x.dtype, None)]
    rank = len(x.shape)
    if _axes_from_input(op.op_type, ctx.version):
        given = ctx.input(1) is not None
        array = ctx.const(1) if given else None
        if given and array is None:  # axes computed at run time: only the rank may be known
            return [TensorType(x.dtype, (None,) * rank if keep else None)]
        axes = [] if array is None else [int(a) for a in array.reshape(-1)]
        if not axes and op.attr("noop_with_empty_axes", 0):
            return [x]
    else:
        axes = [int(a) for a in (op.attr("axes") or [])]
    shape = reduced_shape(x.shape, axes, keep)
    if shape is None:
        return _fallback(op, inputs, ctx)  # onnx names the bad axis
    return [TensorType(x.dtype, shape)]


for _name in REDUCE_OPS:
    shape_rule(_name, versions=schema_versions(_name))(_infer_reduce)
