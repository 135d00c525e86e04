"""The only code that touches ONNX protobuf: load, save, from_proto, to_proto."""

from __future__ import annotations

__all__ = [
    "DEFAULT_EXTERNAL_THRESHOLD",
    "PROTOBUF_LIMIT",
    "STDIN_NAME",
    "STDIO",
    "STDOUT_NAME",
    "Guard",
    "Output",
    "checkable_proto",
    "checker_message",
    "checker_problems",
    "check_output",
    "data_files",
    "in_place_location",
    "negative_dims",
    "from_proto",
    "function_from_proto",
    "load",
    "node_to_proto",
    "save",
    "save_stream",
    "spooled_stdin",
    "tensor_to_proto",
    "to_proto",
    "type_from_proto",
    "type_to_proto",
    "uses_external_data",
    "write",
]

import logging
import os
import stat
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import BinaryIO

import onnx
from google.protobuf.message import DecodeError

from onnxforge import _cleanup
from onnxforge.errors import ModelReadError, OnnxForgeError, OutputError
from onnxforge.io._atomic import TempFile, sync_folder
from onnxforge.io._convert import (
    EmbedSink,
    Spill,
    TensorSink,
    _tensor_to_proto,
    _Writer,
    function_from_proto,
    model_from_proto,
    model_to_proto,
    parse_node_run,
    type_from_proto,
    type_to_proto,
)
from onnxforge.io._files import Span, open_model_file
from onnxforge.io._guard import Guard, checkable_proto, checker_message
from onnxforge.io._output import (
    STDIN_NAME,
    STDIO,
    STDOUT_NAME,
    Output,
    silence_stdout,
    spooled_stdin,
)
from onnxforge.io._tensors import raw_source
from onnxforge.io._wire import (
    Encoded,
    WeightSource,
    WireError,
    cut_graph,
    split_weights,
    write_model,
)
from onnxforge.ir import DType, Model, Op, Tensor, no_gc

logger = logging.getLogger(__name__)

PROTOBUF_LIMIT = (1 << 31) - 1
"""Protobuf cannot serialize a message of 2 GiB or more."""
DEFAULT_EXTERNAL_THRESHOLD = 1024
"""Tensors of at least this many bytes go to the external-data file (onnx's default too)."""
_ALIGN = 4096  # external tensors of 1 MiB or more start on a page boundary, as onnx writes them
_ALIGN_FROM = 1 << 20
SPLIT_MIN_FILE = 16 << 20
"""Files at least this big keep their weights in the file (memory-mapped, written back from it)."""
SPLIT_DENSE_FILE = 1 << 20
"""Files from this size up to SPLIT_MIN_FILE keep them there too when their graph has at most one
field per KiB (weights, not structure): ViT and MobileNet exports (10-14 MB) then load, optimize
and save a quarter faster, while a 5 MB 100k-node graph, whose scan would cost more than it
saves, is parsed whole like every smaller file."""


