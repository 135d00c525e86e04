"""Every broadcast of small shapes, under every rule and every pdpd axis, against its authority.

The shapes: every shape of rank 0 to 4 with dims in {1, 2, 3} (121 shapes, 14,641 ordered
pairs), each pair under each rule:

- ``numpy``: ``np.broadcast_shapes`` and OpenVINO's Subtract-1 ``auto_broadcast="numpy"``.
- ``none``: OpenVINO's ``auto_broadcast="none"``.
- ``pdpd``: OpenVINO's ``auto_broadcast="pdpd"`` at every axis from -2 to 4. The Python API's
  ``opset1.subtract`` takes no axis, so the Subtract comes from IR XML written here, with
  ``auto_broadcast.auto_broadcast_axis`` as ``openvino.save_model`` writes it; ``read_model``
  reads it once per axis with inputs of unknown rank, then each pair is set on the Parameters
  and OpenVINO's own shape inference runs on the Subtract (``validate_and_infer_types``, what
  ``read_model`` runs). One pair in 61 is also read from an IR of its own with the shapes
  written in it, so the shortcut is checked against reading a whole IR.
- ``legacy`` (Sub-1/6 ``broadcast=1``): a transcription of the spec's text, written here, with
  ``axis`` absent and every axis from -2 to 4.

Then unknown dims (every shape of rank 0 to 4 with dims in {1, 3, ?}) against OpenVINO, and
named symbols (every shape of rank 0 to 3 with dims in {1, 2, N, M}) checked for every value
1, 2, 3 the symbols may take against the static results above. Then the static pairs as ONNX
Sub-1, -6 (``broadcast`` absent, 0, 1 with ``axis`` absent and -2 to 4), -7, -13 and -14
models: inference (one model of 14,641 Subs per version, inferred again for each set of
attributes) and our kernel give the authority's shape and values, and onnxruntime (7 and later;
one session per version on inputs of unknown shape, run on every pair) refuses the same pairs
and computes the same values in the same shapes. Every test collects all disagreements and
asserts there are none, so a failure lists them.
"""

from __future__ import annotations

__all__: list[str] = []

import functools
import itertools
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import pytest
from onnx import TensorProto, helper

from onnxforge.errors import KernelError, ShapeError
from onnxforge.ir import Dim, DType, Graph, Model, Op, TensorType
from onnxforge.kernels import run as run_kernel
from onnxforge.shape_infer import infer
from onnxforge.shape_infer.broadcast import broadcast_shape
from onnxforge.shape_infer.symbolic import evaluate

StaticShape = tuple[int, ...]
Pair = tuple[StaticShape, StaticShape]

SHAPES: list[StaticShape] = [
    s for rank in range(5) for s in itertools.product((1, 2, 3), repeat=rank)
]
PAIRS: list[Pair] = list(itertools.product(SHAPES, SHAPES))
PDPD_AXES = tuple(range(-2, 5))
LEGACY_AXES: tuple[int | None, ...] = (None, *range(-2, 5))  # None: the attribute is absent
OPENVINO_CASES = [("numpy", 0), ("none", 0)] + [("pdpd", axis) for axis in PDPD_AXES]
READ_EVERY = 61  # one pair in READ_EVERY also goes through a read_model of its own IR
SHOWN = 20  # disagreements shown when a test fails


def ours(a: Sequence[Dim], b: Sequence[Dim], rule: str, axis: int | None) -> tuple | None:
    try:
        return broadcast_shape(a, b, rule=rule, axis=axis)
    except ShapeError:
        return None


def numpy_shape(a: StaticShape, b: StaticShape) -> StaticShape | None:
    try:
        return tuple(np.broadcast_shapes(a, b))
    except ValueError:
        return None


# --- the legacy rule, from the text of Sub-1 and Sub-6 ----------------------------------------


