"""Build the real-model corpus: small models from every major exporter, random weights.

    python benchmarks/corpus.py --out DIR [--only FAMILY,...] [--list]

Each family writes DIR/<family>/<name>.onnx with whatever exporter the running interpreter can
import, and says which it skipped and why. The heavy exporters live in their own virtual
environments (TensorFlow for tf2onnx, PaddlePaddle for paddle2onnx, torch for the PyTorch
exports and onnxruntime's transformers optimizer): run this script with each one's python and
``--only``. ``tests/data/exporters/`` holds the small outputs of those families, made by this
script (``--out tests/data/exporters``), so CI tests them without installing the exporters;
``sklearn`` and ``quantized`` are light enough to build at test time.
"""

from __future__ import annotations

__all__ = ["FAMILIES", "build", "inside"]

import argparse
import contextlib
import importlib.util
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

RNG_SEED = 0


# -- scikit-learn: skl2onnx and onnxmltools -----------------------------------------------------
def sklearn(out: Path) -> list[str]:
    from skl2onnx import to_onnx
    from sklearn.compose import ColumnTransformer
    from sklearn.ensemble import GradientBoostingRegressor, RandomForestClassifier
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LinearRegression, LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import (
        Binarizer,
        Normalizer,
        OneHotEncoder,
        OrdinalEncoder,
        StandardScaler,
    )
    from sklearn.svm import SVC, SVR

    rng = np.random.default_rng(RNG_SEED)
    x = rng.standard_normal((60, 4)).astype(np.float32)
    y = (x[:, 0] + x[:, 1] > 0).astype(np.int64) + (x[:, 2] > 1)
    models = {
        "logreg_pipeline_zipmap": make_pipeline(StandardScaler(), LogisticRegression()).fit(x, y),
        "random_forest": RandomForestClassifier(n_estimators=3, max_depth=3).fit(x, y),
        "gbm_regressor": GradientBoostingRegressor(n_estimators=3, max_depth=2).fit(x, x[:, 0]),
        "svc": SVC(probability=True).fit(x, y),
        "linear_regression": LinearRegression().fit(x, x[:, 1]),
        "normalize_binarize": make_pipeline(SimpleImputer(), Normalizer(), Binarizer()).fit(x),
    }
    made = []
    for name, model in models.items():
        options = {"zipmap": False} if name in ("random_forest", "svc") else None
        onx = to_onnx(model, x[:1], options={id(model): options} if options else None)
        _save(onx, out / f"{name}.onnx")
        made.append(name)
    columns = ColumnTransformer([("s", StandardScaler(), [0, 1]), ("b", Binarizer(), [2, 3])])
    for name, model in (
        ("svr", SVR().fit(x, x[:, 0])),  # SVMRegressor
        # ArrayFeatureExtractor, Scaler, Binarizer, LinearClassifier, ZipMap
        ("column_transformer", make_pipeline(columns, LogisticRegression()).fit(x, y)),
    ):
        _save(to_onnx(model, x[:1]), out / f"{name}.onnx")
        made.append(name)
    words = np.array([["a", "x"], ["b", "y"], ["a", "y"]], dtype=object)
    _save(to_onnx(OrdinalEncoder().fit(words), words[:1]), out / "ordinal_strings.onnx")
    made.append("ordinal_strings")  # LabelEncoder over strings
    ints = rng.integers(0, 3, (40, 2)).astype(np.int64)
    onehot = OneHotEncoder(handle_unknown="ignore").fit(ints)
    _save(to_onnx(onehot, ints[:1]), out / "onehot.onnx")
    made.append("onehot")
    if importlib.util.find_spec("lightgbm") and importlib.util.find_spec("onnxmltools"):
        import lightgbm
        from onnxmltools import convert_lightgbm
        from onnxmltools.convert.common.data_types import FloatTensorType

        booster = lightgbm.LGBMClassifier(n_estimators=3, num_leaves=4, verbose=-1).fit(x, y)
        onx = convert_lightgbm(booster, initial_types=[("x", FloatTensorType([None, 4]))])
        _save(onx, out / "lightgbm_classifier.onnx")
        made.append("lightgbm_classifier")
    return made


