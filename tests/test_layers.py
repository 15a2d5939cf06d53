"""No module imports a layer above it: the pipeline reads off the package, bottom to top."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).parent.parent / "placement_lint"
LAYERS = [
    {"__init__", "distributed", "edits", "source", "notebook", "process", "scan"},
    {"settings"},
    {"discover"},
    {"analysis"},
    {"context"},
    {"changes"},
    {"rules"},
    {"fixes"},
    {"cache", "cache_json"},
    {"results"},
    {"checker"},
    {"engine"},
    {"explain"},
    {"report", "catalogue"},
    {"cli", "__main__", "api"},
    {"server"},  # the Language Server: the API's checks, for an editor; imported only by `placement-lint server`
]
# The package's `__init__` re-exports the Python API, imported on first use (`placement_lint.check`):
# a facade over the top layer, not a dependency of the bottom one.
FACADE = {("__init__", "api")}
# `placement-lint server` imports the server lazily: the command line does not depend on pygls.
LAZY_COMMANDS = {("cli", "server")}


def layer_of(module: str) -> int:
    head = module.split(".")[0]
    return next(i for i, names in enumerate(LAYERS) if head in names)


def imported(node: ast.AST) -> list[str]:
    """The package modules an import names: `from placement_lint.x import y`, `from placement_lint
    import x` (a module, or a name from `__init__`) and `import placement_lint.x`."""
    if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("placement_lint."):
        return [node.module.removeprefix("placement_lint.")]
    if isinstance(node, ast.ImportFrom) and node.module == "placement_lint":
        return [a.name if (PACKAGE / a.name).is_dir() or (PACKAGE / f"{a.name}.py").is_file() else "__init__" for a in node.names]
    if isinstance(node, ast.Import):
        return [a.name.removeprefix("placement_lint.") for a in node.names if a.name.startswith("placement_lint.")]
    return []


def test_no_module_imports_a_layer_above_it() -> None:
    problems = []
    seen = 0
    for path in PACKAGE.rglob("*.py"):
        name = path.relative_to(PACKAGE).with_suffix("").as_posix().replace("/", ".").removesuffix(".__init__")
        own = layer_of(name)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            for target in imported(node):
                seen += 1
                if layer_of(target) > own and (name, target.split(".")[0]) not in FACADE | LAZY_COMMANDS:
                    problems.append(f"{name} imports {target}")
    assert seen > 50, "the walk saw the package's imports"
    assert problems == []
