"""Tile's output dims: dim * repeat; a negative repeat is an error."""

from __future__ import annotations

from onnxforge.shape_infer import infer
from onnxforge.testing import model_from_text


def test_tile_with_a_negative_repeat_is_an_error_not_a_negative_dim() -> None:
    # boundary fuzz: Tile of float[1,1] by [1, INT64_MIN] was written [1, -9223372036854775808]
    model = model_from_text("""
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[1, 1] x) => (float[?, ?] y) {
        repeats = Constant <value = int64[2] {1, -9223372036854775808}> ()
        y = Tile(x, repeats)
    }""")
    report = infer(model)
    assert [e.reason for e in report.errors] == [
        "repeats [1,-9223372036854775808] has a negative count"
    ]
