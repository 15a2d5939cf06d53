"""Which values can reach a use: reaching definitions over one scope, walked once.

A `device_map` is rarely a literal in the call. It is a name bound earlier, a key of a kwargs
dict that is splatted in, a dataclass field default read as `args.device_map`, or a branch of an
`if ddp:`. The flow keeps, for every point of a scope, each binding that can still be live there,
and prunes the branches of conditions that the detected setup decides.

The algorithm. The first question about a scope walks it once, forward, and keeps the state
before every statement (`_record_scope`); every later question about the scope is a lookup
(`_state_before`). A state maps a name, an attribute chain or a dict key to the bindings that may
reach it; it is persistent (analysis/flowstate.py), so keeping one per statement costs only what
each statement changes. Each block's walk also gives the keys it changed, and two paths are joined
by looking at those keys alone. At each compound statement:
- `if`: each branch is walked once from the state before it, with its condition as a guard. The
  condition is decided (once: `truth` keeps every condition's answer) only when the branches hand
  on different states; a branch the setup rules out is still walked for the questions inside it,
  but not joined.
  Where both branches are joined, every binding of a key a branch changed reaches the join with
  that branch's condition in its `path`: `x = None` reaches past `if q: x = cfg()` only where q is
  false (a binding made in the branch has the condition among its own guards already). A key's
  list is marked as a whole (flowstate.Carried), not binding by binding, and two long lists join as
  two items, so a join costs the same however much reaches it; a question reads a marked list once
  (`_bindings_read`), each binding with the conditions of every way it came, and one binding that
  came several ways keeps the conditions all its ways share. Conditions on one value that
  contradict (`excludes`) then keep a binding from a read on a path it cannot take.
- a loop: one earlier pass of the body, with conditions left undecided (a condition there could
  ask about a later point of this very body), gives what the body binds on a previous iteration;
  the body is recorded from the state before the loop joined with that; one more pass from the
  state before the loop gives what the loop hands on. Three passes a loop, so a statement nested in
  d loops is walked at most 1 + 2d times.
- an `if`/`elif` chain (an `if` whose `else` is one `if`): each branch is walked once from the state
  before the chain, with the conditions of the branches passed and its own, as for nested `if`s.
  The joins are those of the nested `if`s, from the last link up, but a link's join looks only at
  the keys its own branch writes, the keys written below that the state before the chain has (or
  whose dict it has), and those no join below has settled yet: a key first bound further down is
  absent from this link's branch, so the join hands on what the links below gave it, untouched.
- `with`, `try`, `match`, a class body: each block once, from the state before the statement, and
  again for what is handed on only where that starts from another state (a `with ... as`, the
  `else`/handlers/`finally` of a `try`).
Statements after a `return`, `raise`, `break` or `continue` get the state where control left.

Cost: for a scope of n statements nested at most d deep, O(n * d) statement visits, each O(log k)
for the k keys it changes; a join costs the keys its paths changed, each O(1) (a list longer than
four joins as one item). An `elif` chain of b branches costs b joins, each of the keys its branch
writes and those the state before the chain has: linear in the chain. A question pays for what it
reads: the first read of a marked list costs the lists inside it once each, times the bindings
they hold (kept: a later read of any of them is a lookup). What stays superlinear is what the
answers hold: a name re-bound in every branch of a chain reaches a read below it with a binding per
branch, a path down a chain holds a condition per branch passed, and each question compares its
conditions with those of the bindings it reaches.
Questions cost their answer: a lookup, then the bindings followed. A question asked while its own
scope is being walked, about a point the walk has not reached (a condition reading a value bound
further down a loop), sees nothing bound there yet.
"""

from __future__ import annotations

import ast
import copy
import re
import weakref
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from functools import cached_property, partial
from typing import Protocol

from placement_lint.analysis.arguments import UNDECIDED, fire_defaults, fire_entry, parser_fields, value_of
from placement_lint.analysis.flowstate import EMPTY, Bindings, Carried, FlowState, Scratch, base_of, merge
from placement_lint.analysis.guards import (
    NO_LITERAL,
    Fact,
    FactIndex,
    evaluate_truth,
    exclude,
    facts_of,
    fails,
    is_subject,
    literal,
)
from placement_lint.analysis.index import index_of, walk
from placement_lint.analysis.names import PER_PROCESS_CALLS, SPREADING_CALLS, ImportTable, dotted, last_segment
from placement_lint.distributed import Mode, Setup
from placement_lint.patterns import LazyPattern
from placement_lint.records import NamedTuple

Guard = tuple[ast.expr, bool]  # a condition and the outcome the path took


class _Absent:
    """A kwargs dict that is known not to hold the key: the loader's default applies."""

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT = _Absent()
Value = ast.expr | _Absent | None  # None: cannot be resolved


class Binding(NamedTuple):
    value: Value
    statement: ast.AST
    guards: tuple[Guard, ...] = ()
    # The conditions of the branches it was carried through unchanged to get here: `x = None` before
    # `if q: x = cfg()` reaches past the `if` only where q is false. Kept apart from `guards` (where
    # it was bound), and asked only whether two paths exclude each other.
    path: tuple[Guard, ...] = ()

    def __hash__(self) -> int:
        # Equal bindings share their value's and statement's nodes (compared by identity), so those
        # alone make a valid hash; a tuple's hash would hash every guard too, one per `if` around
        # the binding, whenever a join of two paths folds its equal bindings into one.
        return hash((id(self[0]), id(self[1])))


class Candidate(NamedTuple):
    """One value an expression can take, with the path of conditions and bindings that led to it."""

    value: Value
    guards: tuple[Guard, ...] = ()
    via: tuple[ast.AST | LaunchArgument | HelperReturn, ...] = ()
    # For a dict display bound to a name: every value the dict holds where it is used, including the
    # entries stored into it afterwards (`device_map["lm_head"] = 1`); None: the display's own.
    entries: MapEntries | None = None
    path: tuple[Guard, ...] = ()  # the branches its bindings were carried through (Binding.path)

    @property
    def conditions(self) -> tuple[Guard, ...]:
        """Every condition known to hold where this value reaches: where it was bound, and the way here."""
        return (*self.guards, *self.path) if self.path else self.guards

    @property
    def from_launch(self) -> LaunchArgument | None:
        return next((step for step in self.via if isinstance(step, LaunchArgument)), None)

    @property
    def helper(self) -> HelperReturn | None:
        """The first-party helper whose return value this is (the outermost call, in the checked file)."""
        return next((step for step in self.via if isinstance(step, HelperReturn)), None)

    @property
    def foreign(self) -> HelperReturn | None:
        """The helper in another module the value comes from: its nodes belong to that module."""
        return next((step for step in self.via if isinstance(step, HelperReturn) and step.resolver is not None), None)


class MapEntries(NamedTuple):
    values: tuple[ast.expr, ...]
    # The store in a loop (or the comprehension) of a device that varies with the loop variable
    # (`device_map[f"model.layers.{i}"] = i // per_gpu`): the map spreads the layers over devices.
    spread_by: ast.stmt | ast.DictComp | None = None


class ForeignFunction(NamedTuple):
    """A function defined in another module of the repository, as a `HelperLocator` finds it."""

    resolver: Resolver  # over its module, for the same setup
    function: ast.FunctionDef
    path: str  # the module's path, as messages name files
    text: str  # the module's source, to quote its values as written


class ForeignConstant(NamedTuple):
    """A name another module of the repository binds once, at its top level, to a value
    (`DEVICE_MAP = {"": LOCAL_RANK}` in settings.py), as a `HelperLocator` finds it."""

    resolver: Resolver  # over its module, for the same setup
    statement: ast.Assign | ast.AnnAssign
    value: ast.expr
    path: str
    text: str


class HelperReturn(NamedTuple):
    """A step in a candidate's path: the value is what a first-party helper function returns, or (a
    name `call`) the value another module binds a name this file imports to (ForeignConstant)."""

    call: ast.Call | ast.Name  # the call of the helper, or the imported name read, in the checked file
    name: str  # the helper as written at the call
    statement: ast.Return | ast.Assign | ast.AnnAssign  # the `return` (or the assignment) that gives the value
    foreign: ForeignFunction | ForeignConstant | None = None  # the helper, when it is defined in another module

    @property
    def imported(self) -> bool:
        """The value is another module's constant, imported here (not a helper's return)."""
        return isinstance(self.call, ast.Name)

    @property
    def resolver(self) -> Resolver | None:
        return self.foreign.resolver if self.foreign else None

    @property
    def path(self) -> str | None:
        return self.foreign.path if self.foreign else None


class LaunchArgument(NamedTuple):
    """A step in a candidate's path: the value came from a launch's command line, not the file."""

    name: str
    value: str
    where: str


