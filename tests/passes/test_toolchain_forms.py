"""passes/toolchain_forms.py: each edit computes what the model did on onnxruntime, bit for
bit, and leaves alone what is not its form."""

from __future__ import annotations

import numpy as np
import pytest

from onnxforge.io import to_proto
from onnxforge.passes.toolchain_forms import dropout_as_inference, gelu_scale_first
from onnxforge.testing import model_from_text, run_onnxruntime

pytest.importorskip("onnxruntime")

GELU = """<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 16] x) => (float[2, 16] y, float[2, 16] z) {{
    root = Constant <value = float {{{root}}}> ()
    one = Constant <value = float {{1.0}}> ()
    half = Constant <value = float {{0.5}}> ()
    d = {scale} (x, root)
    e = Erf (d)
    a = Add (one, e)
    m = Mul (a, x)
    y = Mul (half, m)
    z = {extra} (m)
}}"""


@pytest.mark.parametrize(
    ("scale", "root"), [("Div", 1.4142135381698608), ("Mul", 0.7071067690849304)]
)
def test_the_erf_gelu_takes_its_half_first_and_computes_the_same_bits(
    scale: str, root: float
) -> None:
    text = (
        GELU.format(scale=scale, root=root, extra="Identity")
        .replace("    z = Identity (m)\n", "")
        .replace(", float[2, 16] z)", ")")
    )
    model = model_from_text(text)
    assert gelu_scale_first(model) == ["Mul -> y"]
    ops = [o for o in model.graph.ops if o.op_type == "Mul"]
    first = next(o for o in ops if o._outputs[0].name != "y")
    assert first._inputs[0].name == "x"  # x * 0.5, then times erf + 1
    x = np.random.default_rng(0).standard_normal((2, 16)).astype(np.float32) * 3
    want = run_onnxruntime(to_proto(model_from_text(text)), {"x": x})[0]
    np.testing.assert_array_equal(run_onnxruntime(to_proto(model), {"x": x})[0], want)


def test_a_gelu_whose_inner_product_is_read_elsewhere_stays() -> None:
    model = model_from_text(GELU.format(scale="Div", root=1.4142135381698608, extra="Relu"))
    assert gelu_scale_first(model) == []


def test_a_training_dropout_keeps_its_ratio_and_loses_its_flag() -> None:
    model = model_from_text(
        """<ir_version: 8, opset_import: ["" : 18]>
        g (float[4] x, bool t) => (float[4] y, float[4] w) {
            r = Constant <value = float {0.3}> ()
            on = Constant <value = bool {1}> ()
            y = Dropout (x, r, on)
            w = Dropout (x, r, t)
        }"""
    )
    assert dropout_as_inference(model) == ["Dropout -> y"]
    first, second = [o for o in model.graph.ops if o.op_type == "Dropout"]
    assert len([v for v in first._inputs if v is not None]) == 2
    assert second._inputs[2] is not None and second._inputs[2].name == "t"  # the caller's