# -- onnxruntime's quantizer --------------------------------------------------------------------
def _float_cnn() -> object:
    """A small float CNN + MLP head with a dynamic batch (the quantizer's input)."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(RNG_SEED)

    def w(name: str, *shape: int) -> object:
        return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32) * 0.2, name)

    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("MatMul", ["f", "w3"], ["m"]),
        helper.make_node("Add", ["m", "b3"], ["a"]),
        helper.make_node("Sigmoid", ["a"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 10])],
        [w("w1", 8, 3, 3, 3), w("b1", 8), w("w2", 16, 8, 3, 3), w("b2", 16)]
        + [w("w3", 16, 10), w("b3", 10)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def quantized(out: Path) -> list[str]:
    import onnx
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_dynamic,
        quantize_static,
    )

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            rng = np.random.default_rng(RNG_SEED)
            self.data = iter(
                [{"x": rng.standard_normal((1, 3, 16, 16)).astype(np.float32)} for _ in range(4)]
            )

        def get_next(self) -> dict | None:
            return next(self.data, None)

    made = []
    out = out.resolve()
    with tempfile.TemporaryDirectory() as tmp, inside(Path(tmp)):  # it leaves files in the cwd
        source = Path(tmp) / "cnn.onnx"
        onnx.save(_float_cnn(), source)
        shutil.copy(source, out / "float_cnn.onnx")
        made.append("float_cnn")
        quantize_dynamic(source, out / "dynamic_int8.onnx", weight_type=QuantType.QInt8)
        made.append("dynamic_int8")
        for fmt, name in ((QuantFormat.QDQ, "static_qdq"), (QuantFormat.QOperator, "static_qop")):
            quantize_static(source, out / f"{name}.onnx", Reader(), quant_format=fmt)
            made.append(name)
        if importlib.util.find_spec("onnx_ir") is not None:  # the 4-bit quantizer needs it
            from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

            nbits = MatMulNBitsQuantizer(onnx.load(source), block_size=16, is_symmetric=True)
            nbits.process()
            nbits.model.save_model_to_file(str(out / "matmul_4bits.onnx"), False)
            made.append("matmul_4bits")
    return made


# -- tf2onnx ------------------------------------------------------------------------------------
def tf2onnx(out: Path) -> list[str]:
    import tensorflow as tf
    import tf2onnx as converter

    tf.random.set_seed(RNG_SEED)
    made = []
    cnn = tf.keras.Sequential(
        [
            tf.keras.Input((None, None, 3), name="image"),
            tf.keras.layers.Conv2D(8, 3, strides=2, padding="same", activation="relu"),
            tf.keras.layers.MaxPool2D(2),
            tf.keras.layers.Conv2D(8, 3, padding="valid", activation="relu"),
            tf.keras.layers.GlobalAveragePooling2D(),
            tf.keras.layers.Dense(5, activation="softmax"),
        ]
    )
    spec = (tf.TensorSpec((None, None, None, 3), tf.float32, name="image"),)
    _from_keras(converter, tf, cnn, spec, opset=13, output_path=str(out / "keras_cnn.onnx"))
    made.append("keras_cnn")
    rnn = tf.keras.Sequential(
        [
            tf.keras.Input((None, 6), name="seq"),
            tf.keras.layers.LSTM(8, return_sequences=True),
            tf.keras.layers.GRU(4),
            tf.keras.layers.Dense(2),
        ]
    )
    spec = (tf.TensorSpec((None, None, 6), tf.float32, name="seq"),)
    _from_keras(converter, tf, rnn, spec, opset=13, output_path=str(out / "keras_rnn.onnx"))
    made.append("keras_rnn")

    @tf.function(input_signature=[tf.TensorSpec((None, 2048), tf.float32, name="features")])
    def flow(features: tf.Tensor) -> tf.Tensor:
        x = tf.reshape(features, (-1, 2048, 1))
        x = tf.cond(tf.reduce_sum(x) > 0, lambda: x * 2.0, lambda: x - 1.0)
        i = tf.constant(0)
        _, x = tf.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, v + 1.0), (i, x))
        shape = tf.shape(x)
        half = tf.cast(tf.cast(shape[1], tf.float32) / 2.0, tf.int32)
        return tf.image.resize(tf.reshape(x, (-1, 32, 64, 1)), (half // 32, 64))

    converter.convert.from_function(
        flow,
        input_signature=flow.input_signature,
        opset=15,
        output_path=str(out / "tf_control_flow.onnx"),
    )
    made.append("tf_control_flow")
    made += _tf_vision_and_control(converter, tf, out)
    return made


def _tf_vision_and_control(converter: object, tf: object, out: Path) -> list[str]:
    """A U-Net with computed-size resizes, detection post-processing (NonMaxSuppression,
    TopK, NonZero), a TensorArray while-loop, computed pads, einsum."""

    class Up(tf.keras.layers.Layer):  # type: ignore[attr-defined,name-defined,misc]
        def __init__(self, method: str = "nearest") -> None:
            super().__init__()
            self.method = method

        def call(self, x: object) -> object:
            return tf.image.resize(x, tf.shape(x)[1:3] * 2, method=self.method)  # type: ignore[attr-defined]

    layers = tf.keras.layers  # type: ignore[attr-defined]
    image = tf.keras.Input((None, None, 3), name="image")  # type: ignore[attr-defined]
    c1 = layers.Conv2D(8, 3, padding="same", activation="relu")(image)
    d1 = layers.Conv2D(8, 3, strides=2, padding="same", activation="relu")(c1)
    d2 = layers.Conv2D(16, 3, strides=2, padding="same", activation="relu")(d1)
    m1 = layers.Concatenate()([Up()(d2), d1])
    m2 = layers.Concatenate()([Up("bilinear")(m1), c1])
    unet = tf.keras.Model(image, layers.Conv2D(2, 1)(m2))  # type: ignore[attr-defined]
    spec = (tf.TensorSpec((None, None, None, 3), tf.float32, name="image"),)  # type: ignore[attr-defined]
    _from_keras(converter, tf, unet, spec, opset=13, output_path=str(out / "keras_unet.onnx"))

    @tf.function(  # type: ignore[attr-defined]
        input_signature=[
            tf.TensorSpec((None, 4), tf.float32, name="boxes"),  # type: ignore[attr-defined]
            tf.TensorSpec((None,), tf.float32, name="scores"),  # type: ignore[attr-defined]
        ]
    )
    def detect(boxes: object, scores: object) -> tuple:
        keep = tf.image.non_max_suppression(boxes, scores, max_output_size=10, iou_threshold=0.5)  # type: ignore[attr-defined]
        top, idx = tf.math.top_k(scores, k=tf.minimum(5, tf.shape(scores)[0]))  # type: ignore[attr-defined]
        hits = tf.where(scores > 0.5)  # type: ignore[attr-defined,operator]
        masked = tf.boolean_mask(boxes, scores > 0.3)  # type: ignore[attr-defined,operator]
        return tf.gather(boxes, keep), top, tf.gather(boxes, idx), hits, masked  # type: ignore[attr-defined]

    converter.convert.from_function(  # type: ignore[attr-defined]
        detect,
        input_signature=detect.input_signature,
        opset=13,
        output_path=str(out / "tf_detect.onnx"),
    )

    @tf.function(input_signature=[tf.TensorSpec((None, None, 4), tf.float32, name="x")])  # type: ignore[attr-defined]
    def misc(x: object) -> tuple:
        n = tf.shape(x)[1]  # type: ignore[attr-defined]
        array = tf.TensorArray(tf.float32, size=n)  # type: ignore[attr-defined]

        def body(i: object, array: object) -> tuple:
            return i + 1, array.write(i, tf.reduce_sum(x[:, i, :], axis=-1))  # type: ignore[attr-defined,index,operator]

        _, array = tf.while_loop(lambda i, _: i < n, body, (0, array))  # type: ignore[attr-defined]
        padded = tf.pad(x, [[0, 0], [0, n % 3 + 1], [0, 0]])  # type: ignore[attr-defined]
        pairs = tf.einsum("bsd,bte->bste", x, x)  # type: ignore[attr-defined]
        first = tf.squeeze(x[:, :1, :], axis=1)  # type: ignore[attr-defined,index]
        return array.stack(), tf.range(n), tf.tile(x, [1, 2, 1]), padded, pairs, first  # type: ignore[attr-defined]

    converter.convert.from_function(  # type: ignore[attr-defined]
        misc, input_signature=misc.input_signature, opset=15, output_path=str(out / "tf_misc.onnx")
    )
    return ["keras_unet", "tf_detect", "tf_misc"]


def _from_keras(
    converter: object, tf: object, model: object, spec: tuple, **kwargs: object
) -> None:
    """tf2onnx 1.17's from_keras does not know Keras 3's tensor names: convert the model's call
    as a tf.function, which is what from_keras does underneath."""
    call = tf.function(lambda x: model(x, training=False), input_signature=spec)  # type: ignore[attr-defined]
    converter.convert.from_function(call, input_signature=spec, **kwargs)  # type: ignore[attr-defined]


# -- paddle2onnx --------------------------------------------------------------------------------
def paddle2onnx(out: Path) -> list[str]:
    import paddle
    from paddle import nn

    paddle.seed(RNG_SEED)

    class Net(nn.Layer):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = nn.Conv2D(3, 8, 3, stride=2, padding=1)
            self.bn = nn.BatchNorm2D(8)
            self.conv2 = nn.Conv2D(8, 8, 3, stride=2, padding=1)
            self.pool = nn.AdaptiveAvgPool2D(1)
            self.fc = nn.Linear(8, 4)

        def forward(self, x: paddle.Tensor) -> paddle.Tensor:
            x = nn.functional.relu(self.bn(self.conv1(x)))
            x = self.conv2(x)  # a Resize to a size computed from the shape (paddle2onnx 2.1
            # cannot export scale_factor)
            x = nn.functional.interpolate(x, size=paddle.shape(x)[2:] * 2, mode="nearest")
            return self.fc(paddle.flatten(self.pool(x), 1))

    class Ocr(nn.Layer):
        """Conv feature map read as a sequence by an LSTM, as PaddleOCR's recognizers do."""

        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2D(3, 16, 3, stride=(2, 1), padding=1)
            self.lstm = nn.LSTM(16, 8, direction="bidirect")
            self.fc = nn.Linear(16, 10)

        def forward(self, x: paddle.Tensor) -> paddle.Tensor:
            x = self.conv(x)  # [N, 16, H/2, W]
            x = paddle.mean(x, axis=2).transpose([0, 2, 1])  # [N, W, 16]
            x, _ = self.lstm(x)
            return nn.functional.softmax(self.fc(x), axis=-1)

    class Det(nn.Layer):
        """Detector-like: strided convs, an upsample to the size of another feature map, a
        head reshaped to [N, h*w, 6], TopK, NonZero, a ceil-mode pool over computed sizes."""

        def __init__(self) -> None:
            super().__init__()
            self.c1 = nn.Conv2D(3, 8, 3, stride=2, padding=1)
            self.c2 = nn.Conv2D(8, 8, 3, stride=2, padding=1)
            self.head = nn.Conv2D(16, 6, 1)

        def forward(self, x: paddle.Tensor) -> tuple:
            a = nn.functional.relu(self.c1(x))
            b = nn.functional.relu(self.c2(a))
            up = nn.functional.interpolate(b, size=paddle.shape(a)[2:], mode="nearest")
            y = self.head(paddle.concat([a, up], axis=1))
            n = paddle.shape(y)[0]
            y = y.reshape([n, 6, -1]).transpose([0, 2, 1])
            scores = nn.functional.sigmoid(y[:, :, 0])
            top, idx = paddle.topk(scores, k=4, axis=1)
            hits = paddle.nonzero(scores[0] > 0.5)
            grid = y.transpose([0, 2, 1]).reshape([n, 6, paddle.shape(a)[2], -1])
            pooled = nn.functional.avg_pool2d(grid, 2, ceil_mode=True)
            return y, top, idx, hits, pooled

    class Seq(nn.Layer):
        """Text-like: embedding, GRU, masked mean, argmax, tile and arange by the length."""

        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(50, 8)
            self.gru = nn.GRU(8, 8)
            self.fc = nn.Linear(8, 3)

        def forward(self, ids: paddle.Tensor) -> tuple:
            h, _ = self.gru(self.emb(ids))
            mask = (ids > 0).astype("float32").unsqueeze(-1)
            logits = self.fc((h * mask).sum(1) / paddle.clip(mask.sum(1), min=1.0))
            t = paddle.shape(ids)[1]
            tiled = paddle.tile(logits.unsqueeze(1), [1, t, 1])
            pos = paddle.arange(t).unsqueeze(0).expand([paddle.shape(ids)[0], t])
            return logits, paddle.argmax(logits, axis=-1), tiled, pos

    image = [paddle.static.InputSpec([None, 3, None, None], "float32", "x")]
    made = []
    for name, net, spec, opset in (
        ("paddle_cnn", Net(), image, 11),
        ("paddle_ocr", Ocr(), image, 11),
        ("paddle_det", Det(), image, 13),
        ("paddle_seq", Seq(), [paddle.static.InputSpec([None, None], "int64", "ids")], 13),
    ):
        net.eval()
        paddle.onnx.export(net, str(out / name), input_spec=spec, opset_version=opset)
        made.append(name)
    return made


