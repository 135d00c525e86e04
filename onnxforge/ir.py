"""The in-memory model: ops and values as a bipartite graph (readable as a
networkx.MultiDiGraph), tensors without copies.

An edge ``value -> op`` is keyed by the input port, an edge ``op -> value`` by the output
port; an op that reads an outer-scope value inside one of its subgraphs gets an extra edge
``value -> op`` keyed ``("capture", name)``, so that dead-code
elimination and topological order see the use. Nothing here imports onnx: protobuf lives in
``onnxforge.io``, and the ``_source`` fields below are io's bookkeeping for lossless writes.
"""

from __future__ import annotations

__all__ = [
    "SMALL_USES",
    "Uses",
    "add_use",
    "no_gc",
    "AttrRef",
    "DType",
    "Dim",
    "FileSpan",
    "Function",
    "Graph",
    "Model",
    "Op",
    "OpaqueType",
    "OrderedValues",
    "Shape",
    "SparseTensor",
    "SymDim",
    "Tensor",
    "TensorCodec",
    "TensorType",
    "UnknownDim",
    "Value",
    "constant_tensor",
    "edit_mark",
    "journal",
    "problems",
    "verify",
    "walk_graphs",
]

import contextlib
import enum
import gc
import heapq
import itertools
import logging
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import numpy as np

from onnxforge.errors import InvalidModelError, OnnxForgeError

if TYPE_CHECKING:
    import mmap

    import networkx as nx

logger = logging.getLogger(__name__)


class DType(enum.IntEnum):
    """ONNX element types, numbered as TensorProto.DataType."""

    UNDEFINED = 0
    FLOAT = 1
    UINT8 = 2
    INT8 = 3
    UINT16 = 4
    INT16 = 5
    INT32 = 6
    INT64 = 7
    STRING = 8
    BOOL = 9
    FLOAT16 = 10
    DOUBLE = 11
    UINT32 = 12
    UINT64 = 13
    COMPLEX64 = 14
    COMPLEX128 = 15
    BFLOAT16 = 16
    FLOAT8E4M3FN = 17
    FLOAT8E4M3FNUZ = 18
    FLOAT8E5M2 = 19
    FLOAT8E5M2FNUZ = 20
    UINT4 = 21
    INT4 = 22
    FLOAT4E2M1 = 23
    FLOAT8E8M0 = 24
    UINT2 = 25
    INT2 = 26
    FLOAT6E2M3 = 27
    FLOAT6E3M2 = 28

    @property
    def bits(self) -> int | None:
        """Bits per element in raw_data; None for STRING and UNDEFINED."""
        return _BITS.get(self)

    @property
    def numpy(self) -> np.dtype | None:
        """The numpy dtype that reads raw_data directly, or None (packed or exotic types)."""
        return _NUMPY.get(self)


_NUMPY: dict[DType, np.dtype] = {
    DType.FLOAT: np.dtype("<f4"),
    DType.UINT8: np.dtype("u1"),
    DType.INT8: np.dtype("i1"),
    DType.UINT16: np.dtype("<u2"),
    DType.INT16: np.dtype("<i2"),
    DType.INT32: np.dtype("<i4"),
    DType.INT64: np.dtype("<i8"),
    DType.BOOL: np.dtype("?"),
    DType.FLOAT16: np.dtype("<f2"),
    DType.DOUBLE: np.dtype("<f8"),
    DType.UINT32: np.dtype("<u4"),
    DType.UINT64: np.dtype("<u8"),
    DType.COMPLEX64: np.dtype("<c8"),
    DType.COMPLEX128: np.dtype("<c16"),
}
_BITS: dict[DType, int] = {
    **{d: dt.itemsize * 8 for d, dt in _NUMPY.items()},
    DType.BFLOAT16: 16,
    DType.FLOAT8E4M3FN: 8,
    DType.FLOAT8E4M3FNUZ: 8,
    DType.FLOAT8E5M2: 8,
    DType.FLOAT8E5M2FNUZ: 8,
    DType.FLOAT8E8M0: 8,
    DType.UINT4: 4,
    DType.INT4: 4,
    DType.FLOAT4E2M1: 4,
    DType.UINT2: 2,
    DType.INT2: 2,
    DType.FLOAT6E2M3: 8,
    DType.FLOAT6E3M2: 8,
}

SymDim = str
"""A symbolic dimension: a name the model gave (``batch``, ``unk__214``, ``p2o.Dim.0``, any
string) or an expression over such names (``N+M``)."""


class UnknownDim(str):
    """A dim nothing is known about, named by shape inference (``unk__3``) so that the values
    that share it stay equal. A distinct kind, not a spelling: a model's own ``unk__214`` is a
    plain ``str`` and a real symbol. An ``UnknownDim`` enters arithmetic like any symbol (it is
    one fixed size, only unknown ahead), but broadcasting takes it as possibly 1 where a named
    dim is assumed to match (``broadcast.py``). Written out it is
    a plain ``dim_param``, read back a symbol like any other."""

    __slots__ = ()


Dim = int | SymDim | None
"""A dimension: static (int), symbolic (str; an ``UnknownDim`` when inference named an unknown)
or unknown (None)."""
Shape = tuple[Dim, ...]


def dtype_name(dtype: int) -> str:
    """``FLOAT`` for 1; the number itself for a code this onnxforge does not know."""
    try:
        return DType(dtype).name
    except ValueError:
        return f"dtype({dtype})"


@dataclass(frozen=True, slots=True)
class TensorType:
    """Element type and shape of a tensor value; ``shape`` None means the rank is unknown."""

    dtype: int
    shape: Shape | None = None

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)

    def __str__(self) -> str:
        dims = (
            "?"
            if self.shape is None
            else ",".join("?" if d is None else str(d) for d in self.shape)
        )
        return f"{dtype_name(self.dtype).lower()}[{dims}]"


