"""onnxforge.check: every problem named, with its file, node and code; nothing on good models."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import parser
from suites import LIGHT_DIR

import onnxforge
from onnxforge import _runtime_child
from onnxforge.api._check import Problem, RuntimeUnavailableError, onnxruntime_limits
from onnxforge.errors import ModelReadError
from onnxforge.io import checker_problems
from onnxforge.testing import model_from_text

GOOD = """<ir_version: 8, opset_import: ["" : 18]>
g (float[N, 3] x) => (float[N, 3] y) { y = Relu(x) }"""
SPLIT_WITHOUT_SIZES = """<ir_version: 8, opset_import: ["" : 18]>
g (float[6, 4] x) => (float[?, 4] a, float[?, 4] b) {
    a, b = Split <axis = 0> (x)
}"""
BAD_SUB = """<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 3] a, float[4] b) => (float[?, ?] y) { y = Sub(a, b) }"""
CUSTOM = """<ir_version: 8, opset_import: ["" : 17, "my.domain" : 1]>
g (float[2, 3] x) => (float[?, ?] y) { y = my.domain.Foo(x) }"""
CYCLE = """<ir_version: 8, opset_import: ["" : 18]>
g (float[2, 3] x) => (float[2, 3] y) {
    b = Identity(c)
    c = Identity(b)
    y = Identity(x)
}"""


def _write(tmp_path: Path, text: str, name: str = "model.onnx") -> Path:
    path = tmp_path / name
    onnx.save(parser.parse_model(text), path)
    return path


def _split_node(tmp_path: Path, attrs: str) -> Path:
    return _write(
        tmp_path,
        f"""<ir_version: 8, opset_import: ["" : 18]>
    g (float[6, 4] x) => (float[?, 4] a, float[?, 4] b) {{
        a, b = Split <axis = 0{attrs}> (x)
    }}""",
    )


def _codes(problems: list[Problem]) -> list[str]:
    return [p.code for p in problems]


@pytest.mark.parametrize("path", sorted(LIGHT_DIR.glob("*.onnx")), ids=lambda p: p.stem)
def test_the_zoo_models_have_no_error(path: Path) -> None:
    # The light zoo models share some batch-norm constants: duplicate-initializer warnings.
    for found in (
        onnxforge.check(path),
        onnxforge.check(path, runtime="onnxruntime", max_opset=18, max_ir=10),
    ):
        assert [p for p in found if p.severity == "error"] == []
        assert {p.code for p in found} <= {"duplicate-initializer"}


def test_a_split_18_without_sizes_is_named_by_its_node(tmp_path: Path) -> None:
    path = _split_node(tmp_path, "")
    [problem] = onnxforge.check(path)
    assert problem.file == str(path)
    assert problem.code == "split-sizes"
    assert problem.node == "Split (output 'a')"
    assert "neither the split input nor num_outputs" in problem.message
    assert str(problem).startswith(f"{path}: Split (output 'a'): Split-18 has neither")


def test_a_split_18_whose_num_outputs_is_not_its_output_count_is_never_run(
    tmp_path: Path,
) -> None:
    path = _split_node(tmp_path, ", num_outputs = 3")
    # onnxruntime aborts the process on this model: verify must not run it
    problems = onnxforge.check(path, verify=["onnxruntime"])
    assert _codes(problems) == ["split-num-outputs"]
    assert "num_outputs is 3, but the node has 2 outputs" in problems[0].message


def test_a_split_18_with_num_outputs_or_the_split_input_is_fine(tmp_path: Path) -> None:
    assert onnxforge.check(_split_node(tmp_path, ", num_outputs = 2")) == []
    with_sizes = _write(
        tmp_path,
        """<ir_version: 8, opset_import: ["" : 18]>
    g (float[6, 4] x) => (float[?, 4] a, float[?, 4] b) {
        s = Constant <value = int64[2] {2, 4}> ()
        a, b = Split <axis = 0> (x, s)
    }""",
    )
    assert onnxforge.check(with_sizes) == []


def test_a_split_18_inside_an_if_branch_says_where_it_is(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        """<ir_version: 8, opset_import: ["" : 18]>
    g (bool c, float[6] x) => (float[?] y) {
        y = If (c) <
            then_branch = t () => (float[?] a) { a, b = Split <axis = 0> (x) },
            else_branch = e () => (float[?] z) { z = Identity(x) }
        >
    }""",
    )
    problems = [p for p in onnxforge.check(path) if p.code == "split-sizes"]
    assert len(problems) == 1
    assert problems[0].message.startswith("in If (output 'y') body 't': Split-18")


def test_an_incompatible_sub_is_a_shape_problem_with_the_numbers(tmp_path: Path) -> None:
    [problem] = onnxforge.check(_write(tmp_path, BAD_SUB))
    assert problem.code == "shape"
    assert problem.node == "Sub (unnamed)"
    assert "Sub-14" in problem.message and "[2,3] and [4]" in problem.message


@pytest.mark.parametrize(("a", "b"), [("[3]", "[1,1]"), ("[1]", "[1,1]"), ("", "[1]")])
def test_a_legacy_sub_with_a_one_element_b_of_higher_rank_is_a_shape_problem(
    tmp_path: Path, a: str, b: str
) -> None:
    # Sub-6 allows a one-element B only "with rank equal to or smaller than the first tensor".
    text = f"""<ir_version: 3, opset_import: ["" : 6]>
    g (float{a} a, float{b} b) => (float{a} y) {{ y = Sub <broadcast = 1> (a, b) }}"""
    [problem] = onnxforge.check(_write(tmp_path, text))
    assert (problem.code, problem.severity, problem.node) == ("shape", "error", "Sub (unnamed)")
    shapes = f"{a or '[]'} and {b} under the legacy rule"
    assert "Sub-6" in problem.message and shapes in problem.message
    assert "rank of B" in problem.message and "one-element B" in problem.message


def test_every_shape_error_is_listed_at_once(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        """<ir_version: 8, opset_import: ["" : 17]>
    g (float[2, 3] a, float[4, 5] b) => (float[?, ?] y, float[?, ?] z) {
        y = Add(a, b)
        z = MatMul(a, a)
    }""",
    )
    problems = onnxforge.check(path)
    assert _codes(problems) == ["shape", "shape"]
    assert [p.node for p in problems] == ["Add (unnamed)", "MatMul (unnamed)"]


def test_an_opset_above_max_opset_is_a_problem(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD)
    assert onnxforge.check(path, max_opset=18) == []
    [problem] = onnxforge.check(path, max_opset=17)
    assert problem.code == "opset"
    assert problem.message == "the model imports ai.onnx opset 18; --max-opset is 17"


def test_an_ir_version_above_max_ir_is_a_problem(tmp_path: Path) -> None:
    [problem] = onnxforge.check(_write(tmp_path, GOOD), max_ir=7)
    assert problem.code == "ir-version"
    assert problem.message == "the model has IR version 8; --max-ir is 7"


def test_an_opset_newer_than_onnxruntime_accepts_is_a_problem(tmp_path: Path) -> None:
    limits = onnxruntime_limits()
    newer = limits.max_opset[""] + 1
    path = _write(
        tmp_path,
        f"""<ir_version: {limits.max_ir}, opset_import: ["" : {newer}]>
    g (float[2] x) => (float[2] y) {{ y = Identity(x) }}""",
    )
    problems = onnxforge.check(path, runtime="onnxruntime")
    assert "opset" in _codes(problems)
    opset = next(p for p in problems if p.code == "opset")
    assert f"{limits.name} supports up to {limits.max_opset['']}" in opset.message


def test_onnxruntime_limits_are_the_installed_versions_own() -> None:
    ort = pytest.importorskip("onnxruntime")
    limits = onnxruntime_limits()
    assert limits.name == f"onnxruntime {ort.__version__}"
    assert limits.max_opset[""] >= 17  # every onnxruntime the test extra allows (>= 1.17)
    assert limits.max_ir is not None and limits.max_ir >= 9
    assert limits.max_opset["ai.onnx.ml"] >= 3
    assert {"Gelu", "FusedMatMul"} <= limits.domains["com.microsoft"]


def test_an_unknown_custom_domain_is_a_problem(tmp_path: Path) -> None:
    [problem] = onnxforge.check(_write(tmp_path, CUSTOM))
    assert problem.code == "custom-domain"
    assert problem.node == "my.domain::Foo (output 'y')"
    assert "'my.domain'" in problem.message


def test_com_microsoft_ops_pass_only_for_onnxruntime_and_only_those_it_has(
    tmp_path: Path,
) -> None:
    path = _write(
        tmp_path,
        """<ir_version: 8, opset_import: ["" : 17, "com.microsoft" : 1]>
    g (float[2, 3] x) => (float[?, ?] y) {
        z = com.microsoft.Gelu(x)
        y = com.microsoft.NoSuchOp(z)
    }""",
    )
    assert _codes(onnxforge.check(path)) == ["custom-domain", "custom-domain"]
    [problem] = onnxforge.check(path, runtime="onnxruntime")
    assert problem.node == "com.microsoft::NoSuchOp (output 'y')"
    assert problem.message.endswith("has no com.microsoft::NoSuchOp")


def test_a_custom_op_defined_by_a_local_function_is_fine(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        """<ir_version: 8, opset_import: ["" : 18, "my.domain" : 1]>
    g (float[2, 3] x) => (float[?, ?] y) { y = my.domain.Double(x) }
    <domain: "my.domain", opset_import: ["" : 18]>
    Double (a) => (b) { b = Add(a, a) }""",
    )
    assert onnxforge.check(path) == []


def test_a_cycle_is_a_graph_problem(tmp_path: Path) -> None:
    problems = onnxforge.check(_write(tmp_path, CYCLE))
    graph = [p for p in problems if p.code == "graph"]
    assert len(graph) == 1
    assert graph[0].message.startswith("graph: cycle through Identity")
    assert "checker" in _codes(problems)  # onnx's checker: not topologically sorted


def test_the_onnx_checker_finds_an_op_that_does_not_exist(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        """<ir_version: 8, opset_import: ["" : 18]>
    g (float[2] x) => (float[2] y) { y = NoSuchOp(x) }""",
    )
    problems = onnxforge.check(path)
    assert problems[0].code == "checker"
    assert "No Op registered for NoSuchOp" in problems[0].message
    assert "\n" not in problems[0].message


def test_the_checker_reads_external_data_by_path(tmp_path: Path) -> None:
    proto = parser.parse_model(
        """<ir_version: 8, opset_import: ["" : 18]>
    g (float[256] x) => (float[256] y) { y = Add(x, w) }"""
    )
    proto.graph.initializer.append(onnx.numpy_helper.from_array(np.ones(256, "float32"), "w"))
    path = tmp_path / "big.onnx"
    onnx.save(proto, path, save_as_external_data=True, location="big.onnx.data")
    assert (tmp_path / "big.onnx.data").stat().st_size == 1024
    assert checker_problems(path) == []
    assert onnxforge.check(path, verify=["onnxruntime"]) == []


def test_a_model_object_is_checked_too() -> None:
    model = model_from_text(BAD_SUB)
    [problem] = onnxforge.check(model)
    assert problem.file == "<model>" and problem.code == "shape"
    assert onnxforge.check(model_from_text(GOOD), verify=["onnxruntime"]) == []


def test_an_unreadable_file_raises_model_read_error(tmp_path: Path) -> None:
    with pytest.raises(ModelReadError):
        onnxforge.check(tmp_path / "missing.onnx")
    corrupt = tmp_path / "corrupt.onnx"
    corrupt.write_bytes(b"\x08\x07garbage")
    with pytest.raises(ModelReadError):
        onnxforge.check(corrupt)


# -- verify ------------------------------------------------------------------------------------
def test_verify_runs_a_zoo_model_in_both_runtimes() -> None:
    pytest.importorskip("openvino")
    path = LIGHT_DIR / "light_squeezenet.onnx"
    assert onnxforge.check(path, verify=["onnxruntime", "openvino"]) == []


def test_a_model_onnxruntime_cannot_load_is_a_verify_problem(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        """<ir_version: 8, opset_import: ["" : 18]>
    g (double[3, 3] a) => (double y) { y = Det(a) }""",
    )
    assert onnxforge.check(path) == []
    [problem] = onnxforge.check(path, verify=["onnxruntime"])
    assert problem.code == "verify"
    assert problem.message.startswith("onnxruntime failed to load the model: ")
    assert "Det" in problem.message


def test_a_model_openvino_cannot_convert_is_a_verify_problem(tmp_path: Path) -> None:
    pytest.importorskip("openvino")
    path = _write(
        tmp_path,
        """<ir_version: 8, opset_import: ["" : 18]>
    g (double[3, 3] a) => (double y) { y = Det(a) }""",
    )
    [problem] = onnxforge.check(path, verify=["openvino"])
    assert problem.message.startswith("openvino failed to load the model: ")


def test_input_shapes_fix_the_dims_verify_feeds(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        """<ir_version: 8, opset_import: ["" : 18]>
    g (float[N, 3] x) => (float[?, ?] y) {
        s = Constant <value = int64[2] {2, 6}> ()
        y = Reshape(x, s)
    }""",
    )
    # N = 1 and N = 2 cannot be reshaped to [2, 6]; N = 4, the third size tried, can
    ran: dict[str, dict[str, list[int]]] = {}
    assert onnxforge.check(path, verify=["onnxruntime"], ran_with=ran) == []
    assert ran == {"onnxruntime": {"x": [4, 3]}}
    [problem] = onnxforge.check(path, verify=["onnxruntime"], input_shapes={"x": [1, 3]})
    assert problem.message.startswith("onnxruntime failed to run the model: ")
    assert "tried" not in problem.message  # the user's shape: nothing else was tried
    [unknown] = onnxforge.check(path, verify=["onnxruntime"], input_shapes={"z": [1]})
    assert unknown.message == "--input-shape names 'z', not an input"


def test_a_runtime_that_crashes_is_a_problem_not_the_end_of_the_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    crash = tmp_path / "crash.py"
    crash.write_text("import os\nos.abort()\n")
    monkeypatch.setattr(_runtime_child, "_SOURCE", crash)
    [problem] = onnxforge.check(_write(tmp_path, GOOD), verify=["onnxruntime"])
    assert problem.code == "verify"
    assert "onnxruntime crashed loading or running the model (signal SIGABRT)" in problem.message


def test_a_missing_runtime_is_named_with_the_extra_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "openvino" else real(name)
    )
    with pytest.raises(RuntimeUnavailableError, match=r"install onnxforge\[openvino\]") as exc:
        onnxforge.check(_write(tmp_path, GOOD), verify=["openvino"])
    assert exc.value.exit_code == 2


_BIG_CHILD = """
import resource, sys
from pathlib import Path
# ru_maxrss counts the memory of the parent at fork (pytest's, often over 1 GB): measure the
# peak from here on (VmHWM reset through clear_refs), ru_maxrss where /proc has neither.
try:
    Path("/proc/self/clear_refs").write_text("5")
    reset = True