def load(
    path: str | os.PathLike[str], *, name: str | None = None, keep_nodes: bool = False
) -> Model:
    """Read a model; weights stay in the (memory-mapped) file, external data included.

    ``name``: the file is a copy of a stream (stdin, see spooled_stdin): messages call it
    ``name``, and external data is refused, since the stream had no folder beside it.

    ``keep_nodes``: for a caller that will change types only (infer). The main graph's
    nodes are written as the file has them, not encoded again, while its ops are the ones
    read (see _convert.nodes_as_read); a PassManager run gives that up. Files of 1 MiB and
    more are then cut into node runs whatever their size.

    Raises ModelReadError when the file cannot be read as an ONNX model.
    """
    path = Path(path)
    data_file = open_model_file(path)
    shown: Path | str = path if name is None else name
    if data_file.size == 0:
        raise ModelReadError(shown, "is empty, not an ONNX model")
    small = data_file.size < SPLIT_DENSE_FILE  # parsed whole, so read, not mapped
    buf = memoryview(data_file.read_all() if small else data_file.mmap())
    try:
        if data_file.size >= SPLIT_MIN_FILE or (keep_nodes and not small):
            skeleton, offsets, runs = split_weights(buf)
        elif not small:
            skeleton, offsets, runs = split_weights(buf, max_graph_fields=data_file.size >> 10)
        else:
            skeleton, offsets, runs = buf, [], []
        wire_problem = ""
    except WireError as exc:
        skeleton, offsets, runs, wire_problem = buf, [], [], str(exc)
    proto = onnx.ModelProto()
    try:
        proto.ParseFromString(skeleton)
        for start, length in runs:  # checked now, so an unreadable model fails here
            parse_node_run(buf[start : start + length])
    except DecodeError as exc:
        if "depth" in str(exc).lower() or "recursion" in str(exc).lower():
            raise ModelReadError(
                shown,
                "not readable: its messages nest deeper than protobuf reads (100 levels; "
                "about 30 levels of subgraphs)",
            ) from None
        if not wire_problem:  # small files were not scanned: ask the scanner where it breaks
            try:
                split_weights(buf)
            except WireError as exc:
                wire_problem = str(exc)
        detail = f" ({wire_problem})" if wire_problem else ""
        raise ModelReadError(
            shown, f"not an ONNX model: the protobuf is truncated or corrupted{detail}"
        ) from None
    finally:
        buf.release()
    if not proto.HasField("graph") or proto.ir_version <= 0:
        missing = "graph" if not proto.HasField("graph") else "ir_version"
        raise ModelReadError(shown, f"not an ONNX model: it has no {missing}")
    spans = [None if o is None else Span(data_file, *o) for o in offsets]
    # External data is checked (files, offsets, lengths) while the graph is built: build it
    # now, so an unreadable model fails here. Otherwise the graph is built when first used.
    external = [t for t in proto.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL]
    if external and name is not None:
        raise ModelReadError(
            name,
            f"tensor {external[0].name!r} keeps its data in an external file, which a model "
            "read from a stream cannot reach; give the model's path instead",
        )
    model = model_from_proto(
        proto,
        spans=spans,
        model_path=path if name is None else None,
        deferred=not external,
        node_runs=[Span(data_file, *run) for run in runs],
        keep_nodes=keep_nodes,
    )
    model._source_spans = spans
    return model


def data_files(model: Model) -> set[Path]:
    """The files whose bytes the model's tensors point into: its external-data files and,
    where weights were left in it, the model file. Writing any of them by name would change
    what the loaded model says."""
    found: set[Path] = set()
    spans = [] if model.built else [*(model._source_spans or []), *(model._source_nodes or [])]
    if model.built:
        if model._loaded_nodes is not None:  # written from the file (load's keep_nodes)
            spans += model._loaded_nodes[0]
        for graph in model.graphs():
            for value in graph.initializers:
                if isinstance(value.const, Tensor):
                    spans.append(value.const.span)
            for op in graph._ops:
                if not op.attrs:  # most ops: 0.3 s of `infer -o` on a million of them
                    continue
                for attr in op.attrs.values():
                    if isinstance(attr, list) and not (attr and isinstance(attr[0], Tensor)):
                        continue  # a list attribute holds one kind: not tensors here
                    for tensor in attr if isinstance(attr, list) else [attr]:
                        if isinstance(tensor, Tensor):
                            spans.append(tensor.span)
    for span in spans:
        if isinstance(span, Span):
            found.add(span.file.path)
    return found


def from_proto(proto: onnx.ModelProto) -> Model:
    """Build a Model from an in-memory ModelProto."""
    return model_from_proto(proto)


def to_proto(model: Model) -> onnx.ModelProto:
    """An in-memory ModelProto with every tensor's bytes embedded (copies the weights)."""
    return model_to_proto(model, EmbedSink())  # builds the graph if it was not yet


def checker_problems(model: Model | str | os.PathLike[str]) -> list[str]:
    """What ``onnx.checker.check_model`` (full_check=False) finds: the first problem, as one
    line, or nothing.

    A path is checked as a path, so onnx parses it in C++ and never reads external data into
    memory (models over 2 GB stay cheap); a Model is converted with every weight embedded.
    """
    source: onnx.ModelProto | str = (
        to_proto(model) if isinstance(model, Model) else os.fspath(model)
    )
    try:
        onnx.checker.check_model(source, full_check=False)
    except onnx.checker.ValidationError as exc:
        lines = (line.strip() for line in str(exc).splitlines())
        return [" ".join(line for line in lines if line)]
    except UnicodeDecodeError as exc:  # the checker quoted a name that is not UTF-8
        text = bytes(exc.object).decode("utf-8", errors="backslashreplace")
        lines = (line.strip() for line in text.splitlines())
        return [" ".join(line for line in lines if line)]
    return []


