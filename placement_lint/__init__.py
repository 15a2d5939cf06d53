"""placement-lint: find model placements that break distributed training, before the GPUs are booked.

The Python API (`check`, `check_source`, `fix_source`, `Finding`, `CheckError`, `SuppressionWarning`)
lives in `placement_lint.api` and is imported on first use, so `import placement_lint` stays light;
`dir(placement_lint)` lists it all the same.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["CheckError", "Finding", "SuppressionWarning", "__version__", "check", "check_source", "fix_source"]

if TYPE_CHECKING:
    from placement_lint.api import CheckError, Finding, SuppressionWarning, check, check_source, fix_source
    from placement_lint.version import __version__


def __getattr__(name: str) -> Any:
    if name == "__version__":  # `import placement_lint` loads none of its modules
        from placement_lint.version import __version__

        return __version__
    if name in __all__:
        from placement_lint import api

        return getattr(api, name)
    raise AttributeError(f"module 'placement_lint' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The API, imported on first use, and the module's dunders (PEP 562): what `dir()` and completion
    in a REPL or notebook offer, without the typing helpers this module uses itself."""
    return sorted({*__all__, *(name for name in globals() if name.startswith("__"))})