@dataclass(frozen=True, slots=True, eq=False)
class OpaqueType:
    """A type carried as it was read but not modelled (sequence, map, optional, sparse,
    denotations): the TypeProto itself. Shape inference treats it as unknown."""

    proto: Any
    kind: str

    def __str__(self) -> str:
        return self.kind.removesuffix("_type")


class FileSpan(Protocol):
    """Bytes of a tensor inside an open file: embedded raw_data of the model or external data.

    Implemented by onnxforge.io; holding a span keeps its file open, so the bytes stay valid
    even when the path is replaced (a model saved over its own input).
    """

    @property
    def offset(self) -> int: ...
    @property
    def length(self) -> int: ...
    def buffer(self) -> mmap.mmap | memoryview: ...
    def read(self) -> bytes: ...


class TensorCodec(Protocol):
    """What onnx knows of tensor data and numpy cannot do alone; onnxforge.io provides it."""

    def decode(self, tensor: Tensor) -> np.ndarray: ...
    def dtype_of_numpy(self, np_dtype: np.dtype) -> int: ...


class Tensor:
    """A constant's dtype, shape and data, wherever the data lives.

    Nothing here copies: ``size``, ``nbytes`` and ``shape`` do no IO, and ``numpy()`` returns a
    read-only view of the file (``span``), the decoded proto (``proto``) or the array a kernel
    made. ``meta`` is the TensorProto without data (name, doc, metadata) for lossless writes.
    """

    __slots__ = ("_array", "dtype", "meta", "proto", "shape", "span")
    codec: ClassVar[TensorCodec | None] = None
    """Set by onnxforge.io, the only maker of tensors whose data numpy cannot view (typed proto
    fields, packed and ml_dtypes types): the ground does not import the floor above it."""

    def __init__(
        self,
        dtype: int,
        shape: Sequence[int],
        *,
        array: np.ndarray | None = None,
        span: FileSpan | None = None,
        proto: Any = None,
        meta: Any = None,
    ) -> None:
        self.dtype = int(dtype)
        self.shape = tuple(int(d) for d in shape)
        self._array = array
        self.span = span
        self.proto = proto
        self.meta = meta

    @classmethod
    def from_numpy(cls, array: np.ndarray, dtype: int | None = None) -> Tensor:
        """Wrap a kernel's result; the dtype comes from numpy unless given (bfloat16, ...)."""
        if dtype is None:
            dtype = _dtype_of_numpy(array.dtype)
        return cls(dtype, array.shape, array=array)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        """Bytes of the data as ONNX stores it (packed for 4-bit types); strings count 0."""
        if self.span is not None:
            return self.span.length
        bits = _BITS.get(self.dtype)  # type: ignore[call-overload]
        return 0 if bits is None else (self.size * bits + 7) // 8

    def numpy(self) -> np.ndarray:
        """The data as a numpy array: a read-only view where it lies in a file."""
        if self._array is not None:
            return self._array
        np_dtype = _NUMPY.get(self.dtype)  # type: ignore[call-overload]
        if self.span is not None and np_dtype is not None:
            if self.span.length != self.size * np_dtype.itemsize:
                raise OnnxForgeError(
                    f"tensor data is {self.span.length} bytes, but {dtype_name(self.dtype)}"
                    f"{list(self.shape)} needs {self.size * np_dtype.itemsize}"
                )
            return np.frombuffer(
                self.span.buffer(), np_dtype, count=self.size, offset=self.span.offset
            ).reshape(self.shape)
        self._array = _codec().decode(self)
        return self._array

    def __repr__(self) -> str:
        where = "array" if self._array is not None else "file" if self.span else "proto"
        return f"Tensor({dtype_name(self.dtype)}, {list(self.shape)}, {where})"


def _dtype_of_numpy(np_dtype: np.dtype) -> int:
    for d, dt in _NUMPY.items():
        if dt == np_dtype.newbyteorder("<") or dt == np_dtype:
            return int(d)
    if np_dtype.kind in "OUS":
        return int(DType.STRING)
    return _codec().dtype_of_numpy(np_dtype)


def _codec() -> TensorCodec:
    if Tensor.codec is None:  # io sets it on import, and `import onnxforge` imports io
        raise OnnxForgeError("onnxforge.io is not imported: it decodes tensor data")
    return Tensor.codec


@dataclass(eq=False, slots=True)
class SparseTensor:
    """A sparse constant (COO): ``values`` and ``indices`` tensors and the dense ``dims``."""

    values: Tensor
    indices: Tensor
    dims: tuple[int, ...]
    _source: Any = field(default=None, repr=False)

    @property
    def dtype(self) -> int:
        return self.values.dtype

    @property
    def nbytes(self) -> int:
        """The bytes stored (values and indices), as ``Tensor.nbytes`` for progress and sizes."""
        return self.values.nbytes + self.indices.nbytes

    def numpy(self) -> np.ndarray:
        """The dense array."""
        dense = np.zeros(self.dims, dtype=self.values.numpy().dtype)
        idx = self.indices.numpy()
        flat = idx if idx.ndim == 1 else np.ravel_multi_index(idx.T, self.dims)
        dense.reshape(-1)[flat] = self.values.numpy().reshape(-1)
        return dense


@dataclass(frozen=True, slots=True)
class AttrRef:
    """An attribute of a function body's node that refers to the function's attribute ``name``."""

    name: str
    kind: int  # AttributeProto.AttributeType of the referenced attribute


AttrValue = Any
"""int, float, str, bytes, Tensor, SparseTensor, Graph, OpaqueType, AttrRef or a list of those."""
CaptureKey = tuple[str, str]
"""``("capture", name)``: the key of the edge from an outer value to the op whose subgraph
reads it."""
Key = int | CaptureKey
"""An edge's key: the input port, or a capture."""


