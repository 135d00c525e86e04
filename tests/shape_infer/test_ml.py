"""Shape rules of every ai.onnx.ml op (skl2onnx, onnxmltools): one node each with a symbolic
batch, and onnxruntime's outputs at two batch sizes equal the inferred types, dims evaluated.
Non-tensor outputs (ZipMap's sequence of maps) must have the type onnxruntime reports."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from onnxforge.io import from_proto
from onnxforge.ir import OpaqueType, TensorType, UnknownDim
from onnxforge.shape_infer import infer
from onnxforge.shape_infer.symbolic import evaluate

ort = pytest.importorskip("onnxruntime")
ML = "ai.onnx.ml"
F, I64, S = TensorProto.FLOAT, TensorProto.INT64, TensorProto.STRING
N = "N"

# Two trees over 3 features: tree 0 splits feature 0, tree 1 splits feature 2.
TREES = {
    "nodes_treeids": [0, 0, 0, 1, 1, 1],
    "nodes_nodeids": [0, 1, 2, 0, 1, 2],
    "nodes_featureids": [0, 0, 0, 2, 0, 0],
    "nodes_values": [0.5, 0.0, 0.0, -0.2, 0.0, 0.0],
    "nodes_modes": ["BRANCH_LEQ", "LEAF", "LEAF", "BRANCH_LEQ", "LEAF", "LEAF"],
    "nodes_truenodeids": [1, 0, 0, 1, 0, 0],
    "nodes_falsenodeids": [2, 0, 0, 2, 0, 0],
    "nodes_missing_value_tracks_true": [0] * 6,
    "nodes_hitrates": [1.0] * 6,
}
LEAVES = {"treeids": [0, 0, 1, 1], "nodeids": [1, 2, 1, 2], "weights": [0.1, 0.9, 0.3, 0.7]}


def _classifier_trees(labels: dict) -> dict:
    return {
        **TREES,
        "class_treeids": LEAVES["treeids"],
        "class_nodeids": LEAVES["nodeids"],
        "class_ids": [0, 1, 0, 1],
        "class_weights": LEAVES["weights"],
        "post_transform": "NONE",
        **labels,
    }


def _regressor_trees(targets: int) -> dict:
    return {
        **TREES,
        "target_treeids": LEAVES["treeids"],
        "target_nodeids": LEAVES["nodeids"],
        "target_ids": [0, targets - 1, 0, targets - 1],
        "target_weights": LEAVES["weights"],
        "n_targets": targets,
        "aggregate_function": "SUM",
    }


def _tensor(dtype: int, dims: list) -> onnx.TypeProto:
    return helper.make_tensor_type_proto(dtype, dims)


# name: (op_type, ml opset, [(input name, TypeProto)], attributes, output count)
CASES: dict[str, tuple] = {
    "tree_ensemble_classifier_int_labels": (
        "TreeEnsembleClassifier", 3, [("x", _tensor(F, [N, 3]))],
        _classifier_trees({"classlabels_int64s": [3, 7]}), 2,
    ),
    "tree_ensemble_classifier_string_labels": (
        "TreeEnsembleClassifier", 3, [("x", _tensor(F, [N, 3]))],
        _classifier_trees({"classlabels_strings": ["no", "yes"]}), 2,
    ),
    "tree_ensemble_regressor_two_targets": (
        "TreeEnsembleRegressor", 3, [("x", _tensor(F, [N, 3]))], _regressor_trees(2), 1,
    ),
    "tree_ensemble_opset5": (
        "TreeEnsemble", 5, [("x", _tensor(F, [N, 3]))],
        {
            "nodes_featureids": [0], "nodes_splits": helper.make_tensor("s", F, [1], [0.5]),
            "nodes_modes": helper.make_tensor("m", TensorProto.UINT8, [1], [0]),
            "nodes_truenodeids": [0], "nodes_trueleafs": [1],
            "nodes_falsenodeids": [1], "nodes_falseleafs": [1], "tree_roots": [0],
            "leaf_targetids": [0, 1], "leaf_weights": helper.make_tensor("w", F, [2], [1, 2]),
            "n_targets": 2, "aggregate_function": 1, "post_transform": 0,
        },
        1,
    ),
    "linear_classifier_three_classes": (
        "LinearClassifier", 1, [("x", _tensor(F, [N, 3]))],
        {"coefficients": [0.1] * 9, "intercepts": [0.0, 0.1, 0.2], "classlabels_ints": [0, 1, 2]},
        2,
    ),
    # OnnxMLTools 1.2's logreg_iris: 2 features declared against 12 coefficients and 3
    # intercepts; onnxruntime gives one score column per intercept (3), not 12 // 2.
    "linear_classifier_columns_follow_the_intercepts": (
        "LinearClassifier", 1, [("x", _tensor(F, [N, 2]))],
        {"coefficients": [0.1] * 12, "intercepts": [0.0, 0.1, 0.2], "classlabels_ints": [0, 1, 2]},
        2,
    ),
    "linear_classifier_binary_one_row": (
        "LinearClassifier", 1, [("x", _tensor(F, [N, 3]))],
        {"coefficients": [0.1, -0.2, 0.3], "intercepts": [0.1], "classlabels_strings": ["a", "b"]},
        2,
    ),
    "linear_regressor": (
        "LinearRegressor", 1, [("x", _tensor(F, [N, 3]))],
        {"coefficients": [0.1] * 6, "intercepts": [0.0, 1.0], "targets": 2}, 1,
    ),
    "svm_classifier_with_probabilities": (
        "SVMClassifier", 1, [("x", _tensor(F, [N, 2]))],
        {
            "classlabels_ints": [0, 1, 2], "vectors_per_class": [1, 1, 1],
            "support_vectors": [0.0, 1.0, 1.0, 0.0, 1.0, 1.0],
            "coefficients": [1.0, -1.0, 1.0, -1.0, 1.0, -1.0], "rho": [0.1, 0.2, 0.3],
            "kernel_type": "RBF", "kernel_params": [0.5, 0.0, 3.0],
            "prob_a": [-1.0, -1.0, -1.0], "prob_b": [0.1, 0.1, 0.1],
        },
        2,
    ),
    "svm_regressor": (
        "SVMRegressor", 1, [("x", _tensor(F, [N, 2]))],
        {
            "n_supports": 2, "support_vectors": [0.0, 1.0, 1.0, 0.0],
            "coefficients": [0.5, -0.5], "rho": [0.1], "kernel_type": "LINEAR",
            "kernel_params": [0.5, 0.0, 3.0], "post_transform": "NONE",
        },
        1,
    ),
    "scaler": ("Scaler", 1, [("x", _tensor(F, [N, 3]))], {"offset": [0.1], "scale": [2.0]}, 1),
    "scaler_of_int64": (
        "Scaler", 1, [("x", _tensor(I64, [N, 3]))], {"offset": [0.0], "scale": [2.0]}, 1,
    ),
    "normalizer": ("Normalizer", 1, [("x", _tensor(F, [N, 3]))], {"norm": "L2"}, 1),
    "binarizer": ("Binarizer", 1, [("x", _tensor(F, [N, 3]))], {"threshold": 0.1}, 1),
    "imputer": (
        "Imputer", 1, [("x", _tensor(F, [N, 3]))],
        {"imputed_value_floats": [0.0, 1.0, 2.0], "replaced_value_float": np.nan}, 1,
    ),
    "one_hot_encoder": (
        "OneHotEncoder", 1, [("x", _tensor(I64, [N, 2]))], {"cats_int64s": [0, 1, 2]}, 1,
    ),
    "array_feature_extractor": (
        "ArrayFeatureExtractor", 1,
        [("x", _tensor(F, [N, 5])), ("i", _tensor(I64, [2]))], {}, 1,
    ),
    "label_encoder_string_to_int": (
        "LabelEncoder", 2, [("x", _tensor(S, [N]))],
        {"keys_strings": ["a", "b"], "values_int64s": [1, 2], "default_int64": -1}, 1,
    ),
    "label_encoder_opset4_tensor_attrs": (
        "LabelEncoder", 4, [("x", _tensor(I64, [N, 2]))],
        {
            "keys_tensor": helper.make_tensor("k", I64, [2], [0, 1]),
            "values_tensor": helper.make_tensor("v", F, [2], [0.5, 1.5]),
            "default_tensor": helper.make_tensor("d", F, [1], [-1.0]),
        },
        1,
    ),
    "category_mapper": (
        "CategoryMapper", 1, [("x", _tensor(S, [N, 2]))],
        {"cats_strings": ["a", "b"], "cats_int64s": [1, 2], "default_int64": 0}, 1,
    ),
    "feature_vectorizer": (
        "FeatureVectorizer", 1, [("a", _tensor(F, [N, 2])), ("b", _tensor(F, [N, 3]))],
        {"inputdimensions": [2, 3]}, 1,
    ),
    "zipmap_int_labels": (
        "ZipMap", 1, [("x", _tensor(F, [N, 2]))], {"classlabels_int64s": [4, 9]}, 1,
    ),
    "zipmap_string_labels": (
        "ZipMap", 1, [("x", _tensor(F, [N, 2]))], {"classlabels_strings": ["a", "b"]}, 1,
    ),
    "dict_vectorizer": (
        "DictVectorizer", 1,
        [("d", helper.make_map_type_proto(S, _tensor(F, [])))],
        {"string_vocabulary": ["a", "b", "c"]}, 1,
    ),
    "cast_map_dense": (
        "CastMap", 1,
        [("d", helper.make_map_type_proto(I64, _tensor(F, [])))],
        {"cast_to": "TO_FLOAT", "map_form": "DENSE"}, 1,
    ),
}  # fmt: skip


DATA_DEPENDENT = {"cast_map_dense"}
"""Cases whose output size is the input map's size, known only at run time."""


