"""No module imports a layer above it: the pipeline reads off the package, bottom to top."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).parent.parent / "placement_lint"
LAYERS = [
    {"version", "distributed", "edits", "source", "newer_syntax", "process", "scan", "patterns", "records"},
    {"notebook"},  # a notebook's cells as a source file: above source.py, which never needs it
    {"decode"},  # read/decode: a .py file or a notebook's cells, whichever the file is
    {"settings"},
    {"discover", "git_index"},  # what files there are: walked, and what git tracks
    {"analysis"},
    {"context"},
    {"changes"},
    {"rules"},
    {"fixes"},
    {"cache", "cache_json"},
    {"results"},
    {"fixing"},  # fixing one checked file: imported by the checker only when a run fixes or diffs
    {"precheck"},  # could a rule fire in a file: its text, scanned once
    {"checker"},
    {"screen_ahead"},  # the pre-check, in a child, while the engine builds the launch context
    {"engine"},
    {"explain"},
    {"report", "catalogue", "config_schema"},  # config_schema: the settings described, for the docs and editors
    # The package's `__init__` re-exports the Python API, imported on first use (`placement_lint.check`):
    # it stands with the API, so no lower module may import it (the version is in version.py).
    {"cli", "__main__", "api", "__init__"},
    {"server"},  # the Language Server: the API's checks, for an editor; imported only by `placement-lint server`
]
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


def module_name(path: Path) -> str:
    return path.relative_to(PACKAGE).with_suffix("").as_posix().replace("/", ".").removesuffix(".__init__")


def test_no_module_imports_a_layer_above_it() -> None:
    problems = []
    seen = 0
    for path in PACKAGE.rglob("*.py"):
        name = module_name(path)
        own = layer_of(name)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            for target in imported(node):
                seen += 1
                if layer_of(target) > own and (name, target.split(".")[0]) not in LAZY_COMMANDS:
                    problems.append(f"{name} imports {target}")
    assert seen > 50, "the walk saw the package's imports"
    assert problems == []


def _is_module(name: str) -> bool:
    folder = PACKAGE / name.replace(".", "/")
    return folder.is_dir() or folder.with_suffix(".py").is_file()


def run_time_imports(tree: ast.Module) -> set[str]:
    """The package modules a module imports when it runs, at its top or in a function (not the ones
    named only for type checking), each with the packages whose `__init__` the import runs."""
    typing_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
        for statement in node.body
        for inner in ast.walk(statement)
    }
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and (node.module + ".").startswith("placement_lint."):
            base = node.module.removeprefix("placement_lint").lstrip(".")
            for alias in node.names:
                below = f"{base}.{alias.name}" if base else alias.name
                found.add(below if _is_module(below) else base or "__init__")
        elif isinstance(node, ast.Import):
            found |= {a.name.removeprefix("placement_lint.") for a in node.names if a.name.startswith("placement_lint.")}
    with_packages = set(found)
    for name in found:
        parts = name.split(".")
        with_packages |= {".".join(parts[:i]) for i in range(1, len(parts))}
    return with_packages


def test_no_import_cycle() -> None:
    """No chain of imports leads a module back to itself (notebook.py and source.py once did: each
    needed the other), counting the imports made inside functions and the packages' `__init__`s."""
    graph: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        name = module_name(path)
        own_packages = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
        graph[name] = run_time_imports(ast.parse(path.read_text(encoding="utf-8"))) - own_packages - {name}
    assert sum(map(len, graph.values())) > 50, "the walk saw the package's imports"
    cycles = []
    done: set[str] = set()

    def visit(name: str, trail: list[str]) -> None:
        if name in trail:
            cycles.append(" -> ".join([*trail[trail.index(name) :], name]))
            return
        if name in done or name not in graph:
            return
        for target in sorted(graph[name]):
            visit(target, [*trail, name])
        done.add(name)

    for name in sorted(graph):
        visit(name, [])
    assert cycles == []
