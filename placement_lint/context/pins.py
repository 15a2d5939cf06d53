"""What the repository pins: the versions of the libraries whose behaviour a rule's truth depends on.

Read as data, never run: `requirements*.txt`, `pyproject.toml` (PEP 621
`dependencies` and optional dependencies, poetry `dependencies`), a literal `install_requires` in
`setup.py` (parsed with `ast`), and conda `environment.yml` (conda specs and its `pip:` section).
Only at the repository root, where these files live: a `requirements/` folder usually holds one file
per optional integration (`requirements/sglang.txt`), which says nothing of the training run. A specifier that cannot be parsed is left out,
with a note for `placement-lint context`.

Specifiers are parsed with `packaging` (PEP 440 and PEP 508, the parser pip itself uses); poetry's
`^`/`~` and conda's `=` forms are translated to PEP 440 first.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from placement_lint.patterns import LazyPattern
from placement_lint.records import NamedTuple

WATCHED = ("transformers", "accelerate", "trl", "peft", "deepspeed")
_MAX_BYTES = 256 * 1024
_USUAL = ("requirements.txt", "pyproject.toml", "setup.py", "environment.yml")
_NAME = LazyPattern(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


class Pin(NamedTuple):
    package: str  # "transformers"
    specifier: str  # PEP 440: ">=4.36,<4.40"; "" when any version goes
    where: str  # "requirements.txt:3"

    def describe(self) -> str:
        return f"{self.package}{self.specifier} ({self.where})"


class Pins(NamedTuple):
    pins: tuple[Pin, ...]
    notes: tuple[str, ...]  # specifiers left out, and why
    read: tuple[Path, ...]  # files looked at (inputs of a cached context)


def read_pins(root: Path) -> Pins:
    pins: list[Pin] = []
    notes: list[str] = []
    read: list[Path] = []
    # The usual names count as inputs even when absent: creating one must refresh a cached context.
    read += [root / name for name in _USUAL if not (root / name).is_file()]
    inside = root.resolve()
    for path in _pin_files(root):
        read.append(path)
        try:
            if path.stat().st_size > _MAX_BYTES or not path.resolve().is_relative_to(inside):
                continue  # too big to be a pin list, or a link out of the repository
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        shown = path.relative_to(root).as_posix()
        try:
            found = list(_READERS[_reader(path)](text, shown))
        except Exception as exc:  # a file that does not parse says nothing; never a crash
            notes.append(f"{shown}: not read ({type(exc).__name__})")
            continue
        for package, written, where in found:
            if package not in WATCHED:
                continue
            specifier = _pep440(written)
            if specifier is None:
                notes.append(f"{where}: {package} {written!r}: cannot parse the version specifier, ignored")
            else:
                pins.append(Pin(package, specifier, where))
    return Pins(tuple(pins), tuple(notes), tuple(read))


def _pin_files(root: Path) -> list[Path]:
    files: list[Path] = []
    try:
        names = sorted(entry.name for entry in root.iterdir() if entry.is_file())
    except OSError:
        return files
    for name in names:
        lower = name.lower()
        if (lower.startswith("requirements") and lower.endswith((".txt", ".in"))) or lower in (
            "pyproject.toml",
            "setup.py",
            "environment.yml",
            "environment.yaml",
        ):
            files.append(root / name)
    return files


def _reader(path: Path) -> str:
    name = path.name.lower()
    if name == "pyproject.toml":
        return "pyproject"
    if name == "setup.py":
        return "setup"
    if name.startswith("environment"):
        return "conda"
    return "requirements"


# -- readers: (package, specifier as written, where) ------------------------------------------


def _requirements(text: str, shown: str) -> list[tuple[str, str, str]]:
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith(("#", "-", "git+", "http")):
            continue  # options (-r, -e, --index-url), URLs
        found += _requirement(line, f"{shown}:{number}")
    return found


def _requirement(line: str, where: str) -> list[tuple[str, str, str]]:
    """`transformers[torch]>=4.36; python_version>'3.8'` -> ("transformers", ">=4.36", where)."""
    match = _NAME.match(line)
    if match is None:
        return []
    package = _normal(match.group(1))
    rest = line[match.end() :].split(";", 1)[0].strip()
    if rest.startswith("["):
        rest = rest[rest.find("]") + 1 :].strip() if "]" in rest else ""
    if rest.startswith("@"):
        return []  # a direct URL: no version to read
    if rest.startswith("(") and rest.endswith(")"):
        rest = rest[1:-1]
    return [(package, rest.replace(" ", ""), where)]


def _pyproject(text: str, shown: str) -> list[tuple[str, str, str]]:
    from placement_lint.settings import parsed_toml

    data = parsed_toml(text)
    found = []
    project = data.get("project", {})
    # Each pin says where it is: an extra's (`pip install .[minicpmv]`) is not the project's own.
    lines = [(line, f"{shown} [project]") for line in project.get("dependencies", [])]
    for name, extra in project.get("optional-dependencies", {}).items():
        lines += [(line, f"{shown} [project.optional-dependencies] {name}") for line in extra]
    for line, where in lines:
        if isinstance(line, str):
            found += _requirement(line, where)
    poetry = data.get("tool", {}).get("poetry", {})
    tables = [poetry.get("dependencies", {}), *(g.get("dependencies", {}) for g in poetry.get("group", {}).values())]
    for table in tables:
        for name, value in table.items():
            version = value.get("version") if isinstance(value, dict) else value
            if isinstance(version, str):
                found.append((_normal(name), _poetry(version), f"{shown} [tool.poetry]"))
    return found


def _setup(text: str, shown: str) -> list[tuple[str, str, str]]:
    """A literal `install_requires=[...]`, or a module-level name bound to a literal list."""
    from placement_lint.context.setup_py import module_literals, setup_py_tree

    module = setup_py_tree(text)
    lists = module_literals(module)
    found = []
    for node in ast.walk(module):
        if not isinstance(node, ast.Call):
            continue
        for keyword in node.keywords:
            if keyword.arg not in ("install_requires", "extras_require"):
                continue
            value = lists.get(keyword.value.id, keyword.value) if isinstance(keyword.value, ast.Name) else keyword.value
            values = value.values if isinstance(value, ast.Dict) else [value]
            for item in values:
                if isinstance(item, (ast.List, ast.Tuple)):
                    for element in item.elts:
                        if isinstance(element, ast.Constant) and isinstance(element.value, str):
                            found += _requirement(element.value, f"{shown}:{element.lineno}")
    return found


def _conda(text: str, shown: str) -> list[tuple[str, str, str]]:
    import yaml

    data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    found: list[tuple[str, str, str]] = []
    dependencies = data.get("dependencies", []) if isinstance(data, dict) else []
    for item in dependencies if isinstance(dependencies, list) else []:
        if isinstance(item, str):
            found += [(package, _conda_spec(spec), where) for package, spec, where in _requirement(item, f"{shown} (conda)")]
        elif isinstance(item, dict) and isinstance(item.get("pip"), list):
            for line in item["pip"]:
                if isinstance(line, str):
                    found += _requirement(line, f"{shown} (pip)")
    return found


_READERS = {"requirements": _requirements, "pyproject": _pyproject, "setup": _setup, "conda": _conda}


# -- specifiers ---------------------------------------------------------------------------------


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _poetry(written: str) -> str:
    """Poetry's `^4.36`, `~4.36`, `4.36.2`, `*` as PEP 440."""
    parts = []
    for piece in written.split(","):
        piece = piece.strip()
        if piece in ("", "*"):
            continue
        if piece[0] in "^~" and piece[1:2] != "=":
            try:
                parts.append(_caret(piece[1:]) if piece[0] == "^" else _tilde(piece[1:]))
            except ValueError:  # `^4.36.0b1`: not plain numbers; kept as written, so it is noted as unparseable
                parts.append(piece)
        elif piece[0].isdigit():
            parts.append(f"=={piece}")
        else:
            parts.append(piece)
    return ",".join(parts)