def spec_legacy_start(
    a: StaticShape, b: StaticShape, axis: int | None, *, outer_ones: bool = True
) -> int | None:
    """Where B goes on A under Sub-1/6 ``broadcast=1`` (-1: anywhere, B is one element), or
    None when the spec does not allow the pair. From the text:

        "the second tensor can either be of element size 1 (including a scalar tensor and any
        tensor with rank equal to or smaller than the first tensor), or having its shape as a
        contiguous subset of the first tensor's shape. The starting of the mutually equal
        shape is specified by the argument "axis", and if it is not set, suffix matching is
        assumed. 1-dim expansion doesn't work yet."

    Where the text says nothing, onnxforge reads it as Caffe2 (where the op comes from) does,
    and so does this transcription: ``axis=-1`` (Caffe2's default; the schema has none) means
    suffix matching, and B's leading and trailing 1s are set aside before B is matched with
    A (``outer_ones=False``: they are part of the "contiguous subset" and must equal A's dims,
    the literal text). A one-element B fits whatever ``axis`` says: the axis places "the
    mutually equal shape", which a one-element B does not need.
    """
    if len(b) > len(a):
        return None  # one element "with rank equal to or smaller", or a subset of A's dims
    if math.prod(b) == 1:
        return -1
    start = len(a) - len(b) if axis is None or axis == -1 else axis
    if not 0 <= start <= len(a) - len(b):
        return None
    lo, hi = 0, len(b)
    if outer_ones:
        while b[lo] == 1:
            lo += 1
        while b[hi - 1] == 1:
            hi -= 1
    return start if b[lo:hi] == a[start + lo : start + hi] else None


def spec_legacy(
    a: StaticShape, b: StaticShape, axis: int | None, *, outer_ones: bool = True
) -> StaticShape | None:
    """The output shape under Sub-1/6 ``broadcast=1``: "same dimensions ... as A"."""
    return None if spec_legacy_start(a, b, axis, outer_ones=outer_ones) is None else a


def legacy_placed(b: np.ndarray, a_rank: int, start: int) -> np.ndarray:
    """B as numpy broadcasting puts it on A from ``start`` (-1: a one-element B, a scalar)."""
    if start == -1:
        return b.reshape(())
    return b.reshape((1,) * start + b.shape + (1,) * (a_rank - start - b.ndim))


def failure(found: list[str], checked: int) -> str:
    shown = "\n".join(found[:SHOWN])
    return f"{len(found)} disagreements in {checked} cases, the first {SHOWN}:\n{shown}"


def test_every_shape_and_pair_is_there() -> None:
    assert len(SHAPES) == 1 + 3 + 9 + 27 + 81 == 121
    assert len(PAIRS) == 14_641 and len(set(PAIRS)) == len(PAIRS)


def test_the_numpy_rule_is_np_broadcast_shapes_on_every_pair() -> None:
    found = [
        f"{a} {b}: ours {ours(a, b, 'numpy', None)}, numpy {numpy_shape(a, b)}"
        for a, b in PAIRS
        if ours(a, b, "numpy", None) != numpy_shape(a, b)
    ]
    assert not found, failure(found, len(PAIRS))


@pytest.mark.parametrize("axis", LEGACY_AXES, ids=lambda axis: f"axis={axis}")
def test_the_legacy_rule_is_the_spec_text_on_every_pair(axis: int | None) -> None:
    found = []
    accepted = 0
    for a, b in PAIRS:
        got, truth = ours(a, b, "legacy", axis), spec_legacy(a, b, axis)
        accepted += truth is not None
        if got != truth:
            found.append(f"{a} {b}: ours {got}, spec {truth}")
    assert not found, failure(found, len(PAIRS))
    assert accepted > 0


def test_a_one_element_b_of_higher_rank_than_a_never_fits_the_legacy_rule() -> None:
    ones = [b for b in SHAPES if math.prod(b) == 1]
    for a, b, axis in itertools.product(SHAPES, ones, LEGACY_AXES):
        if len(b) > len(a):
            assert spec_legacy(a, b, axis) is None
            assert ours(a, b, "legacy", axis) is None, (a, b, axis)
        else:
            assert ours(a, b, "legacy", axis) == a, (a, b, axis)


