"""Parse one shell command line into a launch: which launcher, which Python target, which settings.

Recognises (domain.md §5.3): `accelerate launch`, `torchrun` / `python -m torch.distributed.run|launch`,
`deepspeed`, `trl <command>`, `srun` / `mpirun` / `mpiexec` wrappers, and plain `python script.py`.
Nothing is executed: variables are expanded from assignments seen earlier in the same file, and
anything that cannot be resolved statically is left out.
"""

from __future__ import annotations

import re
from collections.abc import Container

from placement_lint.patterns import LazyPattern
from placement_lint.records import Record

_ENV_PREFIX = LazyPattern(r"^[A-Za-z_][A-Za-z0-9_]*=")
# A whole word that is a variable nobody set (`torchrun $DISTRIBUTED_ARGS train.py`): launcher options
# we cannot see, not the script. The script's own arguments too (`$1`, `$@`, `${1}`): LMFlow's
# `deepspeed_args="$1"` ... `deepspeed ${deepspeed_args} examples/finetune.py`. A whole word computed
# when the script runs (`$(get_launch_args 2)`) is as unknown.
_UNKNOWN_WORD = LazyPattern(r"^\$(?:[A-Za-z_]\w*|[0-9@*#]|\{(?:[A-Za-z_]\w*(?:\[[@*]\])?|[0-9]+|[@*])\}|\(.*\))$", re.DOTALL)
_PYTHON = LazyPattern(r"^(.*/)?python(\d(\.\d+)?)?$")
# `$(which NAME)`, `` `which NAME` ``, `$(command -v NAME)`: the path of an installed program, a console
# script when the repository declares NAME; python runs that file.
_WHICH = LazyPattern(r"\$\(\s*(?:which|command\s+-v)\s+([\w.+-]+)\s*\)|`\s*(?:which|command\s+-v)\s+([\w.+-]+)\s*`")
_PASSTHROUGH = {"nohup", "time", "exec", "sudo", "stdbuf", "nice", "ionice", "command", "builtin"}
_RUNNERS = {("uv", "run"), ("poetry", "run"), ("pipenv", "run"), ("conda", "run"), ("pixi", "run")}
# Options that take no value, per launcher (everything else starting with - takes one, unless written --x=y).
_FLAGS = {
    "accelerate": {
        "--multi_gpu", "--use_deepspeed", "--use_fsdp", "--use_megatron_lm", "--use_xpu", "--cpu", "--tpu",
        "--quiet", "-q", "--debug", "-m", "--module", "--no_python", "--enable_cpu_affinity", "--dynamo_use_fullgraph",
        "--dynamo_use_dynamic", "--use_parallelism_config", "--same_network", "--tpu_use_cluster", "--tpu_use_sudo",
    },
    "torchrun": {"--standalone", "--no-python", "--no_python", "-m", "--module", "--run-path", "--run_path", "--use-env", "--use_env"},
    "deepspeed": {
        "--no_python", "--module", "--no_local_rank", "--no_ssh_check", "--force_multi", "--save_pid",
        "--enable_each_rank_log", "--bind_cores_to_rank", "--elastic_training", "--ssh", "--no_ssh",
    },
    "srun": {"-l", "--label", "-u", "--unbuffered", "--exclusive", "--overlap", "-Q", "--quiet", "-v", "--verbose"},
    "mpirun": {
        "--allow-run-as-root", "--oversubscribe", "--bind-to-core", "-q", "--quiet", "--tag-output", "-v",
        "-display-map", "--display-map", "-report-bindings", "--report-bindings", "-tag-output", "-oversubscribe",
    },
}  # fmt: skip


