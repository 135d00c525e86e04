"""TopK's k: the size of the axis in both outputs; a negative k is an error."""

from __future__ import annotations

from onnxforge.shape_infer import infer
from onnxforge.testing import model_from_text


def test_topk_with_a_negative_k_is_an_error_not_a_negative_dim() -> None:
    # boundary fuzz: TopK-10 of float[N] with k [INT64_MIN] was written float[-9223372036854775808]
    model = model_from_text("""
    <ir_version: 8, opset_import: ["" : 10]>
    g (float[N] x) => (float[?] v, int64[?] i) {
        k = Constant <value = int64[1] {-9223372036854775808}> ()
        v, i = TopK(x, k)
    }""")
    report = infer(model)
    assert [e.reason for e in report.errors] == ["k -9223372036854775808 is negative"]