def _argument_value(text: str, at: ast.expr) -> ast.expr | None:
    """`--device_map auto` -> "auto", `--q_lora True` -> True, placed where the file reads the field.
    Bound arguments arrive as literals (`'auto'`, analysis.arguments); UNDECIDED is no value."""
    if text == UNDECIDED:
        return None
    try:
        value = value_of(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        value = _plain_value(text)
    if not isinstance(value, (bool, int, float, str, type(None))):
        value = text
    node = ast.Constant(value)
    return ast.copy_location(node, at)


def _plain_value(text: str) -> object:
    lowered = text.lower()
    value: object = {"true": True, "false": False, "none": None}.get(lowered, text)
    if value is text:
        try:
            value = int(text)
        except ValueError:
            pass
    return value


# Fields whose value names what the user runs (`model_name_or_path`, `model_type`, `base_model`), not a switch.
_USER_CHOICE = LazyPattern(r"model|name|path|type|arch|family|checkpoint|size", re.I)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
# How a condition reads the environment: `os.environ["X"]`, `os.environ.get("X")`, `os.getenv("X")`.
_ENVIRON = LazyPattern(r"(^|\.)environ$")
_ENV_READER = LazyPattern(r"(^|\.)(environ\.get|getenv)$")
_KNOWN_DICT = "[?]"  # marker key: the name is bound to a dict display whose keys we know
_COMPUTED_KEYS = "[*]"  # entries stored under keys computed at run time (`device_map[f"layers.{i}"] = ...`)


# Finds a first-party helper defined in another module: (the name as called, the setup) -> that
# module's resolver, the function, and the module's path for messages. Given by the caller, who
# knows the repository; the analysis itself reads no other file.
class HelperLocator(Protocol):
    """Finds, for a name as this file writes it, the function (or the constant) of another module of
    the repository it refers to (context/helpers.py)."""

    def __call__(self, written: str, setup: Setup) -> ForeignFunction | None: ...

    def constant(self, name: str, setup: Setup) -> ForeignConstant | None: ...


def _truthy(text: str) -> bool:
    """A launch argument that turns its field on (`--load_in_4bit true`, a bare `--flag`)."""
    if text == UNDECIDED:
        return False
    try:
        return bool(value_of(text))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text.lower() not in ("false", "0", "no", "none", "")


def key_of(base: str, key: str) -> str:
    return f"{base}[{key}]"


class Resolver:
    def __init__(
        self,
        module: ast.Module,
        setup: Setup,
        arguments: tuple[tuple[str, str, str], ...] = (),
        helpers: HelperLocator | None = None,
    ) -> None:
        self.module = module
        self.setup = setup
        self.helpers = helpers
        # Values a launch passes on the command line for parser fields: (field, value, where); with
        # where "", the default of a field the launched script's parser defines outside this file.
        self.arguments = arguments
        # id(statement) -> the running conditions of its block and how many hold before it (see _passing_before)
        self._block_passing: dict[int, tuple[list[Guard], int | None]] = {}
        self._flows: dict[int, _ScopeFlow] = {}  # by id(scope): each scope is walked once, see _record_scope
        self._recording: dict[int, FlowState] = {}  # the states of the scope being walked, by id(statement)
        self._field_defaults: dict[str, list[ast.expr | None]] | None = None
        self.index = index_of(self.module)
        # The launch's script arguments set to a true value, and each condition's truth once asked:
        # rules ask the same test again (guards on values, reachability, setup probes).
        self._passed = frozenset(n for n, value, _ in self.arguments if _truthy(value))
        self._truths: dict[int, bool | None] = {}
        self._facts: dict[tuple[int, bool], list[Fact]] = {}  # what each condition's outcome says, once asked
        self._subjects: dict[int, str] = {}  # by id(expr): what each fact is about (see _subject_of)
        # A function, not a method: the fact indexes kept for the module's branches hold it (no cycle).
        self._subject = partial(_subject_of, self._subjects)
        self._scopes: dict[int, ast.AST] = {}  # by id(node), see scope_of
        self._deciding: set[int] = set()  # the conditions whose truth is being worked out (see truth)
        self._defaults: set[int] = set()  # the field defaults candidates were read from
        self._default_fields: dict[int, str] = {}  # ... and the field each is the default of
        # Conditions undecided only by a value the user chooses (see chosen_by_user), and whether the
        # condition being evaluated met one.
        self._choices: set[int] = set()
        self._chose = False
        self._settings_read: dict[int, bool] = {}  # by id(condition), see reads_run_settings
        self._text_fields: set[str] | None = None
        self._blind = 0  # > 0: walking a loop's earlier pass, where conditions are not decided
        # > 0: values may come from helpers in other modules. Only callers that know such a value's
        # nodes belong to another file ask for them (the device_map analysis); every other question
        # (conditions, a rule reading a config call to edit it) gets this file's nodes only.
        self._importing = 0
        self._imports: ImportTable | None = None  # see _qualify
        # What the analyses over this module work out once for all their questions, by a key of their
        # own (kept here: the module's nodes, whose ids some keys hold, live as long as the resolver).
        self.memo: dict[tuple[object, ...], object] = {}
        self._imported_functions: dict[str, ForeignFunction | None] = {}  # see imported_function
        self._enclosing: dict[tuple[int, bool], tuple[Guard, ...]] = {}  # by (id(if), branch), see enclosing_guards
        self._filed_paths: dict[int, tuple[FactIndex, set[Guard], bool]] = {}  # by id of an enclosing tuple
        self._read: dict[int, tuple[Bindings, list[Binding]]] = {}  # by id of a stored list, see _bindings_read
        self._entries_followed: dict[tuple[int, int, int, bool], tuple[Binding, list[Candidate]]] = {}  # see _entry_values
        self._walks = 0  # scopes being walked now: a question asked meanwhile may see a state not complete yet

    @contextmanager
    def following_imports(self) -> Iterator[None]:
        """Within: `candidates` also follows helpers imported from the repository's other modules."""
        self._importing += 1
        try:
            yield
        finally:
            self._importing -= 1

    # -- structure -------------------------------------------------------------------------

    def parent(self, node: ast.AST) -> ast.AST | None:
        return self.index.parents.get(id(node))

    def ancestors(self, node: ast.AST) -> Iterable[ast.AST]:
        current = self.parent(node)
        while current is not None:
            yield current
            current = self.parent(current)

    def scope_of(self, node: ast.AST) -> ast.AST:
        """The function or lambda `node` is in, else the module. Kept for every node passed on the way
        up: a node nested d deep (an `elif` chain nests each branch in the one before) would otherwise
        cost d steps each time the rules ask."""
        scopes = self._scopes
        found = scopes.get(id(node))
        if found is not None:
            return found
        if id(node) not in self.index.parents:  # not of this module's tree (nor kept alive by it): not kept
            return next((a for a in self.ancestors(node) if isinstance(a, _SCOPES)), self.module)
        passed = [node]
        for ancestor in self.ancestors(node):
            if isinstance(ancestor, _SCOPES):
                found = ancestor
                break
            found = scopes.get(id(ancestor))
            if found is not None:
                break
            passed.append(ancestor)
        else:
            found = self.module
        for step in passed:
            scopes[id(step)] = found
        return found

    def enclosing_guards(self, node: ast.AST) -> tuple[Guard, ...]:
        """The conditions that hold wherever `node` runs, inside its function: the `if`s (and
        conditional expressions) around it, each with the branch `node` is in, innermost first. Loops
        are left out: a `while` body may run with its test already false on the way out. Kept per
        branch, so that a question goes up only to the nearest branch asked about before (down an
        if/elif chain, each `elif` is one level deeper, and every read in it asks)."""
        found: tuple[Guard, ...] = ()
        pending: list[tuple[tuple[int, bool], tuple[Guard, ...]]] = []  # the branches not kept yet, innermost first
        child = node
        for ancestor in self.ancestors(node):
            if isinstance(ancestor, _SCOPES) or isinstance(ancestor, ast.ClassDef):
                break
            if isinstance(ancestor, ast.If) and child is not ancestor.test:
                branch = child in ancestor.body
                held: tuple[Guard, ...] = ((ancestor.test, branch),)
            elif isinstance(ancestor, ast.IfExp) and child is not ancestor.test:
                branch = child is ancestor.body
                held = ((ancestor.test, branch),)
            elif isinstance(ancestor, ast.match_case) and child in ancestor.body:
                branch = True
                held = self._case_guards(ancestor)
            else:
                child = ancestor
                continue
            known = self._enclosing.get((id(ancestor), branch))
            if known is not None:
                found = known
                break
            pending.append(((id(ancestor), branch), held))
            child = ancestor
        for key, held in reversed(pending):
            found = self._enclosing[key] = (*held, *found)
        return found

    def _case_guards(self, case: ast.match_case) -> tuple[Guard, ...]:
        """The conditions a case's body runs under, innermost first, as those of the branches of an
        if/elif chain on the match's subject: see case_guards."""
        match = self.parent(case)
        assert isinstance(match, ast.Match)
        return tuple(reversed(self.case_guards(match)[match.cases.index(case)]))

    def case_guards(self, match: ast.Match) -> list[tuple[Guard, ...]]:
        """Each case's conditions, outermost first, as an if/elif chain on the subject would give them:
        a case of literal patterns (`case "qlora":`, `case "lora" | "full":`) with no `if` clause holds
        `subject in (...)` of its values, and every later case holds that the subject is none of them.
        Other patterns say nothing of the subject. The tests are made once a module (see _case_test)."""
        guards: list[tuple[Guard, ...]] = []
        passed: tuple[Guard, ...] = ()
        for case in match.cases:
            test = self._case_test(match, case)
            guards.append(passed if test is None else (*passed, (test, True)))
            if test is not None:
                passed = (*passed, (test, False))
        return guards

    def _case_test(self, match: ast.Match, case: ast.match_case) -> ast.expr | None:
        """`subject in (v1, v2)` for a case of literal patterns with no `if` clause: one node a case
        for every resolver of the module (kept in the index, as a getattr read is), located at the pattern."""
        if case.guard is not None:
            return None
        made = self.index.added.get(("case", id(case)))
        if made is not None:
            return made  # type: ignore[return-value]
        patterns = case.pattern.patterns if isinstance(case.pattern, ast.MatchOr) else [case.pattern]
        values: list[ast.expr] = []
        for pattern in patterns:
            if isinstance(pattern, ast.MatchValue):
                values.append(pattern.value)
            elif isinstance(pattern, ast.MatchSingleton):
                values.append(ast.copy_location(ast.Constant(value=pattern.value), pattern))
            else:
                return None
        choices = ast.Tuple(elts=values, ctx=ast.Load())
        test = ast.copy_location(ast.Compare(left=match.subject, ops=[ast.In()], comparators=[choices]), case.pattern)
        self.index.added[("case", id(case))] = test
        self.index.parents[id(test)] = case
        return test

    def guards_to(self, node: ast.AST, function: ast.AST) -> list[Guard] | None:
        """The conditions under which `function`'s body reaches `node`: the `if`s around it, and the
        earlier `if`s that return or raise in one branch (`if world_size == 1: return "auto"` before
        `return per_rank_map`). None when every way there returned or raised first."""
        found = list(self.enclosing_guards(node))
        child: ast.AST = node
        for ancestor in self.ancestors(node):
            passed = self._passing_before(ancestor, child)
            if passed is None:
                return None
            found += passed
            if ancestor is function or isinstance(ancestor, _SCOPES):
                break
            child = ancestor
        return found

    def _passing_before(self, parent: ast.AST, child: ast.AST) -> list[Guard] | None:
        """What must hold to get from the start of `child`'s block (in `parent`) to `child`: the
        conditions of the earlier `if`s that leave in one branch; None when an earlier statement always
        leaves. Worked out once per block, as running totals, so each question costs its answer."""
        found = self._block_passing.get(id(child))
        if found is None:
            for block in _bodies_of(parent):
                conditions: list[Guard] = []
                leaves = False
                for stmt in block:
                    self._block_passing[id(stmt)] = (conditions, None if leaves else len(conditions))
                    if leaves:
                        continue
                    if isinstance(stmt, (ast.Return, ast.Raise)):
                        leaves = True
                    elif isinstance(stmt, ast.If):
                        passing = _passing(stmt)
                        if passing is None:
                            leaves = True
                        else:
                            conditions += passing
            found = self._block_passing.setdefault(id(child), ([], 0))  # not in a block: an expression's parent
        conditions, count = found
        return None if count is None else conditions[:count]

    # -- conditions ------------------------------------------------------------------------

    def truth(self, test: ast.expr) -> bool | None:
        """The condition's outcome in this setup (None: either), worked out once. A condition asked
        again while its own answer is being worked out (`mode = a if mode2 else b` and `mode2 = c if
        mode else d`, through a loop or a helper) is undecided there: a cycle decides nothing."""
        known = self._truths.get(id(test), _PENDING)
        if known is not _PENDING:
            return known  # type: ignore[return-value]
        if id(test) in self._deciding:
            return None
        self._deciding.add(id(test))
        outer, self._chose = self._chose, False
        try:
            truth = self._truths[id(test)] = evaluate_truth(test, self.setup, self._lookup, self._passed, self._qualify)
        finally:
            self._deciding.discard(id(test))
        if truth is None and self._chose:
            self._choices.add(id(test))
        self._chose = outer or self._chose
        return truth

    def truth_for_call(self, test: ast.expr, function: ast.FunctionDef, bound: Mapping[str, ast.expr]) -> bool | None:
        """The truth of a condition in `function` for one call of it, whose literal arguments (and the
        defaults it leaves) are `bound` to the parameters: `if model_type == "moss":` under
        `get_device_map(model_type="moss")`. Other conditions are decided as everywhere."""
        reads = {n.id for n in walk(test) if isinstance(n, ast.Name) and n.id in bound}
        if not reads:
            return self.truth(test)

        def lookup(expr: ast.expr) -> list[ast.expr | None]:
            if isinstance(expr, ast.Name) and expr.id in reads and self.scope_of(expr) is function:
                return [bound[expr.id]]
            return self._lookup(expr)

        return evaluate_truth(test, self.setup, lookup, self._passed, self._qualify)

    def _qualify(self, name: str) -> str:
        """A callee's name as the module imports it, for conditions (the table is made when first asked)."""
        if self._imports is None:
            self._imports = ImportTable.of(self.module, self.index.imports)
        return self._imports.qualify_dotted(name)

    def truth_at_defaults(self, test: ast.expr, function: ast.FunctionDef) -> bool | None:
        """The truth of a condition on `function`'s parameters for a call that leaves them at their
        literal defaults (`ds_config=None`, then `if ds_config is not None:`). None when the test reads
        none of them. Conditions on the distributed setup stay unknown: only the defaults decide."""
        bound = call_literals(ast.Call(func=ast.Name(function.name), args=[], keywords=[]), function)
        if not any(isinstance(n, ast.Name) and n.id in bound for n in walk(test)):
            return None

        def lookup(expr: ast.expr) -> list[ast.expr | None]:
            if isinstance(expr, ast.Name) and expr.id in bound and self.scope_of(expr) is function:
                return [bound[expr.id]]
            return [None]

        return evaluate_truth(test, Setup(Mode.POSSIBLE), lookup)

    def chosen_by_user(self, test: ast.expr) -> bool:
        """The condition is undecided because it reads a value the user chooses per run and no launch
        decides (a model name, a model type): the repository ships both branches, so both are live."""
        self.truth(test)
        return id(test) in self._choices

    def reads_run_settings(self, test: ast.expr) -> bool:
        """The condition reads how a run is configured: a field of parsed arguments or of a config
        object (`args.use_lora`, `cfg["max_memory"]`, `self.quantize`), a parameter, an environment
        variable, or a name bound from one of them (`quantization_config = get_quantization_config(
        model_args)`). Left undecided, it is a setting the launch does not show, most often left at a
        default that does not take the branch (TRL's `ModelConfig.load_in_4bit`). A condition that
        reads only library state (`sys.argv[-1].startswith("x")`, `torch.backends.mps.is_available()`)
        or names nothing here binds goes either way on any run."""
        known = self._settings_read.get(id(test))
        if known is None:
            known = self._settings_read[id(test)] = self._reads_settings(test, set(), 0)
        return known

    def _reads_settings(self, expr: ast.expr, seen: set[int], depth: int) -> bool:
        if depth > 4 or id(expr) in seen:
            return False
        seen.add(id(expr))
        for node in walk(expr):
            if isinstance(node, ast.Subscript) and _ENVIRON.search(dotted(node.value) or ""):
                return True
            if isinstance(node, ast.Call) and _ENV_READER.search(dotted(node.func) or ""):
                return True
            if isinstance(node, (ast.Attribute, ast.Subscript)):
                root = node.value
                while isinstance(root, (ast.Attribute, ast.Subscript)):
                    root = root.value
                if isinstance(root, ast.Name) and not self._imported_name(root):
                    return True  # a field of an object the script holds: arguments, a config, `self`
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                found = self.bindings(node.id, node)
                if found is None:
                    if node.id in _parameters(self.scope_of(node)):
                        return True
                    continue
                for binding in found:
                    value = binding.value if isinstance(binding.value, ast.expr) else getattr(binding.statement, "value", None)
                    if isinstance(value, ast.expr) and self._reads_settings(value, seen, depth + 1):
                        return True
        return False

    def _imported_name(self, name: ast.Name) -> bool:
        """`sys`, `torch`, `dist`: a name the module binds by importing it, so what it reads is library state."""
        found = self.bindings(name.id, name)
        return bool(found) and all(isinstance(b.statement, (ast.Import, ast.ImportFrom)) for b in found)

    def excludes(self, first: Iterable[Guard], second: Iterable[Guard]) -> bool:
        """No run takes both paths: a condition on one says of a value what a condition on the other
        contradicts (`args.bits in [4, 8]` and `args.bits == 16`; `q` and `not q`; `cfg is None` and
        `cfg`), and nothing binds the value again between the two tests."""
        return exclude(self._facts_of(first), self._facts_of(second), self._same_value, self._subject)

    def _facts_of(self, guards: Iterable[Guard]) -> list[Fact]:
        found: list[Fact] = []
        for test, outcome in guards:
            facts = self._facts.get((id(test), outcome))
            if facts is None:
                facts = self._facts[(id(test), outcome)] = facts_of(test, outcome)
            found += facts
        return found

    def _same_value(self, one: Fact, other: Fact) -> bool:
        """Two facts on one name, read in this module and one scope, speak of one value: the names it is
        read through (`args` of `args.bits`) have the same bindings at both tests, and each binding of
        the name that reaches the later test but not the earlier is a literal the later fact rules out
        (`train_config.quantization = "8bit"` inside `if train_config.quantization:`, before a test
        that it is false). None of them is made in a loop around either test (a loop binds anew on
        each pass)."""
        first, second = one[0], other[0]
        if first is second:
            return True
        parents = self.index.parents
        if id(first) not in parents or id(second) not in parents:
            return False  # a condition of another module's helper
        scope = self.scope_of(first)
        key = _state_key(first)
        if key is None or self.scope_of(second) is not scope:
            return False
        if (second.lineno, second.col_offset) < (first.lineno, first.col_offset):  # type: ignore[attr-defined]
            first, second, other = second, first, one
        loops = [a for node in (first, second) for a in self._ancestors_in(node, scope) if isinstance(a, _LOOPS)]
        prefixes = _prefixes(key)
        for prefix in prefixes:
            before, after = self.bindings(prefix, first) or [], self.bindings(prefix, second) or []
            earlier = {id(b.statement) for b in before}
            for binding in after:
                if id(binding.statement) in earlier:
                    continue
                value = literal(binding.value) if prefix == key and isinstance(binding.value, ast.expr) else NO_LITERAL
                if value is NO_LITERAL or not fails(value, other):
                    return False
            if loops and any(b.statement is loop or self._inside(b.statement, loop) for b in (*before, *after) for loop in loops):
                return False
        return True

    def _ancestors_in(self, node: ast.AST, scope: ast.AST) -> Iterator[ast.AST]:
        for ancestor in self.ancestors(node):
            if ancestor is scope:
                return
            yield ancestor

    def _inside(self, node: ast.AST, container: ast.AST) -> bool:
        return any(ancestor is container for ancestor in self.ancestors(node))

    def _reachable(self, found: list[Binding], at: ast.AST, guards: tuple[Guard, ...]) -> list[Binding]:
        """The bindings whose path a run reaching `at` (along `guards`) can have taken: one bound under
        `if args.bits in [4, 8]:` never reaches a read under `if args.bits == 16:`."""
        if not any(binding.guards or binding.path for binding in found):
            return found
        enclosing = self.enclosing_guards(at)
        here = (*guards, *enclosing) if guards else enclosing
        if not here:
            return found
        filed, held, consistent = self._filed_path(here) if here is enclosing else self._file_path(here)
        # A binding all of whose conditions are the read's own (down an if/elif chain, those of the
        # read's branch) is excluded only by a contradiction within the read's path, worked out once;
        # on a path without one, only the binding's other conditions can contradict it (down a chain,
        # its own branch's test, not the tests of the branches both passed).
        return [
            b
            for b in found
            if not (b.guards or b.path)
            or (held.issuperset(b.guards) and held.issuperset(b.path) and consistent)
            or not filed.contradicted(self._facts_of(_beyond(held, b) if consistent else (*b.guards, *b.path)), self._same_value)
        ]

    def _filed_path(self, enclosing: tuple[Guard, ...]) -> tuple[FactIndex, set[Guard], bool]:
        """_file_path of a branch's conditions, kept for every read in that branch (the tuple is the
        one enclosing_guards keeps, so its id stays its own)."""
        filed = self._filed_paths.get(id(enclosing))
        if filed is None:
            filed = self._filed_paths[id(enclosing)] = self._file_path(enclosing)
        return filed

    def _file_path(self, here: tuple[Guard, ...]) -> tuple[FactIndex, set[Guard], bool]:
        """The facts of a read's path filed for its bindings to be tried against (exclusion is
        symmetric), the path's conditions, and whether no fact of the path contradicts another."""
        facts = self._facts_of(here)
        filed = FactIndex(facts, self._subject)
        return filed, set(here), not filed.contradicted(facts, self._same_value)

    def _lookup(self, expr: ast.expr) -> list[ast.expr | None]:
        """What a name in a condition can hold; an expression that resolves to nothing but itself
        (an unbound attribute such as `args.use_peft`) is unknown, not a value to evaluate again."""
        values: list[ast.expr | None] = []
        for candidate in self.candidates(expr, depth=6):
            value = candidate.value
            if isinstance(value, ast.expr) and value is not expr and candidate.foreign is None and not self._text_default(value):
                values.append(value)
                continue
            values.append(None)
            if candidate.from_launch is None and (
                (isinstance(value, ast.expr) and self._text_default(value)) or (value is expr and self._text_field(expr))
            ):
                self._chose = True
        return values

    def _text_default(self, value: ast.expr) -> bool:
        """A field's text default that names what the user runs (a model name), which no launch decided."""
        return (
            id(value) in self._defaults
            and isinstance(value, ast.Constant)
            and isinstance(value.value, str)
            and value.value != ""
            and bool(_USER_CHOICE.search(self._default_fields.get(id(value), "")))
        )

    def _text_field(self, expr: ast.expr) -> bool:
        """An attribute read of one of the module's own text fields naming what the user runs, which has no default."""
        if not isinstance(expr, ast.Attribute) or not _USER_CHOICE.search(expr.attr):
            return False
        if self._text_fields is None:
            self._text_fields = {name for name, f in parser_fields(self.module).items() if f.convert == "str"}
        return expr.attr in self._text_fields

    # -- bindings --------------------------------------------------------------------------

    def _getattr_read(self, call: ast.Call) -> ast.Attribute | None:
        """`getattr(args, "deepspeed", None)` read as `args.deepspeed` (what it is when the object has
        it, as the arguments a parser or a config class makes always do): an attribute node made once,
        placed in the tree as the call's child, so its reaching values are those at the call."""
        if not (
            isinstance(call.func, ast.Name)
            and call.func.id == "getattr"
            and len(call.args) in (2, 3)
            and isinstance(call.args[1], ast.Constant)
            and isinstance(call.args[1].value, str)
            and call.args[1].value.isidentifier()
            and _state_key(call.args[0]) is not None
        ):
            return None
        # One node a call for every resolver of the module: the parents outlive a resolver (a helper's
        # module is parsed once a run, read by each file's resolvers), and must name no node freed since.
        read = self.index.added.get(("getattr", id(call)))
        if read is None:
            read = ast.copy_location(ast.Attribute(value=call.args[0], attr=call.args[1].value, ctx=ast.Load()), call)
            self.index.added[("getattr", id(call))] = read
            self.index.parents[id(read)] = call
        return read  # type: ignore[return-value]

    def bindings(self, key: str, at: ast.AST) -> list[Binding] | None:
        scope = self.scope_of(at)
        state = self._state_before(scope, at)
        if key in state:
            return self._bindings_read(state[key])
        base = key.split("[", 1)[0]
        if "[" in key and _known_absent(state, base):
            return [Binding(ABSENT, at)]
        if scope is not self.module:
            if base.split(".")[0] in _parameters(scope):
                return None
            module_state = self._state_before(self.module, None)
            if key in module_state:
                return self._bindings_read(module_state[key])
            if "[" in key and _known_absent(module_state, base):
                return [Binding(ABSENT, at)]
        return None

    def _bindings_read(self, stored: Bindings) -> list[Binding]:
        """A stored list as its bindings, each with the path it was carried along (flowstate.Carried).
        Each list is read once, after the lists its Carried hold (in a loop, not a recursion: a long
        function nests a Carried per `if`), and its reading folded, so a list that many ways reach
        costs its length once per way, never once per path through the ways."""
        read = self._read
        if not _carries(stored):
            return stored
        pending = [stored]
        while pending:
            top = pending[-1]
            if id(top) in read:
                pending.pop()
                continue
            inner = [
                item.bindings
                for item in top
                if type(item) is Carried and id(item.bindings) not in read and _carries(item.bindings)
            ]
            if inner:
                pending += inner
                continue
            pending.pop()
            bindings: list[Binding] = []
            for item in top:
                if type(item) is not Carried:
                    bindings.append(item)
                    continue
                carried = read[id(item.bindings)][1] if id(item.bindings) in read else item.bindings
                guards = item.guards
                bindings += [Binding(b[0], b[1], b[2], (*b[3], *guards)) for b in carried] if guards else carried
            read[id(top)] = (top, _folded(list(dict.fromkeys(bindings))))
        return read[id(stored)][1]

    def map_entries(self, name: ast.expr) -> MapEntries | None:
        """Every value the dict bound to `name` holds where `name` is read, when entries were stored
        into it after it was built; None when there were none (its display says it all)."""
        base = _state_key(name)
        if base is None or "[" in base:
            return None
        scope = self.scope_of(name)
        state = self._state_before(scope, name)
        if key_of(base, _KNOWN_DICT) not in state:
            return None
        stored = [b for k in state.keys_under(base) if k != key_of(base, _KNOWN_DICT) for b in self._bindings_read(state[k])]
        # Stored apart from every display bound to the name (with two live, `None` then `{"": rank}`
        # under `if`, an entry of the one is not a store after the other).
        built = {id(d.statement) for d in self._bindings_read(state.get(base, []))}
        if all(id(b.statement) in built for b in stored):
            return None
        values = tuple(b.value for b in stored if isinstance(b.value, ast.expr))
        computed = [b for b in self._bindings_read(state.get(key_of(base, _COMPUTED_KEYS), [])) if isinstance(b.value, ast.expr)]
        spread_by = next((b.statement for b in computed if self._varies_with_loop(b.value, b.statement)), None)  # type: ignore[arg-type]
        return MapEntries(values, spread_by)  # type: ignore[arg-type]

    def _varies_with_loop(self, value: ast.expr, statement: ast.AST) -> bool:
        """The device stored by `statement` changes along a `for` loop around it."""
        loops = [a for a in self.ancestors(statement) if isinstance(a, (ast.For, ast.AsyncFor))]
        return self._varies(value, [(loop.target, loop.iter) for loop in loops])

    def _varies(self, value: ast.expr, loops: list[tuple[ast.expr, ast.expr]]) -> bool:
        """`value` changes along the loops (their targets and iterables): it is a counter over
        `range`/`enumerate` (`for gpu in range(n)`), or computed from a loop variable by division or
        remainder (`i // per_gpu`, `i % n_gpus`, `int(i / k)`, `f"cuda:{i * n // layers}"`)."""
        names = {n.id for target, _ in loops for n in walk(target) if isinstance(n, ast.Name)}
        counters = {
            n.id
            for target, iterable in loops
            if isinstance(iterable, ast.Call) and last_segment(dotted(iterable.func)) in ("range", "enumerate")
            for n in walk(target.elts[0] if isinstance(target, ast.Tuple) and target.elts else target)
            if isinstance(n, ast.Name)
        }
        if not names:
            return False
        pending, seen = [value], 0
        while pending and seen < 8:
            expr, seen = pending.pop(), seen + 1
            if isinstance(expr, ast.Name) and expr.id in counters:
                return True
            if isinstance(expr, ast.Call) and last_segment(dotted(expr.func)) in ("int", "floor", "str") and len(expr.args) == 1:
                pending.append(expr.args[0])
            elif isinstance(expr, ast.JoinedStr):
                pending += [part.value for part in expr.values if isinstance(part, ast.FormattedValue)]
            elif isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.FloorDiv, ast.Div, ast.Mod)):
                if any(isinstance(n, ast.Name) and n.id in names for n in walk(expr.left)):
                    return True
            elif isinstance(expr, ast.Name) and expr.id not in names:
                # `gpu_id = i % n_gpus` a line above the store
                pending += [
                    c.value for c in self.candidates(expr, depth=8) if isinstance(c.value, ast.expr) and c.value is not expr
                ]
        return False

    def _comprehension_entries(self, comprehension: ast.DictComp) -> MapEntries:
        """`{f"model.layers.{i}": i // per_gpu for i in range(n)}`: its values, and whether they change along its loops."""
        loops = [(generator.target, generator.iter) for generator in comprehension.generators]
        return MapEntries((comprehension.value,), comprehension if self._varies(comprehension.value, loops) else None)

    def candidates(
        self, expr: ast.expr, guards: tuple[Guard, ...] = (), via: tuple[ast.AST, ...] = (), depth: int = 0
    ) -> list[Candidate]:
        """The leaf values `expr` can evaluate to, resolving names and conditional expressions."""
        if depth > 10:
            return [Candidate(None, guards, via)]
        if isinstance(expr, ast.IfExp):
            truth = self.truth(expr.test)
            out: list[Candidate] = []
            if truth is not False:
                out += self.candidates(expr.body, (*guards, (expr.test, True)), via, depth + 1)
            if truth is not True:
                out += self.candidates(expr.orelse, (*guards, (expr.test, False)), via, depth + 1)
            return out
        if isinstance(expr, ast.BoolOp) and isinstance(expr.op, ast.Or):
            return [c for value in expr.values for c in self.candidates(value, guards, via, depth + 1)]
        if isinstance(expr, ast.NamedExpr):
            return self.candidates(expr.value, guards, via, depth + 1)
        if isinstance(expr, ast.Call):
            read = self._getattr_read(expr)
            if read is not None:
                return self.candidates(read, guards, via, depth + 1)
            followed = self._helper_returns(expr, guards, via, depth)
            if followed is not None:
                return followed
        key = _state_key(expr)
        if key is None:
            entries = self._comprehension_entries(expr) if isinstance(expr, ast.DictComp) else None
            return [Candidate(expr, guards, via, entries)]
        found = self.bindings(key, expr)
        if not found and isinstance(expr, ast.Attribute):
            given = self._constructor_keyword(expr)
            if given is not None:  # `args = ScriptArguments(use_4bit=True)`: not the parser's value
                return self.candidates(given, guards, via, depth + 1)
            passed = next((a for a in self.arguments if a[0] == expr.attr), None)
            if passed is not None and passed[2]:
                return [Candidate(_argument_value(passed[1], expr), guards, (*via, LaunchArgument(*passed)))]
            if passed is not None and expr.attr not in self.field_defaults():
                value = _argument_value(passed[1], expr)
                if value is not None:
                    self._defaults.add(id(value))
                    self._default_fields[id(value)] = expr.attr
                return [Candidate(value, guards, via)]
            defaults = self.field_defaults().get(expr.attr)
            if defaults and len(defaults) == 1 and defaults[0] is not None:
                self._defaults.add(id(defaults[0]))
                self._default_fields[id(defaults[0])] = expr.attr
                return self.candidates(defaults[0], guards, (*via, defaults[0]), depth + 1)
        if found is None and isinstance(expr, ast.Name):
            given = self._fire_argument(expr, guards, via, depth)
            if given is not None:
                return given
        if found:
            found = self._reachable(found, expr, guards)
        if found is None or not found:
            return [Candidate(expr if not isinstance(expr, ast.Name) else None, guards, via)]
        out = []
        for binding in found:
            if isinstance(binding.value, ast.expr):
                followed = self.candidates(binding.value, (*guards, *binding.guards), (*via, binding.statement), depth + 1)
                out += _carried_along(followed, binding.path)
                continue
            imported = self._imported_constant(expr, binding, guards, via, depth) if binding.value is None else None
            if imported is not None:
                out += _carried_along(imported, binding.path)
            else:
                out.append(Candidate(binding.value, (*guards, *binding.guards), (*via, binding.statement), path=binding.path))
        entries = self.map_entries(expr) if any(isinstance(c.value, ast.Dict) for c in out) else None
        if entries is not None:
            out = [c._replace(entries=entries) if isinstance(c.value, ast.Dict) else c for c in out]
        return out

    def _constructor_keyword(self, expr: ast.Attribute) -> ast.expr | None:
        """`args.use_4bit` where `args = ScriptArguments(use_4bit=True)` (or `TrainingArguments(deepspeed=...)`)."""
        base = _state_key(expr.value)
        bound = self.bindings(base, expr) if base is not None else None
        if not bound or len(bound) != 1 or not isinstance(bound[0].value, ast.Call):
            return None
        return next((kw.value for kw in bound[0].value.keywords if kw.arg == expr.attr), None)

    def _fire_argument(
        self, expr: ast.Name, guards: tuple[Guard, ...], via: tuple[ast.AST, ...], depth: int
    ) -> list[Candidate] | None:
        """A parameter of the function `fire.Fire(train)` runs, read in that function and not re-bound
        there: the launch's value for its option, else its default. None for any other name."""
        if self._fire_parameters is None or self.scope_of(expr) is not self._fire_parameters[0]:
            return None
        parameters = self._fire_parameters[1]
        if expr.id not in parameters:
            return None
        passed = next((a for a in self.arguments if a[0] == expr.id and a[2]), None)
        if passed is not None:
            return [Candidate(_argument_value(passed[1], expr), guards, (*via, LaunchArgument(*passed)))]
        default = parameters[expr.id]
        if default is None:
            return None  # a required parameter no launch here passes
        self._defaults.add(id(default))
        self._default_fields[id(default)] = expr.id
        return self.candidates(default, guards, (*via, default), depth + 1)

    @cached_property
    def _fire_parameters(self) -> tuple[ast.FunctionDef, dict[str, ast.expr | None]] | None:
        entry = fire_entry(self.module)
        return None if entry is None else (entry, fire_defaults(entry))

    # -- helpers ---------------------------------------------------------------------------

    def _helper_returns(
        self, call: ast.Call, guards: tuple[Guard, ...], via: tuple[ast.AST, ...], depth: int
    ) -> list[Candidate] | None:
        """What a first-party helper called with `call` returns: each `return` of a function defined in
        this module (or, through `helpers`, in another module of the repository), resolved there.
        None when the callee is not such a helper. A `return` under a condition the setup rules out
        is left out; one under a condition nobody can decide keeps it as a guard, so it is not decided."""
        name = dotted(call.func)
        if name is None or name.split(".")[0] not in self._callable_names:
            return None  # cheap: most calls are of a library (or a method), never of a helper here
        if last_segment(name) in PER_PROCESS_CALLS | SPREADING_CALLS:
            return None
        if any(isinstance(step, HelperReturn) and step.name == name for step in via):
            return [Candidate(None, guards, via)]  # a recursive helper: what it returns is not known here
        called = self.called_function(call, name)
        if called is None:
            return None
        function, foreign = called
        resolver = foreign.resolver if foreign else None
        if not _plain_function(function):
            return [Candidate(None, guards, via)]
        owner = resolver or self
        bound = call_literals(call, function)
        out: list[Candidate] = []
        for statement in _returns(function):
            step = HelperReturn(call, name, statement, foreign)
            if statement.value is None:
                out.append(Candidate(ast.copy_location(ast.Constant(None), statement), guards, (*via, step)))
                continue
            conditions = owner.guards_to(statement, function)
            if conditions is None:
                continue  # every path to it returned or raised before
            truths = [owner.truth_for_call(test, function, bound) for test, _ in conditions]
            if any(truth is not None and truth is not outcome for truth, (_, outcome) in zip(truths, conditions, strict=True)):
                continue  # this return does not run in this setup
            if resolver is None:
                # A condition only this call's arguments decide holds here: it is no guard of the value.
                kept = [
                    (self._at_call(test, function, call), outcome)
                    for (test, outcome), truth in zip(conditions, truths, strict=True)
                    if truth is None or owner.truth(test) is not None
                ]
                out += self.candidates(statement.value, (*guards, *kept), (*via, step), depth + 1)
                continue
            # The helper's conditions are its module's: decide them there, keep none of them.
            for candidate in resolver.candidates(statement.value, (), (*via, step), depth + 1):
                undecided = None in truths or any(
                    resolver.truth_for_call(test, function, bound) is None for test, _ in candidate.guards
                )
                value = None if undecided else candidate.value
                out.append(Candidate(value, guards, candidate.via, candidate.entries))
        if _falls_off_end(function):
            out.append(Candidate(None, guards, via))  # returns None at the end: nothing to judge, but not a value
        return out

    def _imported_constant(
        self, expr: ast.expr, binding: Binding, guards: tuple[Guard, ...], via: tuple[ast.AST, ...], depth: int
    ) -> list[Candidate] | None:
        """What a name this file imports from another module of the repository is bound to there, while
        imports are followed (ForeignConstant), resolved in that module as a helper's return is: a
        condition there nobody can decide leaves the value unknown. None for any other name."""
        if self.helpers is None or not self._importing or not isinstance(expr, ast.Name):
            return None
        if not isinstance(binding.statement, ast.ImportFrom):
            return None  # the other module's resolver follows no imports: no chain of constants to loop on
        foreign = self.helpers.constant(expr.id, self.setup)
        if foreign is None:
            return None
        step = HelperReturn(expr, expr.id, foreign.statement, foreign)
        out: list[Candidate] = []
        for candidate in foreign.resolver.candidates(foreign.value, (), (*via, binding.statement, step), depth + 1):
            undecided = any(foreign.resolver.truth(test) is None for test, _ in candidate.guards)
            out.append(
                Candidate(None if undecided else candidate.value, (*guards, *binding.guards), candidate.via, candidate.entries)
            )
        return out

    def _at_call(self, test: ast.expr, function: ast.FunctionDef, call: ast.Call) -> ast.expr:
        """A condition of this module's helper `function` as its caller `call` sees it: a parameter
        it reads is the value the call passes, when that is a name the caller can test too (`bits == 4`
        of `quant_config_for(args.bits)` is `args.bits == 4`, which `if args.bits == 16:` there
        contradicts). `test` itself when it reads no such parameter. One node a call and condition for
        every resolver of the module, kept in the index."""
        key = ("at call", id(call), id(test))
        made = self.index.added.get(key)
        if made is not None:
            return made  # type: ignore[return-value]
        passed = {name: value for name, value in call_arguments(call, function).items() if is_subject(value)}
        if passed and any(isinstance(n, ast.Name) and n.id in passed for n in ast.walk(test)):
            made = _ParametersAsPassed(passed).visit(copy.deepcopy(test))
            self.index.parents[id(made)] = call
        else:
            made = test  # kept too: the next resolver of the module asks no second time
        self.index.added[key] = made
        return made

    def called_function(self, call: ast.Call, name: str) -> tuple[ast.FunctionDef, ForeignFunction | None] | None:
        """The first-party function `call` (its callee written `name`) calls: one `def` of this module
        a bare name is bound to (foreign: None), or, while imports are followed, a function of another
        module of the repository the file imports."""
        if name.split(".")[0] not in self._callable_names:
            return None  # cheap: most calls are of a library (or a method), never of a helper here
        function = self._local_function(call) if isinstance(call.func, ast.Name) else None
        if function is not None:
            return function, None
        if self.helpers is None or not self._importing or not self._imported(name, call):
            return None
        foreign = self.imported_function(name)
        return None if foreign is None else (foreign.function, foreign)

    def imported_function(self, name: str) -> ForeignFunction | None:
        """The function of another module of the repository a callee, as written, names by the module's
        imports alone (not by what binds the name where it is called), looked up once a name."""
        if name not in self._imported_functions:
            self._imported_functions[name] = self.helpers(name, self.setup) if self.helpers is not None else None
        return self._imported_functions[name]

    @cached_property
    def imported_names(self) -> frozenset[str]:
        """The names the module's imports bind and no `def` of it rebinds."""
        bound = {(alias.asname or alias.name).split(".")[0] for node in self.index.imports for alias in node.names}
        return frozenset(bound - {node.name for node in self.index.functions})

    @cached_property
    def _callable_names(self) -> frozenset[str]:
        """Names a helper call can start with: functions defined in the module, and (when other modules
        are followed) names its imports bind."""
        names = {node.name for node in self.index.functions if isinstance(node, ast.FunctionDef)}
        if self.helpers is not None:
            names |= {(alias.asname or alias.name).split(".")[0] for node in self.index.imports for alias in node.names}
        return frozenset(names)

    def _local_function(self, call: ast.Call) -> ast.FunctionDef | None:
        """The function of this module a bare name calls, when that name is bound to one `def` there."""
        assert isinstance(call.func, ast.Name)
        found = self.bindings(call.func.id, call)
        if not found or len(found) != 1 or not isinstance(found[0].statement, ast.FunctionDef):
            return None
        return found[0].statement if found[0].statement.name == call.func.id else None

    def _imported(self, name: str, call: ast.Call) -> bool:
        """The callee's first name is bound by an import (not a parameter or a local)."""
        found = self.bindings(name.split(".")[0], call)
        return bool(found) and all(isinstance(b.statement, (ast.Import, ast.ImportFrom)) for b in found)

    def _entry_values(self, binding: Binding) -> list[Candidate]:
        """What a dict entry's binding can hold, once a binding (by its value, statement and guards, which
        its copies share): an entry set under each of many ifs reaches every load after it. Not kept
        while a scope is walked: what it reads there may be bound further down."""
        if self._walks:
            return self.candidates(binding.value, binding.guards, (binding.statement,))  # type: ignore[arg-type]
        key = (id(binding.value), id(binding.statement), id(binding.guards), self._importing > 0)
        known = self._entries_followed.get(key)
        if known is None:
            known = self._entries_followed[key] = (binding, self.candidates(binding.value, binding.guards, (binding.statement,)))  # type: ignore[arg-type]
        return known[1]

    def key_candidates(self, mapping: ast.expr, key: str, depth: int = 0) -> list[Candidate] | None:
        """Values of `mapping[key]` for a kwargs dict; None when the dict's keys are unknown."""
        if depth > 6:
            return None
        if isinstance(mapping, ast.Dict) or _is_dict_call(mapping):
            value = dict_entry(mapping, key)
            if value is ABSENT and _has_splat(mapping):
                return self._spread_key(mapping, key, depth)
            return [Candidate(value)] if value is ABSENT else self.candidates(value)  # type: ignore[arg-type]
        base = _state_key(mapping)
        if base is None:
            return None
        found = self.bindings(key_of(base, key), mapping)
        if found:
            found = self._reachable(found, mapping, ()) or None  # none reachable: the key is not known here
        if found is not None:
            out: list[Candidate] = []
            for binding in found:
                if isinstance(binding.value, ast.expr):
                    followed = self._entry_values(binding)
                    out += _carried_along(followed, binding.path)
                else:
                    out.append(Candidate(binding.value, binding.guards, (binding.statement,), path=binding.path))
            return out
        # `training_args.model_init_kwargs = model_kwargs`, `kw = {**extra}`: follow one alias.
        aliases = self.bindings(base, mapping)
        if aliases and len(aliases) == 1 and isinstance(aliases[0].value, ast.expr):
            alias = aliases[0].value
            if isinstance(alias, (ast.Name, ast.Attribute)):
                return self.key_candidates(alias, key, depth + 1)
            # A display that spreads another dict, when nothing stored under a computed key since (a
            # display without a spread is followed key by key by the walk).
            spread = (isinstance(alias, ast.Dict) or _is_dict_call(alias)) and _has_splat(alias)
            if spread and self.bindings(key_of(base, _COMPUTED_KEYS), mapping) is None:
                return self.key_candidates(alias, key, depth + 1)
        return None

    def _spread_key(self, display: ast.expr, key: str, depth: int) -> list[Candidate] | None:
        """`key` of a display that names it nowhere but spreads other mappings (`{**extra}`,
        `dict(base, **extra)`): from the last one that may hold it; None when one cannot be read."""
        if isinstance(display, ast.Dict):
            spread = [value for name, value in zip(display.keys, display.values, strict=True) if name is None]
        else:
            assert isinstance(display, ast.Call)
            spread = [*display.args, *(keyword.value for keyword in display.keywords if keyword.arg is None)]
        for position, mapping in enumerate(reversed(spread)):
            found = self.key_candidates(mapping, key, depth + 1)
            if found is None:
                return None
            if all(candidate.value is ABSENT for candidate in found):
                continue
            earlier = position < len(spread) - 1
            if earlier and any(candidate.value is ABSENT for candidate in found):
                return None  # absent on some path: then an earlier mapping decides, which this does not follow
            return found
        return [Candidate(ABSENT)]

    def field_defaults(self) -> dict[str, list[ast.expr | None]]:
        """Field name -> default expression, for every `@dataclass` in the module (HfArgumentParser args)."""
        if self._field_defaults is None:
            self._field_defaults = {}
            for node in self.index.classes:
                if _is_dataclass(node):
                    for stmt in node.body:
                        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                            self._field_defaults.setdefault(stmt.target.id, []).append(_field_default(stmt.value))
        return self._field_defaults

    # -- the flow --------------------------------------------------------------------------

    def _state_before(self, scope: ast.AST, at: ast.AST | None) -> FlowState:
        """The state before the innermost statement holding `at` (the scope's end with no `at`), from
        the scope's one recorded walk."""
        flow = self._flows.get(id(scope))
        if flow is None:
            flow = self._record_scope(scope)
        if at is None:
            return flow.end if flow.end is not None else EMPTY
        stop = self._statement_in(scope, at)
        if stop is None:
            return flow.end if flow.end is not None else EMPTY
        state = flow.before.get(id(stop))
        if state is not None:
            return state
        # Asked while the walk has not reached it yet (a condition on the way reads a value bound
        # further down a loop's body): nothing is known there yet. Once walked, a statement the walk
        # never met is past the scope's end.
        return EMPTY if flow.end is None else flow.end

    def _statement_in(self, scope: ast.AST, node: ast.AST) -> ast.AST | None:
        """The innermost statement holding `node`: where the walk stops."""
        current: ast.AST | None = node
        while current is not None and current is not scope:
            if isinstance(current, ast.stmt):
                return current
            current = self.parent(current)
        return None

    def _record_scope(self, scope: ast.AST) -> _ScopeFlow:
        """Walk the scope once, keeping the state before each statement. See the module docstring
        for what each kind of statement records and what it hands on."""
        flow = self._flows[id(scope)] = _ScopeFlow()
        body = scope.body if isinstance(scope, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef)) else []
        previous, self._recording = self._recording, flow.before
        self._walks += 1
        try:
            flow.end = self._record(body, EMPTY, ())[0]  # type: ignore[arg-type]
        finally:
            self._recording = previous
            self._walks -= 1
        return flow

    def _record(self, stmts: list[ast.stmt], state: FlowState, guards: tuple[Guard, ...]) -> _Outcome:
        """Record the state before each statement of the block, and give what the block hands on
        (the state after it, whether it always leaves early, and the keys it changed)."""
        written: set[str] = set()
        before = self._recording
        for position, stmt in enumerate(stmts):
            before[id(stmt)] = state
            state, terminated, changed = self._record_statement(stmt, state, guards)
            written |= changed
            if terminated:
                # What follows never runs; a question there sees the state where control left.
                for later in stmts[position + 1 :]:
                    for inner in _statements_within(later):
                        before[id(inner)] = state
                return state, True, written
        return state, False, written

    def _record_statement(self, stmt: ast.stmt, state: FlowState, guards: tuple[Guard, ...]) -> _Outcome:
        """The statement's own blocks are recorded as a question inside them is answered: a branch
        from the state before the statement, with its condition as a guard; a loop's body from that
        state joined with one earlier pass of the body; the other blocks (`else`, handlers, `finally`,
        a `with` or class body) from the state before the statement. What it hands on is what the
        walk past it computes (`_apply`), which for most blocks is the same walk, kept once."""
        if not isinstance(stmt, _COMPOUND):
            return self._apply(stmt, state, guards)
        if isinstance(stmt, ast.If):
            if _is_elif(stmt) and not self.index.has_walrus:
                return self._chain(stmt, state, guards, recording=True)
            body = self._record(stmt.body, state, (*guards, (stmt.test, True)))
            orelse = self._record(stmt.orelse, state, (*guards, (stmt.test, False)))
            head, bound = self._head(stmt, state, guards)
            if head is not state:  # the blocks are asked about without the head's `:=`, and walked past with it
                return self._apply(stmt, state, guards)
            return self._join_if(stmt, head, body, orelse, bound)
        if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
            entry = state.edit()
            if isinstance(stmt, (ast.For, ast.AsyncFor)):
                self._bind(stmt.target, None, entry, guards, stmt)
            start = entry.freeze()
            self._blind += 1
            try:
                earlier = self._apply_block(stmt.body, start, guards)
            finally:
                self._blind -= 1
            self._record(stmt.body, self._merge([start, earlier[0]], earlier[2]), guards)
            self._record(stmt.orelse, state, guards)
            return self._apply(stmt, state, guards)
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            body = self._record(stmt.body, state, guards)
            if any(item.optional_vars is not None for item in stmt.items):
                return self._apply(stmt, state, guards)
            return body
        if isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
            body = self._record(stmt.body, state, guards)  # type: ignore[attr-defined]
            for block in (stmt.orelse, *(handler.body for handler in stmt.handlers), stmt.finalbody):  # type: ignore[attr-defined]
                self._record(block, state, guards)
            return self._join_try(stmt, state, body, guards, _UNCHANGED)  # type: ignore[arg-type]
        if isinstance(stmt, ast.Match):
            held = self.case_guards(stmt)
            cases = [self._record(case.body, state, (*guards, *held[i])) for i, case in enumerate(stmt.cases)]
            head, bound = self._head(stmt, state, guards)
            if head is not state:
                return self._apply(stmt, state, guards)
            return self._join_match(head, cases, bound)
        if isinstance(stmt, ast.ClassDef):
            self._record(stmt.body, state, guards)
        return self._apply(stmt, state, guards)

    def _chain(self, stmt: ast.If, state: FlowState, guards: tuple[Guard, ...], recording: bool) -> _Outcome:
        """An `if`/`elif` chain, recorded (or walked past) as its nested `if`s are (each branch from the
        state before the chain, with the conditions of the branches passed and its own), and joined
        link by link from the last, as nested `if`s are, but each join looks only at the keys that can
        differ from what the links below handed on (see _join_link): down a chain of b branches, each
        join would otherwise look at every key written further down."""
        walk = self._record if recording else self._apply_block
        links = [stmt]
        while _is_elif(links[-1]):
            links.append(links[-1].orelse[0])  # type: ignore[arg-type]
        bodies = []
        passed = guards
        for position, link in enumerate(links):
            if position and recording:
                self._recording[id(link)] = state
            bodies.append(walk(link.body, state, (*passed, (link.test, True))))
            passed = (*passed, (link.test, False))
        last = walk(links[-1].orelse, state, passed)
        below = _Below(set(last[2]), {key for key in last[2] if _touches(state, key)}, set(last[2]))
        outcome = last[0], last[1], below.written
        for link, body in zip(reversed(links), reversed(bodies), strict=True):
            outcome = self._join_link(link, state, body, outcome, below)
        return outcome

    def _join_link(self, stmt: ast.If, head: FlowState, body: _Outcome, orelse: _Outcome, below: _Below) -> _Outcome:
        """_join_if for one link of an elif chain, whose `orelse` is what the links below handed on.
        A key written below that the state before the chain lacks (and whose dict it lacks) is absent
        from this link's branch, so the join hands on the bindings the links below gave it: it is
        left as it is, unless it is `unsettled` (a branch's own bindings, never joined yet). `below`
        is updated for the next link up."""
        truth = None
        if not self._blind and (body[1] or orelse[1] or body[2] or orelse[2]):
            truth = self.truth(stmt.test)
        body_taken, orelse_taken = truth is not False, truth is not True
        touching = {key for key in body[2] if _touches(head, key)} if body_taken else set()
        if not orelse_taken:
            below.written, below.touching, below.unsettled = set(body[2]), touching, set(body[2])
        elif body_taken:
            below.written |= body[2]
            below.touching |= touching
        written = below.written
        live = [b for b, taken in ((body, body_taken), (orelse, orelse_taken)) if taken and not b[1]]
        if not live:
            below.unsettled = set()
            return head, True, written
        looked_at = below.touching | below.unsettled
        if body_taken:
            looked_at |= body[2]
            if len(live) == 2:
                for base in body[2]:
                    looked_at.update(orelse[0].keys_under(base))
        if len(live) == 2:
            body_state, orelse_state = body[0], orelse[0]
            if not self._blind:
                body_state = _carried_through(head, body_state, looked_at, (stmt.test, True))
                orelse_state = _carried_through(head, orelse_state, looked_at, (stmt.test, False))
            below.unsettled = set()
            return self._merge([body_state, orelse_state], looked_at, base=1), False, written
        if live[0] is body:
            below.unsettled = set(body[2])
        return self._merge([live[0][0]], looked_at), False, written

    def _head(self, stmt: ast.stmt, state: FlowState, guards: tuple[Guard, ...]) -> tuple[FlowState, set[str]]:
        """The state once the statement's own expressions ran: `:=` there binds before its blocks run."""
        walrus = _walrus_bindings(stmt) if self.index.has_walrus else ()
        if not walrus:
            return state, _UNCHANGED  # type: ignore[return-value]
        scratch = state.edit()
        for target, value in walrus:
            self._bind(target, value, scratch, guards, stmt)
        return scratch.freeze(), scratch.written

    def _apply_block(self, stmts: list[ast.stmt], state: FlowState, guards: tuple[Guard, ...]) -> _Outcome:
        """Walk the block past its end, recording nothing: (state after, always leaves early, keys changed)."""
        written: set[str] = set()
        for stmt in stmts:
            state, terminated, changed = self._apply(stmt, state, guards)
            written |= changed
            if terminated:
                return state, True, written
        return state, False, written

    def _apply(self, stmt: ast.stmt, state: FlowState, guards: tuple[Guard, ...]) -> _Outcome:
        """What the statement hands on to the next one."""
        if isinstance(stmt, (ast.Return, ast.Raise, ast.Continue, ast.Break)):
            head, bound = self._head(stmt, state, guards)
            return head, True, bound
        if isinstance(stmt, ast.Expr) and not self.index.has_walrus:
            if not isinstance(stmt.value, ast.Call):
                return state, False, _UNCHANGED
            return self._mutation(stmt.value, state, guards, stmt)
        kind = type(stmt)
        if kind in _SIMPLE_BINDERS or kind is ast.Expr:
            scratch = state.edit()
            for target, value in _walrus_bindings(stmt) if self.index.has_walrus else ():
                self._bind(target, value, scratch, guards, stmt)
            if kind is ast.Assign:
                for target in stmt.targets:  # type: ignore[attr-defined]
                    self._bind(target, stmt.value, scratch, guards, stmt)  # type: ignore[attr-defined]
            elif kind is ast.AnnAssign:
                if stmt.value is not None:  # type: ignore[attr-defined]
                    self._bind(stmt.target, stmt.value, scratch, guards, stmt)  # type: ignore[attr-defined]
            elif kind is ast.AugAssign:
                base = _state_key(stmt.target) if isinstance(stmt.op, ast.BitOr) else None  # type: ignore[attr-defined]
                if base is not None and "[" not in base:  # `kw |= {...}`: a dict updated in place
                    _merge_into(base, stmt.value, scratch, guards, stmt)  # type: ignore[attr-defined]
                else:
                    self._bind(stmt.target, None, scratch, guards, stmt)  # type: ignore[attr-defined]
            elif kind is ast.Expr:
                if isinstance(stmt.value, ast.Call):  # type: ignore[attr-defined]
                    self._mutate(stmt.value, scratch, guards, stmt)  # type: ignore[attr-defined]
            elif kind is ast.Delete:
                for target in stmt.targets:  # type: ignore[attr-defined]
                    key = _state_key(target)
                    if key is not None:
                        scratch[key] = [Binding(ABSENT, stmt, guards)]
            elif kind in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
                scratch[stmt.name] = [Binding(None, stmt, guards)]  # type: ignore[attr-defined]
            else:  # an import
                for alias in stmt.names:  # type: ignore[attr-defined]
                    scratch[(alias.asname or alias.name).split(".")[0]] = [Binding(None, stmt, guards)]
            return scratch.freeze(), False, scratch.written
        head, bound = self._head(stmt, state, guards)
        if not isinstance(stmt, _COMPOUND):
            return head, False, bound
        if isinstance(stmt, ast.If):
            if _is_elif(stmt) and not self.index.has_walrus:
                return self._chain(stmt, head, guards, recording=False)
            body = self._apply_block(stmt.body, head, (*guards, (stmt.test, True)))
            orelse = self._apply_block(stmt.orelse, head, (*guards, (stmt.test, False)))
            return self._join_if(stmt, head, body, orelse, bound)
        if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
            scratch = head.edit()
            if isinstance(stmt, (ast.For, ast.AsyncFor)):
                self._bind(stmt.target, None, scratch, guards, stmt)
            entry = scratch.freeze()
            body, _, body_written = self._apply_block(stmt.body, entry, guards)
            merged = self._merge([entry, body], body_written)
            after, terminated, after_written = self._apply_block(stmt.orelse, merged, guards)
            return after, terminated, bound | scratch.written | body_written | after_written
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            scratch = head.edit()
            for item in stmt.items:
                if item.optional_vars is not None:
                    self._bind(item.optional_vars, None, scratch, guards, stmt)
            after, terminated, written = self._apply_block(stmt.body, scratch.freeze(), guards)
            return after, terminated, bound | scratch.written | written
        if isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
            body = self._apply_block(stmt.body, head, guards)  # type: ignore[attr-defined]
            return self._join_try(stmt, head, body, guards, bound)
        if isinstance(stmt, ast.Match):
            held = self.case_guards(stmt)
            cases = [self._apply_block(case.body, head, (*guards, *held[i])) for i, case in enumerate(stmt.cases)]
            return self._join_match(head, cases, bound)
        return head, False, bound  # a class body's bindings are its own; a function's name is bound above

    def _join_if(self, stmt: ast.If, head: FlowState, body: _Outcome, orelse: _Outcome, bound: set[str]) -> _Outcome:
        """After an `if`: the branches the setup leaves live, joined. The condition is decided only
        when the branches hand on different states: when neither changes a key nor leaves early, the
        state after the `if` is the state before it, whatever the condition."""
        truth = None
        if not self._blind and (body[1] or orelse[1] or body[2] or orelse[2]):
            truth = self.truth(stmt.test)
        branches = [b for b, taken in ((body, truth is not False), (orelse, truth is not True)) if taken]
        live = [b for b in branches if not b[1]]
        written = bound.union(*(b[2] for b in branches))
        if not live:
            return head, True, written
        if len(live) == 2 and not self._blind:
            changed = body[2] | orelse[2]
            body_state = _carried_through(head, body[0], changed, (stmt.test, True))
            orelse_state = _carried_through(head, orelse[0], changed, (stmt.test, False))
            return self._merge([body_state, orelse_state], written), False, written
        return self._merge([b[0] for b in live], written), False, written

    def _join_try(
        self, stmt: ast.stmt, state: FlowState, body: _Outcome, guards: tuple[Guard, ...], written: set[str]
    ) -> _Outcome:
        after_body, body_terminated, body_written = body
        written = written | body_written
        outcomes = [] if body_terminated else [self._apply_block(stmt.orelse, after_body, guards)]  # type: ignore[attr-defined]
        entry = self._merge([state, after_body], body_written)
        for handler in stmt.handlers:  # type: ignore[attr-defined]
            outcomes.append(self._apply_block(handler.body, entry, guards))
        for outcome in outcomes:
            written |= outcome[2]
        live = [s for s, terminated, _ in outcomes if not terminated]
        merged = self._merge(live, written) if live else entry
        after, terminated, final_written = self._apply_block(stmt.finalbody, merged, guards)  # type: ignore[attr-defined]
        return after, terminated or not live, written | final_written

    def _join_match(self, state: FlowState, cases: list[_Outcome], written: set[str]) -> _Outcome:
        written = written.union(*(case[2] for case in cases))
        live = [state] + [s for s, terminated, _ in cases if not terminated]
        return self._merge(live, written), False, written

    def _merge(self, states: list[FlowState], written: set[str], base: int = 0) -> FlowState:
        return _joined_paths(merge(states, written, ABSENT, Binding, _known_absent, base), written)

    def _bind(self, target: ast.expr, value: ast.expr | None, state: Scratch, guards: tuple[Guard, ...], stmt: ast.stmt) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            values = value.elts if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts) else None
            for i, element in enumerate(target.elts):
                self._bind(element, values[i] if values else None, state, guards, stmt)
            return
        if isinstance(target, ast.Starred):
            self._bind(target.value, None, state, guards, stmt)
            return
        key = _state_key(target)
        if key is None:
            if isinstance(target, ast.Subscript) and (base := _state_key(target.value)) is not None and "[" not in base:
                computed = key_of(base, _COMPUTED_KEYS)
                state[computed] = [*state.get(computed, []), Binding(value, stmt, guards)]
            return
        state[key] = [Binding(value, stmt, guards)]
        if "[" in key:
            return
        state.drop_entries(key)
        if value is not None and (isinstance(value, ast.Dict) or _is_dict_call(value)) and not _has_splat(value):
            state[key_of(key, _KNOWN_DICT)] = []
            for name, entry in dict_entries(value):
                state[key_of(key, name)] = [Binding(entry, stmt, guards)]

    def _mutation(self, call: ast.Call, state: FlowState, guards: tuple[Guard, ...], stmt: ast.stmt) -> _Outcome:
        if not _mutates(call):
            return state, False, _UNCHANGED
        scratch = state.edit()
        self._mutate(call, scratch, guards, stmt)
        return scratch.freeze(), False, scratch.written

    def _mutate(self, call: ast.Call, state: Scratch, guards: tuple[Guard, ...], stmt: ast.stmt) -> None:
        """`kw.update(...)`, `kw.pop("k")`, `kw.setdefault("k", v)`, `kw.__setitem__("k", v)`."""
        if not _mutates(call):
            return
        assert isinstance(call.func, ast.Attribute)
        base = _state_key(call.func.value)
        assert base is not None
        method = call.func.attr
        if method == "update":
            for arg in call.args:
                _merge_into(base, arg, state, guards, stmt)
            for keyword in call.keywords:
                if keyword.arg is None:  # `kw.update(**extra)`
                    _merge_into(base, keyword.value, state, guards, stmt)
                else:
                    state[key_of(base, keyword.arg)] = [Binding(keyword.value, stmt, guards)]
        elif call.args and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str):
            key = key_of(base, call.args[0].value)
            if method == "pop":
                state[key] = [Binding(ABSENT, stmt, guards)]
            elif len(call.args) > 1:
                value = call.args[1]
                if method == "__setitem__":
                    state[key] = [Binding(value, stmt, guards)]
                else:  # setdefault keeps what is there
                    before = state.get(key)
                    known_absent = before is None and key_of(base, _KNOWN_DICT) in state
                    if known_absent or (before and all(b.value is ABSENT for b in self._bindings_read(before))):
                        state[key] = [Binding(value, stmt, guards)]


