"""Read/decode, the pipeline's second step: a checked file's bytes into the text its rules read.

A .py file is decoded as it is (source.py); a notebook's code cells are joined (notebook.py). This
module sits above both, so that neither needs the other.
"""

from __future__ import annotations

from pathlib import Path

from placement_lint.source import SourceFile, decode_source, is_notebook


def read_source(path: Path, raw: bytes) -> SourceFile:
    """A .py file decoded, or a notebook's code cells joined: what the rules read."""
    if is_notebook(path):
        from placement_lint.notebook import decode_notebook  # a tree without notebooks never imports it

        return decode_notebook(path, raw)
    return decode_source(path, raw)
