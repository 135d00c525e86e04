"""Shape rules for the com.microsoft ops that onnxruntime's transformers optimizer and quantizer
write (Attention, SkipLayerNormalization, the Gelus, QLinear* ...). onnx has no schema for them;
the authority is onnxruntime's contrib op definitions (``bert_defs.cc``,
``quantization_defs.cc``) and what it computes. An op of the domain no rule knows keeps unknown
outputs with a note, as every custom op does.

A quantized op is its float twin's shape with its own element type: QLinearAveragePool is
AveragePool's windows, QLinearReduceMean a reduction, QGemm Gemm, QLinearConcat Concat (its
rule), QLinearWhere Where's broadcast, QAttention Attention, DynamicQuantizeLSTM LSTM (onnx's
RNNShapeInference, which onnxruntime's schema calls)."""

from __future__ import annotations

__all__: list[str] = []

from collections.abc import Callable, Sequence

from onnxforge.errors import ShapeError
from onnxforge.ir import Dim, DType, Op, TensorType
from onnxforge.shape_infer.broadcast import broadcast_shape, format_shape
from onnxforge.shape_infer.engine import SHAPE_RULES, InferContext, ShapeRule, shape_rule
from onnxforge.shape_infer.rules.elementwise import numpy_shape
from onnxforge.shape_infer.rules.linalg import gemm_shape
from onnxforge.shape_infer.rules.nn import reduced_shape, window_dims
from onnxforge.shape_infer.symbolic import dim_add, dim_div_exact, dim_max, dim_mul

MS = "com.microsoft"
Inputs = Sequence[TensorType | None]
Result = list[TensorType | None]


def _rule(*op_types: str) -> Callable[[ShapeRule], ShapeRule]:
    return shape_rule(op_types, versions=(1,), domain=MS)


def _input(inputs: Inputs, index: int) -> TensorType | None:
    return inputs[index] if index < len(inputs) else None


def _n_outputs(ctx: InferContext) -> int:
    return len(ctx.scope.graph.outputs_of(ctx.op))


def _first(ctx: InferContext, *types: TensorType | None) -> Result:
    """As many of ``types`` as the node has outputs."""
    return list(types[: _n_outputs(ctx)])


@_rule("BiasGelu", "FastGelu", "Gelu", "QuickGelu", "BiasAdd", "RotaryEmbedding")
def infer_same_as_input(op: Op, inputs: Inputs, ctx: InferContext) -> Result:
    """Element-wise on the first input (a bias is broadcast into it)."""
    return [inputs[0]]


def _norm_stats(x: TensorType, axis: int) -> TensorType:
    """Mean / inverse std dev of a normalization over the dims from ``axis`` on: those are 1."""
    assert x.shape is not None
    rank = len(x.shape)
    axis = axis + rank if axis < 0 else axis
    return TensorType(DType.FLOAT, tuple(d if i < axis else 1 for i, d in enumerate(x.shape)))


@_rule("SkipLayerNormalization", "SkipSimplifiedLayerNormalization")
def infer_skip_layer_norm(op: Op, inputs: Inputs, ctx: InferContext) -> Result:
    """output, mean, inv_std_var, input_skip_bias_sum."""
    x = inputs[0]
    if x is None or x.shape is None:
        return _first(ctx, x, None, None, x)
    stats = _norm_stats(x, -1)
    return _first(ctx, x, stats, stats, x)


@_rule("SimplifiedLayerNormalization", "LayerNormalization")
def infer_simplified_layer_norm(op: Op, inputs: Inputs, ctx: InferContext) -> Result:
    """Y, then the statistics over the dims from ``axis`` on. Also onnxruntime's
    LayerNormalization in the ONNX domain below opset 17 (onnx.opset.RUNTIME_DEFINED)."""
    x = inputs[0]
    if x is None or x.shape is None:
        return _first(ctx, x, None, None)
    stats = _norm_stats(x, int(op.attr("axis", -1)))  # type: ignore[arg-type]
    return _first(ctx, x, stats, stats)


@_rule("EmbedLayerNormalization")
def infer_embed_layer_norm(op: Op, inputs: Inputs, ctx: InferContext) -> Result:
    """input_ids [B, S] -> output [B, S, hidden], mask_index [B] (int32), embedding_sum."""
    word = _input(inputs, 2)
    dtype = word.dtype if word is not None else DType.FLOAT
    return _embed_layer_norm(inputs[0], word, dtype, ctx)


