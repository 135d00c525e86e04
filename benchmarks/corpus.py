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
    from sklearn.ensemble import GradientBoostingRegressor, RandomForestClassifier
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LinearRegression, LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import Binarizer, Normalizer, OneHotEncoder, StandardScaler
    from sklearn.svm import SVC

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
    return made


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

    made = []
    for name, net in (("paddle_cnn", Net()), ("paddle_ocr", Ocr())):
        net.eval()
        spec = [paddle.static.InputSpec([None, 3, None, None], "float32", "x")]
        paddle.onnx.export(net, str(out / name), input_spec=spec, opset_version=11)
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
}
NEEDS = {
    "sklearn": ("skl2onnx", "sklearn"),
    "quantized": ("onnxruntime",),
    "tf2onnx": ("tensorflow", "tf2onnx"),
    "paddle2onnx": ("paddle", "paddle2onnx"),
    "torch": ("torch", "transformers", "onnxruntime"),
}


def build(out: Path, only: list[str] | None = None) -> dict[str, list[str] | str]:
    """Make each family under out/<family>; per family the models made or why none were."""
    done: dict[str, list[str] | str] = {}
    for family, make in FAMILIES.items():
        if only and family not in only:
            continue
        missing = [m for m in NEEDS[family] if importlib.util.find_spec(m) is None]
        if missing:
            done[family] = f"skipped: {', '.join(missing)} not importable"
            continue
        folder = out / family
        folder.mkdir(parents=True, exist_ok=True)
        done[family] = make(folder)
    return done


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, required=False)
    parser.add_argument("--only", default="")
    parser.add_argument("--list", action="store_true")
    args = parser.parse_args()
    if args.list or args.out is None:
        for family, needs in NEEDS.items():
            print(f"{family}: needs {', '.join(needs)}")
        return
    only = [f for f in args.only.split(",") if f] or None
    for family, made in build(args.out, only).items():
        print(f"{family}: {made if isinstance(made, str) else ', '.join(made)}", file=sys.stderr)


if __name__ == "__main__":
    main()
