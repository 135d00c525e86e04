"""`[tool.onnxforge.check]` in pyproject.toml: the defaults of `onnxforge check` for a
repository of models, found from the current folder upward (or given with --config)."""

from __future__ import annotations

__all__ = ["CheckConfig", "ConfigError", "find_config", "load_config"]

import fnmatch
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from onnxforge.api._check import CODES, RUNTIMES, SEVERITIES
from onnxforge.errors import OnnxForgeError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

FORMATS = ("text", "json", "github", "sarif")
KEYS = (
    "runtime",
    "verify",
    "max-opset",
    "max-ir",
    "fail-on",
    "format",
    "jobs",
    "timeout",
    "input-shapes",
    "ignore",
    "per-file",
)
PER_FILE_KEYS = ("input-shapes", "ignore")


class ConfigError(OnnxForgeError):
    """A configuration that cannot be used: exit 2, like a wrong command line."""

    exit_code = 2


@dataclass
class CheckConfig:
    """The settings a config file gives; None where it says nothing."""

    source: Path | None = None
    runtime: str | None = None
    verify: list[str] | None = None
    max_opset: int | None = None
    max_ir: int | None = None
    fail_on: str | None = None
    format: str | None = None
    jobs: int | None = None
    timeout: float | None = None
    input_shapes: dict[str, list[int]] = field(default_factory=dict)
    ignore: list[str] = field(default_factory=list)
    per_file: dict[str, tuple[dict[str, list[int]], list[str]]] = field(default_factory=dict)

    def for_file(self, file: str) -> tuple[dict[str, list[int]], set[str]]:
        """The input shapes and ignored codes for ``file``: the global ones, then those of
        every per-file glob that matches it (relative to the config's folder, or as given)."""
        shapes = dict(self.input_shapes)
        ignored = set(self.ignore)
        names = {Path(file).as_posix()}
        if self.source is not None:
            absolute = Path(os.path.abspath(file))
            if absolute.is_relative_to(self.source.parent):
                names.add(absolute.relative_to(self.source.parent).as_posix())
        for pattern, (more_shapes, more_ignored) in self.per_file.items():
            if any(fnmatch.fnmatch(name, pattern) for name in names):
                shapes.update(more_shapes)
                ignored |= set(more_ignored)
        return shapes, ignored


def find_config(start: Path | None = None) -> Path | None:
    """The nearest pyproject.toml with a [tool.onnxforge.check] table, from ``start`` up."""
    folder = (start or Path.cwd()).resolve()
    for candidate in [folder, *folder.parents]:
        path = candidate / "pyproject.toml"
        if path.is_file():
            try:
                data = tomllib.loads(path.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
                continue  # not ours to judge unless it is the one asked for
            if "check" in data.get("tool", {}).get("onnxforge", {}):
                return path
    return None


def load_config(path: Path) -> CheckConfig:
    """Read and validate [tool.onnxforge.check] of ``path``; ConfigError names a bad key."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the config: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    table = data.get("tool", {}).get("onnxforge", {}).get("check")
    if table is None:
        raise ConfigError(f"{path}: has no [tool.onnxforge.check] table")
    where = f"{path}: [tool.onnxforge.check]"
    if not isinstance(table, dict):
        raise ConfigError(f"{where} is not a table")
    for key in table:
        if key not in KEYS:
            raise ConfigError(f"{where}: unknown key {key!r} (keys: {', '.join(KEYS)})")
    config = CheckConfig(source=path.resolve())
    config.runtime = _choice(table, "runtime", ("onnxruntime",), where)
    verify = table.get("verify")
    if verify is not None:
        items = [verify] if isinstance(verify, str) else verify
        if not isinstance(items, list) or any(v not in RUNTIMES for v in items):
            raise ConfigError(f"{where}: 'verify' must name runtimes of {', '.join(RUNTIMES)}")
        config.verify = list(items)
    config.max_opset = _int(table, "max-opset", where, minimum=1)
    config.max_ir = _int(table, "max-ir", where, minimum=1)
    config.fail_on = _choice(table, "fail-on", SEVERITIES, where)
    config.format = _choice(table, "format", FORMATS, where)
    config.jobs = _int(table, "jobs", where, minimum=1)
    timeout = table.get("timeout")
    if timeout is not None:
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            raise ConfigError(f"{where}: 'timeout' must be a positive number of seconds")
        config.timeout = float(timeout)
    config.input_shapes = _shapes(table.get("input-shapes", {}), f"{where}: 'input-shapes'")
    config.ignore = _codes(table.get("ignore", []), f"{where}: 'ignore'")
    per_file = table.get("per-file", {})
    if not isinstance(per_file, dict):
        raise ConfigError(f"{where}: 'per-file' must be a table of globs")
    for pattern, entry in per_file.items():
        here = f"{where}: per-file {pattern!r}"
        if not isinstance(entry, dict):
            raise ConfigError(f"{here} must be a table")
        for key in entry:
            if key not in PER_FILE_KEYS:
                raise ConfigError(
                    f"{here}: unknown key {key!r} (keys: {', '.join(PER_FILE_KEYS)})"
                )
        config.per_file[pattern] = (
            _shapes(entry.get("input-shapes", {}), f"{here}: 'input-shapes'"),
            _codes(entry.get("ignore", []), f"{here}: 'ignore'"),
        )
    return config


def _choice(table: Mapping[str, Any], key: str, allowed: tuple[str, ...], where: str) -> Any:
    value = table.get(key)
    if value is not None and value not in allowed:
        raise ConfigError(f"{where}: {key!r} must be one of {', '.join(allowed)}, not {value!r}")
    return value


def _int(table: Mapping[str, Any], key: str, where: str, *, minimum: int) -> int | None:
    value = table.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{where}: {key!r} must be a whole number >= {minimum}, not {value!r}")
    return value


def _shapes(value: Any, where: str) -> dict[str, list[int]]:
    if not isinstance(value, dict):
        raise ConfigError(f"{where} must be a table of input name = [dims]")
    shapes = {}
    for name, dims in value.items():
        if not isinstance(dims, list) or any(
            isinstance(d, bool) or not isinstance(d, int) or d < 0 for d in dims
        ):
            raise ConfigError(f"{where}: {name!r} must be a list of dims >= 0, not {dims!r}")
        shapes[name] = list(dims)
    return shapes


def _codes(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or any(c not in CODES for c in value):
        raise ConfigError(f"{where} must list problem codes of: {', '.join(sorted(CODES))}")
    return list(value)
