"""Repo-wide context: how each Python file is launched, from the launch scripts and configs around it.

Built once per repository, before any Python file is parsed: find the files that can hold launch
commands, parse each command, read the configs it names (accelerate YAML, DeepSpeed JSON, recipe
YAML), resolve its target to a file of the repository, and give that file (and the repository
modules it imports) the evidence, with the chain that led to it; and tell each imported module what
its importers do with the values its functions return (a model a helper loads goes to their trainer).

On two cores, a forked child works out the launches' setups while this process summarizes the modules
they may import (_set_up), and another follows the returned values while this one reads the scripts'
parsers and the importers' calls (_returns_aside): each context is the one a single process builds.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from placement_lint.context.commands import Launch, parse_command
from placement_lint.context.configs import ConfigReader
from placement_lint.context.evidence import Evidence, Kind
from placement_lint.context.facets import facets_of, feeds_of
from placement_lint.context.launch_files import (
    DOC_CODE_MARKERS,
    DOC_KINDS,
    MAX_LAUNCHER_BYTES,
    CommandLine,
    SourcedFiles,
    commands_in,
    launcher_kind,
    may_launch,
)
from placement_lint.context.launch_setup import one_gpu, one_process, resolve_setup, script_arguments
from placement_lint.context.launch_targets import console_script, folder_above_holding, folders_above, target_of
from placement_lint.context.launcher_names import launcher_candidates, python_launch_files, tracked_launchers
from placement_lint.context.launches import RepoContext
from placement_lint.context.module_graph import ModuleGraph
from placement_lint.context.projects import ConsoleScript, Projects, ScriptNames
from placement_lint.context.propagation import (
    ParserReads,
    attach_parsers,
    follow_returns,
    propagate_to_imports,
    record_importer_calls,
    summarize_ahead,
)
from placement_lint.context.shipped_configs import ShippedAccelerateConfigs
from placement_lint.process import CAN_FORK, Aside
from placement_lint.records import NamedTuple
from placement_lint.settings import Settings
from placement_lint.source import MAX_NOTEBOOK_BYTES, content_hash, is_notebook


def build_repo_context(
    root: Path,
    settings: Settings,
    display: Callable[[Path], str],
    launchers: list[Path] | None = None,
    anchors: tuple[bytes, ...] | None = None,
    tracked: list[Path] | None = None,
    stage: Callable[[str, int, int | None], None] | None = None,
    jobs: int = 1,
    python_sources: list[Path] | None = None,
    facets: bool = False,
) -> RepoContext:
    """`launchers`: the candidate files, when the caller's walk already covered the root.
    `anchors`: the tokens without which no rule can fire in a file (see ModuleGraph); None: follow
    every import. `tracked`: the launch files git tracks that no walk meets (tracked_launchers), when
    the caller has read them already. `stage(what, done, total)` hears how the building goes. `jobs`:
    how many processes it may use. `python_sources`: the Python files that may start a launcher
    (python_launch_files), when the caller has looked for them already. `facets`: work out what a
    cache needs to reuse the context after an edit (context/facets.py), when it is to be cached."""
    root = root.resolve()
    context = RepoContext(root)
    walked = launcher_candidates(root, settings, launchers)
    context.tracked = tracked if tracked is not None else tracked_launchers(root, settings, walked)
    context.candidates = [*walked, *context.tracked]
    if python_sources is None:
        python_sources = python_launch_files(root, settings)
    projects = Projects(root, context.candidates)
    configs = ConfigReader(root, projects.root_of)
    graph = ModuleGraph(root, anchors=anchors, project_of=projects.root_of)
    configs.script_tree = graph.kept_tree
    launched: dict[Path, list[Evidence]] = {}
    uses: dict[Path, set[str]] = {}  # what of each launched file runs: "__main__", or a console script's function
    shipped = ShippedAccelerateConfigs(root, context.candidates, configs)
    sourced = SourcedFiles(root)
    stage = stage or _unheard
    sources = [*context.candidates, *python_sources]
    read_ahead = _read_launch_files(context.candidates, jobs, sourced)
    digests: dict[Path, str] = {}  # per launch file read on its own, its commands' digest
    read_into_others: set[Path] = set()
    found_launches: list[_Found] = []
    for number, path in enumerate(sources):
        stage("Reading launch files", number, len(sources))
        commands, problems, also_read = read_ahead[path] if path in read_ahead else _commands(path, sourced)
        context.warnings += [f"{display(path)}: {problem}" for problem in problems]
        read_into_others.update(also_read)
        if not also_read and launcher_kind(path, b"") in _READ_FOR_COMMANDS_ONLY:
            digests[path] = commands_digest(commands, problems)
        for command in commands:
            launch = parse_command(command.text, ScriptNames(projects, command.cwd, command.source.parent))
            if launch is None:
                continue
            script = console_script(launch, command, projects, graph, context, display) if launch.program else None
            found = (
                (projects.module_of(script, graph), "")
                if script
                else target_of(launch, command, root, projects, display, graph, configs.foreign_paths, context.warnings)
            )
            target, found_from = found if found is not None else (None, "")
            if target is None:
                continue
            above = folder_above_holding(launch, command, target, folders_above(command, root, projects, launch.target or ""))
            if above is not None:
                # `bash scripts/run.sh` runs from the folder whose paths it names: its configs are there too.
                command = command._replace(cwd=above)
            found_launches.append(_Found(command, launch, script, target, found_from))
    setups = _SetUps(root, configs, shipped, display)
    for item, evidence in zip(found_launches, _set_up(setups, found_launches, projects, graph, jobs), strict=True):
        launched.setdefault(item.target, []).append(evidence)
        # A one-process launch of a console script lends its function to no other launch of the module.
        if not (item.script and evidence.kind is Kind.SINGLE):
            uses.setdefault(item.target, set()).add(item.runs)
    context.warnings += configs.warnings
    pins_read = _attach_pins(root, launched, context) if launched else ()
    for target, items in launched.items():
        context.by_file[target] = tuple(items)
        context.used[target] = frozenset(uses.get(target, ()))
    edges = propagate_to_imports(context, launched, graph, display, stage)
    # The returned values are followed by a forked child, if worth it, while this process reads the
    # scripts' parsers and the importers' calls: they are independent, and the child inherits the
    # trees the propagation parsed (sent back, a tree costs more than parsing it again).
    looked_at, projects_known = graph.files_looked_at(), len(projects.read)
    aside = _returns_aside(context, graph, edges, display, projects, looked_at, projects_known, jobs)
    try:
        reads = ParserReads()
        parsers_read = attach_parsers(context, launched, graph, display, reads)
        calls_from, projects_from = graph.files_looked_at(), len(projects.read)
        called_read = record_importer_calls(context, graph, edges)
    except BaseException:  # Ctrl-C, or a file that broke a reader: the child does not outlive this build
        if aside is not None:
            aside.cancel()
        raise
    if aside is not None:
        stage("Following returned values", 0, len(edges))  # the child's: it tells no one how far it is
    followed = aside.result() if aside is not None else None
    if followed is None:
        classes_read = follow_returns(context, graph, edges, display, stage)
    else:
        context.consumers, classes_read, files_read, projects_read = followed  # type: ignore[misc]
        graph.adopt(files_read, calls_from)
        projects.read[projects_from:projects_from] = projects_read
    modules_read = graph.read()
    context.inputs = [
        *context.candidates,
        *python_sources,
        *configs.read,
        *sourced.read,
        *pins_read,
        *modules_read,
        *graph.layout.read,
        *parsers_read,
        *dict.fromkeys(projects.read),
    ]
    already = set(context.inputs)
    context.inputs += [path for path in called_read if path not in already]
    # A module read for its class bases (a trainer subclass), its parser or its functions' defaults
    # counts whole, not by its import lines.
    context.import_only = (
        graph.import_only(launched) - set(classes_read) - set(parsers_read) - set(called_read) - set(configs.scripts)
    )
    # A Python launcher counts whole: a change to its calls, not only to its imports, changes what it launches.
    context.import_only -= {*python_sources, *(path.resolve() for path in python_sources)}
    context.python_sources = python_sources
    # A launch file read for its commands alone: an edit that leaves them as they were (a comment, an
    # echo) leaves the context as it was. Not one whose text other reads took too (a config, a script
    # another runs, a module), nor a Python launcher (counted whole, above).
    read_otherwise = read_into_others | set(context.inputs[len(context.candidates) :]) | set(python_sources)
    context.launch_digests = {path: digest for path, digest in digests.items() if path not in read_otherwise}
    # What a pre-commit run after an edit needs to tell whether this context still holds for the files
    # it checks (context/facets.py): taken from the trees before they are dropped.
    if facets:
        hard = {*context.candidates, *python_sources, *configs.read, *pins_read, *graph.layout.read, *projects.read}
        context.facets = facets_of(graph, launched, context.calls, reads, hard | reads.parser_modules, configs.scripts, root)
        context.imports_of = feeds_of(graph, edges)
    graph.release()
    context.graph = graph
    return context


class _Found(NamedTuple):
    """A launch command whose target the context found: what its evidence is made from."""

    command: CommandLine
    launch: Launch
    script: ConsoleScript | None  # the console script it runs, if it runs one
    target: Path
    found_from: str  # how the target was found, when that needs saying

    @property
    def runs(self) -> str:
        """What of the target the launch runs: "__main__", or the console script's function."""
        return self.script.function if self.script else "__main__"


