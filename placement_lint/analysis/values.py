"""What a resolved `device_map` value does: spread one process's model, pin a fixed GPU, or follow the rank.

The classes follow transformers' normalisation of the argument (domain.md §1.1) and the
correctness matrix of domain.md §2.1.
"""

from __future__ import annotations

import ast
import enum
import re
from collections.abc import Callable

from placement_lint.analysis.dataflow import ABSENT, Candidate, MapEntries, Value
from placement_lint.analysis.guards import RANK_ENV, is_env_read
from placement_lint.analysis.names import PER_PROCESS_CALLS, SPREADING_CALLS, dotted, last_segment
from placement_lint.patterns import LazyPattern
from placement_lint.records import NamedTuple


class Placement(enum.Enum):
    NONE = "none"  # None or omitted: the distributed framework places the model
    SPREAD = "spread"  # one process spreads the model over every visible GPU
    FIXED = "fixed"  # one device for every process
    PER_PROCESS = "per-process"  # follows the local rank (or the current device)
    CPU = "cpu"
    OTHER = "other"  # some other non-None map
    UNKNOWN = "unknown"  # cannot be resolved statically: never a finding


SPREADING_STRINGS = ("auto", "balanced", "balanced_low_0", "sequential")
_INDEXED_DEVICE = LazyPattern(r"^(cuda|xpu|npu|mlu|musa|hpu):(\d+)$")
_RANK_WORDS = LazyPattern(r"(local_?rank|process_index|local_process_index|current_device|rank)", re.I)
_PER_PROCESS_ATTRS = {"local_process_index", "process_index", "local_rank", "device"}


class Classified(NamedTuple):
    placement: Placement
    device: object = None  # the fixed device (0, "cuda:1"), for messages; a CurrentDevice for PER_PROCESS


class CurrentDevice(NamedTuple):
    """A PER_PROCESS value that means "the process's current CUDA device": its own GPU only once something
    has set it (`torch.cuda.set_device`, PartialState, TrainingArguments); before that, GPU 0 in every process."""

    written: str  # for messages: '"cuda"', 'torch.device("cuda")', "torch.cuda.current_device()"
    # transformers >= 5.0 maps the string device_map "cuda" to cuda:$LOCAL_RANK itself
    # (integrations/accelerate.py check_and_set_device_map); 4.x passes torch.device("cuda") on.
    local_rank_from_transformers_5: bool = False


class GlobalRank(NamedTuple):
    """A PER_PROCESS value that is the process's global rank (`PartialState().process_index`,
    `int(os.environ["RANK"])`, `dist.get_rank()`): its own GPU on one node, a GPU the node does not have
    on the next ones. `node` is what a fix rewrites: the `process_index` attribute, or the variable's name
    as written (`"RANK"`); None for a call, which has no fix."""

    written: str
    node: ast.AST | None


# The environment variables that hold a process's rank among all processes of the job, not on its node.
GLOBAL_RANK_ENV = {"RANK", "SLURM_PROCID"}


def _global_rank(value: ast.expr) -> GlobalRank | None:
    if isinstance(value, ast.Attribute) and value.attr == "process_index":
        return GlobalRank(f"{dotted(value) or '...'}", value)
    if is_env_read(value, GLOBAL_RANK_ENV):
        key = next((n for n in ast.walk(value) if isinstance(n, ast.Constant) and n.value in GLOBAL_RANK_ENV), None)
        return GlobalRank(ast.unparse(value), key)
    callee = dotted(value.func) or "" if isinstance(value, ast.Call) else ""
    if callee == "dist.get_rank" or callee.endswith("distributed.get_rank"):
        return GlobalRank(ast.unparse(value), None)
    return None


Expand = Callable[[ast.expr], list[Candidate]]


def classify(value: Value, expand: Expand, depth: int = 0, entries: MapEntries | None = None) -> Classified:
    """`entries`: for a dict display bound to a name, what the dict holds where it is used."""
    if entries is not None and (isinstance(value, ast.DictComp) or isinstance(value, ast.Dict) and None not in value.keys):
        return _entries(entries, expand, depth)
    if value is ABSENT:
        return Classified(Placement.NONE)
    if value is None or depth > 6:
        return Classified(Placement.UNKNOWN)
    assert isinstance(value, ast.expr)
    if isinstance(value, ast.Constant):
        return _constant(value.value)
    if isinstance(value, ast.Dict):
        return _dict(value, expand, depth)
    if isinstance(value, ast.JoinedStr):
        text = ast.unparse(value)
        return Classified(Placement.PER_PROCESS if _RANK_WORDS.search(text) else Placement.OTHER)
    rank = _global_rank(value)
    if rank is not None:
        return Classified(Placement.PER_PROCESS, rank)
    if isinstance(value, ast.Call):
        return _call(value, expand, depth)
    if isinstance(value, ast.Subscript) and is_env_read(value, RANK_ENV):
        return Classified(Placement.PER_PROCESS)
    if isinstance(value, (ast.Attribute, ast.Name)):
        attr = last_segment(dotted(value))
        if attr in _PER_PROCESS_ATTRS or _RANK_WORDS.fullmatch(attr or ""):
            return Classified(Placement.PER_PROCESS)
    if isinstance(value, ast.BinOp) and _RANK_WORDS.search(ast.unparse(value)):
        return Classified(Placement.PER_PROCESS)  # "cuda:" + str(local_rank)
    return Classified(Placement.UNKNOWN)