def negative_dims(path: str | os.PathLike[str]) -> list[str]:
    """The declared types with a negative ``dim_value`` (paddle2onnx's -1), one line each:
    ``load`` reads those dims as unknown; ``check`` warns about them. External data is not
    read."""
    model = onnx.load(os.fspath(path), load_external_data=False)
    found: list[str] = []

    def visit(graph: onnx.GraphProto, where: str) -> None:
        for kind, infos in (
            ("input", graph.input),
            ("output", graph.output),
            ("value_info", graph.value_info),
        ):
            for vi in infos:
                dims = vi.type.tensor_type.shape.dim if vi.type.HasField("tensor_type") else []
                if any(d.HasField("dim_value") and d.dim_value < 0 for d in dims):
                    shown = [
                        d.dim_value if d.HasField("dim_value") else d.dim_param or "?"
                        for d in dims
                    ]
                    found.append(f"{where}{kind} {vi.name!r} is declared with dims {shown}")
        for node in graph.node:
            for attr in node.attribute:
                for body in [attr.g, *attr.graphs] if attr.HasField("g") else attr.graphs:
                    visit(body, f"{where}in {node.op_type} {node.name!r} body {body.name!r}: ")

    visit(model.graph, "")
    return found


def node_to_proto(op: Op) -> onnx.NodeProto:
    """One op as a NodeProto, attributes and subgraphs embedded (for onnx's per-node helpers)."""
    node = onnx.NodeProto()
    _Writer(EmbedSink()).node(op, node)
    return node


def tensor_to_proto(tensor: Tensor, name: str = "") -> onnx.TensorProto:
    """A TensorProto with the data embedded."""
    out = onnx.TensorProto()
    _tensor_to_proto(tensor, out, name, EmbedSink(), None)
    return out


class _SaveSink(TensorSink):
    """Main-graph weights are spliced into the file as it is written, or go to external data;
    the rest are embedded."""

    def __init__(self, external: BinaryIO | None, location: str, threshold: int) -> None:
        self.external = external
        self.location = location
        self.threshold = threshold
        self.spliced: dict[int, WeightSource] = {}
        self.progress = _Counter(None, None)

    def place(self, tensor: Tensor, out: onnx.TensorProto, *, initializer: int | None) -> None:
        source = raw_source(tensor)
        if source is None:  # strings cannot be raw
            EmbedSink().place(tensor, out, initializer=initializer)
            return
        if self.moves(tensor, initializer):
            self._write_external(source, out)
        elif initializer is not None:
            self.spliced[initializer] = source
        else:
            EmbedSink().place(tensor, out, initializer=initializer)

    def splices(self, initializer: int | None) -> bool:
        return initializer is not None

    def moves(self, tensor: Tensor, initializer: int | None) -> bool:
        """Main-graph weights of at least the threshold go to the external-data file."""
        return (
            self.external is not None
            and initializer is not None
            and tensor.dtype != DType.STRING
            and tensor.nbytes >= self.threshold
        )

    def _write_external(self, source: WeightSource, out: onnx.TensorProto) -> None:
        assert self.external is not None
        offset = self.external.seek(0, os.SEEK_END)
        if source.length >= _ALIGN_FROM and offset % _ALIGN:
            self.external.write(b"\0" * (_ALIGN - offset % _ALIGN))
            offset = self.external.tell()
        source.write(self.external)
        self.progress.add(source.length)
        for key, value in (
            ("location", self.location),
            ("offset", offset),
            ("length", source.length),
        ):
            entry = out.external_data.add()
            entry.key, entry.value = key, str(value)
        out.data_location = onnx.TensorProto.EXTERNAL


class _Counter:
    """Weight bytes written so far, told to a Progress callback."""

    def __init__(self, model: Model | None, progress: Progress | None) -> None:
        self.callback = progress
        self.total = _weight_bytes(model) if progress is not None and model is not None else 0
        self.done = 0

    def add(self, n: int) -> None:
        if self.callback is not None:
            self.done += n
            self.callback(self.done, max(self.total, self.done))

    def counted(self, source: WeightSource | None) -> WeightSource | None:
        """``source``, telling the callback once it is written."""
        if source is None or self.callback is None:
            return source
        write = source.write

        def counting(out: BinaryIO) -> None:
            write(out)
            self.add(source.length)

        return WeightSource(source.length, counting)