@dataclass(eq=False, slots=True)
class Value:
    """A named tensor (or other value) of a graph; identity-hashed (a dict key, a networkx
    node). ``_producer`` is its one incoming edge, kept by Graph (its uses are the
    graph's ``_uses``)."""

    name: str
    type: TensorType | OpaqueType | None = None
    const: Tensor | SparseTensor | None = None
    doc_string: str = ""
    metadata_props: Sequence[tuple[str, str]] = ()  # shared when empty: most have none
    _graph: Graph | None = field(default=None, repr=False)
    _source: Any = field(default=None, repr=False)
    _producer: Op | None = field(default=None, repr=False)
    _inferred: Any = field(default=None, repr=False)
    """The type the model's last cached inference gave it (``passes._rewrite.inference``)."""

    @property
    def graph(self) -> Graph | None:
        """The graph that defines this value."""
        return self._graph

    def __repr__(self) -> str:
        return f"Value({self.name!r}, {self.type})"


@dataclass(eq=False, slots=True)
class Op:
    """One node: ``Op(op_type, domain="", name="", attrs={})``; attrs may hold a Graph."""

    op_type: str
    domain: str = ""
    name: str = ""
    attrs: dict[str, AttrValue] = field(default_factory=dict)
    overload: str = ""
    doc_string: str = ""
    metadata_props: Sequence[tuple[str, str]] = ()  # shared when empty: most have none
    _inputs: list[Value | None] = field(default_factory=list, repr=False)
    _outputs: list[Value | None] = field(default_factory=list, repr=False)
    _graph: Graph | None = field(default=None, repr=False)
    _source: Any = field(default=None, repr=False)
    _stamp: int = field(default=0, repr=False)
    """The edit clock when an edit last touched the op (``edit_mark``); 0: never."""

    def attr(self, key: str, default: AttrValue = None) -> Any:
        """The attribute's value, or ``default`` when the node does not set it."""
        value = self.attrs.get(key)
        return default if value is None else value

    def subgraphs(self) -> Iterator[Graph]:
        """The graphs held in attributes (If branches, Loop/Scan bodies)."""
        for value in self.attrs.values():
            if isinstance(value, Graph):
                yield value
            elif isinstance(value, list) and value and isinstance(value[0], Graph):
                yield from value  # a list attribute holds one kind (GRAPHS; not INTS)

    def reads(self) -> list[Value]:
        """The values this op reads: its inputs, then what its bodies capture."""
        found = [v for v in self._inputs if v is not None]
        for sub in self.subgraphs():
            found += sub.captures()
        return found

    def describe(self) -> str:
        """``Sub 'node_3'`` for messages."""
        kind = f"{self.domain}::{self.op_type}" if self.domain else self.op_type
        return f"{kind} {self.name!r}" if self.name else f"{kind} (unnamed)"

    def __repr__(self) -> str:
        return f"Op({self.describe()})"


class OrderedValues:
    """Values in order, with constant-time membership and removal: a graph's initializers.

    A list made folding quadratic: densenet121's 1,900 folded or merged weights each rebuilt
    a 1,700-entry list (80 ms) and each ``in`` test scanned it.
    """

    __slots__ = ("_items",)

    def __init__(self, values: Iterable[Value] = ()) -> None:
        self._items: dict[Value, None] = dict.fromkeys(values)

    def append(self, value: Value) -> None:
        self._items[value] = None

    def extend(self, values: Iterable[Value]) -> None:
        self._items.update(dict.fromkeys(values))

    def remove(self, value: Value) -> None:
        del self._items[value]

    def __contains__(self, value: object) -> bool:
        return value in self._items

    def __iter__(self) -> Iterator[Value]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __getitem__(self, index: int) -> Value:
        return list(self._items)[index]

    def __repr__(self) -> str:
        return f"OrderedValues({list(self._items)!r})"


