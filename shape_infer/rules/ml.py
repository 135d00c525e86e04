"""Shape rules for the ai.onnx.ml domain (skl2onnx, onnxmltools): onnx's per-node inference
gives most of these ops no shape at all. The authority is what onnxruntime computes: a batch
of N rows (``[N, C]`` input, or ``[C]`` as one row) gives one label per row and one score per
class or target."""

from __future__ import annotations

__all__: list[str] = []

from collections.abc import Callable, Sequence

from onnxforge.ir import Dim, DType, Op, OpaqueType, TensorType
from onnxforge.opset import schema_versions
from onnxforge.shape_infer.engine import InferContext, ShapeRule, shape_rule
from onnxforge.shape_infer.symbolic import dim_add

ML = "ai.onnx.ml"
Inputs = Sequence[TensorType | None]
TypeLike = TensorType | OpaqueType | None
Result = list[TensorType | OpaqueType | None]


def _fallback(op: Op, inputs: Inputs, ctx: InferContext) -> Result:
    from onnxforge.shape_infer import _onnx_fallback  # noqa: PLC0415  (imports onnx)

    return _onnx_fallback.infer_node(op, list(inputs), ctx)


def _rows(x: TensorType | None) -> Dim:
    """The batch: the first dim of a matrix, 1 for a vector; None when the rank is unknown."""
    if x is None or x.shape is None:
        return None
    return x.shape[0] if len(x.shape) == 2 else 1 if len(x.shape) == 1 else None


def _label_type(op: Op) -> int:
    return DType.STRING if op.attr("classlabels_strings") else DType.INT64


def _count(*values: object) -> int | None:
    for value in values:
        if value:
            return len(value)  # type: ignore[arg-type]
    return None


def _rule(op_type: str) -> Callable[[ShapeRule], ShapeRule]:
    return shape_rule(op_type, versions=schema_versions(op_type, ML), domain=ML)


@_rule("TreeEnsembleClassifier")
def infer_tree_ensemble_classifier(op: Op, inputs: Inputs, ctx: InferContext) -> Result:
    n = _rows(inputs[0])
    classes = _count(op.attr("classlabels_int64s"), op.attr("classlabels_strings"))
    return [TensorType(_label_type(op), (n,)), TensorType(DType.FLOAT, (n, classes))]


@_rule("TreeEnsembleRegressor")
def infer_tree_ensemble_regressor(op: Op, inputs: Inputs, ctx: InferContext) -> Result:
    targets = op.attr("n_targets", 1)
    return [TensorType(DType.FLOAT, (_rows(inputs[0]), int(targets)))]  # type: ignore[arg-type]


@_rule("TreeEnsemble")
def infer_tree_ensemble(op: Op, inputs: Inputs, ctx: InferContext) -> Result:
    x = inputs[0]
    targets = op.attr("n_targets")
    dtype = x.dtype if x is not None else DType.FLOAT
    return [TensorType(dtype, (_rows(x), None if targets is None else int(targets)))]  # type: ignore[arg-type]


@_rule("LinearClassifier")
def infer_linear_classifier(op: Op, inputs: Inputs, ctx: InferContext) -> Result:
    n = _rows(inputs[0])
    classes = _count(op.attr("classlabels_ints"), op.attr("classlabels_strings"))
    # onnxruntime's kernel has one score column per intercept, whatever the input's width
    # (OnnxMLTools 1.2's logreg_iris declares 2 features against 12 coefficients and 3
    # intercepts: 3 columns), and two for one intercept with two class labels.
    scores: Dim = len(op.attr("intercepts") or [])
    if classes == 2 and scores == 1:
        scores = 2
    label = DType.STRING if op.attr("classlabels_strings") else DType.INT64
    return [TensorType(label, (n,)), TensorType(DType.FLOAT, (n, scores))]


@_rule("LinearRegressor")
def infer_linear_regressor(op: Op, inputs: Inputs, ctx: InferContext) -> Result:
    return [TensorType(DType.FLOAT, (_rows(inputs[0]), int(op.attr("targets", 1))))]  # type: ignore[arg-type]


@_rule("SVMClassifier")
def infer_svm_classifier(op: Op, inputs: Inputs, ctx: InferContext) -> Result:
    n = _rows(inputs[0])
    classes = _count(op.attr("classlabels_ints"), op.attr("classlabels_strings"))
    label = DType.STRING if op.attr("classlabels_strings") else DType.INT64
    scores: Dim = classes
    if classes == 2 and not op.attr("prob_a"):
        scores = None  # binary without probabilities: onnxruntime writes one or two columns
    return [TensorType(label, (n,)), TensorType(DType.FLOAT, (n, scores))]


