"""Shape computation subgraphs are evaluated on known and symbolic elements."""

from __future__ import annotations

import pytest

from onnxforge.errors import ShapeError
from onnxforge.ir import Model, TensorType, verify
from onnxforge.shape_infer import infer
from onnxforge.testing import model_from_text

HEADER = '<ir_version: 8, opset_import: ["" : 17]>'


def _types(model: Model) -> dict[str, TensorType]:
    return {v.name: v.type for v in model.graph.values() if isinstance(v.type, TensorType)}


def _infer(text: str) -> tuple[Model, dict[str, TensorType]]:
    model = model_from_text(HEADER + text)
    report = infer(model)
    assert not report.errors, report.errors
    verify(model)
    return model, _types(model)


def test_reshape_to_batch_and_minus_one_keeps_the_batch_symbol() -> None:
    _, t = _infer("""
    g (float[N, 3, 4] x) => (float[?, ?] y) {
        s = Shape(x)
        i = Constant <value = int64[1] {0}> ()
        n = Gather <axis = 0> (s, i)
        m = Constant <value = int64[1] {-1}> ()
        target = Concat <axis = 0> (n, m)
        y = Reshape(x, target)
    }""")
    assert t["target"].shape == (2,)
    assert t["y"].shape == ("N", 12)


def test_reshape_minus_one_divides_symbolic_products() -> None:
    _, t = _infer("""
    g (float[B, S, 768] x) => (float[?, ?, ?, ?] y) {
        s = Shape <start = 0, end = 2> (x)
        h = Constant <value = int64[2] {12, -1}> ()
        target = Concat <axis = 0> (s, h)
        y = Reshape(x, target)
    }""")
    assert t["y"].shape == ("B", "S", 12, 64)


def test_concat_of_symbolic_dims_writes_their_sum() -> None:
    _, t = _infer("""
    g (float[N, 4] a, float[M, 4] b) => (float[?, 4] y) { y = Concat <axis = 0> (a, b) }""")
    assert t["y"].shape == ("M+N", 4)


def test_slice_from_one_to_the_end_of_a_symbolic_dim_is_never_negative() -> None:
    _, t = _infer("""
    g (float[N, 8] x) => (float[?, ?] y) {
        st = Constant <value = int64[2] {1, 2}> ()
        en = Constant <value = int64[2] {9223372036854775807, 6}> ()
        y = Slice(x, st, en)
    }""")
    assert t["y"].shape == ("max(0, N-1)", 4)  # N may be 0: the slice is empty, not -1 long


@pytest.mark.parametrize(
    ("starts", "ends", "expected"),
    [
        # tf2onnx's jax2tf batch slice: the clamp is written, never one side of it
        ("0", "1000000000", "min(1000000000, N)"),
        ("-3", "9223372036854775807", "min(3, N)"),  # [-3:]
        ("0", "-1", "max(0, N-1)"),  # [:-1]
        ("2", "5", "min(3, max(0, N-2))"),
        ("-5", "-2", "min(3, max(0, N-2))"),
        ("1", "-1", "max(0, N-2)"),
    ],
)
def test_slice_bounds_on_a_symbolic_dim_are_clamped_exactly(
    starts: str, ends: str, expected: str
) -> None:
    model, t = _infer(f"""
    g (float[N] x) => (float[?] y) {{
        st = Constant <value = int64[1] {{{starts}}}> ()
        en = Constant <value = int64[1] {{{ends}}}> ()
        y = Slice(x, st, en)
    }}""")
    assert t["y"].shape == (expected,)
    assert not infer(model).assumptions


def test_range_over_a_symbolic_length_has_that_length() -> None:
    _, t = _infer("""
    g (float[B, S] x) => (int64[?] y) {
        s = Shape(x)
        i = Constant <value = int64 {1}> ()
        n = Gather <axis = 0> (s, i)
        zero = Constant <value = int64 {0}> ()
        one = Constant <value = int64 {1}> ()
        y = Range(zero, n, one)
    }""")
    assert t["y"].shape == ("S",)


def test_expand_and_constant_of_shape_read_computed_shapes() -> None:
    _, t = _infer("""
    g (float[N, 1] x) => (float[?, ?] y, float[?, ?] z) {
        s = Shape(x)
        four = Constant <value = int64[1] {4}> ()
        b0 = Constant <value = int64[1] {0}> ()
        b1 = Constant <value = int64[1] {1}> ()
        head = Slice(s, b0, b1)
        target = Concat <axis = 0> (head, four)
        y = Expand(x, target)
        z = ConstantOfShape(target)
    }""")
    assert t["y"].shape == ("N", 4)
    assert t["z"].shape == ("N", 4)