class Launch(Record):
    """A launch command as parsed: the launcher, what it runs and with what."""

    __slots__ = (
        "launcher", "target", "module", "options", "script_args", "env", "wrapped_by", "wrapper_options", "text", "program",
    )  # fmt: skip

    def __init__(
        self,
        launcher: str,  # "accelerate", "torchrun", "deepspeed", "trl", "mpirun", "srun", "python"
        target: str | None = None,  # a script path as written, or None
        module: str | None = None,  # `-m package.module`
        options: dict[str, str] | None = None,  # launcher options: "--config_file": "x.yaml", flags: ""
        script_args: dict[str, str] | None = None,  # "--deepspeed": "ds.json", positional yaml/json as "": "x.yaml"
        env: dict[str, str] | None = None,
        wrapped_by: str | None = None,  # "srun", "mpirun": several processes whatever the launcher
        wrapper_options: dict[str, str] | None = None,  # `srun --gpus-per-task 1` -> {"--gpus-per-task": "1"}
        text: str = "",  # the command as written, for messages
        # A program run by name, not a file: `$(which NAME)`, `torchrun --no-python NAME`, or NAME itself under
        # srun/mpirun when it is one of the `programs` the caller knows (the repository's console scripts).
        program: str | None = None,
    ) -> None:
        self.launcher = launcher
        self.target = target
        self.module = module
        self.options: dict[str, str] = {} if options is None else options
        self.script_args: dict[str, str] = {} if script_args is None else script_args
        self.env: dict[str, str] = {} if env is None else env
        self.wrapped_by = wrapped_by
        self.wrapper_options: dict[str, str] = {} if wrapper_options is None else wrapper_options
        self.text = text
        self.program = program

    __hash__ = None  # type: ignore[assignment]  # changed as it is parsed: no hash, as a mutable dataclass has none

    def option(self, *names: str) -> str | None:
        """A launcher option, in either spelling (`--num_processes` / `--num-processes`)."""
        return _lookup(self.options, names)

    def script_arg(self, *names: str) -> str | None:
        """An argument given to the script, in either spelling."""
        return _lookup(self.script_args, names)


def _lookup(values: dict[str, str], names: tuple[str, ...]) -> str | None:
    for name in names:
        for spelling in (name, name.replace("_", "-"), name.replace("-", "_")):
            if spelling in values:
                return values[spelling]
    return None


def expand(text: str, variables: dict[str, str]) -> str:
    """`$X`, `${X}`, `${X:-default}`, `${X-default}`, `${X:=default}`, `$(X)` from known assignments,
    and a script argument's default (`${1:-8}`); unknown ones stay. Inside a shell function's call the
    positional parameters are known too: `$1`, and `"$@"` as the call's words (`@` holds them quoted)."""

    def braced(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(3)
        if name in variables and variables[name] != "":
            return variables[name]
        return default if default is not None else match.group(0)

    if "@" in variables:
        text = _ALL_ARGUMENTS.sub(lambda _: variables["@"], text)
    text = re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*|[0-9])(:?[-=]([^}]*))?\}", braced, text)
    text = re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: variables.get(m.group(1), m.group(0)), text)
    return re.sub(r"\$([A-Za-z_][A-Za-z0-9_]*|[0-9])", lambda m: variables.get(m.group(1), m.group(0)), text)


# `"$@"`, `$@`, `${@}` and `$*`: every argument of a shell function's call.
_ALL_ARGUMENTS = LazyPattern(r'"\$(?:@|\{@\})"|\$(?:[@*]|\{[@*]\})')


# Without quotes or backslashes, shlex's posix split is a split on its four whitespace characters.
_NEEDS_QUOTING_RULES = LazyPattern(r"['\"\\]")
_PLAIN_WORD = LazyPattern(r"[^ \t\r\n]+")
# The pieces shlex's posix split reads (whitespace_split, no comment characters): a run of plain
# characters, a single-quoted run (all literal), a double-quoted run (where a backslash escapes only
# `"` and itself), a backslash escaping one character, whitespace; anything else is an unclosed quote
# or a trailing backslash. shlex's tokenizer costs a Python call per character: on open-instruct's
# 3,500 quoted commands it cost a quarter of a second, the pieces of a regular expression a tenth of that.
_SHELL_PIECE = LazyPattern(r"""([^ \t\r\n'"\\]+)|'([^']*)'|"((?:[^"\\]|\\.)*)"|\\(.)|([ \t\r\n]+)|(.)""", re.DOTALL)
_ESCAPED_IN_DOUBLE_QUOTES = LazyPattern(r'\\([\\"])')
_DOUBLE_QUOTED, _SPACE, _UNCLOSED = 3, 5, 6


