"""A launch script's option loop, run with the words a README or another script gives it.

    while [[ $# -gt 0 ]]; do            while getopts "s:n:" opt; do
      case "$1" in                        case $opt in
        --zero) ZERO="$2"; shift 2 ;;       s) STAGE=$OPTARG ;;
        --gpus=*) GPUS="${1#*=}"; shift ;;  n) NGPU=$OPTARG ;;
      esac                                esac
    done                                done

Read, never run: the loop is stepped through for literal words, each arm's assignments taken as
written (`$2`, `${1#*=}`, `$OPTARG`, a literal), and the loop replaced in the script's text by the
assignments it made, so the rest of the script is read as before. A loop that is not of these shapes,
a word no arm takes, an arm that exits, or `shift` anywhere else leaves the script unread (None).
"""

from __future__ import annotations

import fnmatch
import re
import shlex

from placement_lint.patterns import LazyPattern
from placement_lint.records import NamedTuple

_WHILE = LazyPattern(r"^\s*while\b(.*?);?\s*(?:do)?\s*$")
_GETOPTS = LazyPattern(r"""^\s*getopts\s+["']?(:?[A-Za-z0-9:]+)["']?\s+(\w+)\s*$""")
_CASE = LazyPattern(r"""^\s*case\s+["']?\$\{?(\w+)\}?["']?\s+in\s*$""")
_ASSIGNMENT = LazyPattern(r"^(?:export\s+|local\s+|declare\s+)?([A-Za-z_]\w*)=(.*)$")
_SHIFT = LazyPattern(r"^shift(?:\s+(\d+))?$")
_SHIFT_ANYWHERE = LazyPattern(r"(?:^|[\s;&|(])shift\b")
_OPTIND_SHIFT = LazyPattern(r"""^\s*shift\s+["']?\$\(\(\s*\$?OPTIND\s*-\s*1\s*\)\)["']?\s*;?\s*$""")
_LOOP_START = LazyPattern(r"^\s*(?:while|until|for|select)\b")
_LOOP_END = LazyPattern(r"(?:^|[\s;])done\s*(?:[;<>|&].*)?$")
_COMMENT = LazyPattern(r"(?:^|\s)#.*$")
_MAX_STEPS = 200
# The commands of an arm that leave the script (or print its usage, then leave): a word that reaches
# one is not a run the script goes on from.
_EXITS = ("exit", "return", "usage", "help", "print_usage", "show_help")


class OptionRun(NamedTuple):
    text: str  # the script, its option loop replaced by the assignments the run made (lines kept)
    positional: list[str]  # the words left as $1, $2, ... after the loop


class _Arm(NamedTuple):
    patterns: list[str]
    commands: list[str]


def run_option_loop(text: str, arguments: list[str]) -> OptionRun | None:
    """The script as `arguments` leave it after its option loop (see the module's docstring)."""
    lines = text.split("\n")
    loop = _find_loop(lines)
    if loop is None:
        return None
    start, end, getopts = loop
    outside = [i for i, line in enumerate(lines) if not start <= i <= end and _SHIFT_ANYWHERE.search(_code(line))]
    if any(not (getopts and _OPTIND_SHIFT.match(_code(lines[i]))) for i in outside):
        return None  # the parameters move elsewhere too
    body = lines[start + 1 : end]
    if getopts:
        ran = _run_getopts(body, getopts, arguments)
    else:
        ran = _run_case_loop(body, arguments)
    if ran is None:
        return None
    assigned, positional = ran
    replaced = list(lines)
    replaced[start] = "; ".join(f"{name}={shlex.quote(value)}" for name, value in assigned.items()) or ":"
    for i in range(start + 1, end + 1):
        replaced[i] = ""
    for i in outside:
        replaced[i] = ""
    return OptionRun("\n".join(replaced), positional)


def _code(line: str) -> str:
    """A line without its comment (a `#` starting a word)."""
    return _COMMENT.sub("", line).strip()


def _find_loop(lines: list[str]) -> tuple[int, int, tuple[str, str] | None] | None:
    """The first `while` loop that reads options: its first and last line, and for `getopts` its option
    string and variable."""
    for start, line in enumerate(lines):
        found = _WHILE.match(_code(line))
        if found is None:
            continue
        condition = found.group(1).strip()
        if condition.endswith("; do"):
            condition = condition[: -len("; do")].strip()
        end = _loop_end(lines, start)
        if end is None:
            return None
        getopts = _GETOPTS.match(condition.rstrip(";").strip())
        if getopts is not None:
            return start, end, (getopts.group(1), getopts.group(2))
        if "$#" in condition or "$1" in condition or "${1" in condition or condition in ("true", ":"):
            return start, end, None
        return None
    return None


def _loop_end(lines: list[str], start: int) -> int | None:
    depth = 0
    for i in range(start, len(lines)):
        code = _code(lines[i])
        if _LOOP_START.match(code):
            depth += 1
        if _LOOP_END.search(code):
            depth -= 1
            if depth == 0:
                return i
    return None


def _case_of(body: list[str]) -> tuple[str, list[_Arm], list[str], list[str]] | None:
    """The loop's `case`: the variable it matches, its arms, and the commands before and after it."""
    text = "\n".join(_code(line) for line in body)
    head = re.search(r"(?m)^\s*case\s+.*?\s+in\s*$|\bcase\s+\S+\s+in\b", text)
    if head is None:
        return None
    subject = _CASE.match(head.group(0).strip())
    if subject is None:
        return None
    close = re.search(r"(?m)(?:^|[\s;])esac\b", text[head.end() :])
    if close is None:
        return None
    arms_text = text[head.end() : head.end() + close.start()]
    before = _commands(text[: head.start()])
    after = _commands(text[head.end() + close.end() :])
    arms = []
    for chunk in re.split(r";;&?|;&", arms_text):
        chunk = chunk.strip()
        if not chunk:
            continue
        pattern, paren, rest = chunk.lstrip("(").partition(")")
        if not paren:
            return None
        arms.append(_Arm([p.strip().strip("\"'") for p in pattern.split("|")], _commands(rest)))
    return subject.group(1), arms, before, after


