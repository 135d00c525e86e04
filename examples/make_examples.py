"""Make the small example models the README runs on (deterministic: same bytes every run)."""

from __future__ import annotations

__all__ = ["make_tiny_convnet"]

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = Path(__file__).parent


def make_tiny_convnet() -> onnx.ModelProto:
    """A CNN as exporters leave it: Conv+BatchNorm, a Sub with broadcasting, a Split, shape
    arithmetic (Shape -> Gather -> Concat -> Reshape) and an Identity, with a dynamic batch."""
    rng = np.random.default_rng(0)
    weights = {
        "conv_w": rng.standard_normal((4, 3, 3, 3)).astype(np.float32) * 0.2,
        "conv_b": rng.standard_normal(4).astype(np.float32) * 0.1,
        "bn_scale": rng.uniform(0.5, 1.5, 4).astype(np.float32),
        "bn_bias": rng.standard_normal(4).astype(np.float32) * 0.1,
        "bn_mean": rng.standard_normal(4).astype(np.float32) * 0.1,
        "bn_var": rng.uniform(0.5, 1.5, 4).astype(np.float32),
        "mean": np.array([0.485, 0.456, 0.406], np.float32).reshape(3, 1, 1),
        "split": np.array([2, 2], np.int64),
        "zero": np.array([0], np.int64),
        "minus_one": np.array([-1], np.int64),
        "fc_w": rng.standard_normal((128, 10)).astype(np.float32) * 0.1,
    }
    nodes = [
        helper.make_node("Sub", ["image", "mean"], ["centered"], name="normalize"),
        helper.make_node(
            "Conv", ["centered", "conv_w", "conv_b"], ["conv"], name="conv", pads=[1, 1, 1, 1]
        ),
        helper.make_node(
            "BatchNormalization",
            ["conv", "bn_scale", "bn_bias", "bn_mean", "bn_var"],
            ["bn"],
            name="bn",
        ),
        helper.make_node("Relu", ["bn"], ["act"], name="relu"),
        helper.make_node("Split", ["act", "split"], ["left", "right"], name="split", axis=1),
        helper.make_node("Add", ["left", "right"], ["merged"], name="merge"),
        helper.make_node(
            "MaxPool", ["merged"], ["pooled"], name="pool", kernel_shape=[2, 2], strides=[2, 2]
        ),
        helper.make_node("Shape", ["pooled"], ["pooled_shape"], name="shape"),
        helper.make_node("Gather", ["pooled_shape", "zero"], ["batch"], name="batch", axis=0),
        helper.make_node(
            "Concat", ["batch", "minus_one"], ["flat_shape"], name="flat_shape", axis=0
        ),
        helper.make_node("Reshape", ["pooled", "flat_shape"], ["flat"], name="flatten"),
        helper.make_node("MatMul", ["flat", "fc_w"], ["logits_raw"], name="fc"),
        helper.make_node("Identity", ["logits_raw"], ["logits"], name="identity"),
    ]
    graph = helper.make_graph(
        nodes,
        "tiny_convnet",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["batch", 3, 16, 16])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 10])],
        [numpy_helper.from_array(w, name) for name, w in weights.items()],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="onnxforge-examples"
    )
    model.ir_version = 7
    onnx.checker.check_model(model, full_check=True)
    return model


def main() -> None:
    onnx.save(make_tiny_convnet(), HERE / "tiny_convnet.onnx")


if __name__ == "__main__":
    main()