class _ScopeFlow:
    """One scope's recorded walk: the state before each statement (by id), and at the end (None
    while the walk is under way)."""

    __slots__ = ("before", "end")

    def __init__(self) -> None:
        self.before: dict[int, FlowState] = {}
        self.end: FlowState | None = None


_PENDING = object()  # a condition not decided yet (None is an answer: undecided)
_Outcome = tuple[FlowState, bool, set[str]]  # the state handed on, whether the block always leaves early, the keys changed
_UNCHANGED: frozenset[str] = frozenset()
_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_COMPOUND = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try, ast.Match, ast.ClassDef)
if hasattr(ast, "TryStar"):
    _COMPOUND = (*_COMPOUND, ast.TryStar)  # type: ignore[assignment]
_SIMPLE_BINDERS = frozenset(
    {
        ast.Assign,
        ast.AnnAssign,
        ast.AugAssign,
        ast.Delete,
        ast.FunctionDef,
        ast.AsyncFunctionDef,
        ast.ClassDef,
        ast.Import,
        ast.ImportFrom,
    }
)


class _Below:
    """What the links of an elif chain below the one being joined handed on: every key they wrote, those
    the state before the chain has (`touching`: itself, its dict, or entries of its dict), and those
    whose bindings no join has settled yet (`unsettled`: deduplicated, their paths folded)."""

    __slots__ = ("written", "touching", "unsettled")

    def __init__(self, written: set[str], touching: set[str], unsettled: set[str]) -> None:
        self.written, self.touching, self.unsettled = written, touching, unsettled