class Graph:
    """A (sub)graph: ops and values with their edges, plus the graph's ordered interface.

    The edges live in plain structures: ``op._inputs`` / ``op._outputs`` by port,
    ``value._producer``, and ``graph._uses[value]``, the (op, key) pairs of its uses in this
    graph (key: the input port, or ``("capture", name)`` for a value an op's subgraph reads).
    ``nx`` gives the same graph as a networkx.MultiDiGraph to read (made on demand, kept until
    the next edit). A profile of a 100k-node graph found networkx's three dicts per node and
    two per edge to be most of building time and of memory (4.7 KB a node); these structures
    keep what passes ask for.
    """

    def __init__(self, name: str = "", *, parent: Graph | None = None) -> None:
        self.name = name
        self.doc_string = ""
        self.metadata_props: list[tuple[str, str]] = []
        self.inputs: list[Value] = []
        self.outputs: list[Value] = []
        self.initializers = OrderedValues()
        self.parent = parent
        self.owner: Op | None = None
        self._ops: dict[Op, None] = {}
        self._values: dict[Value, None] = {}  # defined or used here, in creation order
        self._uses: dict[Value, Uses] = {}  # (op, key) of each use, per used value
        self._captured: dict[Op, dict[Value, CaptureKey]] = {}  # holder op -> outer values
        self._holders: list[Op] | None = None  # ops holding subgraphs; None: not yet known
        self._source: Any = None
        self._names: set[str] | None = None  # fresh_name's record of the model's names
        self._order: list[Op] | None = None  # topo_order's last answer, until an edit
        self._order_lost: bool = False  # ops were removed since: filter, no need to sort
        self._nx: nx.MultiDiGraph | None = None  # the networkx view, until an edit

    # -- reading ---------------------------------------------------------------------------
    @property
    def nx(self) -> nx.MultiDiGraph:
        """This graph as a networkx.MultiDiGraph (values and ops as nodes, edges keyed by
        port or ``("capture", name)``), to read: made on first use after an edit."""
        if self._nx is None:
            import networkx  # noqa: PLC0415  (75 ms to import; only readers of .nx need it)

            g = networkx.MultiDiGraph()
            g.add_nodes_from(self._values)
            g.add_nodes_from(self._ops)
            for op in self._ops:
                for port, value in enumerate(op._outputs):
                    if value is not None:
                        g.add_edge(op, value, key=port)
            for value, uses in self._uses.items():
                for op, key in uses:
                    g.add_edge(value, op, key=key)
            self._nx = g
        return self._nx

    @property
    def ops(self) -> list[Op]:
        """Ops in stored order (the file's, then additions); see topo_order()."""
        return list(self._ops)

    def __len__(self) -> int:
        return len(self._ops)

    def values(self) -> Iterator[Value]:
        """Values this graph defines or uses, captured ones included, in creation order."""
        return iter(self._values)

    def __contains__(self, item: object) -> bool:
        """An op or value of this graph (a captured outer value included)."""
        return item in self._values or item in self._ops

    def inputs_of(self, op: Op) -> list[Value | None]:
        """Input values by port; None marks an omitted optional input."""
        return list(op._inputs)

    def outputs_of(self, op: Op) -> list[Value | None]:
        """Output values by port; None marks an omitted optional output."""
        return list(op._outputs)

    def producer(self, value: Value) -> Op | None:
        """The op of this graph that produces ``value``, if any."""
        op = value._producer
        return op if op is not None and op._graph is self else None

    def consumers(self, value: Value) -> list[tuple[Op, int]]:
        """(op, input port) of every use in this graph; captures by subgraphs not included."""
        uses = self._uses.get(value)
        return [(op, key) for op, key in uses if type(key) is int] if uses else []

    def uses(self, value: Value) -> list[tuple[Op, Key]]:
        """(op, key) of every use in this graph: input ports, and ``("capture", name)`` for
        an op whose subgraphs read ``value``."""
        uses = self._uses.get(value)
        return list(uses) if uses else []

    def use_count(self, value: Value) -> int:
        """How many uses ``value`` has in this graph (ports and captures; not as an output)."""
        uses = self._uses.get(value)
        return len(uses) if uses else 0

    def captures(self) -> set[Value]:
        """Outer values read by this subgraph (or by subgraphs nested in it)."""
        return {
            v
            for v in self._values
            if v._graph is not self and (self._uses.get(v) or v in self.outputs)
        }

    def refresh_captures(self, op: Op) -> None:
        """Drop capture edges of ``op`` whose value its subgraphs no longer read."""
        wanted: set[Value] = set()
        for sub in op.subgraphs():
            wanted |= sub.captures()
        captured = self._captured.get(op)
        if not captured:
            return
        for value, key in list(captured.items()):
            if value not in wanted:
                _unuse(value, op, key)
                del captured[value]
        self._edited()

    def is_used(self, value: Value) -> bool:
        """Read by an op, a subgraph or as a graph output."""
        return bool(self._uses.get(value)) or value in self.outputs

    # -- building --------------------------------------------------------------------------
    def touch(self, op: Op) -> None:
        """Record an edit of ``op`` that the graph's methods do not make: an attribute set,
        a declared type of its output or the data of an initializer it reads changed in
        place. Inference brought up to date after edits infers touched ops again
        (``shape_infer.Resumable``)."""
        _touch(op)

    def touched_since(self, mark: int) -> list[Op]:
        """This graph's ops that an edit touched after ``mark`` (``edit_mark``), in stored
        order: ops added or rewired, and producers whose outputs gained or lost a use."""
        return [op for op in self._ops if op._stamp > mark]

    def _edited(self) -> None:
        """Any edit: the networkx view is stale."""
        self._nx = None

    def add_value(
        self,
        name: str,
        type: TensorType | OpaqueType | None = None,
        *,
        const: Tensor | SparseTensor | None = None,
    ) -> Value:
        """A new value defined by this graph (not yet an input, initializer or output)."""
        value = Value(name, type, const, _graph=self)
        self._values[value] = None
        self._nx = None
        names = self._root()._names
        if names is not None:
            names.add(name)
        return value

    def add_initializer(self, name: str, tensor: Tensor | SparseTensor) -> Value:
        value = self.add_value(name, const=tensor)
        self.initializers.append(value)
        return value

    def add_op(
        self,
        op_type: str,
        inputs: Sequence[Value | None],
        *,
        n_outputs: int = 1,
        domain: str = "",
        name: str = "",
        output_names: Sequence[str] | None = None,
        **attrs: AttrValue,
    ) -> Op:
        """Append an op reading ``inputs``; its outputs get fresh unique names unless given."""
        op = Op(op_type, domain, name, dict(attrs))
        if output_names is None:
            base = name or op_type.lower()
            output_names = [self.fresh_name(f"{base}_out{i}") for i in range(n_outputs)]
        outputs = [self.add_value(n) for n in output_names]
        self._attach(op, list(inputs), list(outputs))
        return op

    def _attach(self, op: Op, inputs: list[Value | None], outputs: list[Value | None]) -> None:
        op._graph = self
        _touch(op)
        op._inputs = inputs
        op._outputs = outputs
        self._ops[op] = None
        self._holders = None
        self._reordered()
        for port, value in enumerate(inputs):
            if value is not None:
                self._add_use(value, op, port)
        for value in outputs:
            if value is not None:
                value._producer = op
                self._values.setdefault(value)
        for sub in op.subgraphs():
            sub.parent, sub.owner = self, op
            self._root()._names = None  # its names join the model's: collect them again
            for value in sub.captures():
                self._add_use(value, op, ("capture", value.name))

    def _add_use(self, value: Value, op: Op, key: Key) -> None:
        """Edge value -> op; an outer value also becomes a capture of every enclosing op."""
        add_use(self._uses, value, (op, key))
        self._values.setdefault(value)
        _touch(op, value._producer)  # the producer: one more reader
        if isinstance(key, tuple):
            self._captured.setdefault(op, {})[value] = key
        self._reordered()
        graph: Graph = self
        while value._graph is not graph and graph.owner is not None and graph.parent is not None:
            owner, graph = graph.owner, graph.parent
            capture_key = ("capture", value.name)
            uses = graph._uses.get(value)
            if uses is None or (owner, capture_key) not in uses:
                add_use(graph._uses, value, (owner, capture_key))
                _touch(owner)
                graph._captured.setdefault(owner, {})[value] = capture_key
                graph._values.setdefault(value)
            graph._reordered()

    def set_input(self, op: Op, port: int, value: Value | None) -> None:
        """Rewire one input of ``op``."""
        old = op._inputs[port]
        if old is not None:
            _unuse(old, op, port)
        op._inputs[port] = value
        if value is not None:
            self._add_use(value, op, port)
        self._edited()

    def _drop_value(self, value: Value) -> None:
        """Remove a value and its edges in this graph (networkx's remove_node)."""
        self._values.pop(value, None)
        if value._producer is not None and value._producer._graph is self:
            value._producer = None
        for op, key in self._uses.pop(value, {}):
            if isinstance(key, tuple):
                self._captured.get(op, {}).pop(value, None)
        self._edited()

    def _drop_op(self, op: Op) -> None:
        """Remove an op and the edges into it (its outputs are the caller's)."""
        for port, value in enumerate(op._inputs):
            if value is not None:
                _unuse(value, op, port)
        for value, key in self._captured.pop(op, {}).items():
            _unuse(value, op, key)
        for value in op._outputs:
            if value is not None and value._producer is op:
                value._producer = None
        del self._ops[op]
        self._holders = None
        self._edited()
        op._graph = None

    def remove_op(self, op: Op) -> None:
        """Remove ``op`` and its outputs; they must no longer be used."""
        for value in op._outputs:
            if value is not None and self.is_used(value):
                raise OnnxForgeError(
                    f"cannot remove {op.describe()}: output {value.name!r} is used"
                )
        outputs = [v for v in op._outputs if v is not None]
        self._drop_op(op)
        for value in outputs:
            self._drop_value(value)
        self._shrunk()

    def drop_outputs(self, op: Op, keep: int) -> None:
        """Remove the outputs of ``op`` from port ``keep`` on; they must be unused."""
        for value in op._outputs[keep:]:
            if value is not None:
                if self.is_used(value):
                    raise OnnxForgeError(f"{op.describe()}: output {value.name!r} is used")
                self._drop_value(value)
        op._outputs = op._outputs[:keep]
        _touch(op)

    def set_output(self, op: Op, port: int, value: Value) -> Value | None:
        """Output ``port`` of ``op`` becomes ``value`` (a fresh one); the old value, returned,
        is left without a producer for the caller to replace or remove."""
        old = op._outputs[port]
        if old is not None and old._producer is op:
            old._producer = None
        op._outputs[port] = value
        _touch(op)
        value._producer = op
        self._values.setdefault(value)
        self._reordered()
        self._edited()
        return old

    def remove_value(self, value: Value) -> None:
        """Drop a value that nothing produces or reads any more."""
        if self.is_used(value) or value in self.inputs or self.producer(value) is not None:
            raise OnnxForgeError(f"value {value.name!r} is still used or produced")
        self._drop_value(value)

    def make_constant(self, op: Op, tensors: Sequence[Tensor | None]) -> None:
        """Remove ``op``; each output with a tensor becomes an initializer holding it (its uses
        and name stay). An output without one must be unused."""
        outputs = list(op._outputs)
        for value, tensor in zip(outputs, list(tensors) + [None] * len(outputs), strict=False):
            if value is not None and tensor is None and self.is_used(value):
                raise OnnxForgeError(f"{op.describe()}: output {value.name!r} is used")
        self._drop_op(op)
        self._shrunk()
        for value, tensor in zip(outputs, list(tensors) + [None] * len(outputs), strict=False):
            if value is None:
                continue
            if tensor is None:
                self._drop_value(value)
                continue
            for reader, _ in self._uses.get(value, ()):
                _touch(reader)  # it reads a constant now
            value.const = tensor
            if value not in self.outputs:
                value.type = None  # the tensor says it; no value_info for an initializer
            self.initializers.append(value)

    def remove_initializer(self, value: Value) -> None:
        """Drop an initializer nothing reads any more."""
        if self.is_used(value) or value in self.inputs:
            raise OnnxForgeError(f"initializer {value.name!r} is still used")
        self.initializers.remove(value)
        self._drop_value(value)

    def inline(self, op: Op, body: Graph) -> None:
        """Replace ``op`` (an If whose branch is known) by the ops of ``body``.

        Body values move into this graph (renamed where their name is taken elsewhere in the
        model); the op's outputs are replaced by the body's, and an output that is a graph
        output keeps its name through an Identity.
        """
        produced = list(op._outputs)
        self._drop_op(op)
        for value in produced:  # still this graph's values, replaced below
            if value is not None:
                value._producer = None
        self._reordered()
        root: Graph = self
        while root.parent is not None:
            root = root.parent
        taken = root._all_names()
        own = [v for v in body.values() if v._graph is body]
        for value in own:
            if value.name in taken:
                value.name = self.fresh_name(value.name)
            taken.add(value.name)
        for value in own:
            value._graph = self
            self._values.setdefault(value)
        self.initializers.extend(v for v in body.initializers if v.const is not None)
        for inner in body.topo_order():
            inputs, outputs = list(inner._inputs), list(inner._outputs)
            body._drop_op(inner)
            self._attach(inner, inputs, outputs)
        for value, result in zip(produced, body.outputs, strict=False):
            if value is None:
                continue
            if value in self.outputs:
                self._attach(Op("Identity", name=self.fresh_name(value.name)), [result], [value])
            else:
                self.replace_all_uses(value, result)
                self._drop_value(value)
        self._root()._names = None

    def replace_all_uses(self, old: Value, new: Value) -> int:
        """Make every use of ``old`` (ops, nested subgraphs, graph outputs) read ``new``."""
        count = 0
        for op, port in self.consumers(old):
            self.set_input(op, port, new)
            count += 1
        for op, key in self.uses(old):
            if isinstance(key, tuple):  # a capture: rewire inside the subgraphs
                _unuse(old, op, key)
                self._captured.get(op, {}).pop(old, None)
                self._reordered()
                self._edited()
                for sub in op.subgraphs():
                    if old in sub._values:
                        count += sub.replace_all_uses(old, new)
        for i, value in enumerate(self.outputs):
            if value is old:
                self.outputs[i] = new
                count += 1
                for changed in (old, new):  # is_graph_output changed for their producers
                    if changed._producer is not None:
                        _touch(changed._producer)
        return count

    def rename(self, value: Value, name: str) -> None:
        """Give ``value`` (of this graph) a new name; the capture keys, which hold the name,
        follow in every graph that captures it."""
        old = value.name
        value.name = name
        for graph in walk_graphs(self):
            uses = graph._uses.get(value)
            if not uses or ("capture", old) not in {k for _, k in uses}:
                continue
            renamed = [
                (op, ("capture", name) if key == ("capture", old) else key) for op, key in uses
            ]
            graph._uses[value] = renamed if isinstance(uses, list) else dict.fromkeys(renamed)
            for captured in graph._captured.values():
                if value in captured:
                    captured[value] = ("capture", name)
            graph._edited()

    def _root(self) -> Graph:
        root: Graph = self
        while root.parent is not None:
            root = root.parent
        return root

    def fresh_name(self, base: str) -> str:
        """A value name unused anywhere in the enclosing model scope.

        The names are collected once and then kept up to date by add_value and fresh_name
        (a superset: names that went away stay taken); attaching subgraphs starts over.
        Collecting them on every call made converting densenet121 quadratic (2.2 of 4.3 s).
        """
        root = self._root()
        names = root._names
        if names is None:
            names = root._names = root._all_names()
        candidate, i = base, 1
        while candidate in names:
            candidate = f"{base}_{i}"
            i += 1
        names.add(candidate)
        return candidate

    def _all_names(self) -> set[str]:
        names = {v.name for v in self.values()}
        for op in self._ops:
            for sub in op.subgraphs():
                names |= sub._all_names()
        return names

    # -- order -----------------------------------------------------------------------------
    def _reordered(self) -> None:
        """An edit that may change which orders are topological (an op or a use added)."""
        self._order = None

    def _shrunk(self) -> None:
        """Ops were removed: the last order, less them, is still topological."""
        self._order_lost = True

    def topo_order(self) -> list[Op]:
        """Ops in a topological order that keeps the stored order wherever it is valid.

        The order is kept until an edit adds an op or a use (removals only filter it): a
        pipeline asks for it once per pass, and most passes change nothing (profile of
        optimize on a 100k-op chain: 13 sorts were 40% of the run).

        Raises InvalidModelError on a cycle.
        """
        if self._order is not None:
            if self._order_lost:
                self._order = [op for op in self._order if op._graph is self]
                self._order_lost = False
            return list(self._order)
        self._order_lost = False
        order = list(self._ops) if self.is_sorted() else self._sort()
        self._order = order
        return list(order)

    def _sort(self) -> list[Op]:
        by_position = list(self._ops)
        position = {op: i for i, op in enumerate(by_position)}
        waiting: dict[Op, int] = {}
        ready: list[int] = []
        for op in self._ops:
            n = len(self._producers(op))
            waiting[op] = n
            if n == 0:
                ready.append(position[op])
        heapq.heapify(ready)
        order: list[Op] = []
        while ready:
            op = by_position[heapq.heappop(ready)]
            order.append(op)
            readers = {
                reader
                for value in op._outputs
                if value is not None
                for reader, _ in self._uses.get(value, ())
            }
            for reader in readers:
                waiting[reader] -= 1
                if waiting[reader] == 0:
                    heapq.heappush(ready, position[reader])
        if len(order) != len(self._ops):
            stuck = [op.describe() for op, n in waiting.items() if n > 0]
            raise InvalidModelError([f"cycle through the nodes {', '.join(stuck[:8])}"])
        return order

    def _producers(self, op: Op) -> set[Op]:
        """The ops of this graph whose outputs ``op`` reads (through its subgraphs too)."""
        found = set()
        for value in op._inputs:
            if value is not None:
                p = value._producer
                if p is not None and p._graph is self:
                    found.add(p)
        for value in self._captured.get(op, ()):
            p = value._producer
            if p is not None and p._graph is self:
                found.add(p)
        return found

    def is_sorted(self) -> bool:
        """True when every op comes after the producers of what it reads (its subgraphs'
        captures included)."""
        seen: set[Op] = set()  # ops so far; a value is this graph's when its producer is
        for op in self._ops:
            for value in op._inputs:
                if value is not None:
                    producer = value._producer
                    if producer is not None and producer not in seen and producer._graph is self:
                        return False
            captured = self._captured.get(op)
            if captured:
                for value in captured:
                    producer = value._producer
                    if producer is not None and producer not in seen and producer._graph is self:
                        return False
            seen.add(op)
        return True

    def __repr__(self) -> str:
        return f"Graph({self.name!r}, {len(self._ops)} ops)"


