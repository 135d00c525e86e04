"""Shape rules of the com.microsoft ops onnxruntime's transformers optimizer and quantizer
write, and of its ONNX-domain LayerNormalization below opset 17: one node each, symbolic batch
and sequence, and onnxruntime's output shapes at two sizes equal the inferred ones evaluated."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from ort_shapes import B, S
from ort_shapes import check_against_onnxruntime as _check
from ort_shapes import node_model as _model
from ort_shapes import weight as _w

pytest.importorskip("onnxruntime")
F, U8, I32, I64 = TensorProto.FLOAT, TensorProto.UINT8, TensorProto.INT32, TensorProto.INT64


# name: (op_type, inputs: (name, elem type, dims) for graph inputs or an array for weights,
#        attributes, output count, domain, opset)
CASES: dict[str, tuple] = {
    "attention_with_present": (
        "Attention",
        [("x", F, [B, S, 16]), _w(16, 48), _w(48)],
        {"num_heads": 4},
        2,
    ),
    "skip_layer_norm_all_outputs": (
        "SkipLayerNormalization",
        [("x", F, [B, S, 8]), ("skip", F, [B, S, 8]), _w(8), _w(8), _w(8)],
        {},
        4,
    ),
    "skip_simplified_layer_norm": (
        "SkipSimplifiedLayerNormalization",
        [("x", F, [B, S, 8]), ("skip", F, [B, S, 8]), _w(8)],
        {},
        1,
    ),
    "embed_layer_norm": (
        "EmbedLayerNormalization",
        [
            ("ids", I32, [B, S]),
            ("types", I32, [B, S]),
            _w(10, 8),
            _w(16, 8),
            _w(2, 8),
            _w(8),
            _w(8),
        ],
        {},
        2,
    ),
    "fast_gelu": ("FastGelu", [("x", F, [B, S, 8]), _w(8)], {}, 1),
    "bias_gelu": ("BiasGelu", [("x", F, [B, S, 8]), _w(8)], {}, 1),
    "gelu": ("Gelu", [("x", F, [B, S, 8])], {}, 1),
    "quick_gelu": ("QuickGelu", [("x", F, [B, S, 8])], {}, 1),
    "fused_matmul_trans_b": (
        "FusedMatMul",
        [("x", F, [B, S, 8]), _w(6, 8)],
        {"transB": 1},
        1,
    ),
    "qlinear_add": (
        "QLinearAdd",
        [("a", U8, [B, 4]), np.float32(0.1), np.uint8(3), _w(4, dtype=np.uint8)]
        + [np.float32(0.2), np.uint8(5), np.float32(0.3), np.uint8(7)],
        {},
        1,
    ),
    "qlinear_sigmoid": (
        "QLinearSigmoid",
        [("a", U8, [B, S]), np.float32(0.1), np.uint8(3), np.float32(0.02), np.uint8(0)],
        {},
        1,
    ),
    "qlinear_global_average_pool": (
        "QLinearGlobalAveragePool",
        [("a", U8, [B, 3, S, S]), np.float32(0.1), np.uint8(3), np.float32(0.1), np.uint8(3)],
        {"channels_last": 0},
        1,
    ),
    "multi_head_attention": (
        "MultiHeadAttention",
        [("q", F, [B, S, 8]), ("k", F, [B, "kv", 8]), ("v", F, [B, "kv", 12])],
        {"num_heads": 2},
        1,
    ),
    "dynamic_quantize_matmul": (
        "DynamicQuantizeMatMul",
        [("a", F, [B, S, 8]), _w(8, 6, dtype=np.uint8), np.float32(0.1), np.uint8(3)],
        {},
        1,
    ),
    "matmul_integer_to_float": (
        "MatMulIntegerToFloat",
        [("a", U8, [B, S, 8]), _w(8, 6, dtype=np.uint8), np.float32(0.1), np.float32(0.2)],
        {},
        1,
    ),
    "multi_head_attention_with_past": (
        "MultiHeadAttention",
        [("q", F, [B, S, 8]), ("k", F, [B, "kv", 8]), ("v", F, [B, "kv", 8]), "", "", ""]
        + [("pk", F, [B, 2, "past", 4]), ("pv", F, [B, 2, "past", 4])],
        {"num_heads": 2},
        3,
    ),
    "rotary_embedding": (
        "RotaryEmbedding",
        [("x", F, [B, S, 16]), ("pos", I64, [B, S]), _w(32, 4), _w(32, 4)],
        {"num_heads": 2},
        1,
    ),
    "matmul_4_bits": (
        "MatMulNBits",
        [("a", F, [B, S, 32]), _w(8, 1, 16, dtype=np.uint8), _w(8)],
        {"K": 32, "N": 8, "bits": 4, "block_size": 32},
        1,
    ),
    # BiasAdd has no CPU kernel in onnxruntime 1.31: its rule is its schema's (the first input's
    # type), untested here.
    "qlinear_mul": (
        "QLinearMul",
        [("a", U8, [B, 4]), np.float32(0.1), np.uint8(3), _w(4, dtype=np.uint8)]
        + [np.float32(0.2), np.uint8(5), np.float32(0.3), np.uint8(7)],
        {},
        1,
    ),
    "qlinear_leaky_relu": (
        "QLinearLeakyRelu",
        [("a", U8, [B, S]), np.float32(0.1), np.uint8(3), np.float32(0.02), np.uint8(0)],
        {"alpha": 0.1},
        1,
    ),
    "qlinear_softmax": (
        "QLinearSoftmax",
        [("a", U8, [B, S]), np.float32(0.1), np.uint8(3), np.float32(1 / 256), np.uint8(0)],
        {"opset": 13, "axis": -1},
        1,
    ),
    "quantize_linear": ("QuantizeLinear", [("x", F, [B, S]), np.float32(0.1), np.uint8(3)], {}, 1),
    "dequantize_linear": (
        "DequantizeLinear",
        [("x", U8, [B, S]), np.float32(0.1), np.uint8(3)],
        {},
        1,
    ),
}


@pytest.mark.parametrize("name", CASES)
def test_contrib_op_shapes_are_what_onnxruntime_computes(name: str) -> None:
    op_type, inputs, attrs, n_out = CASES[name]
    _check(_model(op_type, inputs, attrs, n_out))


@pytest.mark.parametrize("op_type", ["LayerNormalization", "SimplifiedLayerNormalization"])
def test_onnxruntimes_own_onnx_domain_norms_at_opset_14_are_inferred(op_type: str) -> None:
    # onnxruntime's transformers optimizer writes these into opset-14 models; onnx has no
    # schema for them there
    weights = [_w(8), _w(8)] if op_type == "LayerNormalization" else [_w(8)]
    _check(_model(op_type, [("x", F, [B, S, 8]), *weights], {"axis": -1}, 1, domain=""))


@pytest.mark.parametrize("with_past", [True, False])
def test_group_query_attention_present_grows_to_the_total_the_graph_computes(
    with_past: bool,
) -> None:
    # total_sequence_length is a value: real exports compute it from shapes (past + sequence)
    heads, kv_heads, head = 4, 2, 8
    inputs = [
        helper.make_tensor_value_info("q", F, [1, S, heads * head]),
        helper.make_tensor_value_info("k", F, [1, S, kv_heads * head]),
        helper.make_tensor_value_info("v", F, [1, S, kv_heads * head]),
    ]
    past = ["pk", "pv"] if with_past else ["", ""]
    if with_past:
        inputs += [helper.make_tensor_value_info(n, F, [1, kv_heads, "past", head]) for n in past]
    nodes = [
        helper.make_node("Shape", ["q"], ["q_shape"]),
        helper.make_node("Gather", ["q_shape", "one"], ["seq"]),
        helper.make_node("Shape", ["pk" if with_past else "q"], ["p_shape"]),
        helper.make_node("Gather", ["p_shape", "two" if with_past else "one"], ["past_len"]),
        helper.make_node("Add" if with_past else "Max", ["past_len", "seq"], ["total64"]),
        helper.make_node("Cast", ["total64"], ["total"], to=I32),
        helper.make_node("Sub", ["total", "one32"], ["last"]),
        helper.make_node("Reshape", ["last", "ones"], ["seqlens"]),
        helper.make_node(
            "GroupQueryAttention",
            ["q", "k", "v", *past, "seqlens", "total"],
            ["y", "present_k", "present_v"],
            domain="com.microsoft",
            num_heads=heads,
            kv_num_heads=kv_heads,
        ),
    ]
    consts = [
        numpy_helper.from_array(np.array(1, np.int64), "one"),
        numpy_helper.from_array(np.array(2, np.int64), "two"),
        numpy_helper.from_array(np.array(1, np.int32), "one32"),
        numpy_helper.from_array(np.array([1], np.int64), "ones"),
    ]
    graph = helper.make_graph(
        nodes, "g", inputs, [onnx.ValueInfoProto(name=n) for n in ("y", "present_k")], consts
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)],
    )
    model.ir_version = 8
    _check(model)