@_rule("SVMRegressor")
def infer_svm_regressor(op: Op, inputs: Inputs, ctx: InferContext) -> Result:
    return [TensorType(DType.FLOAT, (_rows(inputs[0]), 1))]


def _same_shape(dtype: int | None) -> object:
    def rule(op: Op, inputs: Inputs, ctx: InferContext) -> Result:
        x = inputs[0]
        if x is None:
            return _fallback(op, inputs, ctx)
        return [TensorType(dtype or x.dtype, x.shape)]

    return rule


for _name, _dtype in (("Scaler", DType.FLOAT), ("Normalizer", DType.FLOAT), ("Binarizer", None)):
    _rule(_name)(_same_shape(_dtype))  # type: ignore[operator]


@_rule("Imputer")
def infer_imputer(op: Op, inputs: Inputs, ctx: InferContext) -> Result:
    return _same_shape(None)(op, inputs, ctx)  # type: ignore[operator]


@_rule("OneHotEncoder")
def infer_one_hot_encoder(op: Op, inputs: Inputs, ctx: InferContext) -> Result:
    x = inputs[0]
    categories = _count(op.attr("cats_int64s"), op.attr("cats_strings"))
    if x is None or x.shape is None:
        return [TensorType(DType.FLOAT, None)]
    return [TensorType(DType.FLOAT, (*x.shape, categories))]


@_rule("ArrayFeatureExtractor")
def infer_array_feature_extractor(op: Op, inputs: Inputs, ctx: InferContext) -> Result:
    x, indices = inputs[0], inputs[1]
    if x is None or x.shape is None or indices is None or indices.shape is None:
        return _fallback(op, inputs, ctx)
    count: Dim = 1
    for d in indices.shape:
        count = count * d if isinstance(count, int) and isinstance(d, int) else None
    if len(x.shape) == 1:
        return [TensorType(x.dtype, (1, count))]
    return [TensorType(x.dtype, (*x.shape[:-1], count))]


def _mapped(op: Op, inputs: Inputs, ctx: InferContext) -> Result:
    """LabelEncoder, CategoryMapper: each element mapped; the shape stays."""
    out = _fallback(op, inputs, ctx)
    x = inputs[0]
    t = out[0] if out else None
    if x is None or not isinstance(t, TensorType):
        return out
    return [TensorType(t.dtype, x.shape)]


for _name in ("LabelEncoder", "CategoryMapper"):
    _rule(_name)(_mapped)  # type: ignore[operator]


@_rule("FeatureVectorizer")
def infer_feature_vectorizer(op: Op, inputs: Inputs, ctx: InferContext) -> Result:
    sizes = op.attr("inputdimensions") or []
    total: Dim = 0
    for size in sizes:
        total = dim_add(total, int(size))  # type: ignore[arg-type]
    first = next((t for t in inputs if t is not None), None)
    return [TensorType(DType.FLOAT, (_rows(first), total if sizes else None))]


def _map_value(t: TypeLike) -> int | None:
    """The element type of a map input's values (DictVectorizer, CastMap), when it is read."""
    if not isinstance(t, OpaqueType) or t.kind != "map_type":
        return None
    value = t.proto.map_type.value_type
    return int(value.tensor_type.elem_type) if value.HasField("tensor_type") else None


@_rule("DictVectorizer")
def infer_dict_vectorizer(op: Op, inputs: Inputs, ctx: InferContext) -> Result:
    """One map in, one row out: ``[1, len(vocabulary)]`` (onnxruntime writes a row even though
    the spec's text says 1-D), of the map's value type."""
    vocabulary = _count(op.attr("string_vocabulary"), op.attr("int64_vocabulary"))
    source = ctx.input(0)
    dtype = (None if source is None else _map_value(ctx.scope.type_of(source))) or DType.FLOAT
    return [TensorType(dtype, (1, vocabulary))]


@_rule("CastMap")
def infer_cast_map(op: Op, inputs: Inputs, ctx: InferContext) -> Result:
    """``[1, max_map]`` (SPARSE) or ``[1, size of the map]`` (DENSE: known only at run time)."""
    to = str(op.attr("cast_to", "TO_FLOAT"))
    dtype = {"TO_FLOAT": DType.FLOAT, "TO_STRING": DType.STRING, "TO_INT64": DType.INT64}.get(
        to, DType.FLOAT
    )
    dense = str(op.attr("map_form", "DENSE")) == "DENSE"
    return [TensorType(dtype, (1, None if dense else int(op.attr("max_map", 1))))]  # type: ignore[arg-type]