def test_the_literal_text_differs_only_where_b_has_outer_ones_set_aside() -> None:
    """What the literal text refuses and the rule accepts: B's leading or trailing 1s stand
    against dims of A that are not 1 (A=[2,3], B=[1,3]); B without them fits the literal text
    from where they end. Everything the literal text accepts, the rule accepts."""
    set_aside = 0
    for axis in LEGACY_AXES:
        for a, b in PAIRS:
            literal = spec_legacy(a, b, axis, outer_ones=False)
            read = spec_legacy(a, b, axis)
            if literal == read:
                continue
            assert literal is None and read == a, (a, b, axis)
            start = spec_legacy_start(a, b, axis)
            assert start is not None and start >= 0
            lo = next(j for j, d in enumerate(b) if d != 1)
            hi = max(j for j, d in enumerate(b) if d != 1) + 1
            assert (lo, hi) != (0, len(b))
            trimmed = b[lo:hi]
            assert spec_legacy(a, trimmed, start + lo, outer_ones=False) == a
            set_aside += 1
    assert set_aside > 0


# --- OpenVINO, with the Subtract read from IR -------------------------------------------------

SUBTRACT_IR = """<?xml version="1.0"?>
<net name="subtract" version="11">
  <layers>
    <layer id="0" name="a" type="Parameter" version="opset1">
      <data shape="{a}" element_type="f32"/>
      <output><port id="0" precision="FP32" names="a">{a_dims}</port></output>
    </layer>
    <layer id="1" name="b" type="Parameter" version="opset1">
      <data shape="{b}" element_type="f32"/>
      <output><port id="0" precision="FP32" names="b">{b_dims}</port></output>
    </layer>
    <layer id="2" name="sub" type="Subtract" version="opset1">
      <data {attributes}/>
      <input><port id="0" precision="FP32"/><port id="1" precision="FP32"/></input>
      <output><port id="2" precision="FP32" names="c"/></output>
    </layer>
    <layer id="3" name="c" type="Result" version="opset1">
      <input><port id="0" precision="FP32"/></input>
    </layer>
  </layers>
  <edges>
    <edge from-layer="0" from-port="0" to-layer="2" to-port="0"/>
    <edge from-layer="1" from-port="0" to-layer="2" to-port="1"/>
    <edge from-layer="2" from-port="2" to-layer="3" to-port="0"/>
  </edges>
</net>
"""


def subtract_ir(a: Sequence[Dim] | None, b: Sequence[Dim] | None, mode: str, axis: int) -> str:
    """IR of one Subtract-1 on Parameters a and b (None: unknown rank, a None dim: unknown),
    its attributes as ``openvino.save_model`` writes them."""

    def shape(s: Sequence[Dim] | None) -> str:
        return "..." if s is None else ",".join("?" if d is None else str(d) for d in s)

    def dims(s: Sequence[Dim] | None) -> str:
        return "".join(f"<dim>{-1 if d is None else d}</dim>" for d in s or ())

    attributes = f'auto_broadcast="{mode}"'
    if mode == "pdpd":
        attributes += f' auto_broadcast.auto_broadcast_axis="{axis}"'
    return SUBTRACT_IR.format(
        a=shape(a), b=shape(b), a_dims=dims(a), b_dims=dims(b), attributes=attributes
    )


def openvino_shape(shape: Any) -> tuple[Dim, ...]:
    """An OpenVINO PartialShape of static rank as a shape: a dynamic dim is None."""
    out: list[Dim] = []
    for d in shape:
        if d.is_static:
            out.append(d.get_length())
        else:
            assert (d.get_min_length(), d.get_max_length()) == (0, -1), f"interval {d}"
            out.append(None)
    return tuple(out)


