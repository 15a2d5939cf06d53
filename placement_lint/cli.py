"""The command line: `placement-lint check`, `placement-lint rule`, `placement-lint --version`.

Behaves like ruff where a user would expect it: exit 0 when nothing is left to report, 1 when
findings remain, 2 on an error (bad arguments or config, a file that cannot be read or parsed).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

import click

from placement_lint.distributed import NAMED_SETUPS
from placement_lint.process import collect_garbage_rarely, ends_after_the_run
from placement_lint.report.formats import FORMATS
from placement_lint.version import __version__

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def _codes() -> tuple[str, ...]:
    from placement_lint.rules import rule_codes  # by module name: a run the cache answers imports no rule

    return rule_codes()


def _rule_names() -> dict[str, str]:
    """Every rule's code and name, in code order (the rule modules are imported on first use)."""
    from placement_lint.rules import all_rules

    return {rule.code: rule.name for rule in all_rules()}


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="placement-lint")
def main() -> None:
    """Find device_map placements that break distributed training, before the GPUs are booked."""


# Set by `console`: the process is the command's own, not a program that called `main`.
_STANDALONE = False


def console() -> None:
    """The `placement-lint` command and `python -m placement_lint`: `main`, then leave without
    tearing the interpreter down. Freeing every object a run made costs 15-20 ms, a quarter of a
    warm run over trl; mypy leaves the same way. The output is flushed first. An interrupt, a
    crash or `sys.exit("message")` leaves as usual, as does `main` called from Python. The
    collector is the command's own to tune (process.collect_garbage_rarely); a program calling
    `main` keeps its own."""
    global _STANDALONE
    _STANDALONE = True
    collect_garbage_rarely()
    try:
        main()
    except SystemExit as done:
        if done.code is not None and (not isinstance(done.code, int) or done.code == 130):
            raise  # a message to print, or pool workers that may still be stopping
        try:
            for stream in (sys.stdout, sys.stderr):
                if stream is not None:  # None when the stream was closed (`>&-`) or never open (pythonw)
                    stream.flush()
        except (OSError, ValueError):
            raise done from None
        os._exit(done.code or 0)