@_rule("QEmbedLayerNormalization")
def infer_qembed_layer_norm(op: Op, inputs: Inputs, ctx: InferContext) -> Result:
    """EmbedLayerNormalization over 8-bit embeddings: layernorm_out is float, mask_index_out
    int32."""
    return _embed_layer_norm(inputs[0], _input(inputs, 2), DType.FLOAT, ctx)


def _embed_layer_norm(
    ids: TensorType | None, word: TensorType | None, dtype: int, ctx: InferContext
) -> Result:
    hidden: Dim = (
        word.shape[1] if word is not None and word.shape and len(word.shape) == 2 else None
    )
    if ids is None or ids.shape is None or len(ids.shape) != 2:
        unknown = TensorType(dtype, None)
        return _first(ctx, unknown, TensorType(DType.INT32, None), unknown)
    b, s = ids.shape
    out = TensorType(dtype, (b, s, hidden))
    return _first(ctx, out, TensorType(DType.INT32, (b,)), out)


@_rule("Attention")
def infer_attention(op: Op, inputs: Inputs, ctx: InferContext) -> Result:
    """input [B, S, D_in] with weights [D_in, 3 * D] -> output [B, S, D_v]; present
    [2, B, heads, past + S, D / heads]."""
    x = inputs[0]
    dtype = DType.FLOAT if x is None else x.dtype
    return _attention(op, inputs, ctx, past_index=4, dtype=dtype)


@_rule("QAttention")
def infer_qattention(op: Op, inputs: Inputs, ctx: InferContext) -> Result:
    """input, weight, bias, input_scale, weight_scale, mask_index, input_zero_point,
    weight_zero_point, past: Attention's shapes over 8-bit input and weight; bias's (float)
    type."""
    bias = _input(inputs, 2)
    dtype = DType.FLOAT if bias is None else bias.dtype
    return _attention(op, inputs, ctx, past_index=8, dtype=dtype)


def _attention(
    op: Op, inputs: Inputs, ctx: InferContext, *, past_index: int, dtype: int
) -> Result:
    """input 0 [B, S, D_in] with weights (input 1) [D_in, 3 * D], past at ``past_index``."""
    x, weights, past = inputs[0], _input(inputs, 1), _input(inputs, past_index)
    if x is None or x.shape is None or len(x.shape) != 3:
        return [None] * _n_outputs(ctx)
    b, s, _ = x.shape
    sizes = op.attr("qkv_hidden_sizes")
    if sizes:
        v_hidden: Dim = int(sizes[2])  # type: ignore[index]
        qk_hidden: Dim = int(sizes[0])  # type: ignore[index]
    else:
        width = weights.shape[1] if weights is not None and weights.shape else None
        v_hidden = qk_hidden = dim_div_exact(width, 3)
    results: Result = [TensorType(dtype, (b, s, v_hidden))]
    if _n_outputs(ctx) > 1:
        heads = int(op.attr("num_heads"))  # type: ignore[arg-type]
        head = dim_div_exact(qk_hidden, heads)
        past_len = past.shape[3] if past is not None and past.shape and len(past.shape) == 5 else 0
        total = dim_add(past_len, s)
        results.append(TensorType(dtype, (2, b, heads, total, head)))
    return results


@_rule("MultiHeadAttention")
def infer_multi_head_attention(op: Op, inputs: Inputs, ctx: InferContext) -> Result:
    """query [B, S, D] -> output [B, S, D_v] (D_v: value's last dim when value is [B, L, D_v],
    else D); present key and value [B, heads, past + L, D / heads] (past_key is input 6)."""
    q, key, value, past = inputs[0], _input(inputs, 1), _input(inputs, 2), _input(inputs, 6)
    if q is None or q.shape is None or len(q.shape) != 3:
        return [None] * _n_outputs(ctx)
    b, s, d = q.shape
    if value is not None and value.shape is not None and len(value.shape) == 3:
        d = value.shape[2]
    elif key is None and value is None and q.shape is not None:
        d = None  # packed QKV in the query: the split is in the runtime
    results: Result = [TensorType(q.dtype, (b, s, d))]
    if _n_outputs(ctx) > 1:
        heads = int(op.attr("num_heads"))  # type: ignore[arg-type]
        length: Dim = None
        if key is not None and key.shape is not None:  # [B, L, D] or [B, heads, L, D/heads]
            length = key.shape[1] if len(key.shape) == 3 else key.shape[2]
        past_len: Dim = 0
        if past is not None:
            past_len = past.shape[2] if past.shape is not None and len(past.shape) == 4 else None
        qk = q.shape[2]
        total = dim_add(past_len, length)
        results += [
            TensorType(q.dtype, (b, heads, total, dim_div_exact(qk, heads))),
            TensorType(q.dtype, (b, heads, total, dim_div_exact(d, heads))),
        ]
    return results[: _n_outputs(ctx)] + [None] * (_n_outputs(ctx) - len(results))