class OpenVINOSubtract:
    """OpenVINO's verdict on a pair: the IR read once (inputs of unknown rank), then each pair
    set on the Parameters and the Subtract's shape inference run again."""

    def __init__(self, ov: Any, mode: str, axis: int) -> None:
        self.ov, self.mode, self.axis = ov, mode, axis
        self.core = ov.Core()
        self.weights = ov.Tensor(ov.Type.u8, [0])
        model = self.read(subtract_ir(None, None, mode, axis))
        [self.node] = [op for op in model.get_ordered_ops() if op.get_type_name() == "Subtract"]
        attributes = self.node.get_attributes()
        assert attributes["auto_broadcast"] == mode
        if mode == "pdpd":
            assert attributes["auto_broadcast.auto_broadcast_axis"] == axis
        self.params = list(model.get_parameters())
        self.model = model  # keeps the nodes alive

    def read(self, xml: str) -> Any:
        return self.core.read_model(model=xml, weights=self.weights)

    def __call__(self, a: Sequence[Dim], b: Sequence[Dim]) -> tuple[Dim, ...] | None:
        for param, shape in zip(self.params, (a, b), strict=True):
            param.set_partial_shape(self.ov.PartialShape([-1 if d is None else d for d in shape]))
            param.validate_and_infer_types()
        try:
            self.node.validate_and_infer_types()
        except RuntimeError as e:
            assert "Argument shapes are inconsistent" in str(e), str(e)
            return None
        return openvino_shape(self.node.get_output_partial_shape(0))

    def from_its_own_ir(self, a: Sequence[Dim], b: Sequence[Dim]) -> tuple[Dim, ...] | None:
        """The verdict of read_model on an IR with the pair's shapes written in it."""
        try:
            model = self.read(subtract_ir(a, b, self.mode, self.axis))
        except RuntimeError as e:
            assert "Argument shapes are inconsistent" in str(e), str(e)
            return None
        return openvino_shape(model.output(0).get_partial_shape())


@pytest.fixture(scope="module")
def openvino() -> Any:
    return pytest.importorskip(
        "openvino", reason="openvino is not installed (the test extra has it)"
    )


@pytest.fixture(scope="module")
def openvino_table(openvino: Any) -> dict[tuple[str, int], dict[Pair, tuple | None]]:
    """OpenVINO's verdict on every static pair, per (mode, axis)."""
    table = {}
    for mode, axis in OPENVINO_CASES:
        subtract = OpenVINOSubtract(openvino, mode, axis)
        table[mode, axis] = {(a, b): subtract(a, b) for a, b in PAIRS}
    return table


@pytest.mark.parametrize(("mode", "axis"), OPENVINO_CASES, ids=str)
def test_openvino_read_from_ir_agrees_on_every_pair(
    openvino: Any, openvino_table: dict, mode: str, axis: int
) -> None:
    verdicts = openvino_table[mode, axis]
    found = [
        f"{a} {b}: ours {ours(a, b, mode, axis)}, OpenVINO {truth}"
        for (a, b), truth in verdicts.items()
        if ours(a, b, mode, axis) != truth
    ]
    if mode == "numpy":
        found += [
            f"{a} {b}: OpenVINO {truth}, numpy {numpy_shape(a, b)}"
            for (a, b), truth in verdicts.items()
            if truth != numpy_shape(a, b)
        ]
    assert not found, failure(found, len(verdicts))
    accepted = sum(v is not None for v in verdicts.values())
    assert accepted == 0 if axis == -2 else 0 < accepted < len(verdicts)

    subtract = OpenVINOSubtract(openvino, mode, axis)
    for a, b in PAIRS[::READ_EVERY]:
        assert subtract.from_its_own_ir(a, b) == verdicts[a, b], (a, b)


