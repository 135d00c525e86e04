"""Every writer emits a model's fields in field-number order, as protobuf serializes them
(issue 27): the ModelProto's, its graph's and each initializer's. Parsers take fields in any
order, but OpenVINO recognizes a file as ONNX only from its first top-level fields, and
``ir_version, opset_import, opset_import`` (the graph written last) it refuses."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from onnxforge.cli import app
from onnxforge.io import _convert, _wire, from_proto, load, save, save_stream
from onnxforge.ir import Model

runner = CliRunner()

_MODEL_GRAPH = 7
_GRAPH_INITIALIZER = 5


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def wire_fields(data: bytes) -> list[tuple[int, bytes | None]]:
    """The top-level fields of an encoded message, read by hand from the wire format: (field
    number, payload of a length-delimited field or None), in the order the bytes have them."""
    fields: list[tuple[int, bytes | None]] = []
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire_type = key >> 3, key & 7
        payload = None
        if wire_type == 0:
            _, pos = _varint(data, pos)
        elif wire_type == 1:
            pos += 8
        elif wire_type == 5:
            pos += 4
        elif wire_type == 2:
            length, pos = _varint(data, pos)
            payload = data[pos : pos + length]
            pos += length
        else:
            raise AssertionError(f"wire type {wire_type} at byte {pos}")
        assert pos <= len(data), "a field runs past the end of its message"
        fields.append((number, payload))
    return fields


def field_numbers(data: bytes) -> list[int]:
    """The field numbers of an encoded message's top-level fields, in order."""
    return [number for number, _ in wire_fields(data)]


def _payloads(data: bytes, number: int) -> list[bytes]:
    return [p for n, p in wire_fields(data) if n == number and p is not None]


def field_orders(data: bytes) -> dict[str, list[int]]:
    """The field-number sequences of a ModelProto, of its graph and of each initializer."""
    orders = {"model": field_numbers(data)}
    [graph] = _payloads(data, _MODEL_GRAPH)
    orders["graph"] = field_numbers(graph)
    for i, tensor in enumerate(_payloads(graph, _GRAPH_INITIALIZER)):
        orders[f"initializer {i}"] = field_numbers(tensor)
    return orders


def assert_in_field_order(data: bytes) -> None:
    """``data`` has its fields where protobuf (onnx.save) puts them: the same sequences as the
    parsed model serialized again, each of them non-decreasing."""
    ours = field_orders(data)
    expected = field_orders(onnx.load_from_string(data).SerializeToString())
    assert ours == expected
    for where, numbers in ours.items():
        assert numbers == sorted(numbers), f"{where}: fields {numbers}"


def _len_field(number: int, payload: bytes) -> bytes:
    return _encode_varint(number << 3 | 2) + _encode_varint(len(payload)) + payload


def _reversed_fields(message: onnx.ModelProto | onnx.GraphProto) -> bytes:
    """``message`` encoded with its fields in reverse field-number order (each repeated field's
    entries in their order), the graph's too: bytes protobuf parses to the same message."""
    pieces = []
    for fd, value in reversed(message.ListFields()):
        if fd.name == "graph":
            pieces.append(_len_field(fd.number, _reversed_fields(value)))
            continue
        single = type(message)()
        single.CopyFrom(message)
        for other, _ in single.ListFields():
            if other.name != fd.name:
                single.ClearField(other.name)
        pieces.append(single.SerializeToString())
    return b"".join(pieces)


def _simple(weight_elements: int = 64 * 64) -> onnx.ModelProto:
    """y = Relu(x @ W + b), with two opset imports (the file OpenVINO refused: its first
    fields were ir_version, opset_import, opset_import)."""
    side = int(np.sqrt(weight_elements))
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((side, side)).astype(np.float32), "W")
    w.doc_string = "weight doc"  # written after raw_data (fields 9, 12)
    b = numpy_helper.from_array(np.ones(side, np.float32), "b")
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "W"], ["m"], name="mm"),
            helper.make_node("Add", ["m", "b"], ["a"], name="add"),
            helper.make_node("Relu", ["a"], ["y"], name="relu"),
        ],
        "simple",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, side])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, side])],
        [w, b],
        doc_string="graph doc",
        value_info=[helper.make_tensor_value_info("m", TensorProto.FLOAT, [1, side])],
    )
    return helper.make_model(
        graph,
        ir_version=8,
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 3)],
    )


