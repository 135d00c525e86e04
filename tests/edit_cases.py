"""Small models that edits inside and around bodies, local functions and data-dependent dims
put to the test: what work brought up to date after an edit (incremental inference, a
worklist) must get right. Shared by tests/shape_infer/test_resumable.py and
tests/passes/test_worklist.py."""

from __future__ import annotations

EDIT_CASES = {
    "nonzero": """<ir_version: 8, opset_import: ["" : 17]>
    g (float[N, 4] x) => (float[?, ?] y) {
        i = Identity(x) a = Relu(i) nz = NonZero(a) t = Transpose<perm=[1, 0]>(nz)
        u = Transpose<perm=[1, 0]>(t) s = Shape(u) c = Cast<to=1>(s) y = Reshape(c, s)
    }""",
    # The bodies read two equal values: CSE merges them, rewiring what a body captures.
    "if_body": """<ir_version: 8, opset_import: ["" : 17]>
    g (float[N, 4] x, bool b) => (float[N, 4] y) {
        r = Relu(x) r2 = Relu(x)
        y = If(b) <
            then_branch = t () => (float[N, 4] ty) {
                i = Identity(r) ty = Neg(i)
            },
            else_branch = e () => (float[N, 4] ey) {
                p = Transpose<perm=[1, 0]>(r2) q = Transpose<perm=[1, 0]>(p) ey = Abs(q)
            }
        >
    }""",
    "function": """<ir_version: 8, opset_import: ["" : 17, "local" : 1]>
    g (float[N, 4] x) => (float[N, 4] y) {
        t = Transpose<perm=[1, 0]>(x) u = Transpose<perm=[1, 0]>(t) a = local.twice(u)
        y = Relu(a)
    }
    <domain: "local", opset_import: ["" : 17]>
    twice (v) => (w) { c = Constant<value = float {2.0}>() w = Mul(v, c) }""",
}