@main.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path, readable=False))
@click.option("--fix", is_flag=True, help="Apply safe fixes.")
@click.option("--unsafe-fixes", is_flag=True, help="Also apply (or show) fixes that may change behaviour.")
@click.option("--diff", is_flag=True, help="Print the fixes as a unified diff; write nothing. Exit 1 if there is a diff.")
@click.option("--select", multiple=True, help="Rule codes or prefixes to enable (replaces the configured set).")
@click.option("--ignore", multiple=True, help="Rule codes or prefixes to disable.")
@click.option("--extend-select", multiple=True, help="Rule codes or prefixes to enable on top of the configured set.")
@click.option(
    "--output-format",
    type=click.Choice(list(FORMATS)),
    default=None,
    help="How to print findings: for people (full, concise, grouped) or for tools and CI (the rest).",
)
@click.option(
    "-o",
    "--output-file",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Write the report to this file instead of stdout (never coloured).",
)
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when findings remain.")
@click.option("--statistics", is_flag=True, help="Print a count per rule instead of the findings.")
@click.option("--context", type=click.Choice(sorted(NAMED_SETUPS)), default=None, help="Assume this setup for every file.")
@click.option("--config", "config_path", type=click.Path(path_type=Path, dir_okay=False), help="Use this pyproject.toml.")
@click.option("--color/--no-color", default=None, help="Colour the output (default: only on a terminal).")
@click.option("-q", "--quiet", is_flag=True, help="Print findings only, no summary.")
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=None, help="Worker processes (default: one per core).")
@click.option("--no-cache", is_flag=True, help="Neither read nor write the result cache.")
@click.option("--cache-dir", type=click.Path(path_type=Path, file_okay=False), default=None, help="Where the cache lives.")
@click.option(
    "--force-exclude", is_flag=True, help="Apply the configured excludes to paths named on the command line too (pre-commit)."
)
@click.option("--ignore-noqa", is_flag=True, help="Ignore `# noqa` comments: report what they suppress.")
@click.option(
    "--stdin-filename",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Read the source from stdin and check it as this file (its config and launch context apply).",
)
@click.option("--show-fixes", is_flag=True, help="List what --fix fixed (or --diff would fix), per file.")
@click.option("--add-noqa", is_flag=True, help="Add a `# noqa: CODE` comment for every finding left (after --fix).")
@click.option(
    "--changed-since",
    metavar="REF",
    default=None,
    help="Check only files changed since the git ref REF (and untracked ones), and those whose launch context changed.",
)
def check(
    paths: tuple[Path, ...],
    fix: bool,
    unsafe_fixes: bool,
    diff: bool,
    select: tuple[str, ...],
    ignore: tuple[str, ...],
    extend_select: tuple[str, ...],
    output_format: str | None,
    output_file: Path | None,
    exit_zero: bool,
    statistics: bool,
    context: str | None,
    config_path: Path | None,
    color: bool | None,
    quiet: bool,
    jobs: int | None,
    no_cache: bool,
    cache_dir: Path | None,
    force_exclude: bool,
    ignore_noqa: bool,
    stdin_filename: Path | None,
    show_fixes: bool,
    add_noqa: bool,
    changed_since: str | None,
) -> None:
    """Check PATHS (default: the current folder) for device_map placements that break distributed training.

    `-` as the only path, or --stdin-filename, reads the source from stdin."""
    if _STANDALONE:
        ends_after_the_run()
    from placement_lint.engine import run
    from placement_lint.results import RunOptions
    from placement_lint.settings import ConfigError, settings_for

    cwd = Path.cwd()
    reads_stdin = stdin_filename is not None or Path("-") in paths
    if reads_stdin and any(path != Path("-") for path in paths):
        _error("stdin is checked alone: give no other paths with - or --stdin-filename")
        sys.exit(EXIT_ERROR)
    targets = [stdin_filename or Path("-")] if reads_stdin else list(paths) or [Path(".")]
    try:
        settings = settings_for(targets[0], config_path, cwd, _codes(), select, ignore, extend_select)
    except ConfigError as exc:
        _error(str(exc))
        sys.exit(EXIT_ERROR)

    if no_cache and cache_dir is not None:
        _error("--no-cache and --cache-dir contradict each other")
        sys.exit(EXIT_ERROR)
    if add_noqa and diff:
        _error("--add-noqa writes comments and --diff writes nothing: give one of them")
        sys.exit(EXIT_ERROR)
    options = RunOptions(
        fix=fix and not diff,
        unsafe_fixes=unsafe_fixes,
        diff=diff,
        context=context,
        jobs=jobs,
        ignore_noqa=ignore_noqa,
        force_exclude=force_exclude,
    )
    if reads_stdin:
        sys.exit(
            _check_stdin(
                targets[0], settings, options, output_format or "full", output_file, statistics, quiet, color, exit_zero, cwd
            )
        )
    restrict = _changed_files(changed_since, targets, cwd, settings, quiet) if changed_since is not None else None
    bar = None
    if sys.stderr.isatty():  # never a bar in a log: and no import of it either
        from placement_lint.report.progress import ProgressBar, progress_wanted

        bar = ProgressBar() if progress_wanted(True, os.environ, output_format or "full", quiet) else None
    cache_folder = None
    if not no_cache:
        from placement_lint.cache import cache_dir as find_cache_dir  # json and zlib: not for a run without a cache

        cache_folder = find_cache_dir(settings.root, cache_dir)
    _interrupt_on_sigterm()
    try:
        result = run(targets, settings, options, cwd, cache_folder, restrict, bar)
    except KeyboardInterrupt:
        _error("interrupted before any file was checked; nothing was changed")
        sys.exit(130)
    finally:
        if bar is not None:
            bar.close()
    if add_noqa and not result.interrupted:
        from placement_lint.engine import add_noqa_comments

        try:
            add_noqa_comments(result)
        except KeyboardInterrupt:
            _error(f"interrupted while adding noqa comments: {result.noqa_added} added, each file written whole")
            sys.exit(130)

    try:
        _output(
            result,
            options,
            output_format or "full",
            output_file,
            statistics,
            quiet,
            color,
            cwd,
            show_fixes=show_fixes,
            add_noqa=add_noqa,
        )
    except KeyboardInterrupt:
        sys.exit(130)

    if result.interrupted:
        fixed = sum(1 for f in result.files if f.fixed)
        _error(f"interrupted: {fixed} file(s) fixed and written whole, {result.interrupted} not checked and left as they were")
        sys.exit(130)
    sys.exit(_exit_code(result, diff, exit_zero))