def shell_words(text: str) -> list[str]:
    """`shlex.split(text, comments=False)`, with the same words and the same ValueError."""
    words: list[str] = []
    word: str | None = None
    for match in _SHELL_PIECE.finditer(text):
        kind, piece = match.lastindex, match.group(match.lastindex)  # which alternative, and what it read
        if kind == _SPACE:
            if word is not None:
                words.append(word)
                word = None
            continue
        if kind == _UNCLOSED:
            raise ValueError(_unclosed(piece, text[match.end() :]))
        if kind == _DOUBLE_QUOTED and "\\" in piece:
            piece = _ESCAPED_IN_DOUBLE_QUOTES.sub(r"\1", piece)
        word = piece if word is None else word + piece
    if word is not None:
        words.append(word)
    return words


def _unclosed(piece: str, rest: str) -> str:
    """shlex's error for a quote never closed, or a backslash with nothing after it; in double quotes,
    the text may end in a backslash escaping nothing (an odd run of them at the end)."""
    trailing = len(rest) - len(rest.rstrip("\\"))
    if piece == "'" or (piece == '"' and trailing % 2 == 0):
        return "No closing quotation"
    return "No escaped character"


def split(text: str) -> list[str]:
    """The command's words. A `#` starts a comment only at the start of a word (`${#GPUS[@]}`, the
    length of an array, is a word of its own), so the comment is cut after splitting, not by shlex.
    A `$( ... )` or `$(( ... ))` is part of one word, spaces and quotes inside it included, as the
    shell reads it (`--master_port=$(( RANDOM + 1000 ))`); shlex knows no substitutions and would
    cut it at its spaces."""
    substitutions: list[str] = []
    if "$(" in text and "\x00" not in text:
        text = _hold_substitutions(text, substitutions)
    if _NEEDS_QUOTING_RULES.search(text) is None:
        words = _PLAIN_WORD.findall(text)
    else:
        try:
            words = shell_words(text)
        except ValueError:
            words = text.split()
    if substitutions:
        words = [_HELD.sub(lambda held: substitutions[int(held.group(1))], word) for word in words]
    comment = next((index for index, word in enumerate(words) if word.startswith("#")), None)
    return words if comment is None else words[:comment]


# A substitution held out of the split: its number among the held ones, between NULs (never in a command).
_HELD = LazyPattern("\x00([0-9]+)\x00")


def _hold_substitutions(text: str, held: list[str]) -> str:
    """`text` with each outermost `$( ... )` outside single quotes replaced by a placeholder word
    piece, appended to `held`; one never closed is left as written."""
    out: list[str] = []
    at, quote = 0, ""
    while at < len(text):
        char = text[at]
        if char == "\\" and quote != "'":
            out.append(text[at : at + 2])
            at += 2
            continue
        if quote == "" and char in "'\"" or char == quote:
            quote = "" if char == quote else char
        elif quote != "'" and text.startswith("$(", at):
            end = _substitution_end(text, at + 1)
            if end is not None:
                out.append(f"\x00{len(held)}\x00")
                held.append(text[at:end])
                at = end
                continue
        out.append(char)
        at += 1
    return "".join(out)


def _substitution_end(text: str, opening: int) -> int | None:
    """Where the parenthesis at `opening` is closed (the index after it), skipping quoted text and
    nested parentheses; None when it never is."""
    depth, at = 0, opening
    while at < len(text):
        char = text[at]
        if char == "\\":
            at += 2
            continue
        if char == "'":
            closing = text.find("'", at + 1)
            if closing < 0:
                return None
            at = closing + 1
            continue
        if char == '"':
            closing = _double_quoted_end(text, at + 1)
            if closing is None:
                return None
            at = closing
            continue
        depth += {"(": 1, ")": -1}.get(char, 0)
        at += 1
        if depth == 0:
            return at
    return None