def test_arithmetic_on_shape_elements_stays_symbolic() -> None:
    _, t = _infer("""
    g (float[N, 6] x) => (float[?, ?] y) {
        s = Shape(x)
        two = Constant <value = int64[2] {2, 1}> ()
        d = Constant <value = int64[2] {1, 2}> ()
        half = Div(s, d)
        doubled = Mul(half, two)
        y = Reshape(x, half)
        z = ConstantOfShape(doubled)
    }""")
    assert t["y"].shape == ("N", 3)
    assert t["z"].shape == ("2*N", 3)


def test_a_reshape_that_cannot_hold_the_elements_is_an_error() -> None:
    model = model_from_text(
        HEADER
        + """
    g (float[2, 3] x) => (float[?] y) {
        t = Constant <value = int64[1] {5}> ()
        y = Reshape(x, t)
    }"""
    )
    report = infer(model)
    assert len(report.errors) == 1
    assert "cannot reshape [2,3] (6 elements) to [5]" in str(report.errors[0])
    with pytest.raises(ShapeError):
        infer(model, strict=True)


def test_float_shape_arithmetic_is_evaluated_with_small_constants() -> None:
    _, t = _infer("""
    g (float[4] x) => (float[?] y) {
        a = Constant <value = float {7.0}> ()
        b = Constant <value = float {2.0}> ()
        q = Div(a, b)
        c = Ceil(q)
        n = Cast <to = 7> (c)
        one = Constant <value = int64[1] {1}> ()
        shape = Reshape(n, one)
        y = ConstantOfShape(shape)
    }""")
    assert t["y"].shape == (4,)


def test_expand_through_the_where_equal_minus_one_pattern_of_exporters() -> None:
    # torch.onnx (opset 11-13): Where(Equal(shape, -1 * ones), 1, shape) guards against -1.
    _, t = _infer("""
    g (bool[B, 1, S, S] m, float[B, S] x) => (bool[?, ?, ?, ?] y) {
        sx = Shape(x)
        i0 = Constant <value = int64 {0}> ()
        i1 = Constant <value = int64 {1}> ()
        b = Gather <axis = 0> (sx, i0)
        s = Gather <axis = 0> (sx, i1)
        axes = Constant <value = int64[1] {0}> ()
        b1 = Unsqueeze(b, axes)
        s1 = Unsqueeze(s, axes)
        one = Constant <value = int64[1] {1}> ()
        shape = Concat <axis = 0> (b1, one, s1, s1)
        n = Shape(shape)
        ones = ConstantOfShape <value = int64[1] {1}> (n)
        minus = Constant <value = int64 {-1}> ()
        neg = Mul(ones, minus)
        eq = Equal(shape, neg)
        target = Where(eq, ones, shape)
        y = Expand(m, target)
    }""")
    assert t["y"].shape == ("B", 1, "S", "S")


def test_every_slice_length_written_is_python_s_for_every_size_of_the_dim() -> None:
    """_slice_len against Python's slice (which Slice follows) for bounds at the boundaries,
    symbolic ones included, steps 1, 2 and -1, and every size 0-6 of the sliced dim N: a
    written length is exact or left unknown (None), never a guess."""
    import itertools

    from onnxforge.shape_infer.rules.shapes import _slice_len
    from onnxforge.shape_infer.symbolic import evaluate

    bounds: list[int | str] = [0, 1, 3, -1, -3, 10**9, 2**31 - 1, 2**63 - 1, -(2**63)]
    bounds += ["L", "-L", "N", "-N"]
    written = 0
    for start, end, step in itertools.product(bounds, bounds, (1, 2, -1)):
        dim = _slice_len("N", start, end, step, None)  # type: ignore[arg-type]
        if dim is None:
            continue
        written += 1
        for n, length in itertools.product(range(7), range(4)):
            bound = {"N": n, "L": length}

            def value(v: int | str, bound: dict[str, int] = bound) -> int:
                if isinstance(v, int):
                    return v
                return -bound[v[1:]] if v.startswith("-") else bound[v]

            expected = len(range(*slice(value(start), value(end), step).indices(n)))
            assert evaluate(dim, bound) == expected, (start, end, step, bound, dim)
    assert written > 250
