"""ModelProto <-> Model, losslessly.

Every field of every message is read. Writing rebuilds each message from the IR, but what a pass
left unchanged is written as it was read: a value's ValueInfoProto is copied while its type object
is the one loaded, a field set to its default in the file (``domain: ""``) is set again, and the
messages onnxforge does not model (training_info, configuration, quantization annotations,
device configurations, non-tensor types) are carried verbatim.
"""

from __future__ import annotations

__all__ = ["EmbedSink", "Spill", "TensorSink", "model_from_proto", "model_to_proto"]

import ctypes
import io
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import islice, repeat
from operator import itemgetter
from pathlib import Path
from typing import Any

import onnx
from onnx import AttributeProto, TensorProto

try:
    from google.protobuf import unknown_fields
except ImportError:  # pragma: no cover - protobuf before 4.21
    unknown_fields = None

from onnxforge.errors import ModelReadError, OnnxForgeError
from onnxforge.io._files import DataFile, Span, open_external
from onnxforge.io._tensors import raw_source, tensor_from_array
from onnxforge.io._wire import Encoded, field_header, node_run_model
from onnxforge.ir import (
    AttrRef,
    DType,
    Function,
    Graph,
    Model,
    Op,
    OpaqueType,
    SparseTensor,
    Tensor,
    TensorType,
    Value,
    add_use,
    no_gc,
    walk_graphs,
)

_A = AttributeProto


# -- small helpers ---------------------------------------------------------------------------
def _props(entries: Any) -> list[tuple[str, str]]:
    return [(e.key, e.value) for e in entries]


def _write_props(out: Any, props: Sequence[tuple[str, str]], source: Any) -> None:
    if source is not None and len(source) == len(props) and _props(source) == list(props):
        out.extend(source)
        return
    for key, value in props:
        entry = out.add()
        entry.key, entry.value = key, value


def _set(out: Any, source: Any, name: str, value: Any) -> None:
    """Set a scalar field when it differs from its default or the source set it explicitly."""
    if value or (source is not None and source.HasField(name)):
        setattr(out, name, value)


def _copy(message: Any) -> Any:
    """A message of its own: a part of the parsed model held by the IR would keep the whole
    parse alive (protobuf frees a parse as one block, once nothing points into it)."""
    copy = type(message)()
    copy.CopyFrom(message)
    return copy


def _repeated(fd: Any) -> bool:
    repeated = getattr(fd, "is_repeated", None)  # protobuf 6+; `label` before
    return fd.label == fd.LABEL_REPEATED if repeated is None else bool(repeated)


def _rest(message: Any, skip: tuple[str, ...]) -> Any:
    """A copy of ``message`` without the fields ``skip`` names (the nodes, read into the IR)."""
    rest = type(message)()
    for fd, value in message.ListFields():
        if fd.name in skip:
            continue
        if _repeated(fd):
            getattr(rest, fd.name).extend(value)
        elif fd.message_type is not None:
            getattr(rest, fd.name).CopyFrom(value)
        else:
            setattr(rest, fd.name, value)
    return rest


def _text(data: bytes) -> str | bytes:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data


def _bytes(text: str | bytes) -> bytes:
    return text.encode("utf-8") if isinstance(text, str) else text


def type_from_proto(tp: onnx.TypeProto) -> TensorType | OpaqueType:
    which = tp.WhichOneof("value")
    if which != "tensor_type" or tp.HasField("denotation"):
        return OpaqueType(_copy(tp), which or "undefined")
    tt = tp.tensor_type
    if not tt.HasField("elem_type"):
        return OpaqueType(_copy(tp), which)
    if not tt.HasField("shape"):
        return TensorType(tt.elem_type, None)
    dims: list[int | str | None] = []
    for d in tt.shape.dim:
        if d.HasField("denotation"):
            return OpaqueType(_copy(tp), which)
        kind = d.WhichOneof("value")
        if kind == "dim_value":
            # A negative dim_value (paddle2onnx's -1) is an unknown dim: onnx's checker and
            # onnxruntime accept it. An unchanged type is written back as it was read.
            dims.append(d.dim_value if d.dim_value >= 0 else None)
        else:
            dims.append(d.dim_param if kind else None)
    return TensorType(tt.elem_type, tuple(dims))


def type_to_proto(t: TensorType | OpaqueType, out: onnx.TypeProto) -> None:
    if isinstance(t, OpaqueType):
        out.CopyFrom(t.proto)
        return
    tt = out.tensor_type
    tt.elem_type = t.dtype
    if t.shape is not None:
        tt.shape.SetInParent()
        for d in t.shape:
            dim = tt.shape.dim.add()
            if isinstance(d, int):
                if not -(1 << 63) <= d < 1 << 63:
                    raise OnnxForgeError(f"dim {d} of {t} does not fit in int64")
                dim.dim_value = d
            elif isinstance(d, str):
                dim.dim_param = d


# -- reading ---------------------------------------------------------------------------------
@dataclass(slots=True)
class _ValueSource:
    """A value as loaded: unchanged while ``type`` is still the very object and docs match."""

    type: Any
    doc_string: str
    metadata_props: tuple[tuple[str, str], ...]  # a tuple: a value's shared () compares as is

    def unchanged(self, value: Value) -> bool:
        return (
            value.type is self.type
            and value.doc_string == self.doc_string
            and tuple(value.metadata_props) == self.metadata_props
        )