def _main_weights(model: Model) -> list[Tensor]:
    return [v.const for v in model.graph.initializers if isinstance(v.const, Tensor)]


def _had_external(model: Model) -> bool:
    return any(
        t.meta is not None and t.meta.data_location == onnx.TensorProto.EXTERNAL
        for t in _main_weights(model)
    )


def _weight_bytes(model: Model) -> int:
    return sum(t.nbytes for t in _main_weights(model))


def uses_external_data(model: Model, external_data: bool | None = None) -> bool:
    """Whether ``save`` writes ``model``'s weights to an external data file: as asked, else
    when the model was loaded with external data or its weights would pass protobuf's 2 GiB
    limit."""
    if external_data is not None:
        return external_data
    if not model.built:
        return False  # loaded without external data, from a file protobuf could read
    return _had_external(model) or _weight_bytes(model) > PROTOBUF_LIMIT - (64 << 20)


Progress = Callable[[int, int], None]
"""Called with (weight bytes written, weight bytes to write) as a model is written."""


def save(
    model: Model,
    path: str | os.PathLike[str],
    *,
    external_data: bool | None = None,
    size_threshold: int = DEFAULT_EXTERNAL_THRESHOLD,
    location: str | None = None,
    durable: bool = False,
    progress: Progress | None = None,
    guard: Guard | None = None,
) -> None:
    """Write ``model`` to ``path`` atomically: a temporary file in the same folder, renamed.

    ``external_data``: True writes main-graph weights of at least ``size_threshold`` bytes to
    ``location`` (default ``<file name>.data``, beside the model); False embeds everything;
    None (default) keeps external data if the model was loaded with it, and switches to it
    when the weights would pass protobuf's 2 GiB limit. Weight bytes are copied file to file,
    never held in Python memory.

    The data file is written like the model: unnamed or under a temporary name beside its
    target, then renamed (data first, then the model); a symbolic link or a hard-linked file
    at either target is replaced, never written through. ``location`` must be a plain file
    name (no folder, no ``..``), checked before anything is written. A failure or a kill
    leaves the targets as they were and no temporary file.

    ``durable`` also flushes the files to disk before the renames and the folder after them,
    so a power cut cannot leave an empty file or lose the rename. It is off by default, as in
    onnx.save: it costs about a millisecond per small file (as much as the whole save of a
    4 KiB model) and seconds per GiB, and a killed process is covered without it.

    ``progress`` is called as weights are written (see Progress). ``guard`` checks the model
    before it is renamed into place and refuses it (UnsafeOutputError; see Guard): the
    written file itself, or with external data a copy without the weights.
    """
    path = Path(path)
    location = location or f"{path.name}.data"
    _check_location(location, path)
    folder = path.parent
    if not folder.is_dir():
        raise OnnxForgeError(f"{path}: the folder {str(folder)!r} does not exist")
    external_data = uses_external_data(model, external_data)
    targets = [path, folder / location] if external_data else [path]
    for target in targets:
        if target.is_dir() and not target.is_symlink():
            raise OutputError(f"{target}: is a folder; cannot write a file there")
    if external_data and not model.built:
        model._build()  # weights are placed one by one, from the built graph
    files: list[TempFile] = []
    try:
        with no_gc():
            out = _temp(path, files)
            external = _temp(folder / location, files) if external_data else None
            sink = _SaveSink(external.handle if external else None, location, size_threshold)
            sink.progress = _Counter(model, progress)
            _write(model, out.handle, sink, path)
            for file in reversed(files):
                file.finish(durable=durable)
        if guard is not None:
            guard.check_written(model, out.name, str(path), external=external is not None)
        with _cleanup.blocked_signals():  # the data file and its model are published together
            for file in reversed(files):  # data first: the model never points at missing data
                file.publish()
        if durable:
            sync_folder(folder)
    except OSError as exc:
        where = exc.filename if isinstance(exc.filename, str) else path
        raise OnnxForgeError(f"{where}: cannot write: {exc.strerror or exc}") from None
    except WireError as exc:
        raise OnnxForgeError(f"{path}: cannot write: {exc}") from None
    finally:
        for file in files:
            file.discard()


