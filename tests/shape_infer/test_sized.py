"""Ops whose output sizes come from values, on symbolic dims (Pad, Resize, Upsample, TopK,
Slice to a computed end, Min/Max and float casts in shape arithmetic, Loop over a dim, Conv and
pooling with strides): the exact inferred shape, and onnxruntime's shapes at two sizes of every
symbol equal it evaluated."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import parser

from onnxforge.io import from_proto
from onnxforge.ir import TensorType
from onnxforge.shape_infer import infer
from onnxforge.shape_infer.symbolic import evaluate

ort = pytest.importorskip("onnxruntime")

HEAD = '<ir_version: 8, opset_import: ["" : 17]>\n'
CASES: dict[str, tuple[str, dict[str, str], list[dict[str, int]]]] = {
    "pad_with_constant_pads": (
        """g (float[N, C] x) => (float[?, ?] y) {
            p = Constant<value = int64[4] {0, 1, 2, 3}>()
            y = Pad(x, p) }""",
        {"y": "[N+2,C+4]"},
        [{"N": 2, "C": 3}, {"N": 5, "C": 1}],
    ),
    "pad_with_pads_computed_from_a_shape": (
        """g (float[N, C] x, float[P] q) => (float[?, ?] y) {
            s = Shape(q)
            z = Constant<value = int64[3] {0, 0, 0}>()
            p = Concat<axis = 0>(s, z)
            y = Pad(x, p) }""",
        {"y": "[N+P,C]"},
        [{"N": 2, "C": 3, "P": 4}, {"N": 1, "C": 2, "P": 1}],
    ),
    "resize_by_constant_scales": (
        """g (float[N, 3, H, W] x) => (float[?, ?, ?, ?] y, float[?, ?, ?, ?] z) {
            up = Constant<value = float[4] {1.0, 1.0, 2.0, 2.0}>()
            down = Constant<value = float[4] {1.0, 1.0, 0.5, 0.25}>()
            y = Resize<mode = "nearest">(x, , up)
            z = Resize<mode = "nearest">(x, , down) }""",
        {"y": "[N,3,2*H,2*W]", "z": "[N,3,floor(H/2),floor(W/4)]"},
        [{"N": 1, "H": 5, "W": 9}, {"N": 2, "H": 8, "W": 4}],
    ),
    "resize_to_the_size_of_another_tensor": (
        """g (float[N, 3, H, W] x, float[N, 3, P, Q] t) => (float[?, ?, ?, ?] y) {
            s = Shape(t)
            y = Resize<mode = "nearest">(x, , , s) }""",
        {"y": "[N,3,P,Q]"},
        [{"N": 1, "H": 5, "W": 9, "P": 3, "Q": 7}, {"N": 2, "H": 2, "W": 2, "P": 6, "Q": 4}],
    ),
    "resize_by_scales_tf2onnx_computes_in_float": (
        """g (float[N, 3, H, W] x) => (float[?, ?, ?, ?] y) {
            s = Shape(x)
            f = Cast<to = 1>(s)
            k = Constant<value = float[4] {1.0, 1.0, 2.0, 3.0}>()
            m = Mul(f, k)
            i = Cast<to = 7>(m)
            y = Resize<mode = "nearest">(x, , , i) }""",
        {"y": "[N,3,2*H,3*W]"},
        [{"N": 1, "H": 5, "W": 9}, {"N": 2, "H": 2, "W": 3}],
    ),
    "topk_with_a_dim_as_k_and_with_an_input_k": (
        """g (float[N, M] x, int64[1] k) => (float[?, ?] v, int64[?, ?] i, float[?, ?] w) {
            s = Shape(x)
            o = Constant<value = int64[1] {0}>()
            n = Slice(s, o, o2)
            o2 = Constant<value = int64[1] {1}>()
            v, i = TopK<axis = 0>(x, n)
            w, j = TopK(x, k) }""",
        {"v": "[N,M]", "i": "[N,M]", "w": "[N,?k]"},
        [{"N": 4, "M": 3, "k": 2}, {"N": 2, "M": 5, "k": 1}],
    ),
    "slice_to_the_length_of_another_tensor": (
        """g (float[N, 8] x, float[M] w) => (float[?, ?] y) {
            s = Shape(w)
            one = Constant<value = int64[1] {1}>()
            z = Constant<value = int64[1] {0}>()
            y = Slice(x, one, s, z) }""",
        {"y": "[max(-min(1, N)+min(M, N), 0),8]"},
        [{"N": 4, "M": 3}, {"N": 2, "M": 6}, {"N": 5, "M": 0}],
    ),
    "constant_of_the_larger_of_two_shapes": (
        """g (float[N, 8] x, float[M, 8] w) => (float[?, ?] y) {
            a = Shape(x)
            b = Shape(w)
            m = Max(a, b)
            y = ConstantOfShape<value = float[1] {1.0}>(m) }""",
        {"y": "[max(M, N),8]"},
        [{"N": 1, "M": 3}, {"N": 4, "M": 1}],
    ),
    "strided_conv_and_pool_on_named_spatial_dims": (
        """g (float[B, 3, P, W] x) => (float[?, ?, ?, ?] y) {
            w = Constant<value = float[4, 3, 3, 3] {0.5}>()
            c = Conv<pads = [1, 1, 1, 1], strides = [2, 2]>(x, w)
            y = MaxPool<kernel_shape = [2, 2], strides = [2, 2]>(c) }""",
        {"y": "[B,4,floor((p2o.DynamicDimension.1+1)/4),floor((W+1)/4)]"},
        [
            {"B": 1, "p2o.DynamicDimension.1": 9, "W": 16},
            {"B": 2, "p2o.DynamicDimension.1": 4, "W": 7},
        ],
    ),
}


def _split(shape: str) -> list[str]:
    """``[max(M, N),8]`` -> ["max(M, N)", "8"]: commas inside parentheses stay."""
    dims, depth, start = [], 0, 1
    for i, c in enumerate(shape):
        depth += (c == "(") - (c == ")")
        if (c == "," and depth == 0) or i == len(shape) - 1:
            dims.append(shape[start:i].strip())
            start = i + 1
    return dims


def _fill_constant(text: str) -> str:
    """The Conv weight above is written with one element; expand it to its 108."""
    return text.replace("{0.5}", "{" + ", ".join(["0.5"] * 108) + "}")


@pytest.mark.parametrize("name", CASES)
def test_inferred_shapes_are_exact_and_what_onnxruntime_computes(name: str) -> None:
    text, expected, sizes = CASES[name]
    proto = parser.parse_model(HEAD + _fill_constant(text))
    for vi in proto.graph.input:  # paddle2onnx's spelling, which the text format cannot hold
        for d in vi.type.tensor_type.shape.dim:
            if d.dim_param == "P" and "p2o.DynamicDimension.1" in str(expected):
                d.dim_param = "p2o.DynamicDimension.1"
    model = from_proto(proto)
    report = infer(model)
    assert not report.errors, report.errors
    types = {v.name: v.type for v in model.graph.outputs}
    fresh: dict[str, str] = {}
    for value, want in expected.items():
        t = types[value]
        assert isinstance(t, TensorType) and t.shape is not None
        dims = [str(d) for d in t.shape]
        for i, w in enumerate(_split(want)):
            if w.startswith("?"):  # a fresh unknown, the same wherever the same ?name stands
                assert dims[i] == fresh.setdefault(w, dims[i]), (value, t)
                dims[i] = w
        assert "[" + ",".join(dims) + "]" == want, (value, t)
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    for bindings in sizes:
        feeds = {}
        for vi in proto.graph.input:
            dims = [
                d.dim_value if d.HasField("dim_value") else bindings[d.dim_param]
                for d in vi.type.tensor_type.shape.dim
            ]
            if vi.type.tensor_type.elem_type == onnx.TensorProto.INT64:
                feeds[vi.name] = np.array([bindings["k"]], dtype=np.int64)
            else:
                feeds[vi.name] = rng.standard_normal(dims).astype(np.float32)
        names = [o.name for o in session.get_outputs()]
        observed = dict(zip(names, session.run(names, feeds), strict=True))
        unknowns: dict[str, int] = {}
        for value, want in expected.items():
            t = types[value]
            assert isinstance(t, TensorType) and t.shape is not None
            for dim, actual, w in zip(t.shape, observed[value].shape, _split(want), strict=True):
                if w.startswith("?"):
                    assert unknowns.setdefault(str(dim), actual) == actual
                    if w == "?k":
                        assert actual == bindings["k"]
                else:
                    assert evaluate(dim, bindings) == actual, (value, dim, bindings)
