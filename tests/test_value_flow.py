"""Values across branches and helper functions: which binding reaches a load, what a first-party
helper returns (in the file and in another module), and the related locations a finding carries."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from placement_lint.analysis.dataflow import ABSENT, ForeignFunction, Resolver
from placement_lint.cache_json import violation_from_json, violation_json
from placement_lint.distributed import SINGLE, Mode, Setup
from placement_lint.engine import run
from placement_lint.results import RunOptions
from placement_lint.rules.spans import Related
from placement_lint.rules.violation import Violation
from placement_lint.settings import Settings

from helpers import CODES, lint_repo, lint_source, notes_of

DDP = Setup(Mode.DDP)
TRAIN = 'Trainer(model=model, args=TrainingArguments("out", deepspeed="ds_z2.json")).train()\n'


def values_at_last_call(source: str, setup: Setup = DDP) -> list[object]:
    module = ast.parse(source)
    resolver = Resolver(module, setup)
    call = module.body[-1].value  # type: ignore[attr-defined]
    found = resolver.candidates(call.keywords[0].value)
    return [c.value.value if isinstance(c.value, ast.Constant) else c.value for c in found]


def test_a_helpers_return_is_followed_and_a_ruled_out_return_left_out() -> None:
    source = (
        "import os\n"
        "def get_map():\n"
        "    if int(os.environ.get('WORLD_SIZE', 1)) == 1:\n"
        "        return 'auto'\n"
        "    return 'cuda:0'\n"
        "load(device_map=get_map())\n"
    )
    assert values_at_last_call(source, DDP) == ["cuda:0"]
    assert values_at_last_call(source, Setup(Mode.SINGLE)) == ["auto"]  # the second runs only when the first does not


def test_a_helper_that_returns_its_parameter_or_is_decorated_or_a_generator_gives_no_value() -> None:
    for helper in (
        "def get_map(x):\n    return x\n",
        "@cache\ndef get_map():\n    return 'auto'\n",
        "def get_map():\n    yield 'auto'\n",
    ):
        assert values_at_last_call(helper + "load(device_map=get_map())\n") in ([None], [])


def test_a_helpers_condition_on_a_parameter_is_decided_by_the_calls_literals() -> None:
    helper = "def get_map(mode='infer'):\n    if mode == 'train':\n        return 'auto'\n    return None\n"
    assert values_at_last_call(helper + "load(device_map=get_map(mode='train'))\n") == ["auto"]
    assert values_at_last_call(helper + "load(device_map=get_map('train'))\n") == ["auto"]
    assert values_at_last_call(helper + "load(device_map=get_map())\n") == [None]  # the default it leaves
    # Arguments the tool cannot see, or a parameter the helper re-binds, decide nothing.
    assert values_at_last_call(helper + "load(device_map=get_map(**kw))\n") == ["auto", None]
    assert values_at_last_call(helper + "load(device_map=get_map(mode=args.mode))\n") == ["auto", None]
    rebinding = helper.replace("    if mode", "    mode = pick(mode)\n    if mode")
    assert values_at_last_call(rebinding + "load(device_map=get_map(mode='infer'))\n") == ["auto", None]


def test_a_key_stored_under_a_computed_name_makes_absence_unknown() -> None:
    module = ast.parse("kw = {}\nfor k, v in pairs:\n    kw[k] = v\nload(**kw)\n")
    resolver = Resolver(module, DDP)
    splat = module.body[-1].value.keywords[0].value  # type: ignore[attr-defined]
    assert resolver.key_candidates(splat, "device_map") is None
    for merged in ("kw = {}\nkw.update(extra)\n", "kw = {**extra}\nkw[name] = value\n", "kw = {}\nkw |= extra\n"):
        module = ast.parse(f"{merged}load(**kw)\n")
        splat = module.body[-1].value.keywords[0].value  # type: ignore[attr-defined]
        assert Resolver(module, DDP).key_candidates(splat, "device_map") is None, merged
    known = ast.parse("kw = {}\nload(**kw)\n")
    assert [c.value for c in Resolver(known, DDP).key_candidates(known.body[-1].value.keywords[0].value, "device_map")] == [  # type: ignore[attr-defined,union-attr]
        ABSENT
    ]


def _spans(finding, *roles: str) -> list[tuple[str, str, int, int]]:  # type: ignore[no-untyped-def]
    return [(s.role, s.path, s.row, s.column) for s in finding.violation.related if s.role in roles]


def _notes(finding) -> str:  # type: ignore[no-untyped-def]
    return "\n".join(f"{note.label}: {note.text}" for note in finding.violation.notes)


def test_a_finding_on_a_helpers_value_names_the_load_and_the_call(tmp_path: Path) -> None:
    source = (
        "from transformers import AutoModelForCausalLM, Trainer, TrainingArguments\n"
        "def get_device_map():\n"
        "    return {'model.layers.0': 0, 'lm_head': 1}\n"
        "model = AutoModelForCausalLM.from_pretrained('m', device_map=get_device_map())\n" + TRAIN
    )
    [finding] = lint_source(tmp_path, source).findings
    assert (finding.code, finding.row, finding.column) == ("DPL001", 3, 12)
    assert finding.violation.fix is None  # other callers may rely on the helper: a person decides
    assert _spans(finding, "helper", "origin", "load", "finding") == [
        ("helper", "train.py", 4, 62),  # the call that returns the value
        ("origin", "train.py", 3, 12),  # the value, in the helper
        ("load", "train.py", 4, 9),
    ]
    assert "get_device_map(), line 4" in _notes(finding)


def test_a_helper_map_that_follows_the_rank_is_not_spread(tmp_path: Path) -> None:
    source = (
        "import os\n"
        "from transformers import AutoModelForCausalLM, Trainer, TrainingArguments\n"
        "def get_device_map():\n"
        "    device_map = {}\n"
        "    for i in range(32):\n"
        "        device_map[f'model.layers.{i}'] = int(os.environ['LOCAL_RANK'])\n"
        "    return device_map\n"
        "model = AutoModelForCausalLM.from_pretrained('m', device_map=get_device_map())\n" + TRAIN
    )
    assert lint_source(tmp_path, source).findings == []


def _torchrun_repo(tmp_path: Path, maps: str, imported: str, called: str) -> None:
    """A repository whose run.sh starts train.py under torchrun; train.py loads with `device_map=<called>`
    from the helper module maps.py."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "run.sh").write_text("torchrun --nproc_per_node 2 train.py\n")
    (tmp_path / "maps.py").write_text(maps)
    (tmp_path / "train.py").write_text(
        f"from transformers import AutoModelForCausalLM, Trainer\n{imported}\n"
        f"Trainer(model=AutoModelForCausalLM.from_pretrained('m', device_map={called})).train()\n"
    )


