"""What a script's command line turns into: its parser's fields, and a launch's arguments bound to them.

A launch passes `--use_4bit_quantization True`; what the script then reads as
`args.use_4bit_quantization` depends on its parser. HfArgumentParser and TrlParser make a field of
each dataclass attribute (a `bool` accepts `true/yes/1`, bare `--flag` is True, and a field whose
default is True gets `--no_flag`); argparse makes one of each `add_argument` (`store_true`,
`store_false`, `type=bool`, which turns any non-empty text into True, or a str-to-bool helper).
Values are kept as Python literal text (`"True"`, `"'auto'"`, `"8"`), so they travel in the launch
evidence and the cache as plain strings; `UNDECIDED` is a value the tool cannot work out.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping

from placement_lint.analysis.index import index_of
from placement_lint.analysis.names import dotted, last_segment
from placement_lint.patterns import LazyPattern
from placement_lint.records import NamedTuple

UNDECIDED = "?"  # the field's value depends on something the tool cannot follow
_CACHE = "_placement_lint_parser_fields"


class Field(NamedTuple):
    name: str  # the attribute the script reads (argparse `dest`)
    # How text becomes the value: "bool" (str-to-bool), "pybool" (bool(text)), "int", "float", "str",
    # "in:<words>" (a lambda's own test), "?".
    convert: str
    default: str  # literal text, or UNDECIDED
    bare: str  # the value of the option given with no text (`--flag`), or UNDECIDED
    negated_by: str = ""  # `--no_flag` sets this field to False (HfArgumentParser, for a field defaulting to True)
    spellings: str = ""  # argparse: the options that set it, space-separated (`--no-ds` with dest="ds": "no_ds")
    origin: str = "argparse"  # or "dataclass", "library", "fire"


Fields = Mapping[str, Field]

_TRUE = frozenset({"yes", "true", "t", "y", "1", "on"})
_FALSE = frozenset({"no", "false", "f", "n", "0", "off"})
# Names of helpers that read "true"/"false" text as a bool (`str2bool`, `strtobool`, `string_to_bool`, `boolean_string`).
_STR_TO_BOOL = LazyPattern(r"(str|string)_?(2|to)_?bool|^(to_|as_|parse_)?bool(ean)?(_string|_arg|_flag)?$|^bool_?type$", re.I)
_BOOL_TYPES = {"bool", "Optional[bool]", "bool | None", "None | bool", "Union[bool, None]"}
_SCALAR_TYPES = {"int": "int", "float": "float", "str": "str"}
# Fields of library dataclasses (TrainingArguments, TRL configs) a launch sets: their defaults depend
# on which classes the parser holds, so only a launch's value decides them.
LIBRARY_FIELDS: dict[str, Field] = {
    name: Field(name, convert, UNDECIDED, "True" if convert == "bool" else UNDECIDED, origin="library")
    for name, convert in {
        "load_in_4bit": "bool",
        "load_in_8bit": "bool",
        "use_peft": "bool",
        "gradient_checkpointing": "bool",
        "deepspeed": "str",
        "fsdp": "str",
        "fsdp_config": "str",
    }.items()
}


def literal(value: object) -> str:
    return repr(value)


def shown(text: str) -> str:
    """A value as a command line would write it: `'auto'` -> `auto`."""
    try:
        value = value_of(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text
    return value if isinstance(value, str) else text


def value_of(text: str) -> object:
    """The Python value of a literal text; raises ValueError for UNDECIDED or anything else."""
    return ast.literal_eval(text)


def parser_fields(module: ast.Module, imported: Iterable[ast.Module] = ()) -> dict[str, Field]:
    """Every field a parser in `module` can fill: its dataclasses' attributes and its `add_argument`
    options, and those of the `imported` modules, where its parser may live. A parser the tool cannot
    follow (an option named at run time, `add_argument(**spec)`) leaves every field undecided."""
    fields: dict[str, Field] = {}
    dynamic = False
    for source in (*imported, module):
        own, own_dynamic = _own_fields(source)
        fields.update(own)
        dynamic = dynamic or own_dynamic
    if dynamic:
        return {key: Field(field.name, "?", UNDECIDED, UNDECIDED, origin=field.origin) for key, field in fields.items()}
    return fields


def _own_fields(module: ast.Module) -> tuple[dict[str, Field], bool]:
    """One module's fields, and whether its parser is one the tool cannot follow; read once per tree
    (the checker, each resolver of the file and each launched script importing it ask)."""
    cached: tuple[dict[str, Field], bool] | None = getattr(module, _CACHE, None)
    if cached is None:
        cached = _read_fields(module)
        setattr(module, _CACHE, cached)
    return cached


def _read_fields(module: ast.Module) -> tuple[dict[str, Field], bool]:
    fields: dict[str, Field] = {}
    index = index_of(module)
    for node in index.classes:
        if _is_dataclass(node):
            fields.update((f.name, f) for f in _dataclass_fields(node))
    dynamic = False
    for call in index.calls_by_name.get("add_argument", []):
        field = _argparse_field(call)
        if field is None:
            dynamic = True
        elif field.name in fields and fields[field.name].spellings:  # `--ds` and `--no_ds`, one dest
            fields[field.spellings.split()[0] if field.spellings else f"{field.name}#"] = field
        else:
            fields[field.name] = field
    entry = fire_entry(module)
    if entry is not None:
        fields.update((f.name, f) for f in _fire_fields(entry))
    for call in index.calls_by_name.get("set_defaults", []):
        for keyword in call.keywords:
            if keyword.arg is None:
                dynamic = True
            elif keyword.arg in fields:
                fields[keyword.arg] = fields[keyword.arg]._replace(default=_constant_text(keyword.value))
    return fields, dynamic


def fields_from(table: Iterable[tuple[str, ...]]) -> dict[str, Field]:
    """The fields a launch's evidence carries ((key, *Field) rows, from the cache too); a row of another
    shape (a cache written by another version) is left out."""
    found: dict[str, Field] = {}
    for row in table:
        if len(row) == len(Field._fields) + 1 and all(isinstance(item, str) for item in row):
            found[row[0]] = Field(*row[1:])
    return found


def bind(fields: Fields, arguments: Iterable[tuple[str, str]]) -> dict[str, str]:
    """A launch's script arguments (`("use_4bit", "")`) as field values (`{"use_4bit": "True"}`);
    arguments no field takes are left out."""
    negations = {f.negated_by: f for f in fields.values() if f.negated_by}
    spelled = {spelling: f for f in fields.values() for spelling in f.spellings.split()}  # set by a differently named option
    bound: dict[str, str] = {}
    for name, text in arguments:
        field = spelled.get(name) or fields.get(name) or LIBRARY_FIELDS.get(name)
        if field is not None:
            bound[field.name] = convert(field, text)
        elif name in negations:
            bound[negations[name].name] = literal(False) if text == "" else UNDECIDED
    return bound


def convert(field: Field, text: str) -> str:
    if text == "":
        return field.bare
    lowered = text.lower()
    if field.convert == "bool":
        return literal(True) if lowered in _TRUE else literal(False) if lowered in _FALSE else UNDECIDED
    if field.convert == "pybool":
        return literal(bool(text))
    if field.convert in ("int", "float"):
        try:
            return literal(int(text) if field.convert == "int" else float(text))
        except ValueError:
            return UNDECIDED
    if field.convert.startswith(("in:", "in-lower:")):  # a lambda's own test (`x.lower() == "true"`)
        kind, _, words = field.convert.partition(":")
        return literal((lowered if kind == "in-lower" else text) in words.split("\x1f"))
    if field.convert == "str":
        return literal(None) if field.default == literal(None) and lowered == "none" else literal(text)
    if field.convert == "fire":
        return _fire_value(text)
    return UNDECIDED


# -- dataclasses (HfArgumentParser, TrlParser) ------------------------------------------------------


def _is_dataclass(node: ast.ClassDef) -> bool:
    return any(last_segment(dotted(d.func if isinstance(d, ast.Call) else d)) == "dataclass" for d in node.decorator_list)


def _dataclass_fields(node: ast.ClassDef) -> Iterable[Field]:
    for stmt in node.body:
        if not isinstance(stmt, ast.AnnAssign) or not isinstance(stmt.target, ast.Name):
            continue
        written = stmt.annotation
        if isinstance(written, ast.Constant) and isinstance(written.value, str):  # `use_4bit: "bool" = False`
            annotation = written.value.replace("typing.", "")
        else:
            annotation = ast.unparse(written).replace("typing.", "")
        default = _dataclass_default(stmt.value)
        if annotation in _BOOL_TYPES:
            negated = f"no_{stmt.target.id}" if default == literal(True) else ""
            yield Field(stmt.target.id, "bool", default, literal(True), negated, origin="dataclass")
        else:
            scalar = annotation.removeprefix("Optional[").removesuffix("]").split(" |")[0]
            yield Field(stmt.target.id, _SCALAR_TYPES.get(scalar, "?"), default, UNDECIDED, origin="dataclass")


def _dataclass_default(value: ast.expr | None) -> str:
    if value is None:
        return UNDECIDED  # required
    if isinstance(value, ast.Call) and last_segment(dotted(value.func)) == "field":
        given = next((kw.value for kw in value.keywords if kw.arg == "default"), None)
        return _constant_text(given) if given is not None else UNDECIDED
    return _constant_text(value)


def _constant_text(value: ast.expr) -> str:
    if isinstance(value, ast.Constant) and isinstance(value.value, (bool, int, float, str, type(None))):
        return literal(value.value)
    return UNDECIDED


# -- python-fire (`fire.Fire(train)`) ---------------------------------------------------------------


def fire_entry(module: ast.Module) -> ast.FunctionDef | None:
    """The top-level function a script hands to `fire.Fire(train)`: fire makes each of its parameters
    an option (`--fsdp_params 'full_shard'`). None when there is no such call, or the calls name more
    than one function, or a function the module does not define once at its top level."""
    calls = index_of(module).calls_by_name.get("Fire", [])
    named = {
        call.args[0].id
        for call in calls
        if dotted(call.func) in ("fire.Fire", "Fire") and call.args and isinstance(call.args[0], ast.Name)
    }
    if len(named) != 1:
        return None
    name = named.pop()
    defined = [
        s
        for s in module.body
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Assign)) and _defines(s, name)
    ]
    only = defined[0] if len(defined) == 1 else None
    return only if isinstance(only, ast.FunctionDef) else None


def _defines(statement: ast.stmt, name: str) -> bool:
    if isinstance(statement, ast.Assign):
        return any(isinstance(t, ast.Name) and t.id == name for t in statement.targets)
    return statement.name == name  # type: ignore[attr-defined]


def fire_defaults(function: ast.FunctionDef) -> dict[str, ast.expr | None]:
    """Each parameter fire fills, with its default expression (None: required)."""
    args = function.args
    positional = [*args.posonlyargs, *args.args]
    padded: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    found = {a.arg: d for a, d in zip(positional, padded, strict=True)}
    found.update((a.arg, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True))
    found.pop("self", None)
    return found


def _fire_fields(function: ast.FunctionDef) -> Iterable[Field]:
    # fire reads `--flag` alone as True and `--noflag` as False, whatever the parameter's type.
    for name, default in fire_defaults(function).items():
        text = _constant_text(default) if default is not None else UNDECIDED
        yield Field(name, "fire", text, literal(True), f"no{name}", origin="fire")


def _fire_value(text: str) -> str:
    """fire reads an option's text as a Python literal when it is one (`True`, `8`, `'a b'`), and as
    the text itself otherwise (`true` and `false` stay text, both truthy); a container is not followed."""
    try:
        value = value_of(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return UNDECIDED if text[:1] in "[({" else literal(text)
    return literal(value) if isinstance(value, (bool, int, float, str, type(None))) else UNDECIDED


# -- argparse ---------------------------------------------------------------------------------------


def _argparse_field(call: ast.Call) -> Field | None:
    """The field one `add_argument(...)` makes; None when the option is named at run time."""
    if any(kw.arg is None for kw in call.keywords) or any(isinstance(a, ast.Starred) for a in call.args):
        return None
    names = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    if len(names) != len(call.args) or not names:
        return None
    options = {kw.arg: kw.value for kw in call.keywords if kw.arg}
    dest_node = options.get("dest")
    if dest_node is not None:
        if not (isinstance(dest_node, ast.Constant) and isinstance(dest_node.value, str)):
            return None
        dest = dest_node.value
    else:
        long = next((n for n in names if n.startswith("--")), names[0])
        dest = long.lstrip("-").replace("-", "_")
    spellings = " ".join(n.lstrip("-").replace("-", "_") for n in names if n.startswith("--"))
    action = options.get("action")
    action_name = action.value if isinstance(action, ast.Constant) else None if action is None else "?"
    default = _constant_text(options["default"]) if "default" in options else None
    if action_name in ("store_true", "store_false"):
        on = action_name == "store_true"
        return Field(dest, "?", default or literal(not on), literal(on), "", spellings)
    nargs = options.get("nargs")
    if action_name is not None or (nargs is not None and not _optional_nargs(nargs)):
        return Field(dest, "?", default or literal(None), UNDECIDED, "", spellings)  # a count, a list, a custom action
    const = options.get("const")
    bare = (_constant_text(const) if const is not None else literal(None)) if nargs is not None else UNDECIDED
    return Field(dest, _argparse_type(options.get("type")), default or literal(None), bare, "", spellings)


def _optional_nargs(nargs: ast.expr | None) -> bool:
    return isinstance(nargs, ast.Constant) and nargs.value == "?"


def _argparse_type(kind: ast.expr | None) -> str:
    if kind is None:
        return "str"
    if isinstance(kind, ast.Lambda):
        return _lambda_type(kind)
    name = last_segment(dotted(kind) or "")
    if name == "bool":
        return "pybool"
    if name in _SCALAR_TYPES:
        return _SCALAR_TYPES[name]
    if _STR_TO_BOOL.search(name):
        return "bool"
    return "?"


def _lambda_type(function: ast.Lambda) -> str:
    """`lambda x: x.lower() == "true"` and `lambda x: x in ("True", "1")`: True for the listed texts
    only; `lambda x: bool(strtobool(x))`: a str-to-bool helper."""
    body = function.body
    if len(function.args.args) != 1:
        return "?"
    parameter = function.args.args[0].arg
    if isinstance(body, ast.Call) and last_segment(dotted(body.func) or "") == "bool" and len(body.args) == 1:
        body = body.args[0]  # `bool(strtobool(x))`
    if isinstance(body, ast.Call) and _STR_TO_BOOL.search(last_segment(dotted(body.func) or "")):
        return "bool" if len(body.args) == 1 and _is_parameter(body.args[0], parameter) else "?"
    if not (isinstance(body, ast.Compare) and len(body.ops) == 1):
        return "?"
    subject = body.left
    lowered = isinstance(subject, ast.Call) and isinstance(subject.func, ast.Attribute) and subject.func.attr == "lower"
    if lowered:
        subject = subject.func.value  # type: ignore[union-attr]
    if not _is_parameter(subject, parameter):
        return "?"
    right = body.comparators[0]
    texts = [right] if isinstance(body.ops[0], ast.Eq) else getattr(right, "elts", []) if isinstance(body.ops[0], ast.In) else []
    words = [t.value for t in texts if isinstance(t, ast.Constant) and isinstance(t.value, str)]
    if not words or len(words) != len(texts):
        return "?"
    return ("in-lower:" if lowered else "in:") + "\x1f".join(words)


def _is_parameter(expr: ast.expr, parameter: str) -> bool:
    """`x`, or `str(x)`, for the lambda's parameter `x`."""
    if isinstance(expr, ast.Call) and dotted(expr.func) == "str" and len(expr.args) == 1:
        expr = expr.args[0]
    return isinstance(expr, ast.Name) and expr.id == parameter