def _caret(version: str) -> str:
    numbers = [int(n) for n in version.split(".")]
    first = next((i for i, n in enumerate(numbers) if n != 0), len(numbers) - 1)
    upper = numbers[: first + 1]
    upper[-1] += 1
    return f">={version},<{'.'.join(map(str, upper))}"


def _tilde(version: str) -> str:
    numbers = [int(n) for n in version.split(".")]
    upper = numbers[:2] if len(numbers) > 1 else numbers[:1]
    upper[-1] += 1
    return f">={version},<{'.'.join(map(str, upper))}"


def _conda_spec(written: str) -> str:
    """conda's `=4.36` (4.36.*) and `==4.36.2`; `>=` and friends are PEP 440 already."""
    if written.startswith("=") and not written.startswith("=="):
        version = written[1:].split("=", 1)[0]  # `=4.36.2=py_0`: the build string goes
        return f"=={version}" if version.endswith("*") or version.count(".") >= 2 else f"=={version}.*"
    return written


def _pep440(written: str) -> str | None:
    """The specifier, checked by `packaging`; None when it does not parse."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        return str(SpecifierSet(written))
    except InvalidSpecifier:
        return None


def below(pins: tuple[Pin, ...], package: str, boundary: str) -> bool | Pin | None:
    """Whether the pinned versions of `package` all lie below `boundary` (the Pin that says so), all at
    or above it (False), or either (None: unpinned, open-ended, or pins that disagree)."""
    verdicts: dict[bool, Pin] = {}
    for pin in pins:
        if pin.package == package:
            verdict = _side(pin.specifier, boundary)
            if verdict is not None:
                verdicts.setdefault(verdict, pin)
    if len(verdicts) != 1:
        return None
    side, pin = next(iter(verdicts.items()))
    return pin if side else False


def _side(specifier: str, boundary: str) -> bool | None:
    """True: every version the specifier allows is below `boundary`; False: none is; None: some are."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    limit = Version(boundary)
    for spec in SpecifierSet(specifier):
        written = spec.version
        wildcard = written.endswith(".*")
        try:
            version = Version(written[:-2] if wildcard else written)
        except InvalidVersion:
            continue
        operator = spec.operator
        if operator in ("==", "==="):
            if wildcard:  # ==4.* allows 4.x only
                upper = version.release[:-1] + (version.release[-1] + 1,)
                if Version(".".join(map(str, upper))) <= limit:
                    return True
                if version >= limit:
                    return False
                continue
            return version < limit
        if operator in ("<", "<=") and (version < limit or (operator == "<" and version == limit)):
            return True
        if operator in (">=", ">", "~=") and version >= limit:
            return False
        if operator == "~=":  # ~=4.36 means >=4.36,<5
            release = version.release[:-1]
            upper = release[:-1] + (release[-1] + 1,) if release else None
            if upper and Version(".".join(map(str, upper))) <= limit:
                return True
    return None