# -- torch and onnxruntime's transformers optimizer --------------------------------------------
def torch(out: Path) -> list[str]:
    import torch as pt
    from transformers import BertConfig, BertModel, GPT2Config, GPT2Model

    pt.manual_seed(RNG_SEED)
    made = []
    bert = BertModel(
        BertConfig(
            vocab_size=64,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=64,
            max_position_embeddings=64,
            attn_implementation="eager",
        ),
        add_pooling_layer=False,
    ).eval()
    gpt2 = GPT2Model(
        GPT2Config(
            vocab_size=64,
            n_embd=32,
            n_layer=2,
            n_head=4,
            n_positions=64,
            attn_implementation="eager",
        )
    ).eval()

    class Hidden(pt.nn.Module):
        def __init__(self, m: pt.nn.Module) -> None:
            super().__init__()
            self.m = m

        def forward(self, ids: pt.Tensor, mask: pt.Tensor) -> pt.Tensor:
            return self.m(input_ids=ids, attention_mask=mask).last_hidden_state

    ids = pt.randint(0, 64, (2, 8))
    mask = pt.ones(2, 8, dtype=pt.int64)
    axes = {
        "input_ids": {0: "batch", 1: "sequence"},
        "attention_mask": {0: "batch", 1: "sequence"},
    }
    for name, model in (("bert", bert), ("gpt2", gpt2)):
        path = out / f"torch_{name}_op14.onnx"
        pt.onnx.export(
            Hidden(model),
            (ids, mask),
            str(path),
            dynamo=False,
            opset_version=14,
            input_names=["input_ids", "attention_mask"],
            output_names=["hidden"],
            dynamic_axes=axes,
        )
        made.append(path.stem)
        from onnxruntime.transformers.optimizer import optimize_model

        optimized = optimize_model(
            str(path), model_type=name, num_heads=4, hidden_size=32, opt_level=0
        )
        optimized.save_model_to_file(str(out / f"ort_optimized_{name}.onnx"))
        made.append(f"ort_optimized_{name}")
        if name == "bert":
            dynamo = out / "torch_bert_dynamo18.onnx"
            program = pt.onnx.export(
                Hidden(model),
                (ids, mask),
                dynamo=True,
                opset_version=18,
                input_names=["input_ids", "attention_mask"],
                dynamic_shapes={
                    "ids": {0: "batch", 1: "sequence"},
                    "mask": {0: "batch", 1: "sequence"},
                },
            )
            program.save(str(dynamo))
            made.append(dynamo.stem)
    return made + _torch_vision_and_control(out)