def _is_elif(stmt: ast.If) -> bool:
    return len(stmt.orelse) == 1 and isinstance(stmt.orelse[0], ast.If)


def _touches(state: FlowState, key: str) -> bool:
    """The state has the key, or (for a dict entry) its dict or another entry of it."""
    if key in state:
        return True
    if "[" not in key:
        return False
    base = base_of(key)
    return base in state or bool(state.keys_under(base))


def _carried_through(head: FlowState, branch: FlowState, changed: set[str], guard: Guard) -> FlowState:
    """A branch's state, where each key a branch changed and that held bindings before the `if` is
    marked as come through the branch whose condition is `guard`: all its bindings at once (see
    flowstate.Carried), so a join costs the same however much reaches it. A binding made in the
    branch has the condition among its own guards already, so marking it too changes nothing."""
    scratch: Scratch | None = None
    for key in changed:
        before = head.get(key)
        bindings = branch.get(key)
        if not before or not bindings:
            continue
        if not any(type(b) is Carried for b in bindings) and set(map(id, before)).isdisjoint(map(id, bindings)):
            continue  # only the branch's own bindings
        if scratch is None:
            scratch = branch.edit()
        scratch[key] = [Carried(bindings, (guard,))]
    return branch if scratch is None else scratch.freeze()