def save_stream(
    model: Model,
    out: BinaryIO,
    *,
    name: str = STDOUT_NAME,
    external_data: bool | None = None,
    progress: Progress | None = None,
) -> None:
    """Write ``model`` through to an open stream (stdout, a device, a FIFO), in order, every
    weight embedded; messages call the stream ``name``. A model that would need an external
    data file (``uses_external_data``) is refused: there is no folder beside a stream.
    Atomicity does not apply: a failure mid-write leaves what was written."""
    if uses_external_data(model, external_data):
        raise OutputError(external_data_refusal(model, name, external_data))
    sink = _SaveSink(None, "", DEFAULT_EXTERNAL_THRESHOLD)
    sink.progress = _Counter(model, progress)
    try:
        with no_gc():
            _write(model, out, sink, Path(name))
        out.flush()
    except BrokenPipeError:
        if name == STDOUT_NAME:
            silence_stdout()
        raise OnnxForgeError(
            f"{name}: its reader closed it before the model was written (broken pipe)"
        ) from None
    except OSError as exc:
        raise OnnxForgeError(f"{name}: cannot write: {exc.strerror or exc}") from None
    except WireError as exc:
        raise OnnxForgeError(f"{name}: cannot write: {exc}") from None


def external_data_refusal(model: Model, name: str, external_data: bool | None) -> str:
    """Why ``model`` cannot be written to the stream ``name`` (see save_stream)."""
    if external_data:
        return (
            f"{name}: external data cannot be written next to a stream; drop --external-data, "
            "or write to a file (-o FILE)"
        )
    weights = _weight_bytes(model)
    if weights > PROTOBUF_LIMIT - (64 << 20):
        return (
            f"{name}: the model's {weights / 2**30:.2f} GiB of weights need an external data "
            "file (over protobuf's 2 GiB limit), which cannot be written next to a stream; "
            "write to a file (-o FILE)"
        )
    return (
        f"{name}: the model keeps its weights in external data, which cannot be written "
        "next to a stream; pass --no-external-data to embed them, or write to a file (-o FILE)"
    )


def check_output(
    model: Model,
    out: Output,
    location: str,
    *,
    in_place: bool,
    external_data: bool | None = None,
) -> None:
    """Refuse, before any work, what writing ``model`` to ``out`` could not do or should not:
    external data next to a stream (OutputError); a data file beside OUT that is not a regular
    file (OutputError); without ``in_place``, OUT or its data file being a file the input
    reads (its external data: writing it would change the input)."""
    if out.streamed:
        if uses_external_data(model, external_data):
            raise OutputError(external_data_refusal(model, out.name, external_data))
        return
    assert out.path is not None
    data = out.path.parent / location
    try:
        mode = os.stat(data).st_mode
    except OSError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode) and not os.path.islink(data):
        kind = "a folder" if stat.S_ISDIR(mode) else "not a regular file"
        raise OutputError(f"{data}: is {kind}; the external data file cannot be written there")
    if in_place:
        return
    read = {p.resolve() for p in data_files(model)}
    for path in (out.path, data):
        if path.resolve() in read:
            raise OnnxForgeError(
                f"{path}: the input reads this file; writing it would change the input "
                "(choose another -o, or pass --in-place)"
            )


def in_place_location(model: Model, path: Path) -> str | None:
    """The external-data file name to keep when ``path`` is replaced in place: its one data
    file beside it, or None (the default name)."""
    own = path.resolve()
    files = {p.resolve() for p in data_files(model)} - {own}
    if len(files) == 1:
        (only,) = files
        if only.parent == own.parent:
            return only.name
    return None


def write(
    model: Model,
    out: Output,
    *,
    external_data: bool | None = None,
    location: str | None = None,
    durable: bool = False,
    progress: Progress | None = None,
    guard: Guard | None = None,
) -> None:
    """Write ``model`` where ``out`` says: a file with ``save`` (atomically, data file and
    all), a stream with ``save_stream`` (through, then flushed and closed). Every command's
    result passes ``guard`` first: a model onnx's checker refuses where it took the input is
    never published."""
    if not out.streamed:
        assert out.path is not None
        save(
            model,
            out.path,
            external_data=external_data,
            location=location,
            durable=durable,
            progress=progress,
            guard=guard,
        )
        return
    if guard is not None:
        guard.check(model, out.name)
    save_stream(model, out.stream(), name=out.name, external_data=external_data, progress=progress)
    try:
        out.close()
    except OSError as exc:
        raise OnnxForgeError(f"{out.name}: cannot write: {exc.strerror or exc}") from None