def _output(  # type: ignore[no-untyped-def]
    result,
    options,
    output_format: str,
    output_file: Path | None,
    statistics: bool,
    quiet: bool,
    color: bool | None,
    cwd: Path,
    err: bool = False,
    show_fixes: bool = False,
    add_noqa: bool = False,
) -> None:
    """The report to stdout (stderr with `err`), or to `output_file`."""
    stream = sys.stderr if err else sys.stdout
    use_color = output_file is None and color_wanted(color, stream.isatty(), os.environ)
    report, styled = _report(result, options, output_format, statistics, quiet, use_color, cwd, show_fixes, add_noqa)
    if output_file is None:
        _emit(report, styled, err)
        return
    from placement_lint.report.output import write_report

    try:
        write_report(output_file, report + "\n" if report else "")
    except OSError as exc:
        _error(f"cannot write {output_file}: {exc.strerror or exc}")
        sys.exit(EXIT_ERROR)


def color_wanted(flag: bool | None, is_terminal: bool, environ: Mapping[str, str]) -> bool:
    """As ruff decides: --color/--no-color first; then FORCE_COLOR (set and not empty: colour even into
    a pipe, a CI log); then NO_COLOR (set and not empty: none, as no-color.org asks); then whether the
    output is a terminal. Both set: FORCE_COLOR wins, as in ruff."""
    if flag is not None:
        return flag
    if environ.get("FORCE_COLOR"):
        return True
    if environ.get("NO_COLOR"):
        return False
    return is_terminal


def _exit_code(result, diff: bool, exit_zero: bool) -> int:  # type: ignore[no-untyped-def]
    if result.errors or any(f.error for f in result.files):
        return EXIT_ERROR
    if diff:
        return EXIT_FINDINGS if any(f.diff for f in result.files) and not exit_zero else EXIT_CLEAN
    return EXIT_FINDINGS if result.findings and not exit_zero else EXIT_CLEAN


def _check_stdin(  # type: ignore[no-untyped-def]
    path: Path,
    settings,
    options,
    output_format: str,
    output_file: Path | None,
    statistics: bool,
    quiet: bool,
    color: bool | None,
    exit_zero: bool,
    cwd: Path,
) -> int:
    """Check stdin as the file `path`, as editors run it. Like ruff: with --fix, stdout gets the
    source (fixed, or as it came when nothing could be fixed) and nothing else; the findings that
    remain go to stderr (or -o). Nothing is written to disk but an -o report."""
    from placement_lint.discover import force_excluded
    from placement_lint.engine import run_source

    raw = sys.stdin.buffer.read()
    if options.force_exclude and force_excluded(path, settings):
        if options.fix:
            sys.stdout.buffer.write(raw)
        return EXIT_CLEAN
    result = run_source(raw, path, settings, options, cwd)
    if options.fix:
        fixed = result.files[0].source
        sys.stdout.buffer.write(fixed.file_bytes if fixed is not None and result.files[0].error is None else raw)
        sys.stdout.flush()
    _output(result, options, output_format, output_file, statistics, quiet, color, cwd, err=options.fix)
    return _exit_code(result, options.diff, exit_zero)