def _every_field(weight_elements: int = 64 * 64) -> onnx.ModelProto:
    """A model that sets every ModelProto and GraphProto field, and initializers with fields
    on both sides of raw_data."""
    fn = helper.make_function(
        "custom.fn",
        "Twice",
        ["a"],
        ["b"],
        [helper.make_node("Add", ["a", "a"], ["b"])],
        [helper.make_opsetid("", 18)],
    )
    side = int(np.sqrt(weight_elements))
    rng = np.random.default_rng(1)
    w = numpy_helper.from_array(rng.standard_normal((side, side)).astype(np.float32), "W")
    w.doc_string = "weight doc"
    w.metadata_props.add(key="init", value="level")
    small = numpy_helper.from_array(np.arange(3, dtype=np.int64), "small")
    small.doc_string = "small doc"
    sparse = helper.make_sparse_tensor(
        numpy_helper.from_array(np.array([1.5, 2.5], np.float32), "sp"),
        numpy_helper.from_array(np.array([0, 3], np.int64), "sp_idx"),
        [4],
    )
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["m"], name="mm", doc_string="node doc"),
        helper.make_node("Twice", ["m"], ["t"], domain="custom.fn", name="call"),
        helper.make_node("Relu", ["t"], ["y"], name="relu"),
    ]
    nodes[2].metadata_props.add(key="node", value="level")
    graph = helper.make_graph(
        nodes,
        "every",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", side])],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", side]),
            helper.make_tensor_value_info("small", TensorProto.INT64, [3]),
        ],
        [w, small],
        doc_string="graph doc",
        value_info=[
            helper.make_tensor_value_info("m", TensorProto.FLOAT, ["N", side]),
            helper.make_tensor_value_info("t", TensorProto.FLOAT, ["N", side]),
        ],
        sparse_initializer=[sparse],
    )
    graph.metadata_props.add(key="graph", value="level")
    annotation = graph.quantization_annotation.add(tensor_name="m")
    annotation.quant_parameter_tensor_names.add(key="SCALE_TENSOR", value="W")
    model = helper.make_model(
        graph,
        functions=[fn],
        producer_name="order",
        producer_version="1",
        doc_string="model doc",
        model_version=3,
        opset_imports=[
            helper.make_opsetid("", 18),
            helper.make_opsetid("custom.fn", 1),
            helper.make_opsetid("ai.onnx.ml", 3),
        ],
    )
    model.metadata_props.add(key="model", value="level")
    training = model.training_info.add()
    training.algorithm.CopyFrom(helper.make_graph([], "algo", [], []))
    return model


MODELS: dict[str, Callable[[], onnx.ModelProto]] = {
    "simple": _simple,
    "every-field": _every_field,
    # 1 MiB of weights: load keeps them in the file (split_weights) and save splices them back
    "every-field-large": lambda: _every_field(512 * 512),
}


def _input_bytes(name: str, odd: bool) -> tuple[onnx.ModelProto, bytes]:
    proto = MODELS[name]()
    data = _reversed_fields(proto) if odd else proto.SerializeToString()
    assert onnx.load_from_string(data) == proto
    return proto, data


def _save(model: Model, path: Path) -> bytes:
    save(model, path, external_data=False)
    return path.read_bytes()


def _built(path: Path, out: Path) -> bytes:
    model = load(path)
    assert model.graph is not None  # builds it
    return _save(model, out)


def _unbuilt(path: Path, out: Path) -> bytes:
    model = load(path)
    data = _save(model, out)
    assert not model.built  # written from the loaded proto and the file's weights
    return data


def _nodes_as_read(path: Path, out: Path) -> bytes:
    model = load(path, keep_nodes=True)
    assert model.graph is not None
    return _save(model, out)


def _from_proto(path: Path, out: Path) -> bytes:
    return _save(from_proto(onnx.load(path)), out)