def test_a_helper_in_another_module_is_reported_at_its_call_with_the_origin(tmp_path: Path) -> None:
    _torchrun_repo(tmp_path, "def spread():\n    return {'model.layers.0': 0, 'lm_head': 1}\n", "import maps", "maps.spread()")
    result = lint_repo(tmp_path)
    [finding] = result.findings
    assert (finding.display, finding.row, finding.code) == ("train.py", 3, "DPL001")
    assert "maps.spread(): {'model.layers.0': 0, 'lm_head': 1} (maps.py:2)" in _notes(finding)
    assert _spans(finding, "origin") == [("origin", "maps.py", 2, 12)]


def test_a_helper_module_that_does_not_parse_gives_no_value_and_no_error(tmp_path: Path) -> None:
    _torchrun_repo(tmp_path, "def spread(:\n    return 'auto'\n", "from maps import spread", "spread()")
    result = lint_repo(tmp_path)
    assert result.findings == [] and not any(f.error for f in result.files)


def test_related_locations_survive_the_cache() -> None:
    violation = Violation("DPL001", "m", 1, 2, related=(Related("origin", "a.py", 3, 4, 3, 9, "returns 'auto'"),))
    assert violation_from_json(violation_json(violation)) == violation
    old = {k: v for k, v in violation_json(violation).items() if k != "related"}
    assert violation_from_json(old).related == ()


def test_a_changed_helper_module_rechecks_its_importer(tmp_path: Path) -> None:
    _torchrun_repo(tmp_path, "def spread():\n    return {'': 0}\n", "from maps import spread", "spread()")

    def codes() -> list[str]:
        result = run([tmp_path], Settings(root=tmp_path, codes=CODES), RunOptions(), tmp_path, tmp_path / ".cache")
        return [f.code for f in result.findings]

    assert codes() == ["DPL003"]
    (tmp_path / "maps.py").write_text("def spread():\n    return {'model.layers.0': 0, 'lm_head': 1}\n")
    assert codes() == ["DPL001"]