def _commands(text: str) -> list[str]:
    return [command.strip() for line in text.split("\n") for command in line.split(";") if command.strip()]


def _run_case_loop(body: list[str], arguments: list[str]) -> tuple[dict[str, str], list[str]] | None:
    case = _case_of(body)
    if case is None:
        return None
    subject, arms, before, after = case
    aliases = {"1"}
    for command in before:  # `key="$1"` before `case $key in`
        assignment = _ASSIGNMENT.match(command)
        if assignment is not None and assignment.group(2).strip("\"'") in ("$1", "${1}"):
            aliases.add(assignment.group(1))
    if subject not in aliases:
        return None
    trailing_shift = sum(_shift_count(command) or 0 for command in after)
    assigned: dict[str, str] = {}
    words = list(arguments)
    for _ in range(_MAX_STEPS):
        if not words:
            return assigned, words
        arm = next((arm for arm in arms if any(fnmatch.fnmatchcase(words[0], p) for p in arm.patterns)), None)
        if arm is None:
            shifted = trailing_shift  # no arm: the word passes, if the loop shifts after its `case`
            if not shifted:
                return None
        else:
            outcome = _run_arm(arm, words, aliases, assigned)
            if outcome is None:
                return None
            if outcome == "break":
                return assigned, words
            shifted = outcome + trailing_shift
            if not shifted:
                return None  # the loop would not end
        words = words[shifted:]
    return None


def _run_arm(arm: _Arm, words: list[str], aliases: set[str], assigned: dict[str, str]) -> int | str | None:
    """Run an arm's commands for `words` ($1 first): how far it shifts, "break", or None when it exits
    or does what is not followed here."""
    shifted = 0
    for command in arm.commands:
        count = _shift_count(command)
        if count is not None:
            shifted += count
            continue
        if command == "break":
            return "break" if not shifted else shifted
        if command.split()[0] in _EXITS:
            return None
        assignment = _ASSIGNMENT.match(command)
        if assignment is not None:
            assigned[assignment.group(1)] = _value(assignment.group(2), words[shifted:], aliases)
    return shifted


def _shift_count(command: str) -> int | None:
    shift = _SHIFT.match(command)
    if shift is None:
        return None
    return int(shift.group(1)) if shift.group(1) else 1


_PARAMETER = LazyPattern(r"\$\{(\w+)(#{1,2})([^}]*)\}|\$\{(\w+)\}|\$(\w+)")


def _value(written: str, words: list[str], aliases: set[str], optarg: str | None = None) -> str:
    """An arm's assigned value as the shell makes it: `"$2"`, `${1#*=}`, `$OPTARG`, a literal; a parameter
    not known here stays written (`$OTHER`), to be read as unknown."""
    try:
        parts = shlex.split(written, posix=True) if written else [""]
    except ValueError:
        return written
    text = " ".join(parts) if parts else ""
    if written.startswith(("'",)):  # single quotes: nothing expands
        return text

    def parameter(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(4) or match.group(5)
        word = _parameter(name, words, aliases, optarg)
        if word is None:
            return match.group(0)
        if match.group(1):  # ${1#pattern}, ${1##pattern}: the shortest or longest prefix matching it removed
            lengths = range(len(word) + 1) if match.group(2) == "#" else range(len(word), -1, -1)
            for length in lengths:
                if fnmatch.fnmatchcase(word[:length], match.group(3)):
                    return word[length:]
        return word

    return _PARAMETER.sub(parameter, text)


def _parameter(name: str, words: list[str], aliases: set[str], optarg: str | None) -> str | None:
    if name == "OPTARG":
        return optarg
    if name in aliases:
        name = "1"
    if name.isdigit() and 1 <= int(name) <= len(words):
        return words[int(name) - 1]
    return None


def _run_getopts(body: list[str], getopts: tuple[str, str], arguments: list[str]) -> tuple[dict[str, str], list[str]] | None:
    optstring, variable = getopts
    case = _case_of(body)
    if case is None or case[0] != variable:
        return None
    _, arms, _, _ = case
    assigned: dict[str, str] = {}
    words = list(arguments)
    while words and words[0].startswith("-") and words[0] != "-":
        word = words.pop(0)
        if word == "--":
            break
        letters = word[1:]
        while letters:
            letter, letters = letters[0], letters[1:]
            at = optstring.lstrip(":").find(letter)
            if at < 0 or letter == ":":
                return None  # an option the script does not take: its `?)` arm, usually a usage and exit
            optarg = None
            if optstring.lstrip(":")[at + 1 : at + 2] == ":":
                if letters:
                    optarg, letters = letters, ""
                elif words:
                    optarg = words.pop(0)
                else:
                    return None
            arm = next((arm for arm in arms if any(fnmatch.fnmatchcase(letter, p) for p in arm.patterns)), None)
            if arm is None:
                continue
            for command in arm.commands:
                if command.split()[0] in _EXITS:
                    return None
                assignment = _ASSIGNMENT.match(command)
                if assignment is not None:
                    assigned[assignment.group(1)] = _value(assignment.group(2), [], set(), optarg)
    return assigned, words
