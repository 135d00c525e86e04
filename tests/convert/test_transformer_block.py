"""A hand-written transformer block as opset-18 exporters write it (LayerNormalization,
Split with num_outputs, Shape with start/end, Unsqueeze/ReduceMean axes inputs, Softmax on
the last axis, symbolic batch and sequence): it must reach 13 and come back, and go up to
the newest opset onnxruntime runs, computing the same all the way."""

from __future__ import annotations

import numpy as np
import pytest
from adapter_check import check_conversion, op_types

D = 8  # model width; 2 heads of 4


def numbers(n: int, step: int, mod: int, scale: float) -> str:
    """n small deterministic weights, as ONNX text."""
    return ", ".join(str(round(((i * step) % mod - mod // 2) * scale, 3)) for i in range(n))


BLOCK = f"""<ir_version: 8, opset_import: ["" : 18]>
block (float[B, T, {D}] x, int64[B, T] mask) => (float[B, T, {D}] y) <
    float[{D}] g1 = {{{", ".join(str(1 + 0.05 * i) for i in range(D))}}},
    float[{D}] b1 = {{{", ".join(str(0.01 * i) for i in range(D))}}},
    float[{D}, {3 * D}] wqkv = {{{numbers(D * 3 * D, 7, 11, 0.03)}}},
    float[{D}, {D}] wo = {{{numbers(D * D, 5, 13, 0.02)}}},
    float scale = {{0.5}}
> {{
    h = LayerNormalization <axis = -1, epsilon = 0.00001> (x, g1, b1)
    qkv = MatMul (h, wqkv)
    q, k, v = Split <axis = -1, num_outputs = 3> (qkv)
    bt = Shape <end = 2> (x)
    heads = Constant <value = int64[2] {{2, 4}}> ()
    shp = Concat <axis = 0> (bt, heads)
    q4 = Reshape (q, shp)
    k4 = Reshape (k, shp)
    v4 = Reshape (v, shp)
    qh = Transpose <perm = [0, 2, 1, 3]> (q4)
    kh = Transpose <perm = [0, 2, 3, 1]> (k4)
    vh = Transpose <perm = [0, 2, 1, 3]> (v4)
    s0 = MatMul (qh, kh)
    s1 = Mul (s0, scale)
    ax = Constant <value = int64[2] {{1, 2}}> ()
    m1 = Unsqueeze (mask, ax)
    mf = Cast <to = 1> (m1)
    one = Constant <value = float {{1.0}}> ()
    inv = Sub (one, mf)
    big = Constant <value = float {{-10000.0}}> ()
    bias = Mul (inv, big)
    s2 = Add (s1, bias)
    p = Softmax <axis = -1> (s2)
    o = MatMul (p, vh)
    ot = Transpose <perm = [0, 2, 1, 3]> (o)
    flat = Constant <value = int64[3] {{0, 0, -1}}> ()
    o3 = Reshape (ot, flat)
    proj = MatMul (o3, wo)
    r = Add (x, proj)
    red = Constant <value = int64[1] {{-1}}> ()
    mu = ReduceMean <keepdims = 1> (r, red)
    y = Sub (r, mu)
}}"""


def feeds() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    mask = np.ones((2, 5), np.int64)
    mask[1, 3:] = 0
    return {"x": rng.standard_normal((2, 5, D)).astype(np.float32), "mask": mask}


@pytest.mark.parametrize("target", [13, 14, 16, 17])
def test_transformer_block_of_opset_18_reaches_13_and_comes_back(target: int) -> None:
    model = check_conversion(BLOCK, target, feeds=feeds(), rtol=1e-4, atol=1e-5)
    if target < 17:
        assert "LayerNormalization" not in op_types(model)
    if target < 18:
        split = [op for op in model.graph.ops if op.op_type == "Split"][0]
        assert "num_outputs" not in split.attrs
    check_conversion(model, 18, feeds=feeds(), rtol=1e-4, atol=1e-5)


def test_transformer_block_goes_up_to_the_newest_opset_onnxruntime_runs() -> None:
    check_conversion(BLOCK, 23, feeds=feeds(), rtol=1e-4, atol=1e-5)


LOOP = """<ir_version: 8, opset_import: ["" : 18]>
loop (float[B, 4] x, int64 n, bool c) => (float[B, 4] y, float[?, B, 1] trace) {
    y, trace = Loop (n, c, x) <body = body (int64 i, bool cond, float[B, 4] acc)
        => (bool cond_out, float[B, 4] acc_out, float[B, 1] t) {
        cond_out = Identity (cond)
        ax = Constant <value = int64[1] {-1}> ()
        m = ReduceMean <keepdims = 1> (acc, ax)
        s = Softmax <axis = 0> (acc)
        acc_out = Sub (s, m)
        t = ReduceMax <keepdims = 1> (acc_out, ax)
    }>
}"""


@pytest.mark.parametrize("target", [11, 13, 16])
def test_loop_body_ops_are_converted_with_the_graph(target: int) -> None:
    data = {
        "x": np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32),
        "n": np.array(3, np.int64),
        "c": np.array(True),
    }
    model = check_conversion(LOOP, target, feeds=data)
    body = model.graph.ops[0].attrs["body"]
    assert all("axes" in op.attrs for op in body.ops if op.op_type.startswith("Reduce"))
    check_conversion(model, 18, feeds=data)