def test_recursive_helpers_end() -> None:
    source = (
        "def a(n):\n    if n:\n        return b(n - 1)\n    return b(n)\n"
        "def b(n):\n    if n:\n        return a(n - 1)\n    return a(n)\n"
        "load(device_map=a(3))\n"
    )
    assert set(values_at_last_call(source)) == {None}


def test_a_use_in_a_loop_sees_the_bodys_bindings_from_an_earlier_pass_and_the_loop_target() -> None:
    earlier = "kw = {}\nfor name in names:\n    load(**kw)\n    kw = {'device_map': 'auto'}\n"
    module = ast.parse(earlier)
    call = module.body[1].body[0].value  # type: ignore[attr-defined]
    found = Resolver(module, DDP).key_candidates(call.keywords[0].value, "device_map")
    assert sorted(str(c.value.value if isinstance(c.value, ast.Constant) else c.value) for c in found) == ["ABSENT", "auto"]  # type: ignore[union-attr]
    target = "device_map = 'auto'\nfor device_map in maps:\n    load(device_map=device_map)\n"
    module = ast.parse(target)
    call = module.body[1].body[0].value  # type: ignore[attr-defined]
    assert [c.value for c in Resolver(module, DDP).candidates(call.keywords[0].value)] == [None]


def test_a_condition_later_in_the_same_loop_body_does_not_recurse() -> None:
    source = (
        "for item in items:\n    kw = {}\n    load(**kw)\n    flag = item\n    if flag:\n        kw = {'device_map': 'auto'}\n"
    )
    module = ast.parse(source)
    call = module.body[0].body[1].value  # type: ignore[attr-defined]
    found = Resolver(module, DDP).key_candidates(call.keywords[0].value, "device_map")
    assert [c.value for c in found] == [ABSENT]  # type: ignore[union-attr]


def test_a_helper_re_exported_by_a_package_is_found(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "run.sh").write_text("torchrun --nproc_per_node 2 train.py\n")
    (tmp_path / "utils").mkdir()
    (tmp_path / "utils" / "__init__.py").write_text("from .maps import spread\n")
    (tmp_path / "utils" / "maps.py").write_text("def spread():\n    return 'balanced'\n")
    (tmp_path / "train.py").write_text(
        "from transformers import AutoModelForCausalLM, Trainer\nfrom utils import spread\n"
        "Trainer(model=AutoModelForCausalLM.from_pretrained('m', device_map=spread())).train()\n"
    )
    result = lint_repo(tmp_path)
    assert [(f.display, f.code) for f in result.findings] == [("train.py", "DPL001")]
    assert "spread(): 'balanced' (utils/maps.py:2)" in _notes(result.findings[0])


def test_imported_helpers_are_followed_only_for_callers_that_ask() -> None:
    """Other rules read `candidates` to edit what they find: a node of another module must not reach them."""
    helper_module = ast.parse("def spread():\n    return 'auto'\n")
    helper = Resolver(helper_module, DDP)
    located = ForeignFunction(helper, helper_module.body[0], "maps.py", "")  # type: ignore[arg-type]
    module = ast.parse("from maps import spread\nload(device_map=spread())\n")
    resolver = Resolver(module, DDP, helpers=lambda name, setup: located if name == "spread" else None)
    value = module.body[-1].value.keywords[0].value  # type: ignore[attr-defined]
    assert [c.value for c in resolver.candidates(value)] == [value]
    with resolver.following_imports():
        [candidate] = resolver.candidates(value)
    assert candidate.value.value == "auto" and candidate.foreign is not None  # type: ignore[union-attr]


def test_dispatch_model_under_zero3_is_not_claimed_to_raise_at_load(tmp_path: Path) -> None:
    """The load's own branch now decides nothing, so this map resolves: dispatch_model has no ZeRO-3 check."""
    source = (
        "# placement-lint: context=zero3\n"
        "import accelerate\n"
        "def place(model, num_gpus):\n"
        "    if num_gpus != 1:\n"
        "        device_map = accelerate.infer_auto_device_map(model)\n"
        "        model = accelerate.dispatch_model(model, device_map=device_map)\n"
        "    return model\n"
    )
    assert [f.code for f in lint_source(tmp_path, source).findings] == []