except OSError:
    reset = False
import onnxforge
print(onnxforge.check(sys.argv[1], runtime="onnxruntime"))
status = Path("/proc/self/status").read_text() if reset else ""
hwm = [int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:")]
print(hwm[0] * 1024 if hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""


@pytest.mark.slow
def test_a_model_over_2gb_is_checked_without_reading_its_weights(tmp_path: Path) -> None:
    if shutil.disk_usage(tmp_path).free < 6 << 30:
        pytest.skip(f"needs 6 GiB free in {tmp_path}")
    rows = 576  # float32[576, 1024, 1024]: 2.25 GiB in external data
    with open(tmp_path / "w.bin", "wb") as f:
        for _ in range(rows):
            f.write(np.ones((1024, 1024), np.float32).tobytes())
    weight = onnx.TensorProto(name="W", data_type=onnx.TensorProto.FLOAT, dims=[rows, 1024, 1024])
    weight.data_location = onnx.TensorProto.EXTERNAL
    for key, value in (("location", "w.bin"), ("offset", "0"), ("length", str(rows << 22))):
        entry = weight.external_data.add()
        entry.key, entry.value = key, value
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Add", ["X", "W"], ["Y"])],
        "big",
        [onnx.helper.make_tensor_value_info("X", onnx.TensorProto.FLOAT, [1, 1024, 1024])],
        [onnx.helper.make_tensor_value_info("Y", onnx.TensorProto.FLOAT, [rows, 1024, 1024])],
        [weight],
    )
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 18)])
    model.ir_version = 8
    onnx.save(model, tmp_path / "big.onnx")
    result = subprocess.run(
        [sys.executable, "-c", _BIG_CHILD, str(tmp_path / "big.onnx")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    problems, peak = result.stdout.strip().splitlines()[-2:]
    assert problems == "[]"
    assert int(peak) < 512 << 20, f"peak RSS {int(peak) / 2**20:.0f} MiB for a 2.25 GiB weight"