def _constant(value: object) -> Classified:
    if value is None:
        return Classified(Placement.NONE)
    if isinstance(value, bool):
        return Classified(Placement.UNKNOWN)
    if isinstance(value, int):
        return Classified(Placement.FIXED, value) if value >= 0 else Classified(Placement.OTHER)
    if isinstance(value, str):
        if value in SPREADING_STRINGS:
            return Classified(Placement.SPREAD, value)
        if _INDEXED_DEVICE.match(value):
            return Classified(Placement.FIXED, value)
        if value == "cuda":
            return Classified(Placement.PER_PROCESS, CurrentDevice('"cuda"', local_rank_from_transformers_5=True))
        if value in ("xpu", "npu"):
            return Classified(Placement.PER_PROCESS, value)
        if value in ("cpu", "meta", "disk"):
            return Classified(Placement.CPU, value)
        return Classified(Placement.OTHER, value)
    return Classified(Placement.UNKNOWN)


def _device_of(value: ast.expr, expand: Expand, depth: int) -> tuple[set[object], bool | CurrentDevice | GlobalRank]:
    """The devices one dict value can name, and whether any of them depends on the rank (a CurrentDevice
    when the only per-process value is the current device)."""
    devices: set[object] = set()
    per_process: bool | CurrentDevice | GlobalRank = False
    for candidate in expand(value):
        leaf = classify(candidate.value, expand, depth + 1)
        if leaf.placement in (Placement.FIXED, Placement.CPU):
            devices.add(_normalise_device(leaf.device))
        elif leaf.placement is Placement.PER_PROCESS:
            # Inside a dict, transformers 5.x passes "cuda" on as the current device too.
            marker = (
                leaf.device._replace(local_rank_from_transformers_5=False)
                if isinstance(leaf.device, CurrentDevice)
                else leaf.device
                if isinstance(leaf.device, GlobalRank)
                else None
            )
            mixed = bool(per_process) and type(per_process) is not type(marker)
            per_process = True if per_process is True or marker is None or mixed else (per_process or marker)
        else:
            devices.add(object())  # unknown: distinct from everything
    return devices, per_process


def _normalise_device(device: object) -> object:
    if isinstance(device, str):
        match = _INDEXED_DEVICE.match(device)
        if match and match.group(1) == "cuda":
            return int(match.group(2))
    return device


def _entries(entries: MapEntries, expand: Expand, depth: int) -> Classified:
    found = _map_values(entries.values, expand, depth)
    if entries.spread_by is not None and found.placement is not Placement.PER_PROCESS:
        return Classified(Placement.SPREAD, "a map over several devices")
    return found


def _dict(value: ast.Dict, expand: Expand, depth: int) -> Classified:
    if any(key is None for key in value.keys):
        return Classified(Placement.UNKNOWN)
    return _map_values(value.values, expand, depth)


def _map_values(values: list[ast.expr] | tuple[ast.expr, ...], expand: Expand, depth: int) -> Classified:
    devices: set[object] = set()
    per_process: bool | CurrentDevice | GlobalRank = False
    for entry in values:
        found, rank = _device_of(entry, expand, depth)
        devices |= found
        per_process = True if rank is True else (per_process or rank)
    known = {d for d in devices if isinstance(d, (int, str))}
    if per_process:
        current = per_process if isinstance(per_process, (CurrentDevice, GlobalRank)) and not devices else None
        return Classified(Placement.PER_PROCESS, current)
    if len(known) >= 2:
        return Classified(Placement.SPREAD, "a map over several devices")
    if len(devices) == 1 and known:
        device = known.pop()
        if device in ("cpu", "meta", "disk"):
            return Classified(Placement.CPU, device)
        return Classified(Placement.FIXED, device)
    return Classified(Placement.OTHER)


def _call(value: ast.Call, expand: Expand, depth: int) -> Classified:
    name = dotted(value.func) or ""
    func = last_segment(name)
    if func in SPREADING_CALLS:
        return Classified(Placement.SPREAD, f"{func}(...)")
    if func == "current_device" and name.endswith("cuda.current_device"):
        return Classified(Placement.PER_PROCESS, CurrentDevice("torch.cuda.current_device()"))
    if func in PER_PROCESS_CALLS:
        return Classified(Placement.PER_PROCESS)
    if func == "device" and name.endswith("torch.device") or name == "device":
        return _torch_device(value)
    if func == "int" and len(value.args) == 1:
        inner = value.args[0]
        rank = _global_rank(inner)
        if rank is not None:
            return Classified(Placement.PER_PROCESS, rank)
        if is_env_read(inner, RANK_ENV) or _RANK_WORDS.search(ast.unparse(inner)):
            return Classified(Placement.PER_PROCESS)
        return Classified(Placement.UNKNOWN)
    if func == "dict" and not value.args and all(kw.arg for kw in value.keywords):
        as_dict = ast.Dict(keys=[ast.Constant(kw.arg) for kw in value.keywords], values=[kw.value for kw in value.keywords])
        return _dict(as_dict, expand, depth)
    if is_env_read(value, RANK_ENV):
        return Classified(Placement.PER_PROCESS)
    return Classified(Placement.UNKNOWN)


def _torch_device(value: ast.Call) -> Classified:
    args = value.args
    if not args or not isinstance(args[0], ast.Constant) or not isinstance(args[0].value, str):
        return Classified(Placement.UNKNOWN)
    kind = args[0].value
    if len(args) == 1:
        if kind == "cuda":  # a torch.device, not the string: transformers 5.x does not map it to the rank
            return Classified(Placement.PER_PROCESS, CurrentDevice('torch.device("cuda")'))
        return _constant(kind)
    index = args[1]
    if isinstance(index, ast.Constant) and isinstance(index.value, int):
        return Classified(Placement.FIXED, f"{kind}:{index.value}")
    return Classified(Placement.PER_PROCESS)