class _SetUps(NamedTuple):
    """What working out a launch's setup reads: its configs, the accelerate configs the repository ships."""

    root: Path
    configs: ConfigReader
    shipped: ShippedAccelerateConfigs
    display: Callable[[Path], str]

    def evidence(self, found: _Found) -> Evidence:
        """The launch's evidence for its target: what it runs under (its launcher, configs and
        environment), with the chain that led to it."""
        command, launch, script, target = found.command, found.launch, found.script, found.target
        root, configs, display = self.root, self.configs, self.display
        asked = len(configs.loaded)
        env = {**dict(command.env), **launch.env}
        resolved = resolve_setup(launch, command, configs, target, self.shipped, env)
        read = tuple(dict.fromkeys(display(path) for path in configs.loaded[asked:]))
        where = f"{display(command.source)}:{command.where}"
        # A folder the script computed (`$SCRIPT_DIR/train.py`) is absolute: shown from the root.
        text = f"{where} ({_short(launch.text.replace(f'{root}{os.sep}', ''))})"
        for said in (found.found_from, script.describe(display(script.declared_in)) if script else "", resolved.details):
            text += f", {said}" if said else ""
        return Evidence(
            resolved.kind,
            display(command.source),
            command.line,
            text,
            resolved.stage,
            "launch",
            (display(target),),
            script_arguments(launch, command.cwd, configs, target),
            single_process=one_process(launch, env, resolved),
            one_gpu=one_gpu(launch, env),
            bypass=env.get("ACCELERATE_BYPASS_DEVICE_MAP", "").lower() in ("true", "1"),
            entry=script.function if script else "",
            cell=command.cell,  # a notebook's shell escape: `line` is in that cell
            configs=read,
        )