@dataclass(eq=False)
class Function:
    """A model-local function: its body is a Graph whose inputs and outputs are untyped."""

    name: str
    domain: str
    graph: Graph
    attributes: list[str] = field(default_factory=list)
    attribute_defaults: dict[str, AttrValue] = field(default_factory=dict)
    opset_imports: dict[str, int] = field(default_factory=dict)
    overload: str = ""
    doc_string: str = ""
    metadata_props: list[tuple[str, str]] = field(default_factory=list)
    _source: Any = field(default=None, repr=False)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.domain, self.name, self.overload)


class Model:
    """A model: the main graph, opset imports per domain, local functions and metadata.

    ``io.load`` builds the graph and functions on first use: a load + save that never looks at
    them writes the file back from the parsed protobuf, at the cost of onnx.load + onnx.save.
    """

    def __init__(
        self,
        graph: Graph | None,
        *,
        ir_version: int = 10,
        opset_imports: dict[str, int] | None = None,
        producer_name: str = "",
        producer_version: str = "",
        domain: str = "",
        model_version: int = 0,
        doc_string: str = "",
        metadata_props: list[tuple[str, str]] | None = None,
        functions: list[Function] | None = None,
    ) -> None:
        self._graph = graph
        self._pending: Callable[[], tuple[Graph, list[Function]]] | None = None
        self.ir_version = ir_version
        self.opset_imports: dict[str, int] = dict(opset_imports or {})
        self.producer_name = producer_name
        self.producer_version = producer_version
        self.domain = domain
        self.model_version = model_version
        self.doc_string = doc_string
        self.metadata_props: list[tuple[str, str]] = list(metadata_props or [])
        self._functions: list[Function] = list(functions or [])
        self.training_info: list[Any] = []  # TrainingInfoProto, carried as read
        self.configuration: list[Any] = []  # DeviceConfigurationProto, carried as read
        self._source: Any = None
        self._source_spans: Any = None  # io: where the loaded initializers' bytes are
        self._source_nodes: Any = None  # io: where the main graph's nodes are, until built
        self._loaded_nodes: Any = None
        """io: the main graph's nodes as read and how many, kept after building for a caller that
        changes types only (io.load's ``keep_nodes``); a pass manager run drops them."""
        self._inference: Any = None  # passes: the last inference (passes._infra.Inference)

    @classmethod
    def deferred(cls, build: Callable[[], tuple[Graph, list[Function]]], **fields: Any) -> Model:
        """A model whose graph and functions ``build`` makes when first asked for."""
        model = cls(None, **fields)
        model._pending = build
        return model

    @property
    def built(self) -> bool:
        """Whether the graph and functions exist as objects (io writes a built model from them)."""
        return self._pending is None

    def _build(self) -> None:
        if self._pending is not None:
            build, self._pending = self._pending, None
            self._graph, self._functions = build()

    @property
    def graph(self) -> Graph:
        self._build()
        assert self._graph is not None
        return self._graph

    @graph.setter
    def graph(self, graph: Graph) -> None:
        self._build()
        self._graph = graph

    @property
    def functions(self) -> list[Function]:
        self._build()
        return self._functions

    @functions.setter
    def functions(self, functions: list[Function]) -> None:
        self._build()
        self._functions = functions

    def opset(self, domain: str = "") -> int:
        """The imported opset version of ``domain`` ("" and "ai.onnx" are the same domain)."""
        for key in (domain, "ai.onnx" if domain == "" else "" if domain == "ai.onnx" else None):
            if key is not None and key in self.opset_imports:
                return self.opset_imports[key]
        raise OnnxForgeError(f"the model imports no opset for domain {domain or 'ai.onnx'!r}")

    def graphs(self, *, functions: bool = True) -> Iterator[Graph]:
        """The main graph, every subgraph in it, then function bodies and their subgraphs."""
        roots = [self.graph] + ([f.graph for f in self.functions] if functions else [])
        for root in roots:
            yield from walk_graphs(root)

    def ops(self) -> Iterator[tuple[Graph, Op]]:
        """Every (graph, op) pair of ``graphs()``."""
        for graph in self.graphs():
            for op in graph._ops:
                yield graph, op


