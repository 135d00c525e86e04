"""`onnxforge infer`: every type written to OUT, every error at once, nothing written on error."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
from onnx import parser
from typer.testing import CliRunner

from onnxforge.cli import app

runner = CliRunner()
EXAMPLE = Path(__file__).parents[2] / "examples" / "tiny_convnet.onnx"


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "model.onnx"
    onnx.save(parser.parse_model(text), path)
    return path


def _invoke(*args: str):
    result = runner.invoke(app, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


def test_infer_writes_every_type_with_symbolic_dims(tmp_path: Path) -> None:
    out = tmp_path / "out.onnx"
    before = EXAMPLE.read_bytes()
    result = _invoke("infer", str(EXAMPLE), "-o", str(out))
    assert result.exit_code == 0, result.output
    assert EXAMPLE.read_bytes() == before
    written = onnx.load(out)
    onnx.checker.check_model(written, full_check=True)
    types = {vi.name: vi.type.tensor_type for vi in written.graph.value_info}
    flat = types["flat"].shape.dim
    assert [d.dim_param or d.dim_value for d in flat] == ["batch", 128]
    produced = {o for node in written.graph.node for o in node.output}
    graph_outputs = {o.name for o in written.graph.output}
    assert produced - graph_outputs <= set(types)


def test_infer_prints_a_table_without_output(tmp_path: Path) -> None:
    result = _invoke("infer", str(EXAMPLE))
    assert result.exit_code == 0
    assert "float[batch,128]" in result.stdout


def test_infer_json_lists_values_assumptions_and_errors(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        """<ir_version: 8, opset_import: ["" : 17]>
    g (float[2, N] a, float[3, M] b) => (float[?, ?] y) { y = Concat <axis = 0> (a, b) }""",
    )
    result = _invoke("infer", str(path), "--json")
    assert result.exit_code == 0
    report = json.loads(result.stdout)
    assert report["errors"] == []
    assert report["assumptions"][0]["a"] == "N" and report["assumptions"][0]["b"] == "M"
    assert {"name": "y", "graph": "g", "op": "Concat", "dtype": "float", "shape": [5, "N"]} in (
        report["values"]
    )


def test_an_inconsistent_model_lists_every_error_and_writes_nothing(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        """<ir_version: 8, opset_import: ["" : 17]>
    g (float[2, 3] a, float[4, 5] b) => (float[?, ?] y, float[?, ?] z) {
        y = Add(a, b)
        z = MatMul(a, a)
    }""",
    )
    out = tmp_path / "out.onnx"
    result = _invoke("infer", str(path), "-o", str(out))
    assert result.exit_code == 1
    lines = [line for line in result.stderr.splitlines() if "Add-14" in line or "MatMul" in line]
    assert len(lines) == 2, result.stderr
    assert "Traceback" not in result.output
    assert not out.exists()
    assert list(tmp_path.iterdir()) == [path]


def test_unreadable_input_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07garbage")
    result = _invoke("infer", str(bad))
    assert result.exit_code == 2
    assert str(bad) in result.stderr


def test_infer_refuses_to_overwrite_its_input(tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    path.write_bytes(EXAMPLE.read_bytes())
    result = _invoke("infer", str(path), "-o", str(path))
    assert result.exit_code == 1
    assert path.read_bytes() == EXAMPLE.read_bytes()


def test_infer_and_convert_write_a_model_with_a_sparse_initializer(tmp_path: Path) -> None:
    """Their progress sums every initializer's bytes: a sparse one counts its values and
    indices (it raised AttributeError: 'SparseTensor' object has no attribute 'nbytes')."""
    import numpy as np
    from onnx import helper, numpy_helper

    sparse = helper.make_sparse_tensor(
        numpy_helper.from_array(np.array([1.0, 2.0], np.float32), "s"),
        numpy_helper.from_array(np.array([1, 5], np.int64), "s_idx"),
        [2, 3],
    )
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "s"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
        sparse_initializer=[sparse],
    )
    path = tmp_path / "sparse.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    for command in (["infer"], ["convert", "--opset", "18"]):
        out = tmp_path / f"{command[0]}.onnx"
        result = runner.invoke(app, [command[0], str(path), *command[1:], "-o", str(out)])
        assert result.exit_code == 0, result.output
        written = onnx.load(out)
        assert len(written.graph.sparse_initializer) == 1
        assert written.graph.output[0].type.tensor_type.shape.dim[1].dim_value == 3