@_rule("GroupQueryAttention")
def infer_group_query_attention(op: Op, inputs: Inputs, ctx: InferContext) -> Result:
    """query [B, S, D] -> output [B, S, heads * head]; packed QKV (no key) has
    D = (heads + 2 * kv_heads) * head. present key/value [B, kv_heads, max(past, total),
    head]: a dynamic cache grows to total_sequence_length (input 6, a value), a static one
    keeps its buffer of past_key's length."""
    q, key, past = inputs[0], _input(inputs, 1), _input(inputs, 3)
    if q is None or q.shape is None or len(q.shape) != 3:
        return [None] * _n_outputs(ctx)
    b, s, d = q.shape
    heads = int(op.attr("num_heads"))  # type: ignore[arg-type]
    kv_heads = int(op.attr("kv_num_heads"))  # type: ignore[arg-type]
    if key is None:
        head = dim_div_exact(d, heads + 2 * kv_heads)
        d = dim_mul(head, heads)
    else:
        head = dim_div_exact(d, heads)
    results: Result = [TensorType(q.dtype, (b, s, d))]
    if _n_outputs(ctx) > 1:
        total = ctx.value(6)
        past_len: Dim = 0
        if past is not None:
            past_len = past.shape[2] if past.shape is not None and len(past.shape) == 4 else None
        length = dim_max(past_len, total[0]) if total is not None and len(total) == 1 else None
        present = TensorType(q.dtype, (b, kv_heads, length, head))
        results += [present, present]
    return results[: _n_outputs(ctx)]


def _matmul(a: Sequence[Dim], b: Sequence[Dim], ctx: InferContext) -> tuple[Dim, ...] | None:
    """numpy.matmul's shape (1-D operands promoted and the added dim dropped)."""
    if not a or not b:
        return None
    sa = (1, *a) if len(a) == 1 else tuple(a)
    sb = (*b, 1) if len(b) == 1 else tuple(b)
    out = [*broadcast_shape(sa[:-2], sb[:-2], on_assume=ctx.assume)]
    if len(a) > 1:
        out.append(sa[-2])
    if len(b) > 1:
        out.append(sb[-1])
    return tuple(out)


@_rule("FusedMatMul", "DynamicQuantizeMatMul", "MatMulIntegerToFloat")
def infer_fused_matmul(op: Op, inputs: Inputs, ctx: InferContext) -> Result:
    a, b = inputs[0], _input(inputs, 1)
    if a is None or b is None or a.shape is None or b.shape is None:
        return [TensorType(DType.FLOAT if a is None else a.dtype, None)]
    sa, sb = list(a.shape), list(b.shape)
    if op.attr("transA", 0) and len(sa) > 1:
        sa[-2], sa[-1] = sa[-1], sa[-2]
    if op.attr("transB", 0) and len(sb) > 1:
        sb[-2], sb[-1] = sb[-1], sb[-2]
    dtype = a.dtype if op.op_type == "FusedMatMul" else DType.FLOAT
    if op.op_type == "MatMulIntegerToFloat":
        scale = _input(inputs, 2)
        dtype = scale.dtype if scale is not None else DType.FLOAT
    return [TensorType(dtype, _matmul(sa, sb, ctx))]


@_rule("MatMulNBits")
def infer_matmul_n_bits(op: Op, inputs: Inputs, ctx: InferContext) -> Result:
    a = inputs[0]
    n = int(op.attr("N"))  # type: ignore[arg-type]
    if a is None or a.shape is None:
        return [TensorType(DType.FLOAT if a is None else a.dtype, None)]
    return [TensorType(a.dtype, (*a.shape[:-1], n))]


@_rule("QLinearAdd", "QLinearMul")
def infer_qlinear_binary(op: Op, inputs: Inputs, ctx: InferContext) -> Result:
    """A, A_scale, A_zero, B, B_scale, B_zero, C_scale, C_zero -> broadcast(A, B), A's type."""
    a, b = inputs[0], _input(inputs, 3)
    if a is None or b is None or a.shape is None or b.shape is None:
        return [TensorType(DType.UINT8 if a is None else a.dtype, None)]
    return [TensorType(a.dtype, broadcast_shape(a.shape, b.shape, on_assume=ctx.assume))]