def _joined_paths(state: FlowState, written: set[str]) -> FlowState:
    """Bindings carried to the join along both branches are carried along neither: only the conditions
    both of their ways share still hold for them."""
    scratch: Scratch | None = None
    for key in written:
        items = state.get(key)
        if not items or len(items) < 2:
            continue
        ways: dict[int, list[Carried]] = {}
        for item in items:
            if type(item) is Carried:
                ways.setdefault(id(item.bindings), []).append(item)
        if len(ways) == sum(map(len, ways.values())):
            continue
        joined: list[Binding | Carried] = []
        for item in items:
            if type(item) is not Carried:
                joined.append(item)
                continue
            same = ways.pop(id(item.bindings), None)
            if same is None:
                continue  # joined with the first of its kind
            guards = item.guards
            for other in same[1:]:
                held = set(other.guards)
                guards = tuple(g for g in guards if g in held)
            joined.append(item if len(same) == 1 else Carried(item.bindings, guards))
        if scratch is None:
            scratch = state.edit()
        scratch[key] = joined
    return state if scratch is None else scratch.freeze()


def _carried_along(followed: list[Candidate], path: tuple[Guard, ...]) -> list[Candidate]:
    """The values a binding leads to, each with the binding's path before its own; the binding's tuple
    itself where a value has none (a kwargs entry set under each of many ifs reaches every load after
    it with a path as long as the ifs since: a copy for each made its memory grow with the cube)."""
    if not path:
        return followed
    return [c._replace(path=(*path, *c.path) if c.path else path) for c in followed]