@pytest.mark.parametrize(
    ("a", "b", "axis", "out"),
    [
        ((4, 4, 2), (4, 1, 1), 1, None),  # issue 14: B's trailing 1s run past A
        ((5,), (5,), 2, None),  # issue 14: B starts past A
        ((2, 3), (3, 1), -1, None),  # axis -1 places all of B, its trailing 1 too
        ((4, 4, 2), (4, 1, 1), 0, (4, 4, 2)),
        ((2, 3, 1), (3, 1), 1, (2, 3, 1)),
    ],
)
def test_pdpd_places_all_of_b_trailing_ones_included_as_openvino_does(
    openvino: Any, a: StaticShape, b: StaticShape, axis: int, out: StaticShape | None
) -> None:
    # OpenVINO's shape inference places all of B, its trailing 1s too (its reference kernel
    # trims them first), so the first three do not fit; issue 14 names the first two.
    assert OpenVINOSubtract(openvino, "pdpd", axis)(a, b) == out
    assert ours(a, b, "pdpd", axis) == out


UNKNOWN_SHAPES: list[tuple[Dim, ...]] = [
    s for rank in range(5) for s in itertools.product((1, 3, None), repeat=rank)
]


@pytest.mark.parametrize(("mode", "axis"), OPENVINO_CASES, ids=str)
def test_openvino_agrees_on_unknown_dims(openvino: Any, mode: str, axis: int) -> None:
    subtract = OpenVINOSubtract(openvino, mode, axis)
    found = []
    pairs = list(itertools.product(UNKNOWN_SHAPES, UNKNOWN_SHAPES))
    for a, b in pairs:
        got, truth = ours(a, b, mode, axis), subtract(a, b)
        if got != truth:
            found.append(f"{a} {b}: ours {got}, OpenVINO {truth}")
    assert not found, failure(found, len(pairs))


# --- named symbols, for every value they may take ---------------------------------------------

SYMBOLIC_DIMS: tuple[Dim, ...] = (1, 2, "N", "M")
SYMBOLIC_SHAPES: list[tuple[Dim, ...]] = [
    s for rank in range(4) for s in itertools.product(SYMBOLIC_DIMS, repeat=rank)
]
RULE_CASES: list[tuple[str, int | None]] = (
    [("numpy", None), ("none", None)]
    + [("legacy", axis) for axis in LEGACY_AXES]
    + [("pdpd", axis) for axis in PDPD_AXES]
)


def ours_assuming(
    a: Sequence[Dim], b: Sequence[Dim], rule: str, axis: int | None
) -> tuple[tuple[Dim, ...] | None, list[tuple[Dim, Dim]]]:
    """Our shape (None: rejected) and the pairs of dims it takes as equal."""
    assumed: list[tuple[Dim, Dim]] = []
    try:
        out = broadcast_shape(
            a, b, rule=rule, axis=axis, on_assume=lambda x, y: assumed.append((x, y))
        )
    except ShapeError:
        return None, []
    return out, assumed


def substitutions(shapes: Sequence[Sequence[Dim]]) -> Iterator[dict[Dim, int]]:
    names = sorted({d for s in shapes for d in s if isinstance(d, str)})
    for values in itertools.product((1, 2, 3), repeat=len(names)):
        yield dict(zip(names, values, strict=True))


def static_authority(
    rule: str, axis: int | None, request: pytest.FixtureRequest
) -> Callable[[StaticShape, StaticShape], StaticShape | None]:
    if rule == "numpy":
        return numpy_shape
    if rule == "none":
        return lambda a, b: a if a == b else None
    if rule == "legacy":
        return lambda a, b: spec_legacy(a, b, axis)
    assert axis is not None
    verdicts = request.getfixturevalue("openvino_table")[rule, axis]
    return lambda a, b: verdicts[a, b]


def _evaluated(dim: object, values: dict) -> object:
    """A dim of ours at the symbols' values: ``min(M*N, max(M, N))`` is evaluated."""
    if isinstance(dim, str):
        return evaluate(dim, {k: v for k, v in values.items() if isinstance(k, str)})
    return dim


