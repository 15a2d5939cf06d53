"""Unit tests for the analysis layer: conditions, value resolution and classification, decoding."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from placement_lint.analysis.dataflow import ABSENT, Resolver
from placement_lint.analysis.values import Placement, classify
from placement_lint.distributed import Mode, Setup
from placement_lint.source import SourceError, decode_source, parse_python

DDP, SINGLE, ZERO3, ZERO2, DS = (
    Setup(Mode.DDP),
    Setup(Mode.SINGLE),
    Setup(Mode.DEEPSPEED, 3),
    Setup(Mode.DEEPSPEED, 2),
    Setup(Mode.DEEPSPEED),
)


def truth(source: str, setup: Setup) -> bool | None:
    module = ast.parse(source)
    resolver = Resolver(module, setup)
    test = module.body[-1].value  # type: ignore[attr-defined]
    return resolver.truth(test)


@pytest.mark.parametrize(
    ("source", "ddp", "single"),
    [
        ("import os\nws = int(os.environ.get('WORLD_SIZE', 1))\nddp = ws != 1\nddp", True, False),
        ("import os\nint(os.environ.get('WORLD_SIZE', '1')) == 1", False, True),
        ("import os\n'LOCAL_RANK' in os.environ", True, False),
        ("import os\nint(os.environ.get('LOCAL_RANK', -1)) != -1", True, False),
        ("training_args.local_rank == -1", False, True),
        ("accelerator.num_processes > 1", True, False),
        ("state.distributed_type == DistributedType.MULTI_GPU", True, False),
        ("state.distributed_type != DistributedType.NO", True, False),
        ("args.parallel_mode == ParallelMode.DISTRIBUTED", True, False),
        ("torch.distributed.is_initialized()", True, False),
        ("not ddp and torch.cuda.device_count() > 1", False, None),
        ("quantization_config is not None", None, None),
        ("import os\nint(os.environ.get('LOCAL_RANK', 0)) == 0", None, True),
    ],
)
def test_distributed_conditions(source: str, ddp: bool | None, single: bool | None) -> None:
    assert truth(source, DDP) is ddp
    assert truth(source, SINGLE) is single


def test_zero3_condition_depends_on_stage() -> None:
    assert truth("is_deepspeed_zero3_enabled()", ZERO3) is True
    assert truth("is_deepspeed_zero3_enabled()", ZERO2) is False
    assert truth("is_deepspeed_zero3_enabled()", DS) is None
    assert truth("is_deepspeed_zero3_enabled()", DDP) is False


@pytest.mark.parametrize(
    "source",
    [
        "args.zero_stage == 3",
        "accelerator.state.deepspeed_plugin.zero_stage == 3",
        "plugin = accelerator.state.deepspeed_plugin\nplugin is not None and plugin.zero_stage == 3",
        'ds_config["zero_optimization"]["stage"] == 3',
        'stage = config.get("zero_optimization", {}).get("stage", 0)\nstage == 3',
    ],
)
def test_a_zero_stage_read_is_the_launch_configs_stage(source: str) -> None:
    assert truth(source, ZERO3) is True
    assert truth(source, ZERO2) is False
    assert truth(source, DS) is None  # a DeepSpeed run whose config shows no stage decides nothing
    assert truth(source, DDP) is None  # nor does a run without DeepSpeed: no config to read


def test_accelerates_deepspeed_check_with_its_plugin_stage() -> None:
    source = "state.distributed_type == 'DEEPSPEED' and state.deepspeed_plugin.zero_stage > 2"
    assert truth(source, ZERO3) is True
    assert truth(source, ZERO2) is False
    assert truth(source, DDP) is False


def test_a_zero_stage_the_file_or_launch_gives_wins_over_the_config() -> None:
    assert truth("zero_stage = 2\nzero_stage == 3", ZERO3) is False
    assert truth('ds_config["zero_optimization"]["offload_param"] == 3', ZERO3) is None


def values_of(source: str, setup: Setup) -> list[str]:
    module = ast.parse(source)
    resolver = Resolver(module, setup)
    call = module.body[-1].value  # type: ignore[attr-defined]
    keyword = next(kw for kw in call.keywords if kw.arg in ("device_map", None))
    if keyword.arg is None:
        candidates = resolver.key_candidates(keyword.value, "device_map") or []
    else:
        candidates = resolver.candidates(keyword.value)
    return [("ABSENT" if c.value is ABSENT else ast.unparse(c.value) if c.value is not None else "?") for c in candidates]


def test_branch_pruning_follows_the_setup() -> None:
    source = (
        "import os\ndevice_map = 'auto'\nddp = int(os.environ.get('WORLD_SIZE', 1)) != 1\n"
        "if ddp:\n    device_map = {'': int(os.environ.get('LOCAL_RANK') or 0)}\n"
        "load(device_map=device_map)"
    )
    assert values_of(source, DDP) == ["{'': int(os.environ.get('LOCAL_RANK') or 0)}"]
    assert values_of(source, SINGLE) == ["'auto'"]
    assert values_of(source, Setup(Mode.POSSIBLE)) == ["{'': int(os.environ.get('LOCAL_RANK') or 0)}", "'auto'"] or values_of(
        source, Setup(Mode.POSSIBLE)
    ) == ["'auto'", "{'': int(os.environ.get('LOCAL_RANK') or 0)}"]


def test_early_return_prunes_the_rest() -> None:
    source = "def f(ddp):\n    if ddp:\n        return None\n    m = 'auto'\n    return load(device_map=m)\nload(device_map=None)"
    module = ast.parse(source)
    call = module.body[0].body[-1].value  # type: ignore[attr-defined]
    value = call.keywords[0].value
    assert [ast.unparse(c.value) for c in Resolver(module, SINGLE).candidates(value)] == ["'auto'"]
    # Under DDP the function returns before the load: nothing reaches it, so nothing is resolved.
    assert [c.value for c in Resolver(module, DDP).candidates(value)] == [None]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("kw = dict(torch_dtype='auto', device_map='auto')\nload(**kw)", ["'auto'"]),
        ("kw = {'torch_dtype': 1}\nkw['device_map'] = 'balanced'\nload(**kw)", ["'balanced'"]),
        ("kw = {}\nkw.update(device_map={'': 0})\nload(**kw)", ["{'': 0}"]),
        ("kw = {'device_map': 'auto'}\nkw.pop('device_map')\nload(**kw)", ["ABSENT"]),
        ("kw = {'x': 1}\nload(**kw)", ["ABSENT"]),
        ("load(**get_kwargs())", []),
        ("DM = 'sequential'\ndef f():\n    return load(device_map=DM)\nload(device_map=DM)", ["'sequential'"]),
        ("load(device_map=None if is_deepspeed_zero3_enabled() else 'auto')", ["None"]),
    ],
)
def test_value_resolution(source: str, expected: list[str]) -> None:
    assert values_of(source, ZERO3) == expected


def test_dataclass_field_default() -> None:
    source = (
        "from dataclasses import dataclass, field\n@dataclass\nclass Args:\n"
        "    device_map: str = field(default='auto')\nload(device_map=model_args.device_map)"
    )
    assert values_of(source, DDP) == ["'auto'"]


@pytest.mark.parametrize(
    ("value", "placement"),
    [
        ("'auto'", Placement.SPREAD),
        ("'balanced_low_0'", Placement.SPREAD),
        ("{'a': 0, 'b': 1}", Placement.SPREAD),
        ("{'a': 0, 'b': 'cpu'}", Placement.SPREAD),
        ("infer_auto_device_map(model)", Placement.SPREAD),
        ("0", Placement.FIXED),
        ("'cuda:0'", Placement.FIXED),
        ("{'': 0}", Placement.FIXED),
        ("{'': 'cuda:1'}", Placement.FIXED),
        ("torch.device('cuda', 0)", Placement.FIXED),
        ("torch.device('cuda:0')", Placement.FIXED),
        ("{'': PartialState().local_process_index}", Placement.PER_PROCESS),
        ("{'': Accelerator().process_index}", Placement.PER_PROCESS),
        ("{'': int(os.environ.get('LOCAL_RANK', 0))}", Placement.PER_PROCESS),
        ("f'cuda:{local_rank}'", Placement.PER_PROCESS),
        ("{'': torch.cuda.current_device()}", Placement.PER_PROCESS),
        ("get_kbit_device_map()", Placement.PER_PROCESS),
        ("'cuda'", Placement.PER_PROCESS),
        ("'cpu'", Placement.CPU),
        ("None", Placement.NONE),
        ("some_function()", Placement.UNKNOWN),
        ("True", Placement.UNKNOWN),
    ],
)
def test_classification(value: str, placement: Placement) -> None:
    module = ast.parse(f"x = {value}")
    resolver = Resolver(module, DDP)
    assert classify(module.body[0].value, resolver.candidates).placement is placement  # type: ignore[attr-defined]


def test_decoding_keeps_bom_cookie_and_line_endings() -> None:
    bom = decode_source(Path("a.py"), b"\xef\xbb\xbfx = 1\r\ny = 2\r\n")
    assert bom.bom and bom.text == "x = 1\r\ny = 2\r\n" and bom.round_trips and bom.newline == "\r\n"
    latin = decode_source(Path("b.py"), "# -*- coding: latin-1 -*-\nx = 'é'\n".encode("latin-1"))
    assert latin.encoding == "iso-8859-1" and latin.text.endswith("'é'\n") and latin.round_trips
    assert latin.offset(2, 7) == len("# -*- coding: latin-1 -*-\n") + 6  # ast columns count UTF-8 bytes


def test_ast_columns_are_utf8_bytes() -> None:
    source = decode_source(Path("c.py"), "s = 'ü'; load(device_map='auto')\n".encode())
    module = parse_python(source)
    value = module.body[1].value.keywords[0].value  # type: ignore[attr-defined]
    start, end = source.node_span(value)
    assert source.text[start:end] == "'auto'"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"x = (\n", "cannot parse: line 1"),
        (b"x = 1\x00\n", "cannot parse"),
        (b"# coding: nope\nx = 1\n", "cannot decode"),
        (b"\xff\xfe\n", "cannot decode"),
    ],
)
def test_bad_sources_are_source_errors(raw: bytes, message: str) -> None:
    with pytest.raises(SourceError, match=message):
        parse_python(decode_source(Path("d.py"), raw))


def test_walrus_binding_is_followed() -> None:
    source = "if (dm := 'auto'):\n    pass\nload(device_map=dm)"
    assert values_of(source, DDP) == ["'auto'"]


def test_the_index_and_the_walk_meet_every_node_but_the_shared_context_and_operator_ones() -> None:
    """The index does not look into fields that hold names and flags: it must still meet every node
    (a type alias's name, a global's names, f-string parts, patterns, comprehensions included)."""
    import sys

    from placement_lint.analysis.index import ModuleIndex, walk

    source = (
        "import a.b as c\nfrom . import d as e\nglobal g\n"
        "async def f(x: int, *a, k=1, **kw) -> None:\n    nonlocal_ = [y async for y in x if y]\n"
        "    match x:\n        case {'k': [1, *rest]} | Point(x=0) as p if p: pass\n"
        "    try: pass\n    except ValueError as err: raise\n"
        "    return f'{x!r:>{k}}' + x.attr[1:2]\n"
        "class C(B, metaclass=M):\n    v: int = lambda q: (yield q)\n"
    )
    if sys.version_info >= (3, 12):
        source += "type Alias[T] = list[T]\n"
    tree = ast.parse(source)
    shared = (ast.expr_context, ast.operator, ast.unaryop, ast.boolop, ast.cmpop)
    expected = [node for node in ast.walk(tree) if not isinstance(node, shared)]
    assert sorted(map(id, ModuleIndex(tree).nodes)) == sorted(map(id, expected))
    assert walk(tree) == expected, "the walk meets them in ast.walk's order"
    function = tree.body[3]
    assert walk(function) == [node for node in ast.walk(function) if not isinstance(node, shared)]


def _excluded(source: str) -> bool:
    module = ast.parse(source)
    resolver = Resolver(module, SINGLE)
    tests = [node.test for node in ast.walk(module) if isinstance(node, ast.If)]
    tests.sort(key=lambda test: test.lineno)
    return resolver.excludes([(tests[0], True)], [(tests[-1], True)])


@pytest.mark.parametrize(
    ("first", "second", "excluded"),
    [
        ("args.bits in [4, 8]", "args.bits == 16", True),
        ("args.bits in [4, 8]", "args.bits == 8", False),
        ("args.bits in (4, 8)", "args.bits not in (4, 8)", True),
        ("args.bits != 16", "16 == args.bits", True),
        ("cfg is None", "cfg", True),
        ("cfg is not None", "cfg", False),
        ("args.quantization", "args.pure_bf16 and not args.quantization", True),
        ("args.quantization or args.qlora", "not args.quantization", False),
        ("not (args.quantization or args.qlora)", "args.qlora", True),
        ("mode == 'train'", "mode == 'eval'", True),
        ("mode == 'train'", "other == 'eval'", False),
        ("args.bits > 8", "args.bits == 4", False),  # an order is no literal set: undecided
    ],
)
def test_conditions_on_one_value_that_contradict(first: str, second: str, excluded: bool) -> None:
    assert _excluded(f"if {first}:\n    pass\nif {second}:\n    pass\n") is excluded


def test_a_value_bound_again_between_the_tests_is_another_value() -> None:
    assert not _excluded("bits = a\nif bits in [4, 8]:\n    pass\nbits = 16\nif bits == 16:\n    pass\n")
    assert not _excluded("if args.bits in [4, 8]:\n    pass\nargs = other()\nif args.bits == 16:\n    pass\n")


def test_a_binding_on_an_excluded_path_does_not_reach_the_read() -> None:
    source = "q = None\nif args.bits in [4, 8]:\n    q = cfg()\nif args.bits == 16:\n    load(device_map=q)"
    module = ast.parse(source)
    call = module.body[-1].body[0].value  # type: ignore[attr-defined]
    assert [ast.unparse(c.value) for c in Resolver(module, SINGLE).candidates(call.keywords[0].value)] == ["None"]


def test_a_loop_binds_anew_so_its_earlier_pass_reaches_the_other_branch() -> None:
    source = "q = None\nfor bits in (4, 16):\n    if bits in [4, 8]:\n        q = cfg()\n    if bits == 16:\n        load(device_map=q)"
    module = ast.parse(source)
    call = module.body[-1].body[-1].body[0].value  # type: ignore[attr-defined]
    assert sorted(ast.unparse(c.value) for c in Resolver(module, SINGLE).candidates(call.keywords[0].value)) == ["None", "cfg()"]


def test_a_binding_carried_past_an_if_holds_where_the_branch_did_not_rebind() -> None:
    source = "q = None\nif args.bits in [4, 8]:\n    q = cfg()\nload(device_map=q)"
    module = ast.parse(source)
    call = module.body[-1].value  # type: ignore[attr-defined]
    found = {
        ast.unparse(c.value): [(ast.unparse(t), o) for t, o in c.conditions]
        for c in Resolver(module, SINGLE).candidates(call.keywords[0].value)
    }
    assert found == {"None": [("args.bits in [4, 8]", False)], "cfg()": [("args.bits in [4, 8]", True)]}


def test_a_value_bound_again_to_a_literal_the_later_test_rules_out_is_still_excluded() -> None:
    # llama-cookbook's finetuning.py: a boolean --quantization becomes "8bit" inside the quantized branch
    source = (
        "if cfg.quantization:\n    if cfg.quantization is True:\n        cfg.quantization = '8bit'\n"
        "if cfg.fsdp and not cfg.quantization:\n    pass\n"
    )
    assert _excluded(source)
    assert not _excluded(source.replace("'8bit'", "''"))  # now the later test can pass after the first


def test_the_device_maps_of_a_file_are_looked_for_once_whatever_the_setups_it_is_analysed_under(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A module many launches reach is analysed under each setup and arguments they give: which of
    its nodes may give a device map does not depend on them, and is worked out once a file."""
    from placement_lint.analysis import placements
    from placement_lint.analysis.names import ImportTable

    module = ast.parse(
        "from transformers import AutoModelForCausalLM, pipeline\nimport torch\n"
        'def load(rank):\n    torch.cuda.set_device(rank)\n    x = len("a")\n'
        '    return AutoModelForCausalLM.from_pretrained("m", device_map="auto"), pipeline("text-generation", "m")\n'
    )
    imports = ImportTable.of(module)
    asked: list[ast.AST] = []
    may_give = placements._may_give_device_map

    def counted(node: ast.AST, table: ImportTable, forwarding: frozenset[str]) -> bool:
        asked.append(node)
        return may_give(node, table, forwarding)

    monkeypatch.setattr(placements, "_may_give_device_map", counted)
    setups = [Setup(Mode.DDP), Setup(Mode.DEEPSPEED, 3), Setup(Mode.FSDP)]
    found = [
        [d.classified.placement for d in placements.PlacementAnalysis(module, imports, Resolver(module, setup)).device_maps]
        for setup in setups
    ]
    assert found[0] and found == [found[0]] * len(setups)
    assert len(asked) == len({id(node) for node in asked}), "each node is asked once, not once a setup"