def _model(op_type: str, ml_opset: int, inputs: list, attrs: dict, n_out: int) -> onnx.ModelProto:
    outputs = [f"y{i}" for i in range(n_out)]
    node = helper.make_node(op_type, [n for n, _ in inputs], outputs, domain=ML, **attrs)
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_value_info(n, t) for n, t in inputs],
        [onnx.ValueInfoProto(name=o) for o in outputs],
    )
    onnx_opset = 21 if ml_opset == 5 else 17
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", onnx_opset), helper.make_opsetid(ML, ml_opset)],
    )
    model.ir_version = 10 if ml_opset == 5 else 8
    return model


def _feed(name: str, t: onnx.TypeProto, batch: int, rng: np.random.Generator) -> object:
    if t.HasField("map_type"):
        keys = ["a", "c"] if t.map_type.key_type == S else [0, 2]
        return {k: float(i + 1) for i, k in enumerate(keys)}
    tt = t.tensor_type
    dims = [batch if d.dim_param else d.dim_value for d in tt.shape.dim]
    if name == "i":
        return np.array([4, 1], dtype=np.int64)
    if tt.elem_type == S:
        return rng.choice(np.array(["a", "b", "z"], dtype=object), dims)
    if tt.elem_type == I64:
        return rng.integers(0, 3, dims).astype(np.int64)
    return rng.standard_normal(dims).astype(np.float32)


