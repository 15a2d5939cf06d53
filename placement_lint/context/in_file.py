"""Evidence inside the Python file itself (domain.md §5.1): what the file sets up, and its pragma.

The text the pre-check looks for before a file is parsed is in evidence_text.py: a detector added
here needs its text there (tests/test_precheck.py checks the two agree)."""

from __future__ import annotations

import ast
import io
import tokenize

from placement_lint.analysis.dataflow import Resolver
from placement_lint.analysis.guards import ENV_READERS, RANK_ENV, WORLD_ENV, is_env_read
from placement_lint.analysis.index import walk
from placement_lint.analysis.names import ImportTable, dotted, keyword, last_segment
from placement_lint.analysis.written_paths import opened_by_with, written_path
from placement_lint.context.configs import ConfigReader, zero_stage_of
from placement_lint.context.evidence import Evidence, Kind, Override
from placement_lint.distributed import NAMED_SETUPS
from placement_lint.patterns import LazyPattern
from placement_lint.source import SourceFile

# The last name of every callee `_call` looks at (environment reads are known by ENV_READERS).
_EVIDENCE_CALLEES = frozenset(
    {
        "HfDeepSpeedConfig", "initialize", "init_distributed", "Init", "DeepSpeedPlugin", "FullyShardedDataParallelPlugin",
        "FullyShardedDataParallel", "fully_shard", "FSDP", "Accelerator", "init_process_group", "DistributedDataParallel",
        "DDP", "spawn", "notebook_launcher", "PartialState", "TorchTrainer",
    }
)  # fmt: skip
_PRAGMA = LazyPattern(r"#\s*placement-lint:\s*context\s*=\s*([A-Za-z0-9_-]+)")
_ARGUMENT_CLASSES = {"TrainingArguments", "Seq2SeqTrainingArguments"}
_NOT_TRL_CONFIGS = {"AutoConfig", "PretrainedConfig", "GenerationConfig", "BitsAndBytesConfig", "LoraConfig", "PeftConfig"}


# The last name of a callee `_callee` may find relevant, besides the `*Config` classes and the
# environment readers (`os.environ.get`, `os.getenv`; a wider net is harmless, `_callee` decides).
_RELEVANT_LAST_NAMES = _EVIDENCE_CALLEES | _ARGUMENT_CLASSES
_ENV_READER_ENDS = tuple(reader.rsplit(".", 1)[-1] for reader in ENV_READERS)


def _may_start_evidence(func: ast.expr, aliases: dict[str, str]) -> bool:
    """False for a callee `_callee` certainly finds irrelevant, told from its last name alone (most
    calls of a big file): writing out and qualifying every callee cost more than the evidence itself.
    Qualifying a dotted name changes only its head, so its last name is the one written."""
    if isinstance(func, ast.Attribute):
        written = last = func.attr
    elif isinstance(func, ast.Name):
        written, last = func.id, last_segment(aliases.get(func.id, func.id))
    else:
        return True  # `factory()(...)`: `_callee` decides
    return last in _RELEVANT_LAST_NAMES or last.endswith("Config") or written.endswith(_ENV_READER_ENDS)


class PragmaError(ValueError):
    pass


def pragma_override(text: str, path: str) -> Override | None:
    """`# placement-lint: context=zero3` in a comment (not in a string or docstring)."""
    if "placement-lint" not in text:
        return None
    for number, comment in _comments(text):
        match = _PRAGMA.search(comment)
        if match:
            name = match.group(1).lower()
            if name not in NAMED_SETUPS:
                raise PragmaError(
                    f"{path}:{number}: unknown context {name!r} in pragma (expected one of {', '.join(NAMED_SETUPS)})"
                )
            return Override(NAMED_SETUPS[name], f"the pragma at {path}:{number}")
    return None


def _comments(text: str) -> list[tuple[int, str]]:
    try:
        return [
            (token.start[0], token.string)
            for token in tokenize.generate_tokens(io.StringIO(text).readline)
            if token.type == tokenize.COMMENT and "placement-lint" in token.string
        ]
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return []


def is_training_arguments(qualified: str) -> bool:
    """TrainingArguments and every TRL `*Config` (they subclass TrainingArguments)."""
    name = last_segment(qualified)
    if name in _ARGUMENT_CLASSES:
        return True
    return name.endswith("Config") and name not in _NOT_TRL_CONFIGS and (qualified.startswith("trl") or name in _TRL_CONFIG_NAMES)


