"""Shape rules for the com.microsoft ops that onnxruntime's transformers optimizer and quantizer
write (Attention, SkipLayerNormalization, the Gelus, QLinear* ...). onnx has no schema for them;
the authority is onnxruntime's contrib op definitions (``bert_defs.cc``,
``quantization_defs.cc``) and what it computes. An op of the domain no rule knows keeps unknown
outputs with a note, as every custom op does."""

from __future__ import annotations

__all__: list[str] = []

from collections.abc import Callable, Sequence

from onnxforge.ir import Dim, DType, Op, TensorType
from onnxforge.shape_infer.broadcast import broadcast_shape
from onnxforge.shape_infer.engine import InferContext, ShapeRule, shape_rule
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
    ids, word = inputs[0], _input(inputs, 2)
    hidden: Dim = (
        word.shape[1] if word is not None and word.shape and len(word.shape) == 2 else None
    )
    dtype = word.dtype if word is not None else DType.FLOAT
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
    x, weights, past = inputs[0], _input(inputs, 1), _input(inputs, 4)
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
    results: Result = [TensorType(x.dtype, (b, s, v_hidden))]
    if _n_outputs(ctx) > 1:
        heads = int(op.attr("num_heads"))  # type: ignore[arg-type]
        head = dim_div_exact(qk_hidden, heads)
        past_len = past.shape[3] if past is not None and past.shape and len(past.shape) == 5 else 0
        total = dim_add(past_len, s)
        results.append(TensorType(x.dtype, (2, b, heads, total, head)))
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