def _double_quoted_end(text: str, at: int) -> int | None:
    """The index after the `"` closing a double-quoted run that starts at `at`, past any `$( ... )`
    inside it (whose own quotes do not close the run)."""
    while at < len(text):
        char = text[at]
        if char == "\\":
            at += 2
        elif char == '"':
            return at + 1
        elif text.startswith("$(", at):
            end = _substitution_end(text, at + 1)
            if end is None:
                return None
            at = end
        else:
            at += 1
    return None


def parse_command(text: str, programs: Container[str] = ()) -> Launch | None:
    """`programs`: names that run a Python entry point (console scripts), followed when a wrapper
    (srun, mpirun) runs them."""
    looked_up: set[str] = set()
    written = text
    if "which" in text or "command" in text:
        text = _WHICH.sub(lambda match: _looked_up(match, looked_up), text)
    tokens = split(text)
    env: dict[str, str] = {}
    wrapped_by: str | None = None
    wrapper_options: dict[str, str] = {}
    while tokens:
        head = tokens[0]
        if _ENV_PREFIX.match(head):
            name, _, value = head.partition("=")
            env[name] = value
            tokens = tokens[1:]
        elif head in _PASSTHROUGH:
            tokens = tokens[1:]
        elif head == "env":
            tokens = [t for t in tokens[1:] if not t.startswith("-")]
        elif len(tokens) > 1 and (head, tokens[1]) in _RUNNERS:
            tokens = tokens[2:]
        elif head in ("srun", "mpirun", "mpiexec", "horovodrun"):
            wrapped_by = head
            # OpenMPI's single-dash long options take values (`-np 4`, `-x NCCL_DEBUG=INFO`, `-H hosts`).
            tokens = _skip_options(tokens[1:], _FLAGS["srun" if head == "srun" else "mpirun"], head != "srun", wrapper_options)
        else:
            break
    if not tokens:
        return None
    if wrapped_by == "srun" and _one_task(wrapper_options):
        wrapped_by = None  # `srun --ntasks=1 python train.py`: one process, as `python train.py` alone
    launch = _launcher(tokens, looked_up)
    if launch is None and wrapped_by and (tokens[0] in looked_up or tokens[0] in programs):
        # `srun NAME`: every process runs the program. Run alone, a console script may start its own
        # launcher for some subcommands (`llamafactory-cli train`) and not others: not followed.
        launch = Launch("python", program=tokens[0])
        _read_args(tokens[1:], launch.script_args)
    if launch is None:
        return None
    if launch.target is not None and _runs_by_name(launch, looked_up):
        launch.program, launch.target = launch.target, None
    launch.env, launch.wrapped_by, launch.text = env, wrapped_by, " ".join(written.split())
    launch.wrapper_options = wrapper_options
    return launch


def _one_task(options: dict[str, str]) -> bool:
    """srun's options start one task in all: `-n 1` / `--ntasks=1` / `-n1`, or one task on one node."""
    counts: dict[str, str] = {}
    for name, value in options.items():
        if name[:2] in ("-n", "-N") and len(name) > 2 and not name.startswith("--"):  # `-n1`
            name, value = name[:2], name[2:]
        counts[{"-n": "--ntasks", "-N": "--nodes"}.get(name, name)] = value
    ntasks, per_node, nodes = counts.get("--ntasks"), counts.get("--ntasks-per-node"), counts.get("--nodes")
    return ntasks == "1" or (ntasks is None and per_node == "1" and nodes == "1")


def _skip_options(
    tokens: list[str], flags: set[str], long_single_dash: bool = False, into: dict[str, str] | None = None
) -> list[str]:
    """Drop a wrapper's own options (`srun -N 2 --gres gpu:8 ...`) up to the command it runs."""
    into = {} if into is None else into
    i = 0
    while i < len(tokens) and tokens[i].startswith("-"):
        token = tokens[i]
        joined = not token.startswith("--") and len(token) > 2 and not long_single_dash  # `-N2`
        if token in flags or joined:
            into[token] = ""
            i += 1
        elif "=" in token and token.startswith("--"):
            name, _, value = token.partition("=")
            into[name] = value
            i += 1
        else:
            into[token] = tokens[i + 1] if i + 1 < len(tokens) else ""
            i += 2
    return tokens[i:]


