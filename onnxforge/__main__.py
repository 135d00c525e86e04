"""``python -m onnxforge``: the command line."""

from __future__ import annotations

__all__: list[str] = []

from onnxforge.cli import main

if __name__ == "__main__":
    main()