def _torch_vision_and_control(out: Path) -> list[str]:
    """A YOLO-like detector over dynamic height and width (strided convs, an upsample sliced to
    the finer map, a head reshaped per anchor with a grid from arange), data-dependent
    post-processing (masking, TopK by a computed k, NonZero), the ops of item 4 on symbolic
    dims (einsum, gather, repeat, pad by a computed size, arange, cumsum, split, squeeze of a
    dim that is 1), and a scripted loop and branch; legacy exports at opsets 11 and 17 and
    dynamo exports at 18."""
    import torch as pt
    from torch import nn
    from torch.nn import functional as fn

    pt.manual_seed(RNG_SEED)

    class YoloLike(nn.Module):
        def __init__(self, classes: int = 3, anchors: int = 3) -> None:
            super().__init__()
            self.na, self.no = anchors, 5 + classes
            self.stem = nn.Conv2d(3, 8, 3, 2, 1)
            self.c2 = nn.Conv2d(8, 16, 3, 2, 1)
            self.c3 = nn.Conv2d(16, 16, 3, 2, 1)
            self.c4 = nn.Conv2d(16, 16, 3, 2, 1)
            self.lateral = nn.Conv2d(16, 16, 1)
            self.h3 = nn.Conv2d(32, anchors * self.no, 1)
            self.h4 = nn.Conv2d(16, anchors * self.no, 1)

        def forward(self, x: pt.Tensor) -> pt.Tensor:
            x = fn.silu(self.c2(fn.silu(self.stem(x))))
            p3 = fn.silu(self.c3(x))
            p4 = fn.silu(self.c4(p3))
            up = fn.interpolate(self.lateral(p4), scale_factor=2.0, mode="nearest")
            f3 = pt.cat([p3, up[:, :, : p3.shape[2], : p3.shape[3]]], 1)
            out = []
            for head, stride in ((self.h3(f3), 8), (self.h4(p4), 16)):
                b, _, h, w = head.shape
                y = head.view(b, self.na, self.no, h, w).permute(0, 1, 3, 4, 2).contiguous()
                gy, gx = pt.meshgrid(pt.arange(h), pt.arange(w), indexing="ij")
                grid = pt.stack((gx, gy), -1).view(1, 1, h, w, 2).float()
                xy = (y[..., :2].sigmoid() * 2 - 0.5 + grid) * stride
                wh = (y[..., 2:4].sigmoid() * 2) ** 2 * stride
                out.append(pt.cat((xy, wh, y[..., 4:].sigmoid()), -1).view(b, -1, self.no))
            return pt.cat(out, 1)

    class Postprocess(nn.Module):
        def forward(self, boxes: pt.Tensor, scores: pt.Tensor) -> tuple:
            kept = boxes[scores > 0.5]
            top, idx = pt.topk(scores, min(5, scores.shape[0]))
            hits = pt.nonzero(scores > 0.3)
            return kept, top, boxes[idx], hits, kept.sum(0) + boxes[hits[:, 0]].sum(0)

    class Misc(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(pt.randn(8, 6))

        def forward(self, x: pt.Tensor, idx: pt.Tensor) -> tuple:
            e = pt.einsum("bsd,de->bse", x, self.w)
            first, rest = pt.split(x, [3, 5], dim=2)
            return (
                e,
                pt.gather(x, 1, idx),
                x.repeat(1, 2, 1),
                fn.pad(x, (0, 0, 0, x.shape[1] % 3 + 1)),
                pt.arange(x.shape[1]).unsqueeze(0).expand(x.shape[0], -1),
                pt.cumsum(x, 1),
                x.new_zeros((x.shape[0], x.shape[1] * 2)),
                x.masked_fill(x > 0, 0.0),
                first,
                rest,
                x.flatten(1),
                x[:, :1].squeeze(1),
                pt.chunk(e, 2, dim=2)[1],
                x.transpose(1, 2).reshape(x.shape[0], -1, 4),
            )

    @pt.jit.script
    def repeat_rows(x: pt.Tensor, n: int) -> pt.Tensor:
        acc = x
        for _ in range(n):
            acc = pt.cat([acc, x], 0)
        return acc

    class Control(nn.Module):
        def forward(self, x: pt.Tensor) -> tuple:
            z = x[:, :2] if x.sum() > 0 else x[:, 1:3] * 2
            return repeat_rows(x, x.shape[1]), z

    image = pt.randn(1, 3, 64, 96)
    boxes = pt.rand(20, 4) * 10
    boxes[:, 2:] += boxes[:, :2]
    x, idx = pt.randn(2, 7, 8), pt.randint(0, 7, (2, 7, 8))
    hw = {"images": {0: "batch", 2: "height", 3: "width"}}
    legacy = [
        ("yolo_like", YoloLike(), (image,), ["images"], hw, (11, 17)),
        ("postprocess", Postprocess(), (boxes, pt.rand(20)), ["boxes", "scores"],
         {"boxes": {0: "n"}, "scores": {0: "n"}}, (17,)),
        ("misc_ops", Misc(), (x, idx), ["x", "idx"],
         {"x": {0: "b", 1: "s"}, "idx": {0: "b", 1: "s"}}, (17,)),
        ("control", Control(), (pt.randn(3, 4),), ["x"], {"x": {0: "n", 1: "m"}}, (17,)),
    ]  # fmt: skip
    made = []
    for name, model, args, names, axes, opsets in legacy:
        for opset in opsets:
            path = out / f"{name}_op{opset}.onnx"
            pt.onnx.export(
                model.eval(), args, str(path), dynamo=False, opset_version=opset,
                input_names=names, dynamic_axes=axes,
            )  # fmt: skip
            made.append(path.stem)
    dim = pt.export.Dim
    batch, s = dim("b"), dim("s")
    dynamo = [
        ("yolo_like", YoloLike(), (image,), ["images"],
         {"x": {0: dim("batch"), 2: dim("height", min=32), 3: dim("width", min=32)}}),
        ("misc_ops", Misc(), (x, idx), ["x", "idx"],
         {"x": {0: batch, 1: s}, "idx": {0: batch, 1: s}}),
    ]  # fmt: skip
    for name, model, args, names, shapes in dynamo:
        program = pt.onnx.export(
            model.eval(), args, dynamo=True, opset_version=18, input_names=names,
            dynamic_shapes=shapes,
        )  # fmt: skip
        program.save(str(out / f"{name}_dynamo18.onnx"))
        made.append(f"{name}_dynamo18")
    return made


# -- onnxscript ---------------------------------------------------------------------------------
def onnxscript(out: Path) -> list[str]:
    """Models written as onnxscript functions (``onnxscript_models.py``)."""
    import onnx
    import onnxscript_models

    made = []
    for name, function in onnxscript_models.MODELS.items():
        model = function.to_model_proto()
        onnx.checker.check_model(model)
        onnx.save(model, out / f"onnxscript_{name}.onnx")
        made.append(f"onnxscript_{name}")
    return made


# -- onnxruntime's transformers optimizer on the shared exports ---------------------------------
ORT_OPTIMIZED = (
    ("bert_mini_op11_dyn", "bert", 12, 384),
    ("gpt2_4l_op13_dyn", "gpt2", 4, 256),
    ("vit_tiny_op13", "vit", 3, 192),
)
"""The exports of ../shared/tools/export_models.py the optimizer fuses (model type, heads,
hidden size)."""


def ortopt(out: Path, exports: Path | None = None) -> list[str]:
    """onnxruntime's tools on the exports of ``../shared/tools/export_models.py`` in
    ``exports``: the transformers optimizer (opt_level 0) on BERT, GPT-2 and ViT (Attention,
    EmbedLayerNormalization, SkipLayerNormalization, BiasGelu, FastGelu), and the 4-bit
    MatMulNBits quantizer on GPT-2 and Llama."""
    from onnxruntime.transformers.optimizer import optimize_model

    if exports is None:
        return []
    made = []
    for name, kind, heads, hidden in ORT_OPTIMIZED:
        source = exports / f"{name}.onnx"
        if source.exists():
            model = optimize_model(
                str(source), model_type=kind, num_heads=heads, hidden_size=hidden, opt_level=0
            )
            model.save_model_to_file(str(out / f"ort_optimized_{name}.onnx"))
            made.append(f"ort_optimized_{name}")
    if importlib.util.find_spec("onnx_ir") is not None:  # the 4-bit quantizer needs it
        import onnx
        from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

        for name in ("gpt2_4l_op13_dyn", "llama_tiny_op14"):
            source = exports / f"{name}.onnx"
            if source.exists():
                nbits = MatMulNBitsQuantizer(onnx.load(source), block_size=32, is_symmetric=True)
                nbits.process()
                nbits.model.save_model_to_file(str(out / f"matmul_4bits_{name}.onnx"), False)
                made.append(f"matmul_4bits_{name}")
    return made


@contextlib.contextmanager
def inside(folder: Path) -> Iterator[None]:
    """Run in ``folder``: onnxruntime's quantizer writes its temporary files to the cwd."""
    before = Path.cwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


def _save(model: object, path: Path) -> None:
    import onnx

    onnx.save(model, path)  # type: ignore[arg-type]


FAMILIES: dict[str, Callable[[Path], list[str]]] = {
    "sklearn": sklearn,
    "quantized": quantized,
    "tf2onnx": tf2onnx,
    "paddle2onnx": paddle2onnx,
    "torch": torch,
    "onnxscript": onnxscript,
    "ortopt": ortopt,
}
NEEDS = {
    "sklearn": ("skl2onnx", "sklearn"),
    "quantized": ("onnxruntime",),
    "tf2onnx": ("tensorflow", "tf2onnx"),
    "paddle2onnx": ("paddle", "paddle2onnx"),
    "torch": ("torch", "transformers", "onnxruntime"),
    "onnxscript": ("onnxscript",),
    "ortopt": ("onnxruntime",),
}


def build(
    out: Path, only: list[str] | None = None, exports: Path | None = None
) -> dict[str, list[str] | str]:
    """Make each family under out/<family>; per family the models made or why none were.
    ``exports``: the output of ../shared/tools/export_models.py, which ``ortopt`` optimizes."""
    done: dict[str, list[str] | str] = {}
    for family, make in FAMILIES.items():
        if only and family not in only:
            continue
        missing = [m for m in NEEDS[family] if importlib.util.find_spec(m) is None]
        if missing:
            done[family] = f"skipped: {', '.join(missing)} not importable"
            continue
        if family == "ortopt" and exports is None:
            done[family] = "skipped: no --exports folder"
            continue
        folder = out / family
        folder.mkdir(parents=True, exist_ok=True)
        done[family] = ortopt(folder, exports) if family == "ortopt" else make(folder)
    return done


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, required=False)
    parser.add_argument("--only", default="")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--exports", type=Path, help="export_models.py's output, for ortopt")
    args = parser.parse_args()
    if args.list or args.out is None:
        for family, needs in NEEDS.items():
            print(f"{family}: needs {', '.join(needs)}")
        return
    only = [f for f in args.only.split(",") if f] or None
    for family, made in build(args.out, only, args.exports).items():
        print(f"{family}: {made if isinstance(made, str) else ', '.join(made)}", file=sys.stderr)


if __name__ == "__main__":
    main()