def test_a_getattr_read_is_one_node_of_the_tree_for_every_resolver_of_the_module() -> None:
    # A helper's module is parsed once a run and read by each checked file's resolvers: a node each
    # resolver added would leave the tree's parents naming nodes freed with their resolver.
    from placement_lint.analysis.index import index_of

    module = ast.parse('import sys\nargs = parse()\nif getattr(args, "deepspeed", None):\n    sys.exit(1)\n')
    test = module.body[-1].test  # type: ignore[attr-defined]
    parents = index_of(module).parents
    before = len(parents)
    reads = []
    for setup in (DDP, ZERO3, SINGLE):
        resolver = Resolver(module, setup)
        resolver.candidates(test)
        reads.append(resolver._getattr_read(test))
    assert reads[0] is not None and all(read is reads[0] for read in reads)
    assert len(parents) == before + 1


def test_a_callee_of_another_module_is_located_once_a_resolver() -> None:
    # The calls that set the process's state and the helpers followed for values both ask for it.
    module = ast.parse("from utils import load\nload()\nload()\n")
    asked: list[str] = []

    def locate(written: str, setup: Setup) -> None:
        asked.append(written)

    resolver = Resolver(module, DDP, helpers=locate)
    with resolver.following_imports():
        for statement in module.body[1:]:
            resolver.called_function(statement.value, "load")  # type: ignore[attr-defined]
    resolver.imported_function("load")
    assert asked == ["load"]