def _changed_files(ref: str, targets: list[Path], cwd: Path, settings, quiet: bool):  # type: ignore[no-untyped-def]
    """`--changed-since`: which of the files found to check, from git and the launch contexts."""
    from placement_lint.changes import GitError, affected, changed_since

    folders = {Path(os.path.abspath(t if t.is_dir() else t.parent)) for t in targets}
    try:
        changed = changed_since(ref, [f for f in folders if f.exists()] or [cwd])
    except GitError as exc:
        _error(str(exc))
        sys.exit(EXIT_ERROR)
    if settings.config_file is not None and Path(settings.config_file).resolve() in changed:
        if not quiet:
            click.echo(f"{settings.config_file} changed since {ref}: checking every file", err=True)
        return None

    def restrict(files, repos):  # type: ignore[no-untyped-def]
        chosen, context_only = affected(files, repos, changed, cwd)
        if not quiet:
            also = f" ({context_only} of them for their launch context)" if context_only else ""
            click.echo(f"Checking {len(chosen)} of {len(files)} files, changed since {ref}{also}.", err=True)
        return chosen

    return restrict


def _report(  # type: ignore[no-untyped-def]
    result,
    options,
    output_format: str,
    statistics: bool,
    quiet: bool,
    color: bool,
    cwd: Path,
    show_fixes: bool = False,
    add_noqa: bool = False,
) -> tuple[str, bool]:
    """Print the run's errors and warnings on stderr; return the report for stdout or -o, and
    whether it holds colour codes (only a human format on a colour terminal does)."""
    from placement_lint.report import text
    from placement_lint.report.common import problems
    from placement_lint.report.formats import FORMATS, Report, is_human

    for problem in problems(result):
        (_error if problem.level == "error" else _warn)(problem.message)

    human = is_human(output_format)
    if show_fixes or options.fix:  # the fix list and the --fix summary: only such a run imports them
        from placement_lint.report import migration
    if show_fixes and (options.diff or not human):  # stdout holds a patch or a machine format
        for line in migration.fix_list(result, would=options.diff):
            click.echo(line, err=True)
    if add_noqa and not quiet:
        click.echo(f"Added {text.plural(result.noqa_added, 'noqa comment')}.", err=True)
    if options.diff:
        if not quiet:
            click.echo(text.would_fix(result, options), err=True)
        return "".join(f.diff for f in result.files if f.diff).removesuffix("\n"), False
    chosen = FORMATS[output_format]
    if color:
        from placement_lint.report.terminal import terminal_style

        style = terminal_style(cwd)
    else:
        style = text.plain
    if statistics:
        if output_format == "json":
            from placement_lint.report.json_format import render_statistics

            return render_statistics(result, options.unsafe_fixes), False
        lines = text.statistics(result, _rule_names(), options.unsafe_fixes)
    else:
        body = chosen.render(Report(result, options, cwd, style if chosen.human else text.plain))
        if not chosen.human:
            return body, False
        lines = [body] if body else []
    sections = []  # for people only: with a machine format they went to stderr above, or nowhere
    if show_fixes and human:
        sections.append(migration.fix_list(result, would=False))
    if human and options.fix and not quiet and (result.findings or result.baselined or any(f.fixed for f in result.files)):
        summary = migration.summarize(result, options, _rule_names())
        sections.append(migration.render_summary(summary, style, terminal=color))
    for section in sections:
        if section:  # one blank line before each, however the findings ended
            lines += [*([""] if lines and not lines[-1].endswith("\n") and lines[-1] else []), *section, ""]
    if not quiet:
        lines.append(text.summary(result, options))
    return "\n".join(lines), color


def _emit(report: str, color: bool, err: bool = False) -> None:
    if report:
        click.echo(report, err=err, color=color)


def _interrupt_on_sigterm() -> None:
    """SIGTERM stops a run the way Ctrl-C does: between files, reporting what was done."""
    import signal

    def stop(*_: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)


def _error(message: str) -> None:
    click.echo(f"error: {message}", err=True)


def _warn(message: str) -> None:
    click.echo(f"warning: {message}", err=True)