def _external(path: Path, out: Path) -> bytes:
    save(load(path), out, external_data=True, size_threshold=256)
    assert (out.parent / f"{out.name}.data").stat().st_size > 0
    return out.read_bytes()


def _external_again(path: Path, out: Path) -> bytes:
    """A model loaded with external data, written with external data again."""
    first = out.parent / "first.onnx"
    save(load(path), first, external_data=True, size_threshold=0)
    save(load(first), out)
    return out.read_bytes()


def _stream(path: Path, out: Path) -> bytes:
    buffer = io.BytesIO()
    save_stream(load(path), buffer)
    return buffer.getvalue()


WRITERS: dict[str, Callable[[Path, Path], bytes]] = {
    "built": _built,
    "unbuilt": _unbuilt,
    "nodes-as-read": _nodes_as_read,
    "from-proto": _from_proto,
    "external-data": _external,
    "external-data-again": _external_again,
    "stream": _stream,
}


def test_the_wire_reader_reads_what_onnx_save_writes() -> None:
    data = _every_field().SerializeToString()
    assert field_numbers(data) == [1, 2, 3, 5, 6, 7, 8, 8, 8, 14, 20, 25]
    [graph] = _payloads(data, _MODEL_GRAPH)
    assert field_numbers(graph) == [1, 1, 1, 2, 5, 5, 10, 11, 12, 12, 13, 13, 14, 15, 16]
    assert_in_field_order(data)


@pytest.mark.parametrize("name", MODELS)
def test_the_odd_order_input_parses_to_the_model_and_is_out_of_order(name: str) -> None:
    _, data = _input_bytes(name, odd=True)
    numbers = field_numbers(data)
    assert numbers.index(8) < numbers.index(_MODEL_GRAPH)  # opset_import before the graph
    assert numbers != sorted(numbers)


@pytest.mark.parametrize("odd", [False, True], ids=["in-order-input", "odd-order-input"])
@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("writer", WRITERS)
def test_every_writer_emits_fields_in_field_number_order(
    tmp_path: Path, writer: str, name: str, odd: bool
) -> None:
    proto, data = _input_bytes(name, odd)
    path = tmp_path / "in.onnx"
    path.write_bytes(data)
    written = WRITERS[writer](path, tmp_path / "out.onnx")
    assert_in_field_order(written)
    if writer in ("built", "unbuilt", "nodes-as-read", "from-proto", "stream"):
        # the same model, so the same fields in the same order as onnx.save of the input
        assert onnx.load_from_string(written) == proto
        assert field_orders(written) == field_orders(proto.SerializeToString())


def test_a_graph_written_in_batches_keeps_field_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nodes and value_info encoded a batch at a time: the batches of nodes come first, those
    of value_info after the graph's inputs and outputs."""
    monkeypatch.setattr(_convert, "SPILL_EVERY", 2)
    proto = _every_field()
    for i in range(5):
        proto.graph.node.add().CopyFrom(helper.make_node("Identity", ["y"], [f"copy{i}"]))
        proto.graph.value_info.add().CopyFrom(
            helper.make_tensor_value_info(f"copy{i}", TensorProto.FLOAT, ["N", 64])
        )
    path = tmp_path / "in.onnx"
    path.write_bytes(_reversed_fields(proto))
    written = _built(path, tmp_path / "out.onnx")
    assert_in_field_order(written)
    assert onnx.load_from_string(written) == proto


def test_new_value_info_from_inference_goes_with_the_rest(tmp_path: Path) -> None:
    """Types inferred for values without value_info (encoded apart, typed_value_info) are
    written with the loaded value_info, before quantization_annotation and the rest."""
    proto = _every_field()
    del proto.graph.value_info[:]
    path = tmp_path / "in.onnx"
    path.write_bytes(_reversed_fields(proto))
    result = runner.invoke(app, ["infer", str(path), "-o", str(tmp_path / "out.onnx")])
    assert result.exit_code == 0, result.output
    written = (tmp_path / "out.onnx").read_bytes()
    assert_in_field_order(written)
    [graph] = _payloads(written, _MODEL_GRAPH)
    assert field_numbers(graph).count(13) == 2  # m and t typed again