@contextlib.contextmanager
def no_gc() -> Iterator[None]:
    """Building, rewriting or writing a graph makes many objects and next to no cyclic
    garbage; the collector's passes over them were 40% of a 100k-node round trip and a third
    of optimize's time on densenet121."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


_edit_clock = [1]


_journals: list[list[Op]] = []
"""The open ``journal`` lists: every op an edit stamps is appended to each."""


@contextlib.contextmanager
def journal() -> Iterator[list[Op]]:
    """Collect the ops edits touch while the block runs, in the order they are touched
    (repeats kept): a pass that visits only what changed (``passes._worklist.visit``) learns
    from it what its own edits made worth a visit."""
    entries: list[Op] = []
    _journals.append(entries)
    try:
        yield entries
    finally:
        _journals.remove(entries)


def _touch(*ops: Op | None) -> None:
    """Stamp ``ops`` (None skipped) with the edit clock and note them in open journals: every
    edit Graph's methods make goes through here."""
    stamp = _edit_clock[0]
    for op in ops:
        if op is not None:
            op._stamp = stamp
            for entries in _journals:
                entries.append(op)


def edit_mark() -> int:
    """A point in the edit history: an op that an edit touches after it gets a ``_stamp``
    above it (``Graph.touched_since``). Graph's methods touch what they change; passes call
    ``Graph.touch`` for what they change by hand."""
    mark = _edit_clock[0]
    _edit_clock[0] = mark + 1
    return mark