@main.command()
@click.option("--cache-dir", type=click.Path(path_type=Path, file_okay=False), default=None, help="The cache to remove.")
def clean(cache_dir: Path | None) -> None:
    """Remove the result cache (.placement_lint_cache in the project root)."""
    import shutil

    from placement_lint.cache import cache_dir as find_cache_dir
    from placement_lint.settings import ConfigError, settings_for

    try:
        settings = settings_for(Path.cwd(), None, Path.cwd(), _codes())
    except ConfigError as exc:
        _error(str(exc))
        sys.exit(EXIT_ERROR)
    folder = find_cache_dir(settings.root, cache_dir)
    if folder.is_dir():
        shutil.rmtree(folder)
        click.echo(f"Removed {folder}")


@main.command("context")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path, readable=False))
@click.option("--all", "show_all", is_flag=True, help="Also list files that show no distributed setup.")
@click.option("--config", "config_path", type=click.Path(path_type=Path, dir_okay=False), help="Use this pyproject.toml.")
@click.option("--output-format", type=click.Choice(["text", "json"]), default="text")
def context_command(paths: tuple[Path, ...], show_all: bool, config_path: Path | None, output_format: str) -> None:
    """Show the distributed setup each Python file runs under, and why (its evidence chain)."""
    from placement_lint.explain import explain_contexts
    from placement_lint.settings import ConfigError, settings_for

    cwd = Path.cwd()
    targets = list(paths) or [Path(".")]
    try:
        settings = settings_for(targets[0], config_path, cwd, _codes())
    except ConfigError as exc:
        _error(str(exc))
        sys.exit(EXIT_ERROR)
    notes: list[str] = []
    reports = explain_contexts(targets, settings, cwd, show_all, notes)
    excluded = _excluded_launcher(settings, cwd, paths)
    if output_format == "json":
        import json

        def evidence_json(context):  # type: ignore[no-untyped-def]
            items = context.to_json()
            for item, evidence in zip(items[1:] if context.override else items, context.evidence, strict=True):
                item["excluded_folder"] = excluded(evidence)
            return items

        click.echo(
            json.dumps(
                [
                    {
                        "filename": r.display,
                        "error": r.error,
                        "contexts": [{"setup": c.setup.describe(), "evidence": evidence_json(c)} for c in r.contexts],
                    }
                    for r in reports
                ],
                indent=2,
            )
        )
    else:
        for report in reports:
            if report.error:
                _error(f"{report.display}: {report.error}")
                continue
            if not report.contexts:
                click.echo(f"{report.display}: a single process (no distributed setup found)")
                continue
            for context in report.contexts:
                click.echo(f"{report.display}: {context.setup.describe()}")
                if context.override is not None:
                    click.echo(f"  - set by {context.override.source}")
                for evidence in sorted(context.evidence, key=lambda e: (e.origin != "file", e.where)):
                    click.echo(f"  - {evidence.describe(report.display)}")
                    if excluded(evidence):
                        click.echo(
                            f"    ({evidence.path} is in a folder `exclude` leaves out: it is not reported on,"
                            " but what it launches counts; `launch-exclude` would ignore it)"
                        )
                pins = dict.fromkeys(f"{p}{s} ({w})" for e in context.evidence for p, s, w in e.pins if s)
                if pins:
                    click.echo(f"  - the repository pins {', '.join(pins)}")
    for note in notes:  # what could not be read (a config, a pin, a doc), so a missing launch is no mystery
        click.echo(f"note: {note}", err=True)
    sys.exit(EXIT_ERROR if any(r.error for r in reports) else EXIT_CLEAN)


def _excluded_launcher(settings, cwd: Path, named: tuple[Path, ...]):  # type: ignore[no-untyped-def]
    """Does a piece of launch evidence come from a file the configured `exclude` / `extend-exclude`
    cover (which a check reports nothing in, but whose launches count)? Not one under a path the
    command names: a check of that path reports on it, as ruff checks a path it is given."""
    from placement_lint.discover import excluded_by_settings

    covered = excluded_by_settings(settings)
    given = [Path(os.path.abspath(cwd / path)) for path in named]

    def excluded(evidence) -> bool:  # type: ignore[no-untyped-def]
        if evidence.origin == "file":
            return False
        path = Path(os.path.abspath(cwd / evidence.path))
        return covered(path) and not any(path.is_relative_to(folder) for folder in given)

    return excluded