@pytest.mark.parametrize(("rule", "axis"), RULE_CASES, ids=str)
def test_named_symbols_hold_for_every_value_they_may_take(
    request: pytest.FixtureRequest, rule: str, axis: int | None
) -> None:
    """With N and M each 1, 2 or 3: a pair we reject is rejected for every value, and where we
    give a shape, every value that keeps our assumptions and makes the static pair valid gives
    that shape (an unknown dim of ours stands for anything)."""
    authority = static_authority(rule, axis, request)
    found = []
    for a, b in itertools.product(SYMBOLIC_SHAPES, SYMBOLIC_SHAPES):
        out, assumed = ours_assuming(a, b, rule, axis)
        for values in substitutions((a, b)):
            value = values.get
            sa, sb = (tuple(int(value(d, d)) for d in s) for s in (a, b))  # type: ignore[arg-type]
            truth = authority(sa, sb)
            if out is None:
                if truth is not None:
                    found.append(f"{a} {b} {values}: ours rejects, static {truth}")
                continue
            if truth is None or any(value(x, x) != value(y, y) for x, y in assumed):
                continue  # not a valid model, or not one our assumptions describe
            got = tuple(None if d is None else _evaluated(d, values) for d in out)
            if len(got) != len(truth) or any(
                g is not None and g != t for g, t in zip(got, truth, strict=True)
            ):
                found.append(f"{a} {b} {values}: ours {out} assuming {assumed}, static {truth}")
    assert not found, failure(found, len(SYMBOLIC_SHAPES) ** 2)


# --- ONNX Sub models: inference, kernels, onnxruntime ------------------------------------------

ONNX_CASES: list[tuple[int, dict[str, int]]] = [
    (version, attrs)
    for version in (1, 6)
    for attrs in [{}, {"broadcast": 0}, {"broadcast": 1}]
    + [{"broadcast": 1, "axis": axis} for axis in PDPD_AXES]
] + [(version, {}) for version in (7, 13, 14)]


def onnx_authority(
    version: int, attrs: dict[str, int], a: StaticShape, b: StaticShape
) -> tuple[StaticShape | None, np.ndarray | None]:
    """The output shape of Sub-``version`` with ``attrs`` on A and B, and its values (None,
    None: an invalid model)."""
    x, y = A_DATA[a], B_DATA[b]
    if version >= 7 or not attrs.get("broadcast"):
        # numpy broadcasting, or Sub-1/6 broadcast=0: "it should be of the same size"
        shape = numpy_shape(a, b) if version >= 7 else a if a == b else None
        return shape, None if shape is None else x - y
    start = spec_legacy_start(a, b, attrs.get("axis"))
    if start is None:
        return None, None
    return a, x - legacy_placed(y, x.ndim, start)


def arrays(shape: StaticShape, scale: float, shift: float) -> np.ndarray:
    return np.asarray(np.arange(math.prod(shape), dtype=np.float32) * scale + shift).reshape(shape)


A_DATA = {s: arrays(s, 1.0, 0.0) for s in SHAPES}
B_DATA = {s: arrays(s, 7.0, 0.5) for s in SHAPES}


@functools.cache
def sub_model(version: int) -> tuple[Model, list[Op]]:
    """One model: a graph input per shape, a Sub per pair (node ``n<index>``); each test sets
    the attributes of every Sub and infers it again."""
    graph = Graph("pairs")
    inputs = {}
    for shape in SHAPES:
        value = graph.add_value("x" + "_".join(map(str, shape)), TensorType(DType.FLOAT, shape))
        graph.inputs.append(value)
        inputs[shape] = value
    ops = []
    for i, (a, b) in enumerate(PAIRS):
        op = graph.add_op("Sub", [inputs[a], inputs[b]], name=f"n{i}", output_names=[f"y{i}"])
        graph.outputs.append(graph.outputs_of(op)[0])  # type: ignore[arg-type]
        ops.append(op)
    model = Model(graph, ir_version=3 if version < 7 else 8, opset_imports={"": version})
    return model, ops


