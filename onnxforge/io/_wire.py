"""Protobuf wire format, just enough to keep weight bytes out of Python on load and save.

On load, ``split_weights`` finds the raw_data of the main graph's initializers in the file and
returns a skeleton (the model with those bytes cut out) plus each initializer's byte span, so the
weights stay in the memory-mapped file. It cuts the main graph's nodes out too, into runs read a
few thousand at a time: parsed whole, a graph's nodes take ten times their encoded size. On save,
``write_model`` streams the model's fields, the graph's and each spliced weight's in field-number
order, as protobuf serializes a message. Parsers accept fields in any order, but some readers
sniff the first fields: OpenVINO takes a file for ONNX only when its first three top-level
fields are distinct, which ``ir_version, opset_import, opset_import`` (the graph written last)
are not.
"""

from __future__ import annotations

__all__ = [
    "WeightSource",
    "WireError",
    "Encoded",
    "copy_span",
    "cut_fields",
    "cut_graph",
    "field_header",
    "node_run_model",
    "split_weights",
    "write_model",
]

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import BinaryIO

_LEN = 2
_MODEL_GRAPH = 7
_GRAPH_NODE = 1
_GRAPH_INITIALIZER = 5
_TENSOR_RAW_DATA = 9
_GRAPH_NAME = 2  # the last GraphProto field before its initializers
_GRAPH_OUTPUT = 12  # the last before its value_info (13)
SPLIT_MIN_TENSOR = 1024
"""Initializers smaller than this stay in the skeleton: scanning them costs more than it saves."""
NODE_RUN = 4096
"""Nodes in one run of ``split_weights``: parsed, a run of small nodes takes about 2 MB."""


Encoded = bytes | memoryview
"""Protobuf bytes: made here, or in place in a file's mapping (a run of nodes as read)."""


class WireError(ValueError):
    """The bytes are not well-formed protobuf (the message says where)."""