def test_a_return_after_earlier_returning_ifs_is_guarded_by_them() -> None:
    source = (
        "import torch\n"
        "def infer_device():\n"
        "    if is_npu_available():\n"
        "        return 'npu'\n"
        "    elif is_xpu_available():\n"
        "        return 'xpu'\n"
        "    return 'cpu'\n"
        "load(device_map=infer_device())\n"
    )
    module = ast.parse(source)
    resolver = Resolver(module, DDP)
    found = resolver.candidates(module.body[-1].value.keywords[0].value)  # type: ignore[attr-defined]
    cpu = next(c for c in found if isinstance(c.value, ast.Constant) and c.value.value == "cpu")
    assert [(ast.unparse(test), outcome) for test, outcome in cpu.guards] == [
        ("is_npu_available()", False),
        ("is_xpu_available()", False),
    ]
    both = "def f():\n    if x:\n        return 1\n    else:\n        return 2\n    return 'auto'\nload(device_map=f())\n"
    assert "auto" not in values_at_last_call(both)


def test_a_map_filled_in_a_loop_names_the_loop(tmp_path: Path) -> None:
    source = (
        "from transformers import AutoModelForCausalLM, Trainer, TrainingArguments\n"
        "device_map = {'lm_head': 3}\n"
        "for i in range(32):\n"
        "    device_map[f'model.layers.{i}'] = i // 8\n"
        "model = AutoModelForCausalLM.from_pretrained('m', device_map=device_map)\n" + TRAIN
    )
    [finding] = lint_source(tmp_path, source).findings
    assert "the loop at line 4 puts its layers on several devices" in _notes(finding)
    assert _spans(finding, "origin") == [("origin", "train.py", 4, 5)]
    assert finding.violation.fix is not None  # the load's own argument is replaced, not the display the loop fills


def test_a_dict_comprehension_over_the_layers_spreads_and_one_over_the_rank_does_not(tmp_path: Path) -> None:
    spread = "{f'model.layers.{i}': i // 8 for i in range(32)}"
    source = (
        "import os\nfrom transformers import AutoModelForCausalLM, Trainer, TrainingArguments\n"
        "def get_device_map():\n"
        "    return {spread}\n"
        "model = AutoModelForCausalLM.from_pretrained('m', device_map=get_device_map())\n" + TRAIN
    )
    [finding] = lint_source(tmp_path, source.format(spread=spread)).findings
    assert finding.code == "DPL001" and "loop at line 4" in _notes(finding)
    per_rank = "{f'model.layers.{i}': int(os.environ['LOCAL_RANK']) for i in range(32)}"
    assert lint_source(tmp_path, source.format(spread=per_rank)).findings == []


def test_a_cuda_probe_is_true_in_a_multi_process_run_and_unknown_in_one() -> None:
    # A multi-process launch runs on GPUs, so the CUDA branch is the one it takes; one process may
    # be a CPU run, so there both branches stay possible.
    source = "import torch\nload(device_map='auto' if torch.cuda.is_available() else 'cpu')\n"
    module = ast.parse(source)
    value = module.body[-1].value.keywords[0].value  # type: ignore[attr-defined]
    multi = [c.value.value for c in Resolver(module, DDP).candidates(value)]  # type: ignore[union-attr]
    single = [c.value.value for c in Resolver(module, SINGLE).candidates(value)]  # type: ignore[union-attr]
    assert multi == ["auto"]
    assert single == ["auto", "cpu"]


@pytest.mark.parametrize("probe", ["torch.distributed.is_available()", "dist.is_available()"])
def test_a_torch_distributed_probe_is_true_in_a_multi_process_run_and_unknown_in_one(probe: str) -> None:
    # Every CUDA build of torch has torch.distributed, and a multi-process launch runs on GPUs; one
    # process may run a build without it (an old Windows or macOS wheel), so there both stay possible.
    source = f"import torch\nimport torch.distributed as dist\nload(device_map=0 if {probe} else 'auto')\n"
    module = ast.parse(source)
    value = module.body[-1].value.keywords[0].value  # type: ignore[attr-defined]
    multi = [c.value.value for c in Resolver(module, DDP).candidates(value)]  # type: ignore[union-attr]
    single = [c.value.value for c in Resolver(module, SINGLE).candidates(value)]  # type: ignore[union-attr]
    assert multi == [0]
    assert single == [0, "auto"]


