"""OpRegistry: functions per (domain, op_type) and schema version, shared by shape rules,
kernels and version adapters."""

from __future__ import annotations

__all__ = ["OpRegistry"]

from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

from onnxforge import opset as schemas
from onnxforge.errors import OnnxForgeError

F = TypeVar("F", bound=Callable[..., object])


class OpRegistry(Generic[F]):
    """Maps (domain, op_type, since_version) to a function.

    Lookup takes the model's opset, maps it to the schema version it selects and matches exactly,
    so a Split-13 rule never runs on Split-18. ``kind`` names the registry in errors.
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[tuple[str, str, int], F] = {}

    def register(
        self, op_types: str | Iterable[str], versions: Iterable[int], *, domain: str = ""
    ) -> Callable[[F], F]:
        """Decorator: ``@registry.register("Split", versions=(13,))``."""
        names = (op_types,) if isinstance(op_types, str) else tuple(op_types)

        def add(fn: F) -> F:
            for name in names:
                for version in versions:
                    key = (domain, name, version)
                    if key in self._entries:
                        raise OnnxForgeError(f"{self.kind} for {name}-{version} registered twice")
                    self._entries[key] = fn
            return fn

        return add

    def versions(self, op_type: str, domain: str = "") -> tuple[int, ...]:
        return tuple(sorted(v for d, n, v in self._entries if (d, n) == (domain, op_type)))

    def entries(self) -> list[tuple[str, str, int]]:
        return sorted(self._entries)

    def entry(self, op_type: str, version: int, domain: str = "") -> F | None:
        """The function registered for exactly this since_version, or None."""
        return self._entries.get((domain, op_type, version))

    def find(self, op_type: str, opset: int, domain: str = "") -> F | None:
        """The function for the schema ``opset`` selects, or None."""
        since = schemas.since_version(op_type, opset, domain)
        return self._entries.get((domain, op_type, since))

    def lookup(self, op_type: str, opset: int, domain: str = "") -> F:
        """Like find, but a missing entry raises, listing the versions that exist."""
        fn = self.find(op_type, opset, domain)
        if fn is None:
            since = schemas.since_version(op_type, opset, domain)
            have = ", ".join(map(str, self.versions(op_type, domain))) or "none"
            raise OnnxForgeError(
                f"no {self.kind} for {op_type}-{since} (opset {opset}); versions with one: {have}"
            )
        return fn