def _entries(found: list[_Found]) -> list[tuple[Path, str]]:
    """Each launched script with what of it a launch runs, in the order the launches name them; first
    those a launcher starts, as `python` alone (unwrapped) is the likeliest to start one process, and
    a one-process launch is not propagated."""
    entries = dict.fromkeys((item.target, item.runs) for item in found)
    started = {(item.target, item.runs) for item in found if item.launch.launcher != "python" or item.launch.wrapped_by}
    return sorted(entries, key=lambda entry: entry not in started)


# From this many launches on, a forked child works out their setups (the configs they read, the
# launched scripts' own defaults) while this process parses the modules they may reach, which the
# import propagation then finds summarized (diffusers' 246 launches: 1.0 s of setups beside 2.8 s of
# propagation).
SETUPS_ASIDE_LAUNCHES = 64


def _set_up(setups: _SetUps, found: list[_Found], projects: Projects, graph: ModuleGraph, jobs: int) -> list[Evidence]:
    """Each launch's evidence, in order: worked out by a forked child when there are enough launches
    and a process to spare, while this process summarizes what they may import (propagation's
    summarize_ahead: the setups decide which launches propagate, not what a module imports). The
    child sends back the evidence, and what it read that the context lists among its inputs."""

    def each() -> list[Evidence]:
        return [setups.evidence(item) for item in found]

    if jobs < 2 or len(found) < SETUPS_ASIDE_LAUNCHES or not CAN_FORK:
        return each()
    configs, known = setups.configs, len(projects.read)

    def work() -> tuple[object, ...]:
        return each(), configs.read, configs.warnings, configs.scripts, projects.read[known:]

    aside = Aside(work)
    try:
        summarize_ahead(graph, _entries(found), aside.done)
    except BaseException:  # Ctrl-C, or a file that broke a reader: the child does not outlive this build
        aside.cancel()
        raise
    answer = aside.result()
    if answer is None:  # no child, or it failed: worked out here, as it would have been
        return each()
    evidence, configs.read, configs.warnings, configs.scripts, read = answer  # type: ignore[misc]
    projects.read[known:known] = read
    return evidence  # type: ignore[return-value]


def _attach_pins(root: Path, launched: dict[Path, list[Evidence]], context: RepoContext) -> tuple[Path, ...]:
    """Give each launch what the repository pins of the libraries whose behaviour rules depend on
    (read only when something is launched); specifiers that do not parse are named in a warning."""
    from placement_lint.context.pins import read_pins

    found = read_pins(root)
    context.warnings += list(found.notes)
    if found.pins:
        pins = tuple(tuple(pin) for pin in found.pins)
        for items in launched.values():
            items[:] = [item._replace(pins=pins) for item in items]  # type: ignore[misc]
    return found.read


# From this many launch files on, a forked child reads every other one while this process reads the
# rest (open-instruct's 222 launch files, mostly shell scripts: 0.25 s read in one process).
SPLIT_READING_FILES = 64