def test_a_gpu_count_is_several_in_a_multi_process_run_and_unknown_in_one() -> None:
    # Each process of a launch on one machine sees every GPU, one per process at least; one process
    # may run on a machine with one GPU or several.
    source = "import torch\nload(device_map={'': 0} if torch.cuda.device_count() == 1 else 'auto')\n"
    module = ast.parse(source)
    value = module.body[-1].value.keywords[0].value  # type: ignore[attr-defined]
    multi = [c.value for c in Resolver(module, DDP).candidates(value)]
    single = [c.value for c in Resolver(module, SINGLE).candidates(value)]
    assert [type(v).__name__ for v in multi] == ["Constant"]
    assert [type(v).__name__ for v in single] == ["Dict", "Constant"]


@pytest.mark.parametrize(
    ("test", "setting"),
    [
        ("args.use_lora", True),  # a field of parsed arguments the linter cannot read
        ('cfg["max_memory"] is not None', True),  # a field of a config object
        ("quantization_config is not None", True),  # bound from a call given the arguments
        ("quantize", True),  # a parameter: the caller's setting
        ('os.environ.get("USE_QLORA") == "1"', True),  # the launch may set it
        ('sys.argv[-1].startswith("x")', False),  # the command line as the process sees it
        ("torch.cuda.get_device_properties(0).total_memory < 40e9", False),  # a test of the machine
        ("free_memory < 40e9", False),  # bound from such a test
        ("SPREAD_SMALL_GPUS", False),  # a name the module imports
        ("some_unknown_flag", False),  # a name nothing here binds
    ],
)
def test_an_undecided_condition_on_a_setting_is_told_from_one_on_run_time_state(test: str, setting: bool) -> None:
    source = (
        "import os\nimport sys\nimport torch\nfrom settings import SPREAD_SMALL_GPUS\n"
        "def build(args, cfg, quantize):\n"
        "    quantization_config = get_quantization_config(args)\n"
        "    free_memory = torch.cuda.mem_get_info()[0]\n"
        f"    if {test}:\n"
        "        device_map = 'auto'\n"
    )
    module = ast.parse(source)
    resolver = Resolver(module, DDP)
    condition = module.body[-1].body[-1].test  # type: ignore[attr-defined]
    assert resolver.truth(condition) is None
    assert resolver.reads_run_settings(condition) is setting


def test_a_map_set_under_run_time_state_is_reported_and_one_under_an_unread_setting_is_not(tmp_path: Path) -> None:
    head = (
        "# placement-lint: context=ddp\nimport sys\nfrom transformers import AutoModelForCausalLM, Trainer, TrainingArguments\n"
    )
    tail = (
        "    model = AutoModelForCausalLM.from_pretrained('gpt2', device_map=device_map)\n"
        "    Trainer(model=model, args=TrainingArguments('out')).train()\n"
    )
    run_time = (
        head + "def main(args):\n    device_map = None\n    if sys.argv[-1] == 'big':\n        device_map = 'auto'\n" + tail
    )
    setting = head + "def main(args):\n    device_map = None\n    if args.big:\n        device_map = 'auto'\n" + tail
    found = lint_source(tmp_path, run_time).findings
    assert [f.code for f in found] == ["DPL001"] and found[0].violation.fix is not None
    assert not found[0].violation.fix.safe  # another run may take the branch for one process
    assert lint_source(tmp_path, setting).findings == []


def test_a_zero3_map_set_under_run_time_state_is_kept_for_runs_without_zero3_by_an_unsafe_fix(tmp_path: Path) -> None:
    case = Path(__file__).parent / "fixtures" / "DPL002" / "bad_map_set_under_a_test_no_launch_decides.py"
    (finding,) = lint_source(tmp_path, case.read_text(encoding="utf-8")).findings
    fix = finding.violation.fix
    assert fix is not None and not fix.safe
    assert fix.message == "Use None under ZeRO-3 and keep the map for runs without it"
    assert '= only if: sys.argv[-1].startswith("x"), which no launch decides' in notes_of(finding)