@pytest.mark.parametrize("name", CASES)
def test_ml_op_types_are_what_onnxruntime_computes(name: str) -> None:
    op_type, ml_opset, inputs, attrs, n_out = CASES[name]
    proto = _model(op_type, ml_opset, inputs, attrs, n_out)
    ours = from_proto(proto)
    report = infer(ours)
    assert not report.errors, report.errors
    types = {v.name: v.type for v in ours.graph.outputs}
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    for batch in (2, 5):
        feeds = {n: _feed(n, t, batch, rng) for n, t in inputs}
        names = [o.name for o in session.get_outputs()]
        for out, result in zip(session.get_outputs(), session.run(names, feeds), strict=True):
            t = types[out.name]
            if not isinstance(result, np.ndarray):  # ZipMap: a list of dicts
                assert isinstance(t, OpaqueType) and t.kind == "sequence_type", (out.name, t)
                key = t.proto.sequence_type.elem_type.map_type.key_type
                assert key == (S if isinstance(next(iter(result[0])), str) else I64)
                continue
            assert isinstance(t, TensorType) and t.shape is not None, (out.name, t)
            assert t.dtype == helper.np_dtype_to_tensor_dtype(result.dtype) or (
                t.dtype == S and result.dtype == object
            ), (out.name, t, result.dtype)
            got = [evaluate(d, {N: batch}) for d in t.shape]
            if name in DATA_DEPENDENT:  # the map's size: a fresh symbol is the answer
                got = [
                    g if g is not None or not isinstance(d, UnknownDim) else r
                    for g, d, r in zip(got, t.shape, result.shape, strict=True)
                ]
            assert got == list(result.shape), (out.name, t, result.shape)