_TRL_CONFIG_NAMES = {
    "SFTConfig", "DPOConfig", "GRPOConfig", "RLOOConfig", "KTOConfig", "RewardConfig", "OnlineDPOConfig",
    "XPOConfig", "NashMDConfig", "CPOConfig", "ORPOConfig", "BCOConfig", "GKDConfig", "GOLDConfig",
    "MiniLLMConfig", "PPOConfig", "PRMConfig", "DistillationConfig", "IterativeSFTConfig",
}  # fmt: skip


# Calls that read a config from a file object or path, and what opens one, by qualified name.
_CONFIG_READERS = frozenset({"json.load", "yaml.safe_load", "yaml.load", "yaml.full_load", "omegaconf.OmegaConf.load"})
_OPENERS = frozenset({"open", "io.open", "builtins.open", "codecs.open", "pathlib.Path", "Path"})


class InFileEvidence:
    def __init__(
        self,
        module: ast.Module,
        source: SourceFile,
        imports: ImportTable,
        resolver: Resolver,
        display: str,
        configs: ConfigReader | None,
    ) -> None:
        self.module = module
        self.source = source
        self.path = source.path
        self.imports = imports
        self.resolver = resolver
        self.display = display
        self.configs = configs
        self.items: list[tuple[Evidence, ast.AST]] = []
        # Per callee as written: its qualified name, or None when no evidence starts with such a call.
        self._callees: dict[str, str | None] = {}

    def collect(self) -> list[tuple[Evidence, ast.AST]]:
        aliases = self.imports.aliases
        Call, Subscript = ast.Call, ast.Subscript
        for node in self.resolver.index.nodes:  # by exact type: a parsed tree's nodes are never subclassed
            kind = type(node)
            if kind is Call:
                if _may_start_evidence(node.func, aliases):  # type: ignore[attr-defined]
                    self._call(node)  # type: ignore[arg-type]
            elif kind is Subscript and is_env_read(node, RANK_ENV | WORLD_ENV):
                self._add(Kind.POSSIBLE, node, ast.unparse(node))
        return self.items

    def _add(self, kind: Kind, node: ast.AST, text: str, zero_stage: int | None = None) -> None:
        if kind is not Kind.POSSIBLE and (opted := self._opt_in(node)) is not None:
            # A helper that sets up DeepSpeed only when its caller passes a config (DeepSpeed-Chat's
            # `create_hf_model(..., ds_config=None)`) says nothing of the callers that leave it out:
            # whether it runs distributed is theirs to say, through a launch that reaches them.
            kind, text, zero_stage = Kind.POSSIBLE, f"{text}, only when a caller of {opted}", None
        self.items.append((Evidence(kind, self.display, node.lineno, text, zero_stage), node))  # type: ignore[attr-defined]

    def _opt_in(self, node: ast.AST) -> str | None:
        """`f() passes p` when `node` runs only if a caller of the function `f` holding it passes its
        parameter `p`: an `if` on `p` that its literal default decides against `node`'s branch, and no
        call of `f` in this file that passes `p` (or spreads arguments, which may)."""
        function = self.resolver.scope_of(node)
        if not isinstance(function, ast.FunctionDef):
            return None
        for test, outcome in self.resolver.enclosing_guards(node):
            if self.resolver.truth_at_defaults(test, function) is not (not outcome):
                continue
            read = {n.id for n in walk(test) if isinstance(n, ast.Name)}
            parameters = [a.arg for a in (*function.args.posonlyargs, *function.args.args, *function.args.kwonlyargs)]
            read_parameters = [p for p in parameters if p in read]
            if not any(self._passed_in_file(function, parameters, p) for p in read_parameters):
                return f"{function.name}() passes {' or '.join(read_parameters)}"
        return None

    def _passed_in_file(self, function: ast.FunctionDef, parameters: list[str], name: str) -> bool:
        position = parameters.index(name)
        for call in self.resolver.index.calls_by_name.get(function.name, []):
            if any(isinstance(a, ast.Starred) for a in call.args) or any(kw.arg in (None, name) for kw in call.keywords):
                return True
            if len(call.args) > position - (1 if _is_method(function, self.resolver) else 0):
                return True
        return False

    def _callee(self, written: str) -> str | None:
        """The qualified name of a callee that may start evidence (most callees of a big file cannot)."""
        if written not in self._callees:
            qualified = self.imports.qualify_dotted(written)
            relevant = (
                last_segment(qualified) in _EVIDENCE_CALLEES
                or is_training_arguments(qualified)
                or written.endswith(ENV_READERS)  # is_env_read looks at the callee as written
            )
            self._callees[written] = qualified if relevant else None
        return self._callees[written]

    def _call(self, call: ast.Call) -> None:
        written = dotted(call.func)
        qualified = self._callee(written) if written is not None else None
        if qualified is None:
            return
        name = last_segment(qualified)
        if is_training_arguments(qualified):
            self._training_arguments(call, name)
        elif name == "HfDeepSpeedConfig":
            stage = self._stage(call.args[0]) if call.args else None
            self._deepspeed(call, f"HfDeepSpeedConfig({self._short(call.args[0]) if call.args else ''})", stage)
        elif qualified.startswith("deepspeed.") and name == "initialize":
            config = keyword(call, "config") or keyword(call, "config_params")
            stage = self._stage(config.value) if config is not None else None
            self._deepspeed(call, f"deepspeed.initialize({'config=' + self._short(config.value) if config else '...'})", stage)
        elif qualified.startswith("deepspeed.") and name == "init_distributed":
            self._add(Kind.DEEPSPEED, call, f"deepspeed.{name}(...)")
        elif qualified.startswith("deepspeed.") and qualified.endswith("zero.Init"):
            self._add(Kind.ZERO3, call, "deepspeed.zero.Init(...)")
        elif name == "DeepSpeedPlugin":
            stage_kw = keyword(call, "zero_stage")
            stage = stage_kw.value.value if stage_kw and isinstance(stage_kw.value, ast.Constant) else None
            if stage is None and (config := keyword(call, "hf_ds_config")) is not None:
                stage = self._stage(config.value)
            self._deepspeed(call, f"DeepSpeedPlugin({self._keywords(call)})", stage if isinstance(stage, int) else None)
        elif name in ("FullyShardedDataParallelPlugin", "FullyShardedDataParallel", "fully_shard"):
            self._add(Kind.FSDP, call, f"{dotted(call.func)}(...)")
        elif name == "FSDP" and "fsdp" in qualified.lower():
            self._add(Kind.FSDP, call, "FSDP(...)")
        elif name == "Accelerator":
            self._accelerator(call)
        elif name == "init_process_group":
            self._add(Kind.DDP, call, f"{dotted(call.func)}(...)")
        elif name == "DistributedDataParallel" or (name == "DDP" and "parallel" in qualified):
            self._add(Kind.DDP, call, f"{dotted(call.func)}(...)")
        elif name == "spawn" and ("multiprocessing" in qualified or qualified.startswith("mp.")):
            self._add(Kind.DDP, call, f"{dotted(call.func)}(...)")
        elif name == "notebook_launcher":
            count = keyword(call, "num_processes")
            value = count.value if count else (call.args[2] if len(call.args) > 2 else None)
            if isinstance(value, ast.Constant) and isinstance(value.value, int) and value.value > 1:
                self._add(Kind.DDP, call, f"notebook_launcher(num_processes={value.value})")
        elif name == "TorchTrainer" and qualified.startswith("ray."):
            self._ray_trainer(call)
        elif name == "PartialState" or is_env_read(call, RANK_ENV | WORLD_ENV):
            self._add(Kind.POSSIBLE, call, ast.unparse(call)[:80])

    def _ray_trainer(self, call: ast.Call) -> None:
        """Ray Train's `TorchTrainer(train_func, scaling_config=ScalingConfig(num_workers=N, use_gpu=True))`
        runs the function in N worker processes, one GPU each, with torch.distributed set up among
        them: DDP when N > 1."""
        scaling = keyword(call, "scaling_config")
        for candidate in self.resolver.candidates(scaling.value) if scaling is not None else ():
            config = candidate.value
            if not (isinstance(config, ast.Call) and last_segment(dotted(config.func) or "") == "ScalingConfig"):
                continue
            workers, gpu = keyword(config, "num_workers"), keyword(config, "use_gpu")
            # Without use_gpu=True (Ray's default is False) the workers see no GPU: nothing to place.
            if workers is None or not (gpu is not None and isinstance(gpu.value, ast.Constant) and gpu.value.value is True):
                continue
            # `num_workers=NUM_WORKERS`, `num_workers=args.num_workers` (its default): every value it can take
            values = self.resolver.candidates(workers.value)
            counts = [count for candidate in values if (count := _int_of(candidate.value)) is not None]
            if counts and len(counts) == len(values) and min(counts) > 1:
                shown, fewest = self._short(workers.value), min(counts)
                written = str(fewest) if shown == str(fewest) else f"{shown} ({fewest})"
                self._add(Kind.DDP, call, f"TorchTrainer(scaling_config=ScalingConfig(num_workers={written}, use_gpu=True))")
                return

    def _training_arguments(self, call: ast.Call, name: str) -> None:
        for kw in call.keywords:
            if kw.arg == "deepspeed":
                self._deepspeed_argument(call, name, kw.value)
            elif kw.arg == "fsdp":
                truth = self._truthy(kw.value)
                if truth:
                    self._add(Kind.FSDP, call, f"{name}(fsdp={self._short(kw.value)})")
                elif truth is None:
                    self._add(Kind.POSSIBLE, call, f"{name}(fsdp={self._short(kw.value)})")
            elif kw.arg == "fsdp_config":
                if not (isinstance(kw.value, ast.Constant) and kw.value.value is None):
                    self._add(Kind.FSDP, call, f"{name}(fsdp_config={self._short(kw.value)})")
            elif kw.arg and kw.arg.startswith("ddp_"):
                self._add(Kind.POSSIBLE, call, f"{name}({kw.arg}=...)")

    def _deepspeed_argument(self, call: ast.Call, name: str, value: ast.expr) -> None:
        candidates = self.resolver.candidates(value)
        known: list[ast.expr] = []
        for candidate in candidates:
            if isinstance(candidate.value, (ast.Constant, ast.Dict)):
                known.append(candidate.value)
            elif candidate.value is not None and (path := self._config_path(candidate.value)) is not None:
                known.append(ast.Constant(path))
        if any(isinstance(v, ast.Constant) and v.value is not None for v in known) or any(isinstance(v, ast.Dict) for v in known):
            stages = {self._stage(v) for v in known if not (isinstance(v, ast.Constant) and v.value is None)}
            stage = stages.pop() if len(stages) == 1 else None
            self._deepspeed(call, f"{name}(deepspeed={self._short(value)})", stage)
        elif not known:
            self._add(Kind.POSSIBLE, call, f"{name}(deepspeed={self._short(value)}), set at run time")

    def _accelerator(self, call: ast.Call) -> None:
        plugin = keyword(call, "deepspeed_plugin") or keyword(call, "deepspeed_plugins")
        if plugin is not None and not _is_none(plugin.value):
            stage = None
            for candidate in self.resolver.candidates(plugin.value):
                value = candidate.value
                if isinstance(value, ast.Call) and last_segment(dotted(value.func)) == "DeepSpeedPlugin":
                    stage_kw = keyword(value, "zero_stage")
                    if stage_kw and isinstance(stage_kw.value, ast.Constant) and isinstance(stage_kw.value.value, int):
                        stage = stage_kw.value.value
            self._deepspeed(call, f"Accelerator(deepspeed_plugin={self._short(plugin.value)})", stage)
        fsdp = keyword(call, "fsdp_plugin")
        if fsdp is not None and not _is_none(fsdp.value):
            self._add(Kind.FSDP, call, f"Accelerator(fsdp_plugin={self._short(fsdp.value)})")
        if plugin is None and fsdp is None:
            self._add(Kind.POSSIBLE, call, "Accelerator()")

    def _deepspeed(self, node: ast.AST, text: str, stage: int | None) -> None:
        if stage == 3:
            self._add(Kind.ZERO3, node, text)
        else:
            self._add(Kind.DEEPSPEED, node, text, stage)

    def _config_path(self, value: ast.expr) -> str | None:
        """The JSON or YAML file a DeepSpeed config value names or was read from: a path written from
        literals and the script's own folder (`os.path.join(ROOT, "configs", "ds_zero3.json")`,
        relative to that folder), or one the script loads itself (`json.load(f)` with `with
        open("configs/ds_zero3.json") as f`, `json.load(open(path))`, `yaml.safe_load(...)`)."""
        if isinstance(value, ast.Call) and len(value.args) == 1 and not value.keywords:
            reader = self.imports.qualify_dotted(dotted(value.func) or "")
            if reader in _CONFIG_READERS:
                return self._opened_path(value.args[0])
            if reader == "json.loads":  # json.loads(Path(p).read_text()), json.loads(open(p).read())
                text = value.args[0]
                if (
                    isinstance(text, ast.Call)
                    and isinstance(text.func, ast.Attribute)
                    and text.func.attr in ("read_text", "read")
                ):
                    return self._opened_path(text.func.value)
                return None
        written = self._written_path(value)
        return written if written is not None and written.endswith((".json", ".yaml", ".yml")) else None

    def _opened_path(self, value: ast.expr) -> str | None:
        """The path of a file object or Path: `open(p)`, `Path(p)`, `Path(p).open()`, or a name bound to one
        (`with open(p) as f`)."""
        for candidate in self.resolver.candidates(value):
            opened = candidate.value
            if opened is None and isinstance(value, ast.Name):
                opened = opened_by_with(self.resolver, value)
            if (
                isinstance(opened, ast.Call)
                and isinstance(opened.func, ast.Attribute)
                and opened.func.attr == "open"
                and not opened.args
            ):
                opened = opened.func.value  # Path(p).open()
            if (
                isinstance(opened, ast.Call)
                and opened.args
                and self.imports.qualify_dotted(dotted(opened.func) or "") in _OPENERS
            ):
                written = self._written_path(opened.args[0])
                if written is not None and written.endswith((".json", ".yaml", ".yml")):
                    return written
            elif (
                opened is not None
                and (written := self._written_path(opened)) is not None
                and written.endswith((".json", ".yaml", ".yml"))
            ):
                return written
        return None

    def _written_path(self, value: ast.expr) -> str | None:
        """A path written from literals and the script's own folder, relative to that folder."""
        return written_path(value, lambda name: [c.value for c in self.resolver.candidates(name)])

    def _stage(self, value: ast.expr) -> int | None:
        """The ZeRO stage of a DeepSpeed config given as a dict display, a name bound to one, a JSON path,
        or a file the script reads it from (_config_path)."""
        for candidate in self.resolver.candidates(value):
            leaf = candidate.value
            if isinstance(leaf, ast.Dict):
                return _dict_stage(leaf)
            written = leaf.value if isinstance(leaf, ast.Constant) else self._config_path(leaf) if leaf is not None else None
            if isinstance(written, str) and self.configs is not None:
                found = self.configs.find(written, self.path.parent)
                if found is not None:
                    return zero_stage_of(self.configs.load(found))
        return None

    def _short(self, value: ast.expr) -> str:
        start, end = self.source.node_span(value)
        text = " ".join(self.source.text[start:end].split())
        return text if len(text) <= 40 else text[:37] + "..."

    def _keywords(self, call: ast.Call) -> str:
        return ", ".join(f"{kw.arg}={self._short(kw.value)}" for kw in call.keywords if kw.arg)

    def _truthy(self, value: ast.expr) -> bool | None:
        leaves = [c.value for c in self.resolver.candidates(value)]
        if all(isinstance(v, ast.Constant) for v in leaves):
            return any(bool(v.value) for v in leaves)  # type: ignore[union-attr]
        if all(isinstance(v, (ast.List, ast.Tuple, ast.Constant)) for v in leaves):
            return any(bool(v.elts) if isinstance(v, (ast.List, ast.Tuple)) else bool(v.value) for v in leaves)  # type: ignore[union-attr]
        return None


def _int_of(node: ast.expr | None) -> int | None:
    return node.value if isinstance(node, ast.Constant) and type(node.value) is int else None


def _dict_stage(node: ast.Dict) -> int | None:
    for key, value in zip(node.keys, node.values, strict=True):
        if isinstance(key, ast.Constant) and key.value == "zero_optimization" and isinstance(value, ast.Dict):
            for inner_key, inner_value in zip(value.keys, value.values, strict=True):
                if isinstance(inner_key, ast.Constant) and inner_key.value == "stage" and isinstance(inner_value, ast.Constant):
                    return inner_value.value if isinstance(inner_value.value, int) else None
    return None


def _is_none(value: ast.expr) -> bool:
    return isinstance(value, ast.Constant) and value.value is None


def _is_method(function: ast.FunctionDef, resolver: Resolver) -> bool:
    """Called as `obj.f(...)`, its first parameter is not among the call's arguments."""
    parent = next(iter(resolver.ancestors(function)), None)
    static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in function.decorator_list)
    return isinstance(parent, ast.ClassDef) and not static