@dataclass(slots=True)
class _GraphSource:
    proto: Any
    inputs: list[tuple[Any, Value]] = field(default_factory=list)
    outputs: list[tuple[Any, Value]] = field(default_factory=list)
    value_info: list[tuple[Any, Value | None]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _AttrSource:
    """What writing an attribute back needs of the one read: its kind, whether the file stated
    the type, its doc_string; the message itself only when the IR holds no value for it."""

    name: str
    kind: int
    has_type: bool
    doc_string: str | None
    proto: AttributeProto | None = None


def _attr_source(a: AttributeProto, kind: int, *, keep: bool) -> _AttrSource:
    """``keep``: carry a copy of the message (an attribute whose value is not modelled)."""
    copy = None
    if keep:
        copy = AttributeProto()
        copy.CopyFrom(a)
    doc = a.doc_string if a.HasField("doc_string") else None
    return _AttrSource(a.name, kind, a.HasField("type"), doc, copy)


@dataclass(frozen=True, slots=True)
class _NodeSource:
    """A node as read, without its NodeProto: the fields the file set (one set to its default
    is set again), its attributes as _AttrSources, and a message of its own holding its
    metadata_props and device_configurations when it has any. Nodes with the same record
    share one. Holding the NodeProtos kept the whole parsed model alive for as long as the
    IR: 450 MiB on a million nodes."""

    present: frozenset[str]
    attribute: tuple[_AttrSource, ...]
    extra: onnx.NodeProto | None = None

    def HasField(self, name: str) -> bool:  # noqa: N802 - asked as a message is (see _set)
        return name in self.present


class _Building:
    """A graph being read: its name table; values and edges go straight into the Graph's
    structures (``Value._producer``, ``Graph._uses``, ``Graph._values``)."""

    def __init__(self, g: Graph, scopes: list[dict[str, Value]]) -> None:
        self.g = g
        self.scopes = scopes
        self.local: dict[str, Value] = {}
        self.values = g._values

    def define(self, name: str) -> Value:
        """A new value of this graph; a second definition of a name stays a separate value
        (verify reports it) and lookups keep finding the first."""
        value = Value(name, _graph=self.g)
        self.values[value] = None
        self.local.setdefault(name, value)
        return value

    def constant(self, name: str) -> Value:
        """The value an initializer fills: its graph input of the same name, or a new one."""
        value = self.local.get(name)
        if value is None or value.const is not None:
            value = self.define(name)
        self.g.initializers.append(value)
        return value

    def lookup(self, name: str) -> Value:
        """This graph's value, else an enclosing graph's (a capture), else a value defined by
        nothing (verify reports it)."""
        value = self.local.get(name)
        if value is None:
            value = _resolve(name, self.scopes)
            if value is None:
                return self.define(name)
            self.values.setdefault(value)
        return value

    def value_info(self, protos: Any, src: _GraphSource) -> None:
        """``protos``: as read; ``src.proto`` holds their copies, which the source keeps."""
        for vi, kept in zip(protos, src.proto.value_info, strict=True):
            value = self.local.get(vi.name)
            if value is not None:
                _take_info(value, vi)
            src.value_info.append((kept, value))

    def finish(self) -> None:
        _seal(self.values)


_Later = tuple[Op, Any, frozenset[str], list[tuple[int, str]]]
"""A node body() finishes in its second pass: the op, its NodeProto when its attributes wait
(else None), the fields it sets, and the (port, name) of its inputs not yet defined."""


class _Reader:
    def __init__(
        self,
        spans: Sequence[Span | None],
        model_path: Path | None,
        node_runs: Sequence[Span] = (),
    ) -> None:
        self.spans = spans
        self.node_runs = node_runs
        self.model_path = model_path
        self.files: dict[str, DataFile] = {}
        self.node_sources: dict[Any, _NodeSource] = {}  # by fields set (and attributes)
        self.field_sets: dict[tuple[Any, ...], frozenset[str]] = {}  # by field descriptors

    # tensors
    def tensor(self, tp: TensorProto, span: Span | None = None, *, copy: bool = True) -> Tensor:
        if copy:
            tp = _copy(tp)
        if tp.data_location == TensorProto.EXTERNAL:
            return Tensor(tp.data_type, tp.dims, span=self.external_span(tp), meta=tp)
        if span is not None:
            return Tensor(tp.data_type, tp.dims, span=span, meta=tp)
        return Tensor(tp.data_type, tp.dims, proto=tp)

    def external_span(self, tp: TensorProto) -> Span:
        where = self.model_path or Path("<in-memory model>")
        if self.model_path is None:
            raise ModelReadError(
                where, f"tensor {tp.name!r} has external data; load the model from its file"
            )
        info = {e.key: e.value for e in tp.external_data}
        file = open_external(self.model_path, info.get("location", ""), tp.name, self.files)
        try:
            offset = int(info.get("offset", 0))
            length = int(info["length"]) if "length" in info else file.size - offset
        except ValueError:
            raise ModelReadError(
                where, f"tensor {tp.name!r}: external offset/length is not a number"
            ) from None
        if offset < 0 or length < 0 or offset + length > file.size:
            raise ModelReadError(
                where,
                f"tensor {tp.name!r}: external data offset {offset} + length {length} "
                f"lies outside "
                f"{file.path.name!r} ({file.size} bytes)",
            )
        expected = Tensor(tp.data_type, tp.dims).nbytes
        if tp.data_type != DType.STRING and expected != length:
            raise ModelReadError(
                where,
                f"tensor {tp.name!r}: external data has {length} bytes, but its type and shape "
                f"need {expected}",
            )
        return Span(file, offset, length)

    def sparse(self, sp: onnx.SparseTensorProto) -> SparseTensor:
        sp = _copy(sp)
        values = self.tensor(sp.values, copy=False)
        return SparseTensor(values, self.tensor(sp.indices, copy=False), tuple(sp.dims), sp)

    # attributes
    def attribute(
        self, a: AttributeProto, scopes: list[dict[str, Value]], graph: Graph, kind: int = 0
    ) -> Any:
        kind = kind or a.type or _kind_of_fields(a)
        if a.ref_attr_name:
            return AttrRef(a.ref_attr_name, kind)
        if kind == _A.FLOAT:
            return a.f
        if kind == _A.INT:
            return a.i
        if kind == _A.STRING:
            return _text(a.s)
        if kind == _A.TENSOR:
            return self.tensor(a.t)
        if kind == _A.GRAPH:  # typed GRAPH without a graph: no value (validation says so)
            return self.graph(a.g, scopes, graph) if a.HasField("g") else None
        if kind == _A.SPARSE_TENSOR:
            return self.sparse(a.sparse_tensor)
        if kind == _A.TYPE_PROTO:
            return OpaqueType(_copy(a.tp), "type_proto")
        if kind == _A.FLOATS:
            return list(a.floats)
        if kind == _A.INTS:
            return list(a.ints)
        if kind == _A.STRINGS:
            return [_text(s) for s in a.strings]
        if kind == _A.TENSORS:
            return [self.tensor(t) for t in a.tensors]
        if kind == _A.GRAPHS:
            return [self.graph(sub, scopes, graph) for sub in a.graphs]
        if kind == _A.SPARSE_TENSORS:
            return [self.sparse(s) for s in a.sparse_tensors]
        if kind == _A.TYPE_PROTOS:
            return [OpaqueType(_copy(t), "type_proto") for t in a.type_protos]
        return None  # an attribute with no value: written back as read

    # graphs
    def graph(
        self,
        gp: onnx.GraphProto,
        scopes: list[dict[str, Value]],
        parent: Graph | None,
        *,
        top: bool = False,
    ) -> Graph:
        g = Graph(gp.name, parent=parent)
        g.doc_string = gp.doc_string
        g.metadata_props = _props(gp.metadata_props)
        src = g._source = _GraphSource(_rest(gp, ("node", "initializer", "sparse_initializer")))
        b = _Building(g, scopes)
        for vi, kept in zip(gp.input, src.proto.input, strict=True):
            value = b.local.get(vi.name) or b.define(vi.name)
            _take_info(value, vi)
            g.inputs.append(value)
            src.inputs.append((kept, value))
        for i, tp in enumerate(gp.initializer):
            span = self.spans[i] if top and i < len(self.spans) else None
            b.constant(tp.name).const = self.tensor(tp, span)
        for sp in gp.sparse_initializer:
            b.constant(sp.values.name).const = self.sparse(sp)
        self.body(b, _run_nodes(self.node_runs) if top and self.node_runs else gp.node)
        b.value_info(gp.value_info, src)
        for vi, kept in zip(gp.output, src.proto.output, strict=True):
            value = b.lookup(vi.name)
            if value._graph is g:
                _take_info(value, vi)
            g.outputs.append(value)
            src.outputs.append((kept, value))
        b.finish()
        return g

    def body(self, b: _Building, node_protos: Any) -> None:
        """Read the nodes of a graph or function body. The hot loop of loading: names are
        looked up inline (a 100k-node graph spent 0.6 s of 1 s here in calls and repeated
        attribute lookups), op types interned (the same few strings a million times).

        One pass reads each node whole, and keeps no NodeProto, so a graph read in chunks
        frees each chunk once read. Only what a later node decides waits for a second pass:
        an input no node before defines (this graph's later node, else an enclosing graph's
        value, else nothing), and the attributes of a node holding subgraphs, which may read
        any value of this graph."""
        g = b.g
        local, values, graph_ops, uses_of = b.local, b.values, g._ops, g._uses
        intern = sys.intern
        field_sets, node_sources = self.field_sets, self.node_sources
        later: list[_Later] = []
        for n in node_protos:
            op_type = n.op_type  # bytes when not UTF-8: validation reports it, so keep it as is
            op = Op(
                intern(op_type) if type(op_type) is str else op_type,
                n.domain,
                n.name,
                overload=n.overload,
                doc_string=n.doc_string,
            )
            op._graph = g
            fields = tuple(map(_first, n.ListFields()))  # see set_fields; in C, 0.3 µs a node less
            present = field_sets.get(fields)  # one per kind of node, not per node
            if present is None:
                present = field_sets[fields] = frozenset(fd.name for fd in fields)
            if "metadata_props" in present:
                op.metadata_props = _props(n.metadata_props)
            outputs: list[Value | None] = []
            for name in n.output:
                if name:
                    value = Value(name, _graph=g, _producer=op)
                    values[value] = None
                    if name not in local:
                        local[name] = value
                    outputs.append(value)
                else:
                    outputs.append(None)
            op._outputs = outputs
            graph_ops[op] = None
            inputs: list[Value | None] = []
            missing: list[tuple[int, str]] = []
            for port, name in enumerate(n.input):
                used = local.get(name) if name else None
                inputs.append(used)
                if used is None:
                    if name:
                        missing.append((port, name))
                    continue
                uses = uses_of.get(used)
                if uses is None:
                    uses_of[used] = [(op, port)]
                else:
                    add_use(uses_of, used, (op, port))
            op._inputs = inputs
            if "attribute" not in present:
                op._source = node_sources.get(present) or self.node_source(present, (), n)
                if missing:
                    later.append((op, None, present, missing))
            elif self.attributes(op, n, present, None) is None:
                later.append((op, n, present, missing))
            elif missing:
                later.append((op, None, present, missing))
        g._holders = None
        if later:
            self.resolve_later(b, later)

    def attributes(
        self, op: Op, n: onnx.NodeProto, present: frozenset[str], scopes: Any
    ) -> Op | None:
        """Read the node's attributes into ``op``; None (nothing read) when one holds a graph
        and ``scopes`` (the names its body may read) is not given yet."""
        kinds = [a.type or _kind_of_fields(a) for a in n.attribute]
        if scopes is None and (_A.GRAPH in kinds or _A.GRAPHS in kinds):
            return None
        attrs, read = op.attrs, []
        for a, kind in zip(n.attribute, kinds, strict=True):
            value = attrs[a.name] = self.attribute(a, scopes, op._graph, kind)  # type: ignore[arg-type]
            read.append(_attr_source(a, kind, keep=value is None))
        op._source = self.node_source(present, tuple(read), n)
        return op

    def resolve_later(self, b: _Building, later: list[_Later]) -> None:
        """The second pass (see body), in node order; the uses it adds are then put in node
        order among the others, as a reader of the graph would list them."""
        g, uses_of = b.g, b.g._uses
        inner_scopes = [*b.scopes, b.local]
        touched: dict[Value, None] = {}
        for op, n, present, missing in later:
            for port, name in missing:
                used = b.lookup(name)
                op._inputs[port] = used
                add_use(uses_of, used, (op, port))
                touched[used] = None
            if n is None:
                continue
            self.attributes(op, n, present, inner_scopes)
            for sub in op.subgraphs():
                sub.owner = op
                for value in sub.captures():
                    key = ("capture", value.name)
                    b.values.setdefault(value)
                    add_use(uses_of, value, (op, key))
                    g._captured.setdefault(op, {})[value] = key
                    touched[value] = None
        position = {op: i for i, op in enumerate(g._ops)} if touched else {}
        for value in touched:
            uses = uses_of[value]
            ordered = sorted(uses, key=lambda use: (position[use[0]], isinstance(use[1], tuple)))
            uses_of[value] = ordered if isinstance(uses, list) else dict.fromkeys(ordered)

    def node_source(
        self, present: frozenset[str], attributes: tuple[_AttrSource, ...], n: onnx.NodeProto
    ) -> _NodeSource:
        """The node's record, shared with every node read with the same one."""
        if "metadata_props" in present or "device_configurations" in present:
            extra = onnx.NodeProto()
            extra.metadata_props.extend(n.metadata_props)
            extra.device_configurations.extend(n.device_configurations)
            return _NodeSource(present, attributes, extra)
        if any(a.proto is not None for a in attributes):
            return _NodeSource(present, attributes)
        key = (present, attributes) if attributes else present
        found = self.node_sources.get(key)
        if found is None:
            found = self.node_sources[key] = _NodeSource(present, attributes)
        return found

    def function(self, fp: onnx.FunctionProto) -> Function:
        g = Graph(fp.name)
        rest = _rest(fp, ("node",))
        g._source = _GraphSource(rest)
        b = _Building(g, [])
        g.inputs = [b.local.get(name) or b.define(name) for name in fp.input]
        self.body(b, fp.node)
        g.outputs = [b.lookup(name) for name in fp.output]
        b.value_info(fp.value_info, g._source)
        b.finish()
        fn = Function(
            fp.name,
            fp.domain,
            g,
            attributes=list(fp.attribute),
            attribute_defaults={a.name: self.attribute(a, [], g) for a in fp.attribute_proto},
            opset_imports={o.domain: o.version for o in fp.opset_import},
            overload=fp.overload,
            doc_string=fp.doc_string,
            metadata_props=_props(fp.metadata_props),
        )
        fn._source = rest
        return fn


def parse_node_run(data: bytes | memoryview) -> onnx.ModelProto:
    """A run of the main graph's node fields (see _wire.split_weights), parsed: the nodes are
    its graph's."""
    part = onnx.ModelProto()
    part.ParseFromString(node_run_model(data))
    return part


def _run_nodes(runs: Sequence[Span]) -> Iterator[onnx.NodeProto]:
    """The main graph's nodes, one run parsed at a time: a run is freed once read."""
    for run in runs:
        part = parse_node_run(run.view())
        yield from part.graph.node


def _resolve(name: str, scopes: list[dict[str, Value]]) -> Value | None:
    for scope in reversed(scopes):
        value = scope.get(name)
        if value is not None:
            return value
    return None


_first = itemgetter(0)


def set_fields(message: Any) -> set[str]:
    """The names of the fields ``message`` sets. Asking an unset repeated message field (a
    node's ``attribute``, ``metadata_props``) for its length makes upb keep an empty stub with
    the message, about 350 bytes each: 350 MB on a million nodes, held by ``op._source``."""
    return {fd.name for fd, _ in message.ListFields()}


def _take_info(value: Value, vi: onnx.ValueInfoProto) -> None:
    """The first ValueInfoProto of a value gives its type and docs."""
    if value._source is not None:
        return
    present = set_fields(vi)
    value.type = type_from_proto(vi.type) if "type" in present else None
    value.doc_string = vi.doc_string
    if "metadata_props" in present:
        value.metadata_props = _props(vi.metadata_props)
    value._source = True  # sealed into a _ValueSource once the graph is read


def _seal(nodes: Iterable[Any]) -> None:
    for node in nodes:
        if isinstance(node, Value) and node._source is True:
            node._source = _ValueSource(node.type, node.doc_string, tuple(node.metadata_props))


_KINDS = (  # (field, kind) of one value, and (field, kind) of a list of them
    (("f", _A.FLOAT), ("floats", _A.FLOATS)),
    (("i", _A.INT), ("ints", _A.INTS)),
    (("s", _A.STRING), ("strings", _A.STRINGS)),
    (("t", _A.TENSOR), ("tensors", _A.TENSORS)),
    (("g", _A.GRAPH), ("graphs", _A.GRAPHS)),
    (("sparse_tensor", _A.SPARSE_TENSOR), ("sparse_tensors", _A.SPARSE_TENSORS)),
    (("tp", _A.TYPE_PROTO), ("type_protos", _A.TYPE_PROTOS)),
)
_LIST_OF: dict[int, int] = {one[1]: many[1] for one, many in _KINDS}
_LIST_KINDS = set(_LIST_OF.values())


def _kind_of_fields(a: AttributeProto) -> int:
    """The kind of an attribute from IR versions before `type` existed."""
    for (name, kind), _ in _KINDS:
        if a.HasField(name):
            return kind
    for _, (name, kind) in _KINDS:
        if len(getattr(a, name)):
            return kind
    return _A.UNDEFINED


RETURN_MEMORY_NODES = 10_000
"""Graphs of at least this many nodes hand their freed parse back to the system once built."""


def return_freed_memory() -> None:
    """Give freed heap pages back to the system. glibc keeps the pages of a freed protobuf
    parse (450 MiB on a million nodes) in its heap, and the IR built meanwhile reuses few of
    them: without this, the parse stayed in the process's resident memory to the end."""
    if not sys.platform.startswith("linux"):
        return
    try:
        trim = ctypes.CDLL(None).malloc_trim  # glibc's; musl has none
    except (OSError, AttributeError):
        return
    trim(0)


def function_from_proto(fp: onnx.FunctionProto) -> Function:
    """A Function from an in-memory FunctionProto (a schema's function body, for instance)."""
    return _Reader([], None).function(fp)


def model_from_proto(
    mp: onnx.ModelProto,
    *,
    spans: Sequence[Span | None] = (),
    model_path: Path | None = None,
    deferred: bool = False,
    node_runs: Sequence[Span] = (),
    keep_nodes: bool = False,
) -> Model:
    """Build a Model; ``spans`` give the file bytes of the main graph's initializers.

    ``deferred``: the graph and functions are built when first used (``Model.built``).
    ``node_runs``: where the main graph's nodes are when ``mp`` was parsed without them.
    ``keep_nodes``: keep them once built (Model._loaded_nodes), unless the model has external
    data (a node written as read would point into the old file's folder).
    """
    reader = _Reader(spans, model_path, node_runs)
    rest = _rest(mp, ("graph", "functions"))  # what the model keeps once its graph is built
    if mp.HasField("graph"):
        rest.graph.SetInParent()
    made: list[Model] = []
    kept: list[tuple[list[Span], int]] = []
    parsed = [mp]  # held here, not by the closure, so building can let it go

    def build() -> tuple[Graph, list[Function]]:
        source = parsed.pop()
        with no_gc():
            graph = reader.graph(source.graph, [], None, top=True)
            functions = [reader.function(fp) for fp in source.functions]
        nodes = len(graph._ops)
        if keep_nodes and node_runs and not reader.files:
            kept.append((list(node_runs), nodes))
        if made:  # deferred: the parsed model is no longer needed
            made[0]._source = rest
            made[0]._source_nodes = None
            made[0]._loaded_nodes = kept[0] if kept else None
        del source
        if nodes >= RETURN_MEMORY_NODES:
            return_freed_memory()
        return graph, functions

    fields: dict[str, Any] = {
        "ir_version": mp.ir_version,
        "opset_imports": {o.domain: o.version for o in mp.opset_import},
        "producer_name": mp.producer_name,
        "producer_version": mp.producer_version,
        "domain": mp.domain,
        "model_version": mp.model_version,
        "doc_string": mp.doc_string,
        "metadata_props": _props(mp.metadata_props),
    }
    if deferred:
        model = Model.deferred(build, **fields)
    else:
        graph, functions = build()
        model = Model(graph, functions=functions, **fields)
        model._loaded_nodes = kept[0] if kept else None
    model.training_info = list(rest.training_info)
    model.configuration = list(rest.configuration)
    model._source = rest if model.built else mp  # an unbuilt model is written from its parse
    if not model.built:
        model._source_nodes = list(node_runs)
    made.append(model)
    return model


# -- writing ---------------------------------------------------------------------------------
class TensorSink:
    """Decides where the bytes of each tensor go when a model is written."""

    def place(self, tensor: Tensor, out: TensorProto, *, initializer: int | None) -> None:
        """Fill ``out``'s data; ``initializer``: index among the main graph's initializers."""
        raise NotImplementedError

    def moves(self, tensor: Tensor, initializer: int | None) -> bool:
        """True when a tensor whose data sits in its proto must be written elsewhere."""
        return False

    def splices(self, initializer: int | None) -> bool:
        """True when a tensor whose raw_data sits in its proto is better written from those
        bytes than copied inside the new proto (which would then be serialized again)."""
        return False


class EmbedSink(TensorSink):
    """Every tensor's bytes inside the proto (the in-memory ModelProto)."""

    def place(self, tensor: Tensor, out: TensorProto, *, initializer: int | None) -> None:
        source = raw_source(tensor)
        if source is None:  # strings
            out.string_data.extend(tensor_from_array(tensor.numpy(), tensor.dtype).string_data)
            return
        buffer = io.BytesIO()
        source.write(buffer)
        out.raw_data = buffer.getvalue()


_DATA_FIELDS = (
    "raw_data",
    "float_data",
    "int32_data",
    "string_data",
    "int64_data",
    "double_data",
    "uint64_data",
    "external_data",
    "data_location",
)


def _tensor_to_proto(
    tensor: Tensor, out: TensorProto, name: str | None, sink: TensorSink, initializer: int | None
) -> None:
    if (
        tensor.proto is not None
        and tensor.proto.HasField("raw_data")
        and sink.splices(initializer)
        and _copy_all_but_raw_data(tensor.proto, out)
    ):
        sink.place(tensor, out, initializer=initializer)  # the bytes, written once
    elif tensor.proto is not None:
        out.CopyFrom(tensor.proto)
        if sink.moves(tensor, initializer):  # its data goes elsewhere: keep the rest
            for data_field in _DATA_FIELDS:
                out.ClearField(data_field)
            sink.place(tensor, out, initializer=initializer)
    else:
        if tensor.meta is not None:
            out.CopyFrom(tensor.meta)
            if out.data_location == TensorProto.EXTERNAL:
                out.ClearField("external_data")
                out.ClearField("data_location")
        else:
            out.data_type = tensor.dtype
            out.dims.extend(tensor.shape)
        sink.place(tensor, out, initializer=initializer)
    if name is not None and name != out.name:
        out.name = name


def _tensor_fields() -> list[tuple[str, str]]:
    """(name, kind) of TensorProto's fields but raw_data; kind: repeated, message or scalar."""
    fields = []
    for fd in TensorProto.DESCRIPTOR.fields:
        kind = "repeated" if _repeated(fd) else "message" if fd.message_type else "scalar"
        if fd.name != "raw_data":
            fields.append((fd.name, kind))
    return fields


_TENSOR_FIELDS = _tensor_fields()


def _copy_all_but_raw_data(src: TensorProto, out: TensorProto) -> bool:
    """Copy every field of ``src`` but raw_data into ``out``, so a weight's bytes are not
    copied into a proto only to be serialized again (ListFields would copy them too); False
    (nothing copied) when ``src`` carries fields this protobuf does not know, which only
    CopyFrom keeps."""
    if unknown_fields is None or len(unknown_fields.UnknownFieldSet(src)):
        return False
    for name, kind in _TENSOR_FIELDS:
        if kind == "repeated":
            values = getattr(src, name)
            if len(values):
                getattr(out, name).extend(values)
        elif src.HasField(name):
            if kind == "message":
                getattr(out, name).CopyFrom(getattr(src, name))
            else:
                setattr(out, name, getattr(src, name))
    return True


def _sparse_to_proto(
    sparse: SparseTensor, out: onnx.SparseTensorProto, name: str | None, sink: TensorSink
) -> None:
    src = sparse._source
    if (
        src is not None
        and sparse.values.proto is src.values
        and sparse.indices.proto is src.indices
    ):
        out.CopyFrom(src)
    else:
        _tensor_to_proto(sparse.values, out.values, None, sink, None)
        _tensor_to_proto(sparse.indices, out.indices, None, sink, None)
        out.dims.extend(sparse.dims)
    if name is not None and name != out.values.name:
        out.values.name = name


def _kind_of_value(value: Any) -> int:
    if isinstance(value, AttrRef):
        return value.kind
    if isinstance(value, bool | int):
        return _A.INT
    if isinstance(value, float):
        return _A.FLOAT
    if isinstance(value, str | bytes):
        return _A.STRING
    if isinstance(value, Tensor):
        return _A.TENSOR
    if isinstance(value, Graph):
        return _A.GRAPH
    if isinstance(value, SparseTensor):
        return _A.SPARSE_TENSOR
    if isinstance(value, OpaqueType | TensorType):
        return _A.TYPE_PROTO
    if isinstance(value, list | tuple):
        if not value:
            return _A.INTS
        single = _kind_of_value(value[0])
        if single == _A.INT and any(map(isinstance, value, repeat(float))):  # in C: 50M ints
            return _A.FLOATS
        return _LIST_OF[single]
    raise OnnxForgeError(f"attribute value {value!r} has no ONNX attribute type")


def _fits(value: Any, kind: int) -> bool:
    if isinstance(value, AttrRef):
        return True
    if isinstance(value, list | tuple):
        if kind not in _LIST_KINDS:
            return False
        return (
            not value
            or _kind_of_value(value) == kind
            or (kind == _A.FLOATS and _kind_of_value(value) == _A.INTS)
        )
    inferred = _kind_of_value(value)
    return inferred == kind or (kind == _A.FLOAT and inferred == _A.INT)


UNANNOTATED_OUTPUTS = frozenset({("ai.onnx.ml", "Normalizer")})
"""Ops whose outputs get no new value_info: onnxruntime (1.31) computes ai.onnx.ml Normalizer
wrongly once the shapes of its input and output are both declared (its memory planner gives
them one buffer and the signs are lost). The type stays known in memory; the file says less."""


def _unannotated(g: Graph, value: Value) -> bool:
    producer = g.producer(value)
    return producer is not None and (producer.domain, producer.op_type) in UNANNOTATED_OUTPUTS


SPILL_EVERY = 4096
"""Nodes and value_info entries of the main graph held as messages before they are encoded
(see _Writer.spill)."""
_GRAPH_VALUE_INFO = 13  # GraphProto's field number
_SHORT_HEADERS = {
    number: [field_header(number, size) for size in range(0x80)]
    for number in (1, _GRAPH_VALUE_INFO)
}
"""The one-byte tag and length of a field number's short payloads, made once."""


@dataclass(slots=True)
class Spill:
    """The main graph's nodes and value_info, encoded as GraphProto fragments (see
    _Writer.spill). Two lists: the graph's other fields go between them in field-number
    order (name and initializers after the nodes; doc_string, input, output before the
    value_info)."""

    node: list[Encoded] = field(default_factory=list)
    value_info: list[Encoded] = field(default_factory=list)


class _Writer:
    def __init__(
        self,
        sink: TensorSink,
        spill: Spill | None = None,
        nodes_as_read: list[memoryview] | None = None,
    ) -> None:
        self.sink = sink
        self.nodes_as_read = nodes_as_read
        """The main graph's nodes, encoded as read (see nodes_as_read), to go to ``spill``."""
        self.types: dict[TensorType, onnx.TypeProto] = {}
        self.typed_info: dict[TensorType, bytes] = {}
        """Per type, the encoded ``type`` field of a ValueInfoProto (see typed_value_info)."""
        self.spill = spill
        """When given: the main graph's nodes and value_info go there as encoded GraphProto
        fragments every SPILL_EVERY entries instead of staying in the ModelProto (protobuf
        concatenation is merging, so the fragments and the rest make up the graph). A
        million-node graph's messages took 600 MB more than its encoding."""

    def type(self, t: TensorType | OpaqueType, out: onnx.TypeProto) -> None:
        """Write a type, copying the proto of an equal one written before (a 100k-op chain
        has one type: building 100k TypeProtos dim by dim was a third of saving it)."""
        if isinstance(t, OpaqueType):
            type_to_proto(t, out)
            return
        made = self.types.get(t)
        if made is None:
            made = self.types[t] = onnx.TypeProto()
            type_to_proto(t, made)
        out.CopyFrom(made)

    def attribute(
        self, out: AttributeProto, name: str, value: Any, orig: _AttrSource | None
    ) -> None:
        if value is None and orig is not None and orig.proto is not None:
            out.CopyFrom(orig.proto)
            return
        out.name = name
        kind = orig.kind if orig is not None else 0
        if not kind or not _fits(value, kind):
            kind = _kind_of_value(value)
            orig = None
        if orig is None or orig.has_type:
            out.type = kind  # type: ignore[assignment]  # an AttributeType number
        if orig is not None and orig.doc_string is not None:
            out.doc_string = orig.doc_string
        if isinstance(value, AttrRef):
            out.ref_attr_name = value.name
            return
        if kind == _A.FLOAT:
            out.f = value
        elif kind == _A.INT:
            out.i = value
        elif kind == _A.STRING:
            out.s = _bytes(value)
        elif kind == _A.TENSOR:
            _tensor_to_proto(value, out.t, None, self.sink, None)
        elif kind == _A.GRAPH:
            self.graph(value, out.g)
        elif kind == _A.SPARSE_TENSOR:
            _sparse_to_proto(value, out.sparse_tensor, None, self.sink)
        elif kind == _A.TYPE_PROTO:
            type_to_proto(value, out.tp)
        elif kind == _A.FLOATS:
            out.floats.extend(value)
        elif kind == _A.INTS:
            out.ints.extend(value)
        elif kind == _A.STRINGS:
            out.strings.extend(_bytes(s) for s in value)
        elif kind == _A.TENSORS:
            for t in value:
                _tensor_to_proto(t, out.tensors.add(), None, self.sink, None)
        elif kind == _A.GRAPHS:
            for g in value:
                self.graph(g, out.graphs.add())
        elif kind == _A.SPARSE_TENSORS:
            for s in value:
                _sparse_to_proto(s, out.sparse_tensors.add(), None, self.sink)
        elif kind == _A.TYPE_PROTOS:
            for t in value:
                type_to_proto(t, out.type_protos.add())

    def node(self, op: Op, n: onnx.NodeProto) -> None:
        src: _NodeSource | None = op._source
        n.input.extend([v.name if v is not None else "" for v in op._inputs])
        n.output.extend([v.name if v is not None else "" for v in op._outputs])
        _set(n, src, "name", op.name)
        n.op_type = op.op_type
        _set(n, src, "domain", op.domain)
        _set(n, src, "overload", op.overload)
        _set(n, src, "doc_string", op.doc_string)
        present = src.present if src is not None else frozenset()
        if op.attrs:
            origs = {a.name: a for a in src.attribute} if src is not None else {}
            for key, value in op.attrs.items():
                self.attribute(n.attribute.add(), key, value, origs.get(key))
        extra = src.extra if src is not None else None
        if op.metadata_props or "metadata_props" in present:
            _write_props(
                n.metadata_props,
                op.metadata_props,
                extra.metadata_props if extra is not None else None,
            )
        if extra is not None and "device_configurations" in present:
            n.device_configurations.extend(extra.device_configurations)

    def value_info(self, value: Value, out: onnx.ValueInfoProto, vi: Any) -> None:
        src = value._source
        if vi is not None and isinstance(src, _ValueSource) and src.unchanged(value):
            out.CopyFrom(vi)
            if out.name != value.name:
                out.name = value.name
            return
        out.name = value.name
        if value.type is not None:
            self.type(value.type, out.type)
        _set(out, vi, "doc_string", value.doc_string)
        if value.metadata_props:
            _write_props(
                out.metadata_props,
                value.metadata_props,
                vi.metadata_props if vi is not None else None,
            )

    def ops_in_order(self, g: Graph) -> list[Op]:
        return g.topo_order()  # kept by the graph; the stored order when that is sorted

    def graph(self, g: Graph, gp: onnx.GraphProto, *, top: bool = False) -> None:
        src: _GraphSource | None = g._source
        sp = src.proto if src is not None else None
        spill = self.spill if top else None
        if spill is not None and self.nodes_as_read is not None:
            spill.node.extend(self.nodes_as_read)
        else:
            nodes = _Spiller(gp, "node", spill.node if spill is not None else None)
            for op in self.ops_in_order(g):
                self.node(op, nodes.add())
            nodes.flush()
        _set(gp, sp, "name", g.name)
        dense = 0
        for value in g.initializers:
            if isinstance(value.const, SparseTensor):
                _sparse_to_proto(value.const, gp.sparse_initializer.add(), value.name, self.sink)
            elif value.const is not None:
                index = dense if top else None
                _tensor_to_proto(value.const, gp.initializer.add(), value.name, self.sink, index)
                dense += 1
        _set(gp, sp, "doc_string", g.doc_string)
        self.interface(g.inputs, gp.input, src.inputs if src else [])
        self.interface(g.outputs, gp.output, src.outputs if src else [])
        infos = _Spiller(gp, "value_info", spill.value_info if spill is not None else None)
        typed: list[Value] = []
        self.all_value_info(g, infos.add, src, typed)
        infos.flush()
        for chunk in self.typed_value_info(typed):
            if spill is not None:
                spill.value_info.append(chunk)
            else:
                gp.MergeFromString(chunk)  # merging appends to value_info
        if sp is not None and len(sp.quantization_annotation):
            gp.quantization_annotation.extend(sp.quantization_annotation)
        if g.metadata_props or (sp is not None and len(sp.metadata_props)):
            _write_props(
                gp.metadata_props, g.metadata_props, sp.metadata_props if sp is not None else None
            )

    def interface(self, values: list[Value], out: Any, loaded: list[tuple[Any, Value]]) -> None:
        for i, value in enumerate(values):
            vi = loaded[i][0] if i < len(loaded) and loaded[i][1] is value else None
            self.value_info(value, out.add(), vi)

    def all_value_info(
        self,
        g: Graph,
        add: Callable[[], onnx.ValueInfoProto],
        src: _GraphSource | None,
        typed: list[Value] | None = None,
    ) -> None:
        """Loaded entries in their order (dropped with their value), then newly typed values;
        ``add`` gives each a new ValueInfoProto. ``typed``: where the new entries that are a
        name and a tensor type alone go instead, for typed_value_info to encode."""
        written: set[Value] = set()
        for vi, value in src.value_info if src else []:
            if value is None:
                add().CopyFrom(vi)
            elif value in g._values and value not in written:
                self.value_info(value, add(), vi)
                written.add(value)
        interface = set(g.inputs) | set(g.outputs)
        for value in g.values():
            if (
                value.type is not None
                and value not in written
                and value not in interface
                and value._graph is g
                and not isinstance(value._source, _ValueSource)
                and not _unannotated(g, value)
            ):
                if (
                    typed is not None
                    and type(value.type) is TensorType
                    and not value.doc_string
                    and not value.metadata_props
                ):
                    typed.append(value)
                else:
                    self.value_info(value, add(), None)

    def typed_value_info(self, values: list[Value]) -> Iterator[bytes]:
        """GraphProto fragments of value_info entries, a name and a tensor type each, encoded
        here every SPILL_EVERY entries: the type's encoding is made once per distinct type,
        and no message is made per value (a message per entry was half of writing the 100k
        chain's graph). Within a fragment a type object is looked up by identity first:
        hashing TensorType (in Python) was a third of the rest."""
        made = self.typed_info
        names, entries = _SHORT_HEADERS[1], _SHORT_HEADERS[_GRAPH_VALUE_INFO]
        for first in range(0, len(values), SPILL_EVERY):
            chunk = []
            seen: dict[int, bytes] = {}  # id -> encoding; the values hold their types meanwhile
            for value in values[first : first + SPILL_EVERY]:
                t = value.type
                typed = seen.get(id(t))
                if typed is None:
                    typed = made.get(t)  # type: ignore[arg-type]
                    if typed is None:
                        proto = onnx.TypeProto()
                        self.type(t, proto)  # type: ignore[arg-type]
                        encoded = proto.SerializeToString()
                        typed = made[t] = field_header(2, len(encoded)) + encoded  # type: ignore[index]
                    seen[id(t)] = typed
                name = value.name.encode()
                size = len(name)
                entry = (names[size] if size < 0x80 else field_header(1, size)) + name + typed
                size = len(entry)
                header = entries[size] if size < 0x80 else field_header(_GRAPH_VALUE_INFO, size)
                chunk.append(header + entry)
            yield b"".join(chunk)

    def function(self, fn: Function, fp: onnx.FunctionProto) -> None:
        src = fn._source
        fp.name = fn.name
        fp.input.extend(v.name for v in fn.graph.inputs)
        fp.output.extend(v.name for v in fn.graph.outputs)
        fp.attribute.extend(fn.attributes)
        origs = (
            {
                a.name: _attr_source(a, a.type or _kind_of_fields(a), keep=True)
                for a in src.attribute_proto
            }
            if src is not None
            else {}
        )
        for key, value in fn.attribute_defaults.items():
            self.attribute(fp.attribute_proto.add(), key, value, origs.get(key))
        # A FunctionProto has no initializers: a constant a pass gave the body (fuse-bias-add's
        # new bias) is written as the Constant op it stands for, not dropped.
        for value in fn.graph.initializers:
            if value.const is None or value in fn.graph.inputs:
                continue
            node = fp.node.add(op_type="Constant", output=[value.name])
            attr = node.attribute.add(name="value", type=onnx.AttributeProto.TENSOR)
            if isinstance(value.const, SparseTensor):
                attr.name, attr.type = "sparse_value", onnx.AttributeProto.SPARSE_TENSOR
                _sparse_to_proto(value.const, attr.sparse_tensor, None, self.sink)
            else:
                _tensor_to_proto(value.const, attr.t, None, self.sink, None)
        for op in self.ops_in_order(fn.graph):
            self.node(op, fp.node.add())
        _set(fp, src, "doc_string", fn.doc_string)
        if src is not None and _opsets(src.opset_import) == fn.opset_imports:
            fp.opset_import.extend(src.opset_import)
        else:
            _write_opsets(fp.opset_import, fn.opset_imports)
        _set(fp, src, "domain", fn.domain)
        _set(fp, src, "overload", fn.overload)
        self.all_value_info(fn.graph, fp.value_info.add, fn.graph._source)
        if fn.metadata_props or (src is not None and len(src.metadata_props)):
            _write_props(fp.metadata_props, fn.metadata_props, src.metadata_props if src else None)


class _Spiller:
    """New entries of one repeated field of ``gp``; with ``spill`` a list, they are encoded into
    it every SPILL_EVERY entries instead. Each batch is a message of its own: clearing a field
    keeps its memory in the message's arena, dropping the message frees it."""

    def __init__(self, gp: onnx.GraphProto, field: str, spill: list[Encoded] | None) -> None:
        self.spill, self.field = spill, field
        self._hold(gp if spill is None else onnx.GraphProto())

    def _hold(self, held: onnx.GraphProto) -> None:
        self.held, self.count = held, 0
        self._add = getattr(held, self.field).add  # once per batch, not once per entry

    def add(self) -> Any:
        if self.spill is not None and self.count >= SPILL_EVERY:  # the last entry is complete
            self.flush()
        self.count += 1
        return self._add()

    def flush(self) -> None:
        if self.spill is not None and self.count:
            self.spill.append(self.held.SerializeToString())
            self._hold(onnx.GraphProto())


def _opsets(entries: Any) -> dict[str, int]:
    return {o.domain: o.version for o in entries}


def _write_opsets(out: Any, opsets: dict[str, int]) -> None:
    for domain, version in opsets.items():
        entry = out.add()
        entry.domain, entry.version = domain, version


def nodes_as_read(model: Model) -> list[memoryview] | None:
    """The main graph's nodes as the file has them, when the model kept them (load's
    ``keep_nodes``) and its graph still has the ops read, in their order, none holding a
    subgraph (whose body's new value_info would be lost). Writing them is free; encoding a
    million ops took 1.5 s of `infer`'s write (3.1 s)."""
    kept = model._loaded_nodes
    if kept is None or not model.built:
        return None
    runs, count = kept
    g = model.graph
    ops = g._ops
    if len(ops) != count or len(list(islice(walk_graphs(g), 2))) > 1:
        return None
    if any(a is not b for a, b in zip(g.topo_order(), ops, strict=True)):
        return None
    return [run.view() for run in runs]


def _written_ir_version(model: Model) -> int:
    """The model's IR version, or 4 where an IR < 4 model holds an initializer that is not a
    graph input (IR 3 has none: a pass that folded a constant or fused a weight made one),
    since onnx's checker and converters hold IR 3 to that rule. A model whose graph was never
    built is written as read."""
    version = model.ir_version
    if version >= 4 or not model.built:
        return version
    inputs = {v.name for v in model.graph.inputs}
    if any(v.name not in inputs for v in model.graph.initializers):
        return 4
    return version


def model_to_proto(
    model: Model,
    sink: TensorSink | None = None,
    *,
    source_graph: bool = False,
    spill: Spill | None = None,
) -> onnx.ModelProto:
    """Build a ModelProto; ``sink`` places tensor bytes (default: embedded).

    ``source_graph``: a model whose graph was never built gets no graph field (the caller
    writes the loaded one) and its loaded functions. ``spill``: the main graph's nodes and
    value_info go there encoded, not into the proto (see _Writer.spill); its nodes as read
    when nodes_as_read finds them.
    """
    reused = nodes_as_read(model) if spill is not None else None
    writer = _Writer(sink or EmbedSink(), spill, reused)
    src = model._source
    unbuilt = source_graph and not model.built
    mp = onnx.ModelProto()
    _set(mp, src, "ir_version", _written_ir_version(model))
    if (
        src is not None
        and _opsets(src.opset_import) == model.opset_imports
        and len(src.opset_import) == len(model.opset_imports)
    ):
        mp.opset_import.extend(src.opset_import)
    else:
        _write_opsets(mp.opset_import, model.opset_imports)
    _set(mp, src, "producer_name", model.producer_name)
    _set(mp, src, "producer_version", model.producer_version)
    _set(mp, src, "domain", model.domain)
    _set(mp, src, "model_version", model.model_version)
    _set(mp, src, "doc_string", model.doc_string)
    if unbuilt:
        pass  # io.save writes the source graph itself
    elif src is None or src.HasField("graph"):
        writer.graph(model.graph, mp.graph, top=True)
    if model.metadata_props or (src is not None and len(src.metadata_props)):
        _write_props(mp.metadata_props, model.metadata_props, src.metadata_props if src else None)
    mp.training_info.extend(model.training_info)
    if unbuilt:
        mp.functions.extend(src.functions)
    else:
        for fn in model.functions:
            writer.function(fn, mp.functions.add())
    mp.configuration.extend(model.configuration)
    return mp