def test_cut_fields_cuts_before_the_first_field_above_each_number() -> None:
    data = _every_field().SerializeToString()
    before, after = _wire.cut_fields(data, _MODEL_GRAPH)
    assert field_numbers(bytes(before)) == [1, 2, 3, 5, 6, 7]
    assert field_numbers(bytes(after)) == [8, 8, 8, 14, 20, 25]
    head, middle, tail = _wire.cut_fields(data, 0, 30)
    assert (bytes(head), bytes(middle), bytes(tail)) == (b"", data, b"")


CLI = {
    "optimize": ["optimize", "{m}"],
    "convert": ["convert", "{m}", "--opset", "18"],
    "fold": ["fold", "{m}"],
    "infer": ["infer", "{m}"],
}


@pytest.mark.parametrize("odd", [False, True], ids=["in-order-input", "odd-order-input"])
@pytest.mark.parametrize("external", [False, True], ids=["embedded", "external-data"])
@pytest.mark.parametrize("command", CLI)
def test_commands_write_fields_in_field_number_order(
    tmp_path: Path, command: str, external: bool, odd: bool
) -> None:
    _, data = _input_bytes("simple", odd)
    path = tmp_path / "in.onnx"
    path.write_bytes(data)
    out = tmp_path / "out.onnx"
    args = [a.format(m=path) for a in CLI[command]] + ["-o", str(out)]
    if external:
        args.append("--external-data")
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "out.onnx.data").exists() == external
    assert_in_field_order(out.read_bytes())


@pytest.mark.parametrize(
    "source", sorted(Path(__file__).parents[1].glob("data/exporters/paddle2onnx/*.onnx"))
)
def test_paddle2onnx_exports_are_written_in_field_order(tmp_path: Path, source: Path) -> None:
    out = tmp_path / "out.onnx"
    result = runner.invoke(app, ["optimize", str(source), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert_in_field_order(out.read_bytes())


def _openvino_recognizes(path: Path) -> None:
    ov = pytest.importorskip("openvino", reason="openvino is not installed (onnxforge[openvino])")
    ov.convert_model(str(path))  # raises "Cannot recognize input model" on a refused file


@pytest.mark.parametrize("odd", [False, True], ids=["in-order-input", "odd-order-input"])
@pytest.mark.parametrize("writer", WRITERS)
def test_openvino_recognizes_what_every_writer_writes(
    tmp_path: Path, writer: str, odd: bool
) -> None:
    _, data = _input_bytes("simple", odd)
    path = tmp_path / "in.onnx"
    path.write_bytes(data)
    out = tmp_path / "out.onnx"
    written = WRITERS[writer](path, out)
    if writer == "stream":
        out.write_bytes(written)
    _openvino_recognizes(out)


def test_openvino_refuses_opset_imports_before_the_graph_and_takes_our_output(
    tmp_path: Path,
) -> None:
    """The bytes of the issue: ir_version, opset_import, opset_import, graph. OpenVINO reads
    the first three top-level fields to recognize ONNX and refuses a repeated one."""
    ov = pytest.importorskip("openvino", reason="openvino is not installed (onnxforge[openvino])")
    proto = _simple()
    rest = onnx.ModelProto()
    rest.CopyFrom(proto)
    rest.ClearField("graph")
    data = rest.SerializeToString() + _len_field(_MODEL_GRAPH, proto.graph.SerializeToString())
    assert field_numbers(data) == [1, 8, 8, _MODEL_GRAPH]
    assert onnx.load_from_string(data) == proto
    path = tmp_path / "in.onnx"
    path.write_bytes(data)
    with pytest.raises(Exception, match="Cannot recognize input model"):
        ov.convert_model(str(path))
    result = runner.invoke(app, ["optimize", str(path), "-o", str(tmp_path / "out.onnx")])
    assert result.exit_code == 0, result.output
    assert field_numbers((tmp_path / "out.onnx").read_bytes())[:3] == [1, _MODEL_GRAPH, 8]
    ov.convert_model(str(tmp_path / "out.onnx"))