def _unuse(value: Value, op: Op, key: Key) -> None:
    """Drop the edge value -> op keyed ``key`` from the op's graph."""
    graph = op._graph
    if graph is None:
        return
    _touch(op, value._producer)  # the producer: one reader fewer
    uses = graph._uses.get(value)
    if uses is not None:
        if isinstance(uses, list):
            if (op, key) in uses:
                uses.remove((op, key))
        else:
            uses.pop((op, key), None)
        if not uses:
            del graph._uses[value]
        elif value._producer is None and len(uses) == 1:
            # An initializer or input with one reader left: that reader may own it now.
            for reader, _ in uses:
                _touch(reader)


SMALL_USES = 8
"""A value's uses in a graph are a list up to this many, then a dict: most values have one or
two readers (a list is 64 bytes, a dict 232), and a weight read by thousands of ops still
loses a use in constant time."""
Uses = list[tuple["Op", Key]] | dict[tuple["Op", Key], None]


def add_use(table: dict[Value, Uses], value: Value, use: tuple[Op, Key]) -> None:
    """Record a use of ``value`` in a graph's table (once)."""
    uses = table.get(value)
    if uses is None:
        table[value] = [use]
    elif isinstance(uses, list):
        if use not in uses:
            uses.append(use)
            if len(uses) > SMALL_USES:
                table[value] = dict.fromkeys(uses)
    else:
        uses[use] = None


