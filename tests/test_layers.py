"""No module imports a layer above it: the pipeline reads off the package, bottom to top."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).parent.parent / "placement_lint"
LAYERS = [
    {"__init__", "distributed", "edits", "source", "notebook"},
    {"settings"},
    {"discover"},
    {"analysis"},
    {"context"},
    {"rules"},
    {"fixes"},
    {"cache"},
    {"engine"},
    {"report", "catalogue"},
    {"cli", "__main__"},
]


def layer_of(module: str) -> int:
    head = module.split(".")[0]
    return next(i for i, names in enumerate(LAYERS) if head in names)


def test_no_module_imports_a_layer_above_it() -> None:
    problems = []
    seen = 0
    for path in PACKAGE.rglob("*.py"):
        name = path.relative_to(PACKAGE).with_suffix("").as_posix().replace("/", ".").removesuffix(".__init__")
        own = layer_of(name)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("placement_lint."):
                target = node.module.removeprefix("placement_lint.")
                seen += 1
                if layer_of(target) > own:
                    problems.append(f"{name} imports {target}")
    assert seen > 50, "the walk saw the package's imports"
    assert problems == []