@main.command()
@click.option("--stdio", is_flag=True, help="Talk over stdin and stdout (the default, and the only transport).")
def server(stdio: bool) -> None:
    """Run the Language Server for editors (needs the `lsp` extra: pip install 'placement-lint[lsp]')."""
    try:
        from placement_lint.server import serve  # pygls: only this command pays for it
    except ImportError as exc:
        _error(f"placement-lint server needs the lsp extra (pip install 'placement-lint[lsp]'): {exc}")
        sys.exit(EXIT_ERROR)
    serve()


@main.command()
@click.argument("code", required=False)
@click.option("--all", "show_all", is_flag=True, help="List every rule.")
@click.option("--output-format", type=click.Choice(["text", "json"]), default="text")
def rule(code: str | None, show_all: bool, output_format: str) -> None:
    """Explain a rule (its catalogue page), or list them all with --all."""
    from placement_lint.catalogue import page
    from placement_lint.rules import all_rules, rule_by_code

    if show_all and code is not None:
        _error("give a rule code or --all, not both")
        sys.exit(EXIT_ERROR)
    if show_all or code is None:
        rules = all_rules()
        if output_format == "json":
            import json

            base = _rule_url_base()
            click.echo(json.dumps([_rule_json(r, base) for r in rules], indent=2))
        else:
            import shutil

            width = shutil.get_terminal_size().columns if sys.stdout.isatty() else None
            for line in rule_table(rules, width):
                click.echo(line)
        return
    found = rule_by_code(code)
    if found is None:
        _error(f"unknown rule code {code!r} (rules are {', '.join(_codes())})")
        sys.exit(EXIT_ERROR)
    if output_format == "json":
        import json

        click.echo(json.dumps({**_rule_json(found, _rule_url_base()), "explanation": page(found.code)}, indent=2))
        return
    click.echo(page(found.code) or f"{found.code} ({found.name}): {found.summary}")


def rule_table(rules, width: int | None = None) -> list[str]:  # type: ignore[no-untyped-def]
    """`rule --all` as text: a header and aligned columns two spaces apart. On a terminal `width`
    wide, a summary wraps under its own column, or, where that leaves it too little room, under the
    name; piped, each rule stays one line, for grep."""
    import textwrap

    rows = [("code", "name", "fix", "summary"), *((r.code, r.name, r.fix_availability.value, r.summary) for r in rules)]
    widths = [max(len(row[column]) for row in rows) for column in range(3)]
    indent = sum(widths) + 2 * len(widths)
    lines = []
    for *cells, summary in rows:
        columns = "  ".join(cell.ljust(w) for cell, w in zip(cells, widths, strict=True))
        if not width:
            lines.append(f"{columns}  {summary}")
        elif width - indent >= _SUMMARY_ROOM:
            first, *more = textwrap.wrap(summary, width - indent)
            lines += [f"{columns}  {first}", *(" " * indent + line for line in more)]
        else:
            under = widths[0] + 2
            lines += [
                columns.rstrip(),
                *textwrap.wrap(
                    summary, max(width - under, _SUMMARY_ROOM), initial_indent=" " * under, subsequent_indent=" " * under
                ),
            ]
    return lines


_SUMMARY_ROOM = 30  # the narrowest summary column worth wrapping into


def _rule_url_base() -> str | None:
    """The configured `rule-url-base` of the project the command runs in (None: the default)."""
    from placement_lint.settings import ConfigError, settings_for

    try:
        return settings_for(Path.cwd(), None, Path.cwd(), _codes()).rule_url_base
    except ConfigError as exc:
        _error(str(exc))
        sys.exit(EXIT_ERROR)


def _rule_json(rule, rule_url_base: str | None) -> dict[str, str]:  # type: ignore[no-untyped-def]
    from placement_lint.catalogue import page_url

    return {
        "code": rule.code,
        "name": rule.name,
        "summary": rule.summary,
        "fix": rule.fix_availability.value,
        "url": page_url(rule.code, rule_url_base),  # as the findings' JSON and SARIF link it
    }