@pytest.mark.parametrize(("version", "attrs"), ONNX_CASES, ids=str)
def test_sub_models_infer_and_compute_what_the_authority_says(
    version: int, attrs: dict[str, int]
) -> None:
    model, ops = sub_model(version)
    for op in ops:
        op.attrs = dict(attrs)
    for value in model.graph.outputs:
        value.type = None
    report = infer(model, verify=False)
    errors = {e.node: e.reason for e in report.errors}
    found = []
    for i, ((a, b), op) in enumerate(zip(PAIRS, ops, strict=True)):
        truth, values = onnx_authority(version, attrs, a, b)
        out = model.graph.outputs[i].type
        reason = errors.pop(op.name, None)
        if truth is None:
            if reason is None or "cannot broadcast" not in reason:
                found.append(f"{a} {b}: inferred {out}, expected an error")
        elif reason is not None or out != TensorType(DType.FLOAT, truth):
            found.append(f"{a} {b}: inferred {out} ({reason}), expected {truth}")
        try:
            [c] = run_kernel(op, [A_DATA[a], B_DATA[b]], {"": version})
        except KernelError as e:
            if truth is not None:
                found.append(f"{a} {b}: kernel error {e}, expected {truth}")
            continue
        if truth is None:
            found.append(f"{a} {b}: kernel computed {c.shape}, expected an error")
        elif values is None or c.dtype != np.float32 or not np.array_equal(c, values):
            found.append(f"{a} {b}: kernel computed {c.dtype}{c.shape}, expected {truth}")
    found += [f"an error on no pair: {name}: {reason}" for name, reason in errors.items()]
    assert not found, failure(found, len(PAIRS))


@pytest.fixture(scope="module")
def onnxruntime() -> Any:
    ort = pytest.importorskip(
        "onnxruntime", reason="onnxruntime is not installed (the test extra has it)"
    )
    ort.set_default_logger_severity(4)
    return ort


@pytest.mark.parametrize("version", [7, 13, 14])
def test_onnxruntime_computes_what_our_kernel_and_inference_give(
    onnxruntime: Any, version: int
) -> None:
    """One session per version on inputs of unknown shape, run on every pair: onnxruntime
    refuses exactly the pairs inference and our kernel refuse, and computes the same values in
    the shape inference gives."""
    model, ops = sub_model(version)
    for sub in ops:
        sub.attrs = {}
    for value in model.graph.outputs:
        value.type = None
    infer(model, verify=False)
    inferred = {
        pair: None if t is None else t.shape  # type: ignore[union-attr]
        for pair, t in zip(PAIRS, (v.type for v in model.graph.outputs), strict=True)
    }
    node = helper.make_node("Sub", ["a", "b"], ["c"])
    graph = helper.make_graph(
        [node],
        "sub",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in "ab"],
        [helper.make_tensor_value_info("c", TensorProto.FLOAT, None)],
    )
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", version)])
    proto.ir_version = 8
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(
        proto.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    op = Op("Sub", name="sub")
    found = []
    for a, b in PAIRS:
        try:
            [ours_c] = run_kernel(op, [A_DATA[a], B_DATA[b]], {"": version})
        except KernelError:
            ours_c = None
        try:
            [theirs] = session.run(None, {"a": A_DATA[a], "b": B_DATA[b]})
        except Exception as e:  # noqa: BLE001  (onnxruntime raises its own exception types)
            assert "Sub node" in str(e), str(e)
            theirs = None
        if ours_c is None or theirs is None:
            if ours_c is not theirs:
                found.append(f"{a} {b}: ours {ours_c is not None}, onnxruntime {theirs}")
        elif theirs.dtype != ours_c.dtype or not np.array_equal(theirs, ours_c):
            found.append(f"{a} {b}: ours {ours_c.shape}, onnxruntime {theirs.shape}")
        if (theirs is None and inferred[a, b] is not None) or (
            theirs is not None and theirs.shape != inferred[a, b]
        ):
            found.append(f"{a} {b}: onnxruntime {theirs is not None}, inferred {inferred[a, b]}")
    assert not found, failure(found, len(PAIRS))