def _looked_up(match: re.Match[str], found: set[str]) -> str:
    """`$(which NAME)` -> NAME, remembered as a program (python runs the file the shell finds)."""
    name = match.group(1) or match.group(2)
    found.add(name)
    return name


def _runs_by_name(launch: Launch, looked_up: set[str]) -> bool:
    """The launcher runs its target as a program: found with `which`, or `--no-python` (torchrun,
    accelerate, and deepspeed's `--no_python`, which execute the target instead of `python target`)."""
    assert launch.target is not None
    if launch.target in looked_up:
        return True
    return launch.option("--no_python") is not None and "/" not in launch.target and not launch.target.endswith(".py")


def _launcher(tokens: list[str], looked_up: Container[str] = ()) -> Launch | None:
    head = tokens[0].rsplit("/", 1)[-1]
    rest = tokens[1:]
    if head == "accelerate" and rest[:1] == ["launch"]:
        return _with_target("accelerate", rest[1:], _FLAGS["accelerate"])
    if head in ("torchrun", "torch.distributed.run"):
        return _with_target("torchrun", rest, _FLAGS["torchrun"])
    if head == "deepspeed":
        return _with_target("deepspeed", rest, _FLAGS["deepspeed"])
    if head == "trl" and rest and not rest[0].startswith("-"):
        launch = Launch("trl", module=f"trl.scripts.{rest[0]}")
        _read_args(rest[1:], launch.options)
        return launch
    if _PYTHON.match(head):
        args = [t for t in rest if t not in ("-u", "-O", "-OO", "-B", "-E", "-s", "-S")]
        if args[:2] == ["-m", "accelerate.commands.launch"]:
            return _with_target("accelerate", args[2:], _FLAGS["accelerate"])
        if args[:2] in (["-m", "torch.distributed.run"], ["-m", "torch.distributed.launch"]):
            return _with_target("torchrun", args[2:], _FLAGS["torchrun"])
        if args[:2] == ["-m", "deepspeed.launcher.runner"]:
            return _with_target("deepspeed", args[2:], _FLAGS["deepspeed"])
        if args[:1] == ["-m"] and len(args) > 1:
            launch = Launch("python", module=args[1])
            _read_args(args[2:], launch.script_args)
            return launch
        if args and (args[0].endswith(".py") or args[0] in looked_up):  # `python $(which NAME)`
            launch = Launch("python", target=args[0])
            _read_args(args[1:], launch.script_args)
            return launch
    return None


def _with_target(launcher: str, tokens: list[str], flags: set[str]) -> Launch:
    launch = Launch(launcher)
    i = 0
    module_next = False
    while i < len(tokens):
        token = tokens[i]
        if _UNKNOWN_WORD.match(token) and launch.target is None and launch.module is None:
            launch.options[token] = ""
            i += 1
            continue
        if token.startswith("-") and launch.target is None and launch.module is None:
            name, eq, value = token.partition("=")
            if eq:
                launch.options[name] = value
                i += 1
            elif token in flags:
                launch.options[token] = ""
                module_next = module_next or token in ("-m", "--module")
                i += 1
            else:
                launch.options[token] = tokens[i + 1] if i + 1 < len(tokens) else ""
                i += 2
            continue
        if module_next:
            launch.module = token
        else:
            launch.target = token
        _read_args(tokens[i + 1 :], launch.script_args)
        break
    return launch


def _read_args(tokens: list[str], into: dict[str, str]) -> None:
    """`--deepspeed ds.json --fsdp "full_shard auto_wrap" recipe.yaml` -> options (positional YAML under "")."""
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token.startswith("--"):
            name, eq, value = token.partition("=")
            if eq:
                into[name] = value
                i += 1
            elif i + 1 < len(tokens) and not tokens[i + 1].startswith("--"):
                into[name] = tokens[i + 1]
                i += 2
            else:
                into[name] = ""
                i += 1
        else:
            if token.endswith((".yaml", ".yml", ".json")) and "" not in into:
                into[""] = token
            i += 1