def walk_graphs(graph: Graph) -> Iterator[Graph]:
    """``graph`` and every subgraph nested in it, parents before their bodies (depth first,
    in op order; iterative, so nesting depth is no recursion limit)."""
    stack = [graph]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed([sub for op in _holders(current) for sub in op.subgraphs()]))


def _holders(graph: Graph) -> list[Op]:
    """The ops of ``graph`` that hold subgraphs, kept until an op is added or removed: passes
    walk every graph many times, and graph attributes are set only when an op is made."""
    if graph._holders is None:  # most ops have no attributes: no subgraphs() generator for them
        graph._holders = [
            op for op in graph._ops if op.attrs and any(True for _ in op.subgraphs())
        ]
    return graph._holders


def constant_tensor(op: Op) -> Tensor | None:
    """The tensor a Constant op defines (value, value_int(s), value_float(s)); None for the
    string and sparse forms."""
    for key, value in op.attrs.items():
        if key == "value" and isinstance(value, Tensor):
            return value
        if key == "value_int":
            return Tensor.from_numpy(np.array(int(value), dtype=np.int64))
        if key == "value_ints":
            return Tensor.from_numpy(np.array([int(v) for v in value], dtype=np.int64))
        if key == "value_float":
            return Tensor.from_numpy(np.array(float(value), dtype=np.float32))
        if key == "value_floats":
            return Tensor.from_numpy(np.array([float(v) for v in value], dtype=np.float32))
    return None


# -- invariants ------------------------------------------------------------------------------
def problems(model: Model) -> list[str]:
    """Every broken invariant of the model, one message each (empty when valid)."""
    found: list[str] = []
    _check_graph(model.graph, "graph", set(), found, {})
    for fn in model.functions:
        _check_graph(fn.graph, f"function {fn.domain}::{fn.name}", set(), found, {})
    return found


def verify(model: Model) -> None:
    """Raise InvalidModelError listing every problem: cycles, values used but never produced,
    names defined twice, graph outputs that nothing produces."""
    found = problems(model)
    if found:
        raise InvalidModelError(found)


def _where(graph: Graph, scope: str) -> str:
    if graph.owner is None:
        return scope
    return f"{scope} > {graph.owner.describe()} body {graph.name!r}"


def _check_graph(
    graph: Graph, scope: str, visible: set[Value], found: list[str], names: dict[str, Value]
) -> None:
    """Check ``graph`` and its bodies. ``visible`` and ``names`` are the enclosing graphs'
    values and names, shared down the recursion: this graph adds its own while its bodies are
    checked and takes them back before returning, so a body sees its ancestors' names and not
    its siblings' (copying them per body was quadratic: 6 s for 4,500 If/Loop bodies)."""
    where = _where(graph, scope)
    claimed: list[str] = []
    defined: set[Value] = set(graph.inputs) | set(graph.initializers)
    made: Iterator[tuple[Value, Op | None]] = itertools.chain(
        ((v, None) for v in [*graph.inputs, *graph.initializers]),
        ((out, op) for op in graph._ops for out in op._outputs if out is not None),
    )
    for value, op in made:  # each claims its name; one loop, no call per value (1M of them)
        if op is not None:
            if value in defined:
                found.append(f"{where}: {op.describe()} produces {value.name!r}, already defined")
            defined.add(value)
        other = names.get(value.name)
        if other is None:
            names[value.name] = value
            claimed.append(value.name)
        elif other is not value:
            _claim_name(value, names, where, found)
    added = [v for v in defined if v not in visible]
    visible.update(added)
    holders = set(_holders(graph))  # not a subgraphs() generator per op: 0.1 s per 100k ops
    try:
        for op in graph._ops:
            for port, used in enumerate(op._inputs):
                if used is not None and used not in visible:
                    found.append(
                        f"{where}: {op.describe()} input {port} {used.name!r} "
                        "is used but never produced"
                    )
            if op in holders:
                for sub in op.subgraphs():
                    _check_graph(sub, scope, visible, found, names)
        for value in graph.outputs:
            if value not in visible:
                found.append(f"{where}: graph output {value.name!r} is never produced")
    finally:
        visible.difference_update(added)
        for name in claimed:
            del names[name]
    # Stored in a topological order means acyclic; only an unsorted graph needs the search.
    # The order is kept (topo_order): inference and writing ask for it next.
    if not _acyclic(graph):
        import networkx  # noqa: PLC0415  (the cycle's ops, for the message)

        on_cycle = {n for edge in networkx.find_cycle(graph.nx) for n in edge[:2]}
        ops = [op.describe() for op in graph._ops if op in on_cycle]  # in file order
        found.append(f"{where}: cycle through {', '.join(ops)}")


def _acyclic(graph: Graph) -> bool:
    try:
        graph.topo_order()
    except InvalidModelError:
        return False
    return True


def _definer(value: Value) -> str:
    graph = value._graph
    producer = graph.producer(value) if graph is not None else None
    if producer is not None:
        return producer.describe()
    return "an initializer" if value.const is not None else "an input"


def _claim_name(value: Value, names: dict[str, Value], where: str, found: list[str]) -> None:
    other = names.setdefault(value.name, value)
    if other is not value:
        found.append(
            f"{where}: the name {value.name!r} is defined twice: by {_definer(other)} "
            f"and by {_definer(value)}"
        )