@_rule("QLinearSigmoid", "QLinearLeakyRelu", "QLinearSoftmax")
def infer_qlinear_unary(op: Op, inputs: Inputs, ctx: InferContext) -> Result:
    return [inputs[0]]


@_rule("QLinearGlobalAveragePool")
def infer_qlinear_global_average_pool(op: Op, inputs: Inputs, ctx: InferContext) -> Result:
    x = inputs[0]
    if x is None or x.shape is None or len(x.shape) < 3:
        return [x if x is None else TensorType(x.dtype, None)]
    spatial = (1,) * (len(x.shape) - 2)
    if op.attr("channels_last", 0):
        return [TensorType(x.dtype, (x.shape[0], *spatial, x.shape[-1]))]
    return [TensorType(x.dtype, (x.shape[0], x.shape[1], *spatial))]


@_rule("QuantizeLinear")
def infer_quantize_linear(op: Op, inputs: Inputs, ctx: InferContext) -> Result:
    x, zero = inputs[0], _input(inputs, 2)
    dtype = zero.dtype if zero is not None else DType.UINT8
    return [TensorType(dtype, None if x is None else x.shape)]


@_rule("DequantizeLinear")
def infer_dequantize_linear(op: Op, inputs: Inputs, ctx: InferContext) -> Result:
    x, scale = inputs[0], _input(inputs, 1)
    dtype = scale.dtype if scale is not None else DType.FLOAT
    return [TensorType(dtype, None if x is None else x.shape)]


# -- quantized twins of ONNX ops ----------------------------------------------------------------
def _float_rule(op_type: str, ctx: InferContext) -> ShapeRule:
    """The rule of the ONNX op a quantized one computes as, at the model's ONNX opset."""
    return SHAPE_RULES.lookup(op_type, ctx.scope.opsets.get("", 13))


@_rule("QLinearConcat")
def infer_qlinear_concat(op: Op, inputs: Inputs, ctx: InferContext) -> Result:
    """Y_scale, Y_zero_point, then (tensor, scale, zero point) per input: Concat's shape of the
    tensors, Y_zero_point's type."""
    if op.attr("axis") is None:
        raise ShapeError("QLinearConcat needs an axis attribute")
    if len(inputs) < 5 or (len(inputs) - 2) % 3:
        raise ShapeError(
            f"QLinearConcat takes Y_scale, Y_zero_point and (tensor, scale, zero point) "
            f"triples: {len(inputs)} inputs is not 2 + 3 * n"
        )
    (out,) = _float_rule("Concat", ctx)(op, inputs[2::3], ctx)
    zero = inputs[1]
    if not isinstance(out, TensorType):
        return [None if zero is None else TensorType(zero.dtype, None)]
    return [out if zero is None else TensorType(zero.dtype, out.shape)]


@_rule("QLinearWhere")
def infer_qlinear_where(op: Op, inputs: Inputs, ctx: InferContext) -> Result:
    """condition, X, x_scale, x_zero_point, Y, y_scale, y_zero_point, z_scale, z_zero_point:
    Where's broadcast of condition, X and Y; z_zero_point's type (X's while unknown)."""
    x, zero = _input(inputs, 1), _input(inputs, 8)
    shape = numpy_shape([inputs[0], x, _input(inputs, 4)], ctx)
    known = zero or x
    if known is None:
        return [None]
    return [TensorType(known.dtype, shape)]


@_rule("QLinearAveragePool")
def infer_qlinear_average_pool(op: Op, inputs: Inputs, ctx: InferContext) -> Result:
    """X, x_scale, x_zero_point, y_scale, y_zero_point: AveragePool's windows over X's
    spatial dims, [N, C, *spatial] or, with channels_last, [N, *spatial, C]; X's type. Where
    AveragePool's rule asks onnx (sizes below 1, ceil_mode with auto_pad) the windows stay
    unknown."""
    x, kernel = inputs[0], op.attr("kernel_shape")
    if kernel is None:
        raise ShapeError("QLinearAveragePool needs a kernel_shape attribute")
    if x is None or x.shape is None:
        return [x]
    if len(x.shape) < 3:
        raise ShapeError(
            f"QLinearAveragePool takes X of rank 3 or more, not {format_shape(x.shape)}"
        )
    last = bool(op.attr("channels_last", 0))
    spatial = x.shape[1:-1] if last else x.shape[2:]
    windows = window_dims(op, spatial, [int(k) for k in kernel])
    if windows is None:
        windows = [None] * len(spatial)
    if last:
        return [TensorType(x.dtype, (x.shape[0], *windows, x.shape[-1]))]
    return [TensorType(x.dtype, (*x.shape[:2], *windows))]