def _varint(buf: memoryview, pos: int, end: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= end:
            raise WireError(f"truncated varint at byte {pos}")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift >= 64:
            raise WireError(f"varint longer than 10 bytes at byte {pos}")


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def field_header(number: int, length: int) -> bytes:
    """Tag and length of a length-delimited field."""
    if number < 16 and length < 0x80:  # one byte each: names, types, small messages
        return bytes((number << 3 | _LEN, length))
    return _encode_varint(number << 3 | _LEN) + _encode_varint(length)


_Field = tuple[int, int, int, int]
"""A field as _scan finds it: (number, first byte of the tag, first byte of the payload, one
past the last byte). A plain tuple: a million-node graph has a million of them."""


def _fields(buf: memoryview, pos: int, end: int, limit: int | None = None) -> list[_Field] | None:
    """The fields of the message in ``buf[pos:end]``; None once there are more than ``limit``."""
    fields: list[_Field] = []
    for f in _scan(buf, pos, end):
        if limit is not None and len(fields) > limit:
            return None
        fields.append(f)
    return fields


def _scan(buf: memoryview, pos: int, end: int) -> Iterator[_Field]:
    """The fields of the message in ``buf[pos:end]``, one at a time (a million-node graph's
    fields held in a list took 270 MB while the file was read). One-byte tags and lengths
    (nearly every field of a graph) are read inline: with a call per varint and an object per
    field, scanning a million-node graph took 1.06 s."""
    while pos < end:
        start = pos
        key = buf[pos]
        if key < 0x80:
            pos += 1
        else:
            key, pos = _varint(buf, pos, end)
        number, wire_type = key >> 3, key & 7
        if number == 0:
            raise WireError(f"field number 0 at byte {start}")
        if wire_type == _LEN:
            length = buf[pos] if pos < end else 0x80
            if length < 0x80:
                data = pos + 1
            else:
                length, data = _varint(buf, pos, end)
            pos = data + length
        else:
            data = pos
            if wire_type == 0:
                _, pos = _varint(buf, pos, end)
            elif wire_type == 1:
                pos += 8
            elif wire_type == 5:
                pos += 4
            else:
                raise WireError(
                    f"wire type {wire_type} (groups are not used by ONNX) at byte {start}"
                )
        if pos > end:
            raise WireError(f"field {number} at byte {start} runs past the end of its message")
        yield number, start, data, pos


def split_weights(
    buf: memoryview, *, max_graph_fields: int | None = None
) -> tuple[bytes | memoryview, list[tuple[int, int] | None], list[tuple[int, int]]]:
    """Cut the raw_data of the main graph's initializers, and the main graph's nodes, out of a
    serialized ModelProto.

    Returns the skeleton; per initializer in order, the (offset, length) of its raw_data in
    ``buf`` or None; and the (offset, length) of each run of at most NODE_RUN nodes, in
    order (each run is node fields one after another, a GraphProto of those nodes alone).
    Raises WireError on malformed input; a model whose graph field appears more than once
    (legal but never written by exporters), or whose graph has more than
    ``max_graph_fields`` fields (scanning them in Python would cost more than the split
    saves), comes back whole, with no spans and no runs.
    """
    end = len(buf)
    top = _fields(buf, 0, end)
    assert top is not None
    graphs = [f for f in top if f[0] == _MODEL_GRAPH]
    if len(graphs) != 1:
        return bytes(buf), [], []
    _, graph_start, graph_data, graph_end = graphs[0]
    graph_fields: Iterable[_Field] | None
    if max_graph_fields is None:
        graph_fields = _scan(buf, graph_data, graph_end)
    else:
        graph_fields = _fields(buf, graph_data, graph_end, max_graph_fields)
    if graph_fields is None:
        return buf, [], []
    pieces: list[bytes | memoryview] = []
    spans: list[tuple[int, int] | None] = []
    runs: list[list[int]] = []  # [start, end, nodes]
    run: list[int] = [-1, -1, NODE_RUN]  # the last of runs
    copied = graph_data  # graph payload copied up to here
    for number, start, data, stop in graph_fields:
        if number == _GRAPH_NODE:
            if copied < start:
                pieces.append(buf[copied:start])
            copied = stop
            if run[1] == start and run[2] < NODE_RUN:
                run[1] = stop
                run[2] += 1
            else:
                run = [start, stop, 1]
                runs.append(run)
            continue
        if number != _GRAPH_INITIALIZER:
            continue
        if stop - data < SPLIT_MIN_TENSOR:
            spans.append(None)
            continue
        raws = [t for t in _fields(buf, data, stop) or () if t[0] == _TENSOR_RAW_DATA]
        if not raws:
            spans.append(None)
            continue
        pieces.append(buf[copied:start])
        body = bytearray()
        cut = data
        for _, raw_start, _, raw_end in raws:  # repeated raw_data: the last one wins
            body += buf[cut:raw_start]
            cut = raw_end
        body += buf[cut:stop]
        pieces.append(field_header(_GRAPH_INITIALIZER, len(body)) + bytes(body))
        _, _, raw_data, raw_end = raws[-1]
        spans.append((raw_data, raw_end - raw_data))
        copied = stop
    pieces.append(buf[copied:graph_end])
    graph_body = b"".join(pieces)
    skeleton = b"".join(
        [
            buf[:graph_start],
            field_header(_MODEL_GRAPH, len(graph_body)),
            graph_body,
            buf[graph_end:],
        ]
    )
    return skeleton, spans, [(start, stop - start) for start, stop, _ in runs]


def node_run_model(run: bytes | memoryview) -> bytes:
    """A run of split_weights wrapped as the graph field of a ModelProto: parsed, its nodes
    nest as deep as in the file, so protobuf's depth limit holds as it did."""
    return field_header(_MODEL_GRAPH, len(run)) + bytes(run)


@dataclass(frozen=True, slots=True)
class WeightSource:
    """Where a spliced weight's bytes come from: an open file's span, or an in-memory buffer."""

    length: int
    write: Callable[[BinaryIO], None]


def _cuts(message: memoryview, numbers: Sequence[int]) -> list[int]:
    """Per number, where the first field numbered above it starts in ``message`` (encoded in
    field-number order), or its end. Only the top-level tags are read, up to the last cut."""
    cuts: list[int] = []
    for number, start, _, _ in _scan(message, 0, len(message)):
        while len(cuts) < len(numbers) and number > numbers[len(cuts)]:
            cuts.append(start)
        if len(cuts) == len(numbers):
            return cuts
    return cuts + [len(message)] * (len(numbers) - len(cuts))


def cut_fields(message: Encoded, *numbers: int) -> list[memoryview]:
    """``message``, encoded in field-number order, cut into ``len(numbers) + 1`` pieces: piece
    ``i`` ends before the first field numbered above ``numbers[i]``. Unknown fields, which
    protobuf writes last, stay last."""
    view = memoryview(message)
    bounds = [0, *_cuts(view, numbers), len(view)]
    return [view[start:end] for start, end in zip(bounds, bounds[1:], strict=False)]


def cut_graph(graph_rest: Encoded, *, value_info: bool = False) -> list[memoryview]:
    """A GraphProto without its nodes and initializers, encoded, cut where the initializers go
    in field-number order: its name, then the rest. With ``value_info`` (it has none either),
    the rest is cut where they go too: doc_string, input and output; then
    quantization_annotation, sparse_initializer, metadata_props."""
    if value_info:
        return cut_fields(graph_rest, _GRAPH_NAME, _GRAPH_OUTPUT)
    return cut_fields(graph_rest, _GRAPH_NAME)


def write_model(
    out: BinaryIO,
    model_rest: Encoded,
    graph_head: Sequence[Encoded],
    initializers: Sequence[tuple[bytes, WeightSource | None]],
    graph_tail: Sequence[Encoded] = (),
) -> None:
    """Stream a ModelProto in field-number order, as protobuf serializes one: the model's fields
    before its graph, the graph (``graph_head``, the initializers, ``graph_tail``), the model's
    fields after it (opset_import, metadata_props, functions...).

    ``model_rest``: the ModelProto without its graph, encoded. ``graph_head``: the graph's
    fields before its initializers (nodes, name), ``graph_tail``: those after (doc_string,
    input, output, value_info...), each encoded in pieces written one after another (a large
    graph's nodes come encoded in batches; joining them would copy them all).

    Each initializer is a TensorProto whose raw_data comes from a WeightSource, spliced in
    before the tensor's fields numbered above it (doc_string, external_data, metadata_props),
    or, with no WeightSource, initializer fields already encoded (a run of tensors with their
    data inside).
    """
    before_graph, after_graph = cut_fields(model_rest, _MODEL_GRAPH)
    init_fields: list[tuple[bytes, bytes, int, bytes, WeightSource | None]] = []
    graph_len = sum(len(piece) for piece in graph_head) + sum(len(p) for p in graph_tail)
    for tensor_bytes, weight in initializers:
        if weight is None:
            init_fields.append((b"", tensor_bytes, len(tensor_bytes), b"", None))
            graph_len += len(tensor_bytes)
            continue
        # where raw_data goes: an offset, since a view per tensor held took 9 MB on 20k weights
        (cut,) = _cuts(memoryview(tensor_bytes), (_TENSOR_RAW_DATA,))
        raw_header = field_header(_TENSOR_RAW_DATA, weight.length)
        body_len = len(tensor_bytes) + len(raw_header) + weight.length
        header = field_header(_GRAPH_INITIALIZER, body_len)
        init_fields.append((header, tensor_bytes, cut, raw_header, weight))
        graph_len += len(header) + body_len
    out.write(before_graph)
    out.write(field_header(_MODEL_GRAPH, graph_len))
    for piece in graph_head:
        out.write(piece)
    for header, tensor_bytes, cut, raw_header, weight in init_fields:
        out.write(header)
        if weight is None:
            out.write(tensor_bytes)
            continue
        out.write(memoryview(tensor_bytes)[:cut])
        out.write(raw_header)
        weight.write(out)
        if cut < len(tensor_bytes):
            out.write(memoryview(tensor_bytes)[cut:])
    for piece in graph_tail:
        out.write(piece)
    out.write(after_graph)


def copy_span(src_fd: int, offset: int, length: int, out: BinaryIO) -> None:
    """Copy bytes between files in the kernel (copy_file_range), never through Python memory;
    to a stream (a pipe, a device: not seekable) in chunks, in order."""
    done = 0
    if not out.seekable():
        while done < length:
            chunk = os.pread(src_fd, min(1 << 24, length - done), offset + done)
            if not chunk:
                raise WireError(f"source file ended {length - done} bytes early")
            out.write(chunk)
            done += len(chunk)
        return
    out.flush()
    try:
        while done < length:
            n = os.copy_file_range(src_fd, out.fileno(), length - done, offset + done)
            if n == 0:
                raise WireError(f"source file ended {length - done} bytes early")
            done += n
    except OSError:  # another filesystem, or a kernel without it: copy in chunks
        out.seek(0, os.SEEK_END)
        while done < length:
            chunk = os.pread(src_fd, min(1 << 24, length - done), offset + done)
            if not chunk:
                raise WireError(f"source file ended {length - done} bytes early") from None
            out.write(chunk)
            done += len(chunk)
    out.seek(0, os.SEEK_END)