def _check_location(location: str, path: Path) -> None:
    """An external-data location for saving must be a plain file name beside the model."""
    if (
        "\x00" in location
        or os.path.dirname(location)
        or "/" in location
        or os.sep in location
        or (os.altsep is not None and os.altsep in location)
        or location in (".", "..")
        or os.path.isabs(location)
    ):
        raise OnnxForgeError(
            f"external data location {location!r} must be a file name beside the model"
        )
    if location == path.name:
        raise OnnxForgeError(
            f"external data location {location!r} is the model's own file name; choose another"
        )


def _temp(target: Path, files: list[TempFile]) -> TempFile:
    file = TempFile(target)
    files.append(file)
    return file


def _pieces(
    tensors: Sequence[onnx.TensorProto], weight_of: Callable[[int], WeightSource | None]
) -> list[tuple[bytes, WeightSource | None]]:
    """The initializer fields for write_model, in order: a tensor whose raw_data is spliced
    in from ``weight_of(i)``, or a run of tensors with their data inside, encoded together."""
    pieces: list[tuple[bytes, WeightSource | None]] = []
    run = onnx.GraphProto()
    for i, tensor in enumerate(tensors):
        weight = weight_of(i)
        if weight is None:
            run.initializer.append(tensor)
            continue
        if len(run.initializer):
            pieces.append((run.SerializeToString(), None))
            run.Clear()
        pieces.append((tensor.SerializeToString(), weight))
    if len(run.initializer):
        pieces.append((run.SerializeToString(), None))
    return pieces


_GraphParts = tuple[list[Encoded], list[tuple[bytes, WeightSource | None]], list[Encoded]]
"""The main graph as write_model takes it: the fields before its initializers, the
initializers, the fields after them."""


def _source_graph(model: Model) -> _GraphParts:
    """The loaded graph of a model whose graph was never built, as write_model takes it."""
    gp = model._source.graph
    spans: list[Span | None] = model._source_spans or []
    nodes = [run.view() for run in model._source_nodes or []]  # cut out of gp when loaded
    if not any(spans):  # initializers stay in place, in order
        return [*nodes, gp.SerializeToString()], [], []
    rest = onnx.GraphProto()
    rest.CopyFrom(gp)  # the skeleton: spanned initializers have no data in it
    rest.ClearField("initializer")
    name, after = cut_graph(rest.SerializeToString())

    def weight_of(i: int) -> WeightSource | None:
        span = spans[i] if i < len(spans) else None
        return None if span is None else WeightSource(span.length, span.write_to)

    initializers = _pieces(gp.initializer, weight_of)
    return [*nodes, name], initializers, [after]


def _built_graph(model: Model, sink: _SaveSink) -> tuple[onnx.ModelProto, _GraphParts]:
    """The model without its graph, and the built graph as write_model takes it: its nodes and
    value_info encoded as they are made, its initializers' data spliced in where the sink
    left them out."""
    spill = Spill()
    mp = model_to_proto(model, sink, spill=spill)
    gp = mp.graph
    initializers = _pieces(gp.initializer, sink.spliced.get)
    gp.ClearField("initializer")
    name, interface, after = cut_graph(gp.SerializeToString(), value_info=True)
    mp.ClearField("graph")
    return mp, ([*spill.node, name], initializers, [interface, *spill.value_info, after])


def _write(model: Model, out: BinaryIO, sink: _SaveSink, path: Path) -> None:
    if not model.built:
        mp = model_to_proto(model, sink, source_graph=True)
        graph_head, initializers, graph_tail = _source_graph(model)
    else:
        mp, (graph_head, initializers, graph_tail) = _built_graph(model, sink)
    initializers = [(t, sink.progress.counted(w)) for t, w in initializers]
    model_rest = mp.SerializeToString()
    total = (
        len(model_rest)
        + sum(len(piece) for piece in [*graph_head, *graph_tail])
        + sum(len(t) + (w.length if w else 0) for t, w in initializers)
    )
    if total > PROTOBUF_LIMIT:
        raise OnnxForgeError(
            f"{path}: the model would be {total / 2**30:.2f} GiB, over protobuf's 2 GiB limit; "
            "save it with external data"
        )
    write_model(out, model_rest, graph_head, initializers, graph_tail)