def _beyond(held: set[Guard], binding: Binding) -> list[Guard]:
    """The binding's conditions that a read's path does not hold."""
    return [condition for condition in (*binding.guards, *binding.path) if condition not in held]


def _carries(stored: Bindings) -> bool:
    return any(type(item) is Carried for item in stored)


def _folded(bindings: list[Binding]) -> list[Binding]:
    """One binding reaching a point along several ways is one binding: only the conditions all of its
    ways share still hold for it (in the order of its first way)."""
    if len(bindings) < 2 or not any(b.path for b in bindings):
        return bindings
    combined: dict[tuple[int, int, tuple[Guard, ...]], Binding] = {}
    for b in bindings:
        same = (id(b.value), id(b.statement), b.guards)
        earlier = combined.get(same)
        if earlier is None:
            combined[same] = b
        else:  # a path is a condition per `if` the binding was carried through: a set, not a scan each
            ways = set(b.path)
            combined[same] = Binding(earlier[0], earlier[1], earlier[2], tuple(g for g in earlier.path if g in ways))
    return list(combined.values()) if len(combined) < len(bindings) else bindings


def _mutates(call: ast.Call) -> bool:
    return (
        isinstance(call.func, ast.Attribute)
        and call.func.attr in ("update", "pop", "setdefault", "__setitem__")
        and _state_key(call.func.value) is not None
    )