def _read_launch_files(
    paths: list[Path], jobs: int, sourced: SourcedFiles
) -> dict[Path, tuple[list[CommandLine], list[str], list[Path]]]:
    """The commands and problems of each launch file, read on both cores when there are enough (a file's
    commands depend on its text and the files beside it only); empty when this process is to read
    each file as it comes. Python launchers are not among them: reading one parses it, and the parse
    is kept for the question whether it is one (python_launches)."""
    if jobs < 2 or len(paths) < SPLIT_READING_FILES:
        return {}
    theirs, known = paths[1::2], len(sourced.read)
    # The child reads the scripts its files source on its own: it sends back those it looked at.
    aside = Aside(lambda: ([_commands(path, sourced) for path in theirs], sourced.read[known:]))
    try:
        read = {path: _commands(path, sourced) for path in paths[::2]}
    except BaseException:
        aside.cancel()
        raise
    found = aside.result()
    if found is not None:
        commands, looked_at = found  # type: ignore[misc]
        read.update(zip(theirs, commands, strict=True))
        sourced.read += looked_at
    return read


# The launch files whose text the context takes nothing from but their commands: not a YAML file (an
# accelerate config the launches beside it may use) nor a Dockerfile (where it copies the repository to).
_READ_FOR_COMMANDS_ONLY = ("shell", "make", "procfile", "notebook", *DOC_KINDS)


def commands_digest(commands: list[CommandLine], problems: list[str]) -> str:
    """What a launch file gives the context: its commands (their lines, words, folders, environment)
    and the problems reading it met."""
    return content_hash(repr((commands, problems)).encode())


def launch_file_digest(path: Path, root: Path) -> str | None:
    """A launch file's commands' digest as it is now; None when reading it reads other files too, or
    the context may take more than its commands from it."""
    if launcher_kind(path, b"") not in _READ_FOR_COMMANDS_ONLY:
        return None
    commands, problems, also_read = _commands(path, SourcedFiles(root))
    return None if also_read else commands_digest(commands, problems)


def _commands(path: Path, sourced: SourcedFiles) -> tuple[list[CommandLine], list[str], list[Path]]:
    """The launch commands a file holds, what could not be read of it (warnings, which the caller
    prefixes with the path as the run shows it), and the other files read into its commands."""
    try:
        if path.stat().st_size > (MAX_NOTEBOOK_BYTES if is_notebook(path) else MAX_LAUNCHER_BYTES):
            if launcher_kind(path, b"") in ("shell", "make", "docker", "procfile", *DOC_KINDS):  # a big YAML is just data
                return [], [f"skipped, larger than {MAX_LAUNCHER_BYTES} bytes"], []
            return [], [], []
        raw = path.read_bytes()
    except OSError:
        return [], [], []
    kind = launcher_kind(path, raw[:512])
    if kind is None or not may_launch(raw, kind):
        return [], [], []
    if kind in DOC_KINDS and not any(marker in raw for marker in DOC_CODE_MARKERS):
        return [], [], []  # prose only: no code block to hold a command
    if kind != "notebook" and b"\0" in raw:
        return [], ["skipped, binary (NUL bytes), no launch commands read"], []
    problems: list[str] = []
    also_read: list[Path] = []
    try:
        commands = commands_in(path, raw.decode("utf-8", errors="replace"), kind, problems, sourced, also_read)
    except (RecursionError, ValueError) as exc:
        problems.append(f"cannot read launch commands: {exc}")
        commands = []
    return commands, problems, also_read


def _short(text: str) -> str:
    return text if len(text) <= 90 else text[:87] + "..."


def _unheard(what: str, done: int, total: int | None) -> None:
    pass


# Below this many importers passing evidence on, following their returned values here costs less than
# a fork, whose copied pages slow this process too (median of 3, context built with a child / alone:
# diffusers' 264 importers 7.3 s / 7.9 s, peft's 72 1.34 / 1.44, NeMo's 112 2.73 / 2.49, accelerate's
# 55 0.72 / 0.66).
RETURNS_ASIDE_IMPORTERS = 128


def _returns_aside(
    context: RepoContext,
    graph: ModuleGraph,
    edges: dict[Path, set[Path]],
    display: Callable[[Path], str],
    projects: Projects,
    looked_at: int,
    projects_known: int,
    jobs: int,
) -> Aside | None:
    """A forked child following the returned values (follow_returns), when there are processes to
    spare and enough importers; it sends back the consumers, the modules read for their classes, and
    the files its graph and the projects looked at that this process had not."""
    if jobs < 2 or len(edges) < RETURNS_ASIDE_IMPORTERS:
        return None

    def follow() -> tuple[object, ...]:
        classes_read = follow_returns(context, graph, edges, display)
        return context.consumers, classes_read, graph.read_since(looked_at), projects.read[projects_known:]

    return Aside(follow)