@_rule("QLinearReduceMean")
def infer_qlinear_reduce_mean(op: Op, inputs: Inputs, ctx: InferContext) -> Result:
    """data, data_scale, data_zero_point, reduced_scale, reduced_zero_point: ReduceMean-13's
    shape (axes and keepdims attributes; no axes: every axis); data's type."""
    x = inputs[0]
    if x is None or x.shape is None:
        return [x]
    axes = [int(a) for a in (op.attr("axes") or [])]
    shape = reduced_shape(x.shape, axes, bool(op.attr("keepdims", 1)))
    if shape is None:
        raise ShapeError(f"axes {axes} are out of range for rank {len(x.shape)}")
    return [TensorType(x.dtype, shape)]


@_rule("QGemm")
def infer_qgemm(op: Op, inputs: Inputs, ctx: InferContext) -> Result:
    """A, a_scale, a_zero_point, B, b_scale, b_zero_point, C, y_scale, y_zero_point: Gemm's
    (M, N); y_zero_point's type, float when there is none (the output is not quantized)."""
    a, b, zero = inputs[0], _input(inputs, 3), _input(inputs, 8)
    if ctx.input(8) is None:
        dtype: int = DType.FLOAT
    else:
        dtype = DType.UNDEFINED if zero is None else zero.dtype
    shape = gemm_shape(op, None if a is None else a.shape, None if b is None else b.shape, ctx)
    return [TensorType(dtype, shape)]


DIRECTIONS = {"forward": 1, "reverse": 1, "bidirectional": 2}


@_rule("DynamicQuantizeLSTM")
def infer_dynamic_quantize_lstm(op: Op, inputs: Inputs, ctx: InferContext) -> Result:
    """LSTM with 8-bit weights: X [seq_length, batch_size, input_size], W [num_directions,
    input_size, 4*hidden_size] and R [num_directions, hidden_size, 4*hidden_size] (both
    transposed against LSTM's) -> Y [seq_length, num_directions, batch_size, hidden_size], Y_h
    and Y_c [num_directions, batch_size, hidden_size]; X's type. No layout attribute: always
    sequence first. hidden_size is the attribute's (R's dim 1 without it)."""
    x, w, r = inputs[0], _input(inputs, 1), _input(inputs, 2)
    direction = op.attr("direction", "forward")
    direction = direction.decode() if isinstance(direction, bytes) else str(direction)
    if direction not in DIRECTIONS:
        raise ShapeError(f"direction {direction!r} is not one of {', '.join(DIRECTIONS)}")
    directions = DIRECTIONS[direction]
    given = op.attr("hidden_size")
    hidden: Dim = None if given is None else int(given)
    if isinstance(hidden, int) and hidden < 1:
        raise ShapeError(f"hidden_size must be positive, not {hidden}")
    if hidden is None and r is not None and r.shape is not None and len(r.shape) == 3:
        hidden = r.shape[1]
    seq: Dim = None
    batch: Dim = None
    size: Dim = None
    if x is not None and x.shape is not None:
        if len(x.shape) != 3:
            raise ShapeError(f"X must have rank 3, not {format_shape(x.shape)}")
        seq, batch, size = x.shape
    gates = None if hidden is None else dim_mul(4, hidden)
    _weights("W", w, (directions, size, gates))
    _weights("R", r, (directions, hidden, gates))
    dtype = DType.FLOAT if x is None else x.dtype
    state = TensorType(dtype, (directions, batch, hidden))
    return _first(ctx, TensorType(dtype, (seq, directions, batch, hidden)), state, state)


def _weights(name: str, t: TensorType | None, expected: tuple[Dim, ...]) -> None:
    """A weight's static dims are the ones X and the attributes give (ShapeError if not)."""
    if t is None or t.shape is None:
        return
    if len(t.shape) != len(expected) or any(
        isinstance(d, int) and isinstance(e, int) and d != e
        for d, e in zip(t.shape, expected, strict=True)
    ):
        raise ShapeError(f"{name} is {format_shape(t.shape)}, expected {format_shape(expected)}")