def _statements_within(stmt: ast.stmt) -> Iterator[ast.stmt]:
    """The statement and every statement in its blocks, but not in the functions it defines (those
    are scopes of their own)."""
    stack = [stmt]
    while stack:
        current = stack.pop()
        yield current
        if isinstance(current, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for block in _blocks(current):
            stack.extend(block)


def _bodies_of(node: ast.AST) -> list[list[ast.stmt]]:
    blocks = [getattr(node, name) for name in ("body", "orelse", "finalbody") if isinstance(getattr(node, name, None), list)]
    blocks += [handler.body for handler in getattr(node, "handlers", []) or []]
    return blocks + [case.body for case in getattr(node, "cases", []) or []]


def _ends(block: list[ast.stmt]) -> bool:
    """Every path through the block returns or raises."""
    if not block:
        return False
    last = block[-1]
    if isinstance(last, (ast.Return, ast.Raise)):
        return True
    if isinstance(last, (ast.With, ast.AsyncWith)):
        return _ends(last.body)  # `with init_empty_weights(): ... return device_map`
    return isinstance(last, ast.If) and _ends(last.body) and _ends(last.orelse)


def _passing(statement: ast.If) -> list[Guard] | None:
    """What must hold for control to get past an `if` (and its `elif`s) that returns in a branch;
    None when both branches return."""
    body, orelse = _ends(statement.body), _ends(statement.orelse)
    if body and orelse:
        return None
    if orelse:
        return [(statement.test, True)]
    if not body:
        return []
    rest = statement.orelse
    if len(rest) == 1 and isinstance(rest[0], ast.If):
        inner = _passing(rest[0])
        return None if inner is None else [(statement.test, False), *inner]
    return [(statement.test, False)]


def _merge_into(base: str, mapping: ast.expr, state: Scratch, guards: tuple[Guard, ...], stmt: ast.stmt) -> None:
    """`base.update(mapping)`: a display's entries, or those of a dict whose keys the walk knows
    (`kw.update(extra)` after `extra = {"device_map": "auto"}`), are stored into `base`; from any other
    mapping, keys unknown here may arrive, so no key of `base` is known to be absent any more."""
    if (isinstance(mapping, ast.Dict) or _is_dict_call(mapping)) and not _has_splat(mapping):
        for name, entry in dict_entries(mapping):
            state[key_of(base, name)] = [Binding(entry, stmt, guards)]
        return
    source = _state_key(mapping)
    if source is None or "[" in source or not _known_absent(state, source):
        computed = key_of(base, _COMPUTED_KEYS)
        state[computed] = [*state.get(computed, []), Binding(None, stmt, guards)]
        return
    prefix = source + "["
    markers = (key_of(source, _KNOWN_DICT), key_of(source, _COMPUTED_KEYS))
    for key in state.keys_under(source):
        if key.startswith(prefix) and key not in markers:
            state[key_of(base, key[len(prefix) : -1])] = state[key]


def _known_absent(state: FlowState | Scratch, base: str) -> bool:
    """The dict bound to `base` is a display whose keys we know, and nothing stored a computed key since."""
    return key_of(base, _KNOWN_DICT) in state and key_of(base, _COMPUTED_KEYS) not in state


def _subject_of(known: dict[int, str], expr: ast.expr) -> str:
    """The value a fact is about, as exclude() compares them; once per expression (its conditions are
    asked about again and again, one fact per branch passed down an if/elif chain)."""
    subject = known.get(id(expr))
    if subject is None:
        subject = known[id(expr)] = ast.dump(expr)
    return subject


def call_literals(call: ast.Call, function: ast.FunctionDef, rebound: frozenset[str] | None = None) -> dict[str, ast.expr]:
    """The parameters of `function` this call fixes to a literal: the literal arguments it passes,
    and the literal defaults of those it leaves out (see call_arguments)."""
    return {name: value for name, value in call_arguments(call, function, rebound).items() if isinstance(value, ast.Constant)}


_CONSTRUCTOR = "_placement_lint_constructor"


def constructor(cls: ast.ClassDef) -> ast.FunctionDef | None:
    """The class's own `__init__` as a call of the class sees it: its parameters without `self`
    (its body and defaults the very nodes), for call_arguments; made once and kept on the class."""
    if hasattr(cls, _CONSTRUCTOR):
        return getattr(cls, _CONSTRUCTOR)  # type: ignore[no-any-return]
    found = [s for s in cls.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"]
    view = None
    if len(found) == 1 and (found[0].args.posonlyargs or found[0].args.args):
        init = found[0]
        args = copy.copy(init.args)
        if args.posonlyargs:
            args.posonlyargs = args.posonlyargs[1:]
        else:
            args.args = args.args[1:]
        view = copy.copy(init)
        view.args = args
    setattr(cls, _CONSTRUCTOR, view)
    return view


class _ParametersAsPassed(ast.NodeTransformer):
    """A copy of a helper's condition whose reads of its parameters are the caller's arguments (the
    very nodes, so that a fact on one is a fact on the caller's value)."""

    def __init__(self, passed: dict[str, ast.expr]) -> None:
        self.passed = passed

    def visit_Name(self, node: ast.Name) -> ast.expr:
        return self.passed.get(node.id, node) if isinstance(node.ctx, ast.Load) else node


def call_arguments(call: ast.Call, function: ast.FunctionDef, rebound: frozenset[str] | None = None) -> dict[str, ast.expr]:
    """The value of each parameter of `function` this call fixes: the argument it passes, or the
    default of one it leaves out. Nothing when the call spreads `*args`/`**kw` or passes what the
    function does not take; a parameter the function re-binds is left out (`rebound`:
    `rebound_names(function)`, for a caller asking of many calls of one function)."""
    args = function.args
    if any(isinstance(a, ast.Starred) for a in call.args) or any(kw.arg is None for kw in call.keywords):
        return {}
    positional = [*args.posonlyargs, *args.args]
    if len(call.args) > len(positional) and args.vararg is None:
        return {}
    defaults = dict(zip([a.arg for a in positional[len(positional) - len(args.defaults) :]], args.defaults, strict=True))
    defaults.update((a.arg, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None)
    given: dict[str, ast.expr] = {a.arg: value for a, value in zip(positional, call.args, strict=False)}
    names = {a.arg for a in (*positional, *args.kwonlyargs)}
    for keyword in call.keywords:
        if keyword.arg not in names and args.kwarg is None:
            return {}
        given[keyword.arg] = keyword.value  # type: ignore[index]
    values = {**{n: d for n, d in defaults.items() if n not in given}, **given}
    if rebound is None:
        rebound = rebound_names(function)
    return {name: value for name, value in values.items() if name in names and name not in rebound}


def rebound_names(function: ast.FunctionDef) -> frozenset[str]:
    """The names the function's own body assigns (its parameters among them, if it re-binds one):
    walked once a function, however many of its calls are asked about (accelerate's checks asked
    118 times of a few functions, each a walk of the body)."""
    found = _REBOUND.get(function)
    if found is None:
        found = _REBOUND[function] = frozenset(
            n.id for n in own_nodes(function) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)
        )
    return found


# Per function node, while its tree lives.
_REBOUND: weakref.WeakKeyDictionary[ast.AST, frozenset[str]] = weakref.WeakKeyDictionary()


def _plain_function(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A function whose call gives what it returns: not a generator, a coroutine, or decorated (a cache
    decorator is harmless, but `@contextmanager` and friends change what a call gives)."""
    if not isinstance(function, ast.FunctionDef) or function.decorator_list:
        return False
    return not any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in own_nodes(function))


def own_nodes(function: ast.FunctionDef) -> Iterable[ast.AST]:
    """The nodes of a function's body, without those of functions and classes nested in it."""
    stack: list[ast.AST] = list(function.body)
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(node))


def _returns(function: ast.FunctionDef) -> list[ast.Return]:
    found = [n for n in own_nodes(function) if isinstance(n, ast.Return)]
    return sorted(found, key=lambda n: (n.lineno, n.col_offset))


def _falls_off_end(function: ast.FunctionDef) -> bool:
    """Control can reach the end of the body (a conservative look at its last statement)."""
    last = function.body[-1]
    return not isinstance(last, (ast.Return, ast.Raise))


def _walrus_bindings(stmt: ast.stmt) -> list[tuple[ast.Name, ast.expr]]:
    """`name := value` in the expressions a statement evaluates itself (not in its nested blocks)."""
    heads = [
        getattr(stmt, name) for name in ("test", "value", "iter", "subject") if isinstance(getattr(stmt, name, None), ast.expr)
    ]
    found = []
    for head in heads:
        for node in walk(head):
            if isinstance(node, ast.NamedExpr) and isinstance(node.target, ast.Name):
                found.append((node.target, node.value))
    return found


def _blocks(stmt: ast.stmt) -> list[list[ast.stmt]]:
    blocks: list[list[ast.stmt]] = []
    for name in ("body", "orelse", "finalbody"):
        block = getattr(stmt, name, None)
        if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
            blocks.append(block)
    for handler in getattr(stmt, "handlers", []) or []:
        blocks.append(handler.body)
    for case in getattr(stmt, "cases", []) or []:
        blocks.append(case.body)
    return blocks


def _state_key(expr: ast.expr) -> str | None:
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        base = _state_key(expr.value)
        return f"{base}.{expr.attr}" if base is not None else None
    if isinstance(expr, ast.Subscript):
        base = _state_key(expr.value)
        key = expr.slice
        if base is not None and isinstance(key, ast.Constant) and isinstance(key.value, str):
            return key_of(base, key.value)
    return None


def _prefixes(key: str) -> list[str]:
    """`args.model.bits` -> `args`, `args.model`, `args.model.bits`: the names a read goes through."""
    cuts = [i for i, char in enumerate(key) if char in ".["]
    return [key[:i] for i in cuts] + [key]


def _parameters(scope: ast.AST) -> set[str]:
    args = getattr(scope, "args", None)
    if args is None:
        return set()
    names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
    if args.vararg:
        names.append(args.vararg.arg)
    if args.kwarg:
        names.append(args.kwarg.arg)
    return set(names)


def _is_dict_call(expr: ast.expr) -> bool:
    return isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "dict"


def _has_splat(expr: ast.expr) -> bool:
    if isinstance(expr, ast.Dict):
        return any(key is None for key in expr.keys)
    if isinstance(expr, ast.Call):
        return any(kw.arg is None for kw in expr.keywords) or bool(expr.args)
    return False


def dict_entries(expr: ast.expr) -> list[tuple[str, ast.expr]]:
    """String-keyed entries of `{...}`, `dict(k=v)` or the keywords of `d.update(k=v)`."""
    if isinstance(expr, ast.Dict):
        return [
            (key.value, value)
            for key, value in zip(expr.keys, expr.values, strict=True)
            if isinstance(key, ast.Constant) and isinstance(key.value, str)
        ]
    if isinstance(expr, ast.Call):
        return [(kw.arg, kw.value) for kw in expr.keywords if kw.arg is not None]
    return []


def dict_entry(expr: ast.expr, key: str) -> ast.expr | _Absent:
    for name, value in dict_entries(expr):
        if name == key:
            return value
    return ABSENT


def _is_dataclass(node: ast.ClassDef) -> bool:
    return any(last_segment(dotted(d.func if isinstance(d, ast.Call) else d)) == "dataclass" for d in node.decorator_list)


def _field_default(value: ast.expr | None) -> ast.expr | None:
    if value is None:
        return None
    if isinstance(value, ast.Call) and last_segment(dotted(value.func)) == "field":
        for kw in value.keywords:
            if kw.arg == "default":
                return kw.value
        return None
    return value
