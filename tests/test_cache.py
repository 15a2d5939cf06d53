"""The result cache: an unchanged tree is not parsed again; a changed file or launcher is."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import pytest

from placement_lint.cache import Cache, load_repo_context, save_repo_context
from placement_lint.context.launches import DecodedOnRead, Launches
from placement_lint.context.repo import build_repo_context
from placement_lint.engine import run
from placement_lint.results import RunOptions
from placement_lint.settings import Settings

from helpers import CODES, imported_by_a_check

ZERO3 = 'from transformers import AutoModelForCausalLM\nimport deepspeed\nengine = deepspeed.initialize(model=AutoModelForCausalLM.from_pretrained("m", device_map="cuda"))\n'
LAUNCHED = 'from transformers import AutoModelForCausalLM, Trainer\nTrainer(model=AutoModelForCausalLM.from_pretrained("m", device_map="auto")).train()\n'


def check(root: Path) -> list[tuple[str, int, str]]:
    result = run([root], Settings(root=root, codes=CODES), RunOptions(), root, root / ".placement_lint_cache")
    return [(f.display, f.row, f.code) for f in result.findings]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / ".git").mkdir()
    (tmp_path / "a.py").write_text(ZERO3.replace('"cuda"', '"auto"'))
    (tmp_path / "b.py").write_text(LAUNCHED)
    (tmp_path / "clean.py").write_text("print('hello')\n")
    (tmp_path / "run.sh").write_text("python b.py\n")
    return tmp_path


def forbid_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*_: object) -> None:
        raise AssertionError("parsed a file the cache should have answered")

    monkeypatch.setattr("placement_lint.checker.parse_python", fail)


def test_warm_run_parses_nothing_and_gives_the_same_findings(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = check(repo)
    assert first == [("a.py", 3, "DPL001")]
    assert (repo / ".placement_lint_cache" / ".gitignore").read_text().endswith("*\n")
    forbid_parsing(monkeypatch)
    assert check(repo) == first


def test_a_run_that_shares_its_files_among_processes_fills_the_cache(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("placement_lint.engine.SCREEN_POOL_BYTES", 0)
    result = run([repo], Settings(root=repo, codes=CODES), RunOptions(jobs=2), repo, repo / ".placement_lint_cache")
    first = [(f.display, f.row, f.code) for f in result.findings]
    assert first == [("a.py", 3, "DPL001")]
    forbid_parsing(monkeypatch)
    assert check(repo) == first


def test_an_entry_only_ever_read_is_kept_past_the_stale_limit(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file checked every day without changing stays cached, even when another run writes the cache."""
    import time as clock

    def check_one(name: str) -> list[tuple[str, int, str]]:
        result = run([repo / name], Settings(root=repo, codes=CODES), RunOptions(), repo, repo / ".placement_lint_cache")
        return [(f.display, f.row, f.code) for f in result.findings]

    first = check_one("a.py")
    today = clock.time()
    for day in range(1, 61):  # two months of daily runs over a.py that change nothing
        monkeypatch.setattr("placement_lint.cache.time.time", lambda day=day: today + day * 24 * 3600 + 1)
        check_one("a.py")
    # Then another run changes b.py: it writes the cache, and drops what was not seen for 30 days.
    (repo / "b.py").write_text(LAUNCHED + "# edited\n")
    check_one("b.py")
    forbid_parsing(monkeypatch)
    assert check_one("a.py") == first


def test_a_changed_file_is_checked_again(repo: Path) -> None:
    check(repo)
    (repo / "a.py").write_text(ZERO3.replace('device_map="cuda"', "device_map=None"))
    assert check(repo) == []


def test_a_touched_but_unchanged_file_is_not_parsed(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = check(repo)
    os.utime(repo / "a.py", ns=(1, 1))
    forbid_parsing(monkeypatch)
    assert check(repo) == first


def test_a_changed_launcher_rechecks_the_files_it_launches(repo: Path) -> None:
    assert check(repo) == [("a.py", 3, "DPL001")]
    (repo / "run.sh").write_text("torchrun --nproc_per_node 8 b.py\n")
    assert check(repo) == [("a.py", 3, "DPL001"), ("b.py", 2, "DPL001")]


def test_a_new_or_changed_pin_rechecks_the_launched_files(repo: Path) -> None:
    """transformers >= 5.0 maps device_map="cuda" to the local rank: the pin decides, so it is an input."""
    (repo / "b.py").write_text(LAUNCHED.replace('"auto"', '"cuda"'))
    (repo / "run.sh").write_text("torchrun --nproc_per_node 8 b.py\n")
    assert ("b.py", 2, "DPL003") in check(repo)
    (repo / "requirements.txt").write_text("transformers>=5.0\n")
    assert ("b.py", 2, "DPL003") not in check(repo)
    (repo / "requirements.txt").write_text("transformers==4.57.3\n")
    assert ("b.py", 2, "DPL003") in check(repo)


def test_a_damaged_cache_is_ignored(repo: Path) -> None:
    first = check(repo)
    for cached in (repo / ".placement_lint_cache").rglob("*.json"):
        cached.write_text("{not json")
    assert check(repo) == first


def test_a_damaged_entry_is_checked_again(repo: Path) -> None:
    import json

    from placement_lint.cache import _FINDINGS

    first = check(repo)
    (results,) = [p for p in (repo / ".placement_lint_cache").rglob("*.json") if not p.name.startswith("repo-")]
    data = json.loads(results.read_text())
    for entry in data["files"].values():
        entry[_FINDINGS:] = [None, {}]  # not a list: not to be read as "no findings"
    results.write_text(json.dumps(data))
    assert check(repo) == first
    for entry in data["files"].values():
        del entry[_FINDINGS + 1 :]  # neither a clean file's entry nor a whole one
    results.write_text(json.dumps(data))
    assert check(repo) == first


@pytest.mark.parametrize("damage", ["cut short", "a byte changed"])
def test_a_launch_context_whose_details_are_damaged_is_rebuilt(repo: Path, damage: str) -> None:
    """The details line is parsed only when a launched file is checked again, too late to rebuild the
    context: damage (a write cut short, as the cache is not written durably) is found when it is loaded."""
    (repo / "run.sh").write_text("torchrun --nproc_per_node 8 b.py\n")
    first = check(repo)
    assert ("b.py", 2, "DPL001") in first
    (context_file,) = (repo / ".placement_lint_cache").rglob("repo-*.json")
    raw = context_file.read_bytes()
    details_start = raw.index(b"\n") + 1
    context_file.write_bytes(raw[: details_start + 20] if damage == "cut short" else raw[:-2] + b"X" + raw[-1:])
    (repo / "b.py").write_text(LAUNCHED + "# edited: checked again, so its launch evidence is read\n")
    assert check(repo) == first


@pytest.mark.parametrize("key", ["walked", "folders", "git_index", "candidates", "tracked", "inputs", "key", "slices"])
@pytest.mark.parametrize("value", [None, "planted", [[1, 2]], {"/": ["x", None]}, True])
@pytest.mark.parametrize("relaunch", [False, True])
def test_a_launch_context_whose_index_is_damaged_or_planted_is_rebuilt(
    repo: Path, key: str, value: object, relaunch: bool
) -> None:
    """What tells whether a cached context is current, replaced by what a damaged or planted file may
    hold: the run answers as a fresh one (or is only rebuilt), never fails, never runs anything."""
    import json

    (repo / "run.sh").write_text("torchrun --nproc_per_node 8 b.py\n")
    first = check(repo)
    (context_file,) = (repo / ".placement_lint_cache").rglob("repo-*.json")
    index, _, details = context_file.read_bytes().partition(b"\n")
    data = json.loads(index)
    data[key] = value
    context_file.write_bytes(json.dumps(data).encode() + b"\n" + details)
    if relaunch:  # the launches change too: a stale context would show it
        (repo / "run.sh").write_text("torchrun --nproc_per_node 8 a.py\n")
    fresh = run([repo], Settings(root=repo, codes=CODES), RunOptions(), repo, None)
    assert check(repo) == [(f.display, f.row, f.code) for f in fresh.findings]
    assert (check(repo) != first) == relaunch


def test_settings_whose_cache_files_share_a_name_never_read_each_others(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Cache files are named by a CRC of their key, and hold the key: a clash costs a re-check, never a wrong answer."""
    monkeypatch.setattr("placement_lint.cache._file_name", lambda key: "clash")

    def findings(codes: tuple[str, ...]) -> list[tuple[str, int, str]]:
        result = run([repo], Settings(root=repo, codes=codes), RunOptions(), repo, repo / ".placement_lint_cache")
        return [(f.display, f.row, f.code) for f in result.findings]

    everything = findings(CODES)
    assert everything == [("a.py", 3, "DPL001")]
    without_dpl001 = tuple(code for code in CODES if code != "DPL001")
    for _ in range(2):  # each run replaces the other's file
        assert findings(without_dpl001) == []
        assert findings(CODES) == everything


def test_no_cache_writes_nothing(repo: Path) -> None:
    run([repo], Settings(root=repo, codes=CODES), RunOptions(), repo, None)
    assert not (repo / ".placement_lint_cache").exists()


def test_the_launch_context_is_cached_and_refreshed_when_a_launcher_changes(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    check(repo)

    def fail(*_: object, **__: object) -> None:
        raise AssertionError("rebuilt a launch context the cache holds")

    monkeypatch.setattr("placement_lint.context.repo.build_repo_context", fail)
    check(repo)  # nothing changed: from the cache
    monkeypatch.undo()
    (repo / "run.sh").write_text("torchrun --nproc_per_node 8 b.py\n")
    assert ("b.py", 2, "DPL001") in check(repo)
    (repo / "new.sh").write_text("python a.py\n")  # a new launcher file: the walk sees it
    monkeypatch.setattr("placement_lint.context.repo.build_repo_context", fail)
    with pytest.raises(AssertionError, match="rebuilt"):
        check(repo)


def test_a_cached_launch_context_reads_as_the_built_one(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "helpers.py").write_text("def load(for_eval=False):\n    return AutoModelForCausalLM.from_pretrained('m')\n")
    (tmp_path / "b.py").write_text("from helpers import load\nload()\n" + LAUNCHED)
    (tmp_path / "run.sh").write_text("accelerate launch --num_processes 2 b.py --bf16\n")
    root = tmp_path.resolve()
    settings = Settings(root=root, codes=CODES)
    built = build_repo_context(root, settings, str)
    # What the launched script passes to the helper module's functions is cached too.
    assert built.calls == {root / "helpers.py": {"load": [{"for_eval": False}]}}
    save_repo_context(tmp_path / "cache", built, root, settings, [str(root)])
    loaded = load_repo_context(tmp_path / "cache", root, None, root, settings)
    assert loaded is not None and isinstance(loaded.by_file, DecodedOnRead)
    assert sorted(loaded.by_file) == sorted(built.by_file) != []
    for path in built.by_file:
        assert loaded.launched(path) == built.launched(path)
        # The result cache keys a file on this digest: a loaded context must give the one a fresh build gives.
        assert Launches([loaded]).digest(str(path)) == Launches([built]).digest(str(path)) != ""
    assert Launches([loaded]).digest(str(root / "nowhere.py")) == ""
    # Pool workers that do not fork (macOS, Windows, Python 3.14) receive the checker, contexts included, pickled.
    assert pickle.loads(pickle.dumps(loaded)).launched(next(iter(built.by_file))) == loaded.launched(next(iter(built.by_file)))


def test_a_cached_launch_context_names_paths_from_where_the_run_is(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.py").write_text(LAUNCHED)
    (tmp_path / "run.sh").write_text("torchrun --nproc_per_node 8 sub/b.py\n")
    settings = Settings(root=tmp_path, codes=CODES)
    cache = tmp_path / "cache"
    from_root = run([tmp_path], settings, RunOptions(), tmp_path, cache).findings
    from_sub = run([tmp_path / "sub"], settings, RunOptions(), tmp_path / "sub", cache).findings
    assert [e.path for f in from_root for e in f.context.evidence] == ["run.sh"]
    # Outside the working folder a launcher is named by its full path, never as if it were in `sub`.
    assert [e.path for f in from_sub for e in f.context.evidence] == [str((tmp_path / "run.sh").resolve())]


def test_editing_a_launched_script_keeps_the_launch_context_unless_its_imports_change(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:

    check(repo)
    (repo / "b.py").write_text(LAUNCHED + "print('more')\n")

    def fail(*_: object, **__: object) -> None:
        raise AssertionError("rebuilt a launch context the cache holds")

    monkeypatch.setattr("placement_lint.context.repo.build_repo_context", fail)
    check(repo)
    (repo / "helpers.py").write_text("X = 1\n")
    (repo / "b.py").write_text("import helpers\n" + LAUNCHED)
    with pytest.raises(AssertionError, match="rebuilt"):
        check(repo)


def test_a_script_that_adds_a_folder_to_sys_path_later_rebuilds_the_launch_context(tmp_path: Path) -> None:
    """Its import lines stay the same: the folder it adds is what makes them lead into the repository."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "loading.py").write_text(
        'from transformers import AutoModelForCausalLM\n\n\ndef load():\n    return AutoModelForCausalLM.from_pretrained("m", device_map="auto")\n'
    )
    (tmp_path / "jobs").mkdir()
    script = (
        "import os\nimport sys\n{}\nfrom loading import load\nfrom transformers import Trainer\nTrainer(model=load()).train()\n"
    )
    (tmp_path / "jobs" / "train.py").write_text(script.format(""))
    (tmp_path / "run.sh").write_text("torchrun --nproc_per_node 4 jobs/train.py\n")
    assert check(tmp_path) == []
    added = 'sys.path.append(os.path.join(os.path.dirname(__file__), "..", "lib"))'
    (tmp_path / "jobs" / "train.py").write_text(script.format(added))
    assert [(name, code) for name, _, code in check(tmp_path)] == [("lib/loading.py", "DPL001")]


def test_a_changed_or_new_config_rechecks(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "ds.json").write_text('{"zero_optimization": {"stage": 2}}')
    (tmp_path / "a.py").write_text(
        'args = TrainingArguments("o", deepspeed="ds.json")\nm = X.from_pretrained("m", device_map={"": 0})\n'
    )
    assert [c for _, _, c in check(tmp_path)] == ["DPL003"]
    (tmp_path / "ds.json").write_text('{"zero_optimization": {"stage": 3}}')
    assert [c for _, _, c in check(tmp_path)] == ["DPL002"], "the file's own config changed"
    (tmp_path / "b.py").write_text(
        'args = TrainingArguments("o")\nm = X.from_pretrained("m", device_map={"": 0})\nTrainer(model=m, args=args)\n'
    )
    (tmp_path / "run.sh").write_text("deepspeed --num_gpus 8 b.py --deepspeed z.json\n")
    assert ("b.py", 2, "DPL003") in check(tmp_path)
    (tmp_path / "z.json").write_text('{"zero_optimization": {"stage": 3}}')
    assert ("b.py", 2, "DPL002") in check(tmp_path), "a launch's config that appeared"


def test_a_changed_use_in_an_importer_rechecks_the_helper_it_imports(tmp_path: Path) -> None:
    """The helper's finding depends on what the launched script does with the model it returns."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "run.sh").write_text("torchrun --nproc_per_node 4 train.py\n")
    (tmp_path / "model_utils.py").write_text(
        'from transformers import AutoModelForCausalLM\n\n\ndef load_model(name):\n    return AutoModelForCausalLM.from_pretrained(name, device_map="auto")\n'
    )
    head = "from trl import SFTTrainer\nfrom model_utils import load_model\n\nmodel = load_model('m')\n"
    (tmp_path / "train.py").write_text(head + "SFTTrainer(model=model).train()\n")
    assert check(tmp_path) == [("model_utils.py", 5, "DPL001")]
    (tmp_path / "train.py").write_text(head + "model.generate()\n")  # same import lines, another use
    assert check(tmp_path) == [("model_utils.py", 5, "DPL007")]


def test_a_changed_base_class_in_another_module_rechecks_the_file_that_imports_it(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "run.sh").write_text("torchrun --nproc_per_node 4 train.py\n")
    (tmp_path / "trainers.py").write_text("from trl import SFTTrainer\n\n\nclass Custom(SFTTrainer):\n    pass\n")
    (tmp_path / "train.py").write_text(
        'from trl import SFTConfig\nfrom trainers import Custom\n\nCustom(model="Qwen/Qwen2.5-0.5B", args=SFTConfig("out")).train()\n'
    )
    assert check(tmp_path) == [], "SFTTrainer resets the map itself under DDP"
    (tmp_path / "trainers.py").write_text(
        "from trl.experimental.online_dpo import OnlineDPOTrainer\n\n\nclass Custom(OnlineDPOTrainer):\n    pass\n"
    )
    assert check(tmp_path) == [("train.py", 4, "DPL004")]


def test_a_changed_base_class_refreshes_what_an_importer_tells_the_helper(tmp_path: Path) -> None:
    """trainers.py was read whole to tell Custom a trainer: its import lines alone do not vouch for it."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "run.sh").write_text("accelerate launch --use_fsdp --num_processes 4 train.py\n")
    (tmp_path / "model_utils.py").write_text(
        "from transformers import AutoModelForCausalLM\n\n\ndef load_model(name):\n"
        "    model = AutoModelForCausalLM.from_pretrained(name)\n    model.to('cuda')\n    return model\n"
    )
    (tmp_path / "trainers.py").write_text("from trl import SFTTrainer\n\n\nclass Custom(SFTTrainer):\n    pass\n")
    (tmp_path / "train.py").write_text(
        "from trainers import Custom\nfrom model_utils import load_model\n\nCustom(model=load_model('m'))\n"
    )
    assert check(tmp_path) == [("model_utils.py", 6, "DPL006")]
    (tmp_path / "trainers.py").write_text("from trl import SFTTrainer\n\n\nclass Custom:\n    pass\n")
    assert check(tmp_path) == []


def test_a_run_the_cache_answers_imports_no_rule_analysis_or_renderer(repo: Path) -> None:
    """Light start-up: a pre-commit run over unchanged files pays for none of the checking layers."""
    heavy = (
        "placement_lint.checker", "placement_lint.analysis.", "placement_lint.rules.", "placement_lint.notebook",
        "libcst", "rich", "yaml",
    )  # fmt: skip
    files = ["a.py", "b.py", "clean.py"]
    cold = imported_by_a_check(repo, files, heavy, exit_code=1)  # a.py's finding, from the checker or from the cache
    assert "placement_lint.checker" in cold  # the probe sees what a run that checks imports
    # The cached findings' data: what a violation is, and the spans and notes of its path.
    allowed = {"placement_lint.analysis.consumers", "placement_lint.rules.violation", "placement_lint.rules.spans"}
    assert [m for m in imported_by_a_check(repo, files, heavy, exit_code=1) if m not in allowed] == []


def test_a_run_without_a_cache_never_imports_it(repo: Path) -> None:
    """--no-cache (the pre-commit benchmark's run) reads and writes no cache: nor does it import the
    module, with its JSON and checksum readers."""
    assert imported_by_a_check(repo, ["--no-cache", "a.py", "clean.py"], ("placement_lint.cache",), exit_code=1) == []
    assert "placement_lint.cache" in imported_by_a_check(repo, ["a.py", "clean.py"], ("placement_lint.cache",), exit_code=1)


def test_a_repository_with_no_launcher_never_imports_the_launch_readers(tmp_path: Path) -> None:
    """Without a file that may launch training, the launch context is empty: nothing to read or parse."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "train.py").write_text(ZERO3.replace('"cuda"', '"auto"'))
    readers = ("placement_lint.context.repo", "placement_lint.context.launch_files", "placement_lint.context.commands", "yaml")
    assert imported_by_a_check(tmp_path, ["--no-cache", "."], readers, exit_code=1) == []
    (tmp_path / "run.sh").write_text("torchrun --nproc_per_node 2 train.py\n")
    assert "placement_lint.context.repo" in imported_by_a_check(tmp_path, ["--no-cache", "."], readers, exit_code=1)


def test_a_run_the_cache_answers_for_clean_files_decodes_no_finding_or_evidence(repo: Path) -> None:
    """With nothing to report, a warm run imports neither what findings and launch evidence are made
    of nor the launch readers: b.py is launched, but its cached digest is all the run needs. Nor
    does it parse a pyproject.toml that does not mention placement-lint, or load OpenSSL's hashes."""
    data = (
        "placement_lint.cache_json", "placement_lint.context.evidence", "placement_lint.edits",
        "placement_lint.rules.violation", "placement_lint.analysis.", "placement_lint.context.launch_files",
        "placement_lint.context.commands", "tomllib", "tomli", "hashlib", "_hashlib",
    )  # fmt: skip
    (repo / "a.py").unlink()
    (repo / "pyproject.toml").write_text("[tool.ruff]\nline-length = 100\n")  # another tool's settings: not parsed
    assert "placement_lint.context.evidence" in imported_by_a_check(repo, ["."], data, exit_code=0)
    assert imported_by_a_check(repo, ["."], data, exit_code=0) == []


@pytest.mark.parametrize("fast", [True, False])
def test_the_cache_json_decodes_alike_with_and_without_orjson(monkeypatch: pytest.MonkeyPatch, fast: bool) -> None:
    from placement_lint.context import launches

    if fast:
        monkeypatch.setattr(launches, "_FAST_FROM_BYTES", 0)  # orjson for every input, however small
    else:
        monkeypatch.setattr(launches, "_fast_decoder", lambda: None)
    text = json.dumps({"files": {"caf\udcff.py": [1, 2, "h", None]}, "x": [1.5, True, None]}).encode()
    assert launches.decode_json(text) == json.loads(text), "a lone surrogate from a non-UTF-8 path name"
    plain = b'{"a": [1, "b"]}'
    assert launches.decode_json(plain) == {"a": [1, "b"]}
    with pytest.raises(ValueError):
        launches.decode_json(b'{"a": ')


def cache_files(root: Path) -> dict[str, tuple[int, bytes]]:
    return {
        str(path.relative_to(root)): (path.stat().st_mtime_ns, path.read_bytes())
        for path in (root / ".placement_lint_cache").rglob("*")
        if path.is_file()
    }


@pytest.fixture
def many(repo: Path) -> Path:
    """Enough files that changing one is a few entries: appended, not the whole cache written again."""
    for index in range(12):
        (repo / f"clean_{index}.py").write_text(f"x = {index}\n")
    return repo


def test_a_warm_run_with_nothing_changed_writes_nothing(many: Path) -> None:
    first = check(many)
    before = cache_files(many)
    assert check(many) == first
    assert cache_files(many) == before


def test_a_run_that_changes_a_few_files_appends_only_their_entries(many: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = check(many)
    (whole,) = [p for p in (many / ".placement_lint_cache").rglob("*.json") if not p.name.startswith("repo-")]
    written = whole.read_bytes()
    (many / "clean_3.py").write_text("x = 'changed'\n")
    os.utime(many / "clean_4.py", ns=(1, 1))  # touched, unchanged: its new mtime is stored
    assert check(many) == first
    assert whole.read_bytes() == written
    header, batch, end = whole.with_suffix(".jsonl").read_bytes().split(b"\n")
    assert json.loads(header)["format"] and end == b""
    assert sorted(json.loads(batch)) == [str(many / "clean_3.py"), str(many / "clean_4.py")]
    forbid_parsing(monkeypatch)
    assert check(many) == first
    assert len(whole.with_suffix(".jsonl").read_bytes().split(b"\n")) == 3, "the warm run after it wrote nothing"


def test_many_changes_write_the_whole_cache_again_and_start_a_new_log(many: Path) -> None:
    first = check(many)
    (many / "clean_0.py").write_text("x = 'changed'\n")
    check(many)
    (log,) = (many / ".placement_lint_cache").rglob("*.jsonl")
    for index in range(12):
        (many / f"clean_{index}.py").write_text(f"x = 'changed again {index}'\n")
    assert check(many) == first
    assert not log.exists()
    (whole,) = [p for p in (many / ".placement_lint_cache").rglob("*.json") if not p.name.startswith("repo-")]
    assert json.loads(whole.read_bytes())["files"][str(many / "clean_11.py")]


@pytest.mark.parametrize(
    "log",
    [
        "cut short",  # a run stopped while appending
        "not json",
        "another key",  # settings whose cache file names clash
        "planted",  # entries claiming a finding-free result for a file with a finding
    ],
)
def test_a_damaged_or_planted_log_never_changes_a_result(many: Path, log: str) -> None:
    first = check(many)
    (many / "clean_3.py").write_text("x = 'changed'\n")
    check(many)
    (path,) = (many / ".placement_lint_cache").rglob("*.jsonl")
    header, batch, _ = path.read_bytes().split(b"\n")
    (many / "a.py").write_text(ZERO3.replace('"cuda"', '"auto"') + "# edited\n")
    if log == "cut short":
        path.write_bytes(header + b"\n" + batch[: len(batch) // 2])
    elif log == "not json":
        path.write_bytes(b"\x00\xff garbage\n{]\n")
    elif log == "another key":
        path.write_bytes(json.dumps({"format": 4, "settings": "other"}).encode() + b"\n" + batch + b"\n")
    else:
        status = (many / "a.py").stat()
        import time

        # Fresh, but for the file as it was (another mtime, another digest), saying it holds no finding.
        entry = [status.st_mtime_ns - 1, status.st_size, "0" * 32, "", int(time.time()), [], {}]
        planted = {str(many / "a.py"): entry, "x": "__import__('os').system('false')", "y": [1, 2]}
        path.write_bytes(header + b"\n" + json.dumps(planted).encode() + b"\n")
    assert check(many) == first
    assert check(many) == first


def test_a_touched_file_with_findings_is_read_once(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The bytes the cache's content check reads locate the cached findings too."""
    first = check(repo)
    os.utime(repo / "a.py", ns=(1, 1))
    read_bytes = Path.read_bytes

    def once(path: Path) -> bytes:
        assert path.name != "a.py", "read again after the content check"
        return read_bytes(path)

    monkeypatch.setattr(Path, "read_bytes", once)
    forbid_parsing(monkeypatch)
    assert check(repo) == first


def test_the_warm_pass_answers_only_what_a_lookup_finds_clean_with_nothing_to_update(tmp_path: Path) -> None:
    """`Cache.unanswered` skips a file only where `lookup` would give [] and change no entry."""
    cache = Cache(tmp_path / "cache", "key")
    names, statuses = [], {}
    for index in range(9):
        path = tmp_path / f"f{index}.py"
        path.write_text("x = 1\n")
        names.append(str(path))
        statuses[str(path)] = path.stat()
    entry = lambda name: [statuses[name].st_mtime_ns, statuses[name].st_size, "digest", "", cache.now]  # noqa: E731
    cache.entries = {name: entry(name) for name in names[:8]}  # names[8]: never seen
    cache.entries[names[1]][0] += 1  # touched
    cache.entries[names[2]][3] = "a launch"  # launched since
    cache.entries[names[3]][4] = cache.now - 2 * 24 * 3600  # seen two days ago: the lookup renews it
    cache.entries[names[4]] += [[{"code": "DPL001"}], {}]  # has findings
    cache.entries[names[5]][4] = "yesterday"  # damaged
    cache.entries[names[6]] = {"not": "a list"}  # damaged
    cache.entries[names[7]][1] += 1  # another size
    left = cache.unanswered(names, statuses)
    assert left == names[1:], "only the clean, unchanged, recently seen entry is answered"
    before = {name: list(value) if isinstance(value, list) else value for name, value in cache.entries.items()}
    assert cache.lookup(names[0], statuses[names[0]], "") == [] and not cache.changed
    assert cache.entries == before
    assert [name for name in names if cache.lookup(name, statuses[name], "") == [] and name not in cache.changed] == names[:1]


HELPER = 'from transformers import AutoModelForCausalLM\n\n\ndef load(for_eval=False):\n    if for_eval:\n        return AutoModelForCausalLM.from_pretrained("m", device_map={"": 0})\n    return AutoModelForCausalLM.from_pretrained("m")\n'
TRAIN = "from transformers import Trainer\nfrom helper import load\n\n\ndef main():\n    model = load({})\n    Trainer(model=model).train()\n\n\nmain()\n"


@pytest.fixture
def launched_package(tmp_path: Path) -> Path:
    """train.py, launched on 8 GPUs, loads through helper.py, which puts every rank's model on GPU 0
    (DPL003) only when the call passes for_eval=True."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "helper.py").write_text(HELPER)
    (tmp_path / "train.py").write_text(TRAIN.format(""))
    (tmp_path / "run.sh").write_text("torchrun --nproc_per_node 8 train.py\n")
    return tmp_path


def check_paths(root: Path, *names: str, cache: bool = True) -> list[tuple[str, int, str]]:
    result = run(
        [root / name for name in names],
        Settings(root=root, codes=CODES),
        RunOptions(),
        root,
        root / ".placement_lint_cache" if cache else None,
    )
    return [(f.display, f.row, f.code) for f in result.findings]


def forbid_building(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*_: object, **__: object) -> None:
        raise AssertionError("rebuilt a launch context the cache holds")

    monkeypatch.setattr("placement_lint.context.repo.build_repo_context", fail)


def test_an_edit_inside_a_function_keeps_the_context_for_the_edited_file(
    launched_package: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pre-commit run after changing a training script's body: what the body decides goes only to the
    modules it imports, none of them checked, so the cached context answers for the script."""
    assert check_paths(launched_package, ".") == []
    (launched_package / "train.py").write_text(
        TRAIN.format("").replace("    model = load()\n", "    model = load()\n    print('a line more')\n")
    )
    fresh = check_paths(launched_package, "train.py", cache=False)
    forbid_building(monkeypatch)
    assert check_paths(launched_package, "train.py") == fresh == []


def test_an_edit_that_changes_what_an_imported_module_is_called_with_rebuilds_for_that_module(
    launched_package: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The script now calls the loader with for_eval=True, which the loader's `if for_eval:` reads: a run
    that reports the loader builds the context again; one that reports only the script need not."""
    assert check_paths(launched_package, ".") == []
    (launched_package / "train.py").write_text(TRAIN.format("for_eval=True"))
    assert check_paths(launched_package, "train.py", cache=False) == []
    with monkeypatch.context() as patched:
        forbid_building(patched)
        assert check_paths(launched_package, "train.py") == []
        with pytest.raises(AssertionError, match="rebuilt"):
            check_paths(launched_package, "helper.py")
    assert (
        check_paths(launched_package, "helper.py")
        == check_paths(launched_package, "helper.py", cache=False)
        == [("helper.py", 6, "DPL003")]
    )


@pytest.mark.parametrize(
    "edit",
    [
        pytest.param(lambda text: text.replace("def load(for_eval=False)", "def load(for_eval=True)"), id="a default"),
        pytest.param(lambda text: "import os\n" + text, id="an import"),
        pytest.param(lambda text: text + "\n\ndef build():\n    return load()\n", id="a top-level definition"),
        pytest.param(
            lambda text: text.replace("    if for_eval:", "    for_eval = True\n    if for_eval:"), id="a parameter rebound"
        ),
    ],
)
def test_an_edit_of_what_the_context_takes_from_a_module_itself_rebuilds(
    launched_package: Path, monkeypatch: pytest.MonkeyPatch, edit: object
) -> None:
    """Its facet (context/facets.py) changes: the module's own entries may, so the context is built again."""
    check_paths(launched_package, ".")
    helper = launched_package / "helper.py"
    helper.write_text(edit(helper.read_text()))  # type: ignore[operator]
    with monkeypatch.context() as patched:
        forbid_building(patched)
        with pytest.raises(AssertionError, match="rebuilt"):
            check_paths(launched_package, "helper.py")
    assert check_paths(launched_package, "helper.py") == check_paths(launched_package, "helper.py", cache=False)


def test_a_named_launch_script_keeps_the_context_after_an_edit_that_feeds_nothing_it_launches(
    launched_package: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pre-commit after a launch script was edited (not its commands) and another launch's script was
    edited before: what run.sh launches is told by the cached context, and no file it reaches is fed
    by the other script, so the context answers. Fed by it (train.py calling the loader otherwise), it
    is built again."""
    (launched_package / "otherlib.py").write_text(
        'from transformers import AutoModel\n\n\ndef build():\n    return AutoModel.from_pretrained("m")\n'
    )
    other = "from otherlib import build\n\n\ndef main():\n    build(){}\n\n\nmain()\n"
    (launched_package / "other.py").write_text(other.format(""))
    (launched_package / "other.sh").write_text("torchrun --nproc_per_node 8 other.py\n")
    check_paths(launched_package, ".")
    (launched_package / "other.py").write_text(other.format("\n    print('edited')"))
    (launched_package / "run.sh").write_text("torchrun --nproc_per_node 8 train.py\n# edited\n")
    train = launched_package / "train.py"
    train.write_text(TRAIN.format("for_eval=True"))  # once, the cache's stamp of it is taken now
    fresh = check_paths(launched_package, "run.sh", cache=False)
    assert fresh == [("helper.py", 6, "DPL003")]
    assert check_paths(launched_package, "run.sh") == fresh  # built again: train.py feeds the loader
    (launched_package / "other.py").write_text(other.format("\n    print('edited again')"))
    with monkeypatch.context() as patched:
        forbid_building(patched)
        assert check_paths(launched_package, "run.sh") == fresh
    train.write_text(TRAIN.format(""))
    with monkeypatch.context() as patched:
        forbid_building(patched)
        with pytest.raises(AssertionError, match="rebuilt"):
            check_paths(launched_package, "run.sh")
    assert check_paths(launched_package, "run.sh") == check_paths(launched_package, "run.sh", cache=False) == []


def test_a_named_launch_script_checks_what_it_launches_from_a_cached_context(launched_package: Path) -> None:
    """The cached context's entries are screened by their stored text before they are decoded: from the
    root and from a folder below it (where evidence names the script by another path), run.sh's files
    are reported and other.sh's are not."""
    (launched_package / "other.py").write_text(
        'from transformers import AutoModel\n\nAutoModel.from_pretrained("m", device_map={"": 0})\n'
    )
    (launched_package / "other.sh").write_text("torchrun --nproc_per_node 8 other.py\n")
    (launched_package / "train.py").write_text(TRAIN.format("for_eval=True"))
    below = launched_package / "sub"
    below.mkdir()

    def named(script: str, cwd: Path, cache: bool = True) -> list[tuple[str, int, str]]:
        folder = launched_package / ".placement_lint_cache" if cache else None
        result = run([launched_package / script], Settings(root=launched_package, codes=CODES), RunOptions(), cwd, folder)
        return [(f.display, f.row, f.code) for f in result.findings]

    for cwd, shown in ((launched_package, ""), (below, f"{launched_package}/")):
        run(
            [launched_package],
            Settings(root=launched_package, codes=CODES),
            RunOptions(),
            cwd,
            launched_package / ".placement_lint_cache",
        )
        assert named("run.sh", cwd) == named("run.sh", cwd, cache=False) == [(f"{shown}helper.py", 6, "DPL003")]
        assert named("other.sh", cwd) == named("other.sh", cwd, cache=False) == [(f"{shown}other.py", 3, "DPL003")]


DS_FILE_TRAIN = (
    "import argparse\nimport json\n\nimport deepspeed\nfrom transformers import AutoModelForCausalLM\n\n"
    'parser = argparse.ArgumentParser()\nparser.add_argument("--ds_file", default="ds_zero2.json")\n\n\n'
    "def main():\n    args = parser.parse_args()\n    with open(args.ds_file) as fh:\n        ds_config = json.load(fh)\n"
    '    model = AutoModelForCausalLM.from_pretrained("m")\n    deepspeed.initialize(model=model, config=ds_config)\n\n\nmain()\n'
)


def test_an_edit_that_stops_handing_deepspeed_the_launchs_config_rebuilds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The launch's `--ds_file ds_zero3.json` is the script's DeepSpeed config only while its body hands
    that option's file to deepspeed.initialize: an edit there (a fixed ZeRO-2 file instead) changes the
    launch's setup, so the context is built again; an edit beside it keeps the context."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "ds_zero2.json").write_text('{"zero_optimization": {"stage": 2}}')
    (tmp_path / "ds_zero3.json").write_text('{"zero_optimization": {"stage": 3}}')
    (tmp_path / "train.py").write_text(DS_FILE_TRAIN)
    (tmp_path / "run.sh").write_text("deepspeed --num_gpus 8 train.py --ds_file ds_zero3.json\n")
    assert check_paths(tmp_path, ".") == [("train.py", 15, "DPL008")]
    script = tmp_path / "train.py"
    script.write_text(DS_FILE_TRAIN.replace("    model =", "    print(ds_config)\n    model ="))
    with monkeypatch.context() as patched:
        forbid_building(patched)
        assert check_paths(tmp_path, "train.py") == [("train.py", 16, "DPL008")]
    script.write_text(DS_FILE_TRAIN.replace("open(args.ds_file)", 'open("ds_zero2.json")'))
    with monkeypatch.context() as patched:
        forbid_building(patched)
        with pytest.raises(AssertionError, match="rebuilt"):
            check_paths(tmp_path, "train.py")
    assert check_paths(tmp_path, "train.py") == check_paths(tmp_path, "train.py", cache=False) == []


SECTION_TRAIN = (
    "import sys\n\nimport yaml\nfrom transformers import AutoModelForCausalLM, Trainer, TrainingArguments\n\n\n"
    "def main(path):\n    with open(path) as f:\n        config = yaml.safe_load(f)\n"
    '    model = AutoModelForCausalLM.from_pretrained("m")\n'
    '    Trainer(model=model, args=TrainingArguments(**config["training_args"])).train()\n\n\nmain(sys.argv[1])\n'
)


def test_an_edit_that_stops_handing_the_training_arguments_a_section_rebuilds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ZeRO-3 config in the `training_args:` section of the launch's YAML is the script's only while
    its body hands that section to TrainingArguments: handing another one changes the launch's setup,
    so the context is built again."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "ds_zero3.json").write_text('{"zero_optimization": {"stage": 3}}')
    (tmp_path / "sft.yaml").write_text(
        "training_args:\n  output_dir: out\n  deepspeed: ds_zero3.json\neval_args:\n  output_dir: out\n"
    )
    (tmp_path / "train.py").write_text(SECTION_TRAIN)
    (tmp_path / "run.sh").write_text("torchrun --nproc_per_node 8 train.py sft.yaml\n")
    assert check_paths(tmp_path, ".") == [("train.py", 10, "DPL008")]
    (tmp_path / "train.py").write_text(SECTION_TRAIN.replace('config["training_args"]', 'config["eval_args"]'))
    with monkeypatch.context() as patched:
        forbid_building(patched)
        with pytest.raises(AssertionError, match="rebuilt"):
            check_paths(tmp_path, "train.py")
    assert check_paths(tmp_path, "train.py") == check_paths(tmp_path, "train.py", cache=False) == []


def test_an_edit_of_the_deepspeed_default_of_a_script_on_its_own_rebuilds(tmp_path: Path) -> None:
    """A launched script that imports nothing of the repository names the ZeRO-3 config its launch uses
    as its `--deepspeed` default; made a ZeRO-2 one, the cached context must not keep the ZeRO-3 setup."""
    import shutil

    case = tmp_path / "case"
    shutil.copytree(Path(__file__).parent / "fixtures" / "launch" / "bad_argparse_default_names_the_config", case)
    (case / ".git").mkdir()
    assert check_paths(case, ".") == [("train.py", 12, "DPL008")]
    script = case / "train.py"
    script.write_text(script.read_text().replace("configs/ds_zero3.json", "configs/ds_zero2.json"))
    assert check_paths(case, "train.py") == check_paths(case, "train.py", cache=False) == []


def test_an_edited_module_that_now_starts_a_launcher_rebuilds(launched_package: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    check_paths(launched_package, ".")
    helper = launched_package / "helper.py"
    helper.write_text(
        helper.read_text() + '\n\ndef go():\n    import subprocess\n    subprocess.run(["deepspeed", "train.py"])\n'
    )
    with monkeypatch.context() as patched:
        forbid_building(patched)
        with pytest.raises(AssertionError, match="rebuilt"):
            check_paths(launched_package, "helper.py")


@pytest.mark.parametrize("planted", [None, {"by_file": {}}, "sections", "out of bounds", "shifted"])
def test_a_launch_context_whose_entry_places_are_damaged_or_planted_is_rebuilt(repo: Path, planted: object) -> None:
    """Each file's entry is read from the place the index names, when the file is checked again: a
    place that is missing, outside the details or off by a byte rebuilds the context, never reads
    another file's entry or fails."""
    import json

    (repo / "run.sh").write_text("torchrun --nproc_per_node 8 b.py\n")
    first = check(repo)
    assert ("b.py", 2, "DPL001") in first
    (context_file,) = (repo / ".placement_lint_cache").rglob("repo-*.json")
    index, _, rest = context_file.read_bytes().partition(b"\n")
    data = json.loads(index)
    slices = data["slices"]
    name = next(iter(slices["by_file"]))
    if planted == "sections":
        slices.pop("calls")
    elif planted == "out of bounds":
        slices["by_file"][name] = [0, 10**9]
    elif planted == "shifted":
        start, length = slices["by_file"][name]
        slices["by_file"][name] = [start + 1, length]
    else:
        data["slices"] = planted
    context_file.write_bytes(json.dumps(data).encode() + b"\n" + rest)
    (repo / "b.py").write_text(LAUNCHED + "# edited: checked again, so its launch evidence is read\n")
    fresh = run([repo], Settings(root=repo, codes=CODES), RunOptions(), repo, None)
    assert check(repo) == [(f.display, f.row, f.code) for f in fresh.findings] == first


def test_a_launch_script_edited_without_changing_its_commands_keeps_the_context(
    launched_package: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A comment or an echo added to a launch script: its commands are the same, so is the context."""
    check_paths(launched_package, ".")
    (launched_package / "run.sh").write_text("# 8 GPUs\necho start; torchrun --nproc_per_node 8 train.py\n# done\n")
    with monkeypatch.context() as patched:
        forbid_building(patched)
        with pytest.raises(AssertionError, match="rebuilt"):  # the command moved a line: its evidence did too
            check_paths(launched_package, "train.py")
    check_paths(launched_package, ".")
    (launched_package / "run.sh").write_text("# 8 GPUs\necho start; torchrun --nproc_per_node 8 train.py\n# done, for real\n")
    fresh = check_paths(launched_package, "train.py", "helper.py", cache=False)
    with monkeypatch.context() as patched:
        forbid_building(patched)
        assert check_paths(launched_package, "train.py", "helper.py") == fresh


@pytest.mark.parametrize(
    ("name", "first", "then"),
    [
        pytest.param(
            "run.sh", "torchrun --nproc_per_node 8 train.py\n", "torchrun --nproc_per_node 1 train.py\n", id="a command"
        ),
        pytest.param(  # read into the commands of the script that runs it with arguments
            "inner.sh",
            'torchrun --nproc_per_node "$1" train.py\n',
            'torchrun --nproc_per_node "$1" train.py  # edited\n',
            id="a called script",
        ),
        pytest.param(
            "ci.yml",
            "steps:\n  - run: torchrun --nproc_per_node 8 train.py\n",
            "steps:\n  - run: torchrun --nproc_per_node 8 train.py\ndistributed_type: DEEPSPEED\n",
            id="a YAML file",
        ),
    ],
)
def test_a_launch_file_whose_text_goes_beyond_its_own_commands_rebuilds(
    launched_package: Path, monkeypatch: pytest.MonkeyPatch, name: str, first: str, then: str
) -> None:
    """A changed command, a script another one runs (its text is read into the caller's commands), a YAML
    file (an accelerate config the launches beside it may use): each edit builds the context again."""
    (launched_package / name).write_text(first)
    if name == "inner.sh":
        (launched_package / "run.sh").write_text("bash inner.sh 8\n")
    check_paths(launched_package, ".")
    (launched_package / name).write_text(then)
    with monkeypatch.context() as patched:
        forbid_building(patched)
        with pytest.raises(AssertionError, match="rebuilt"):
            check_paths(launched_package, "train.py")
    assert check_paths(launched_package, "train.py", "helper.py") == check_paths(
        launched_package, "train.py", "helper.py", cache=False
    )


def test_a_changed_sourced_file_rechecks_what_the_sourcing_script_launches(tmp_path: Path) -> None:
    """`train.env` is no launch file by its name: the context depends on it because a script sources it."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "b.py").write_text(LAUNCHED)
    (tmp_path / "train.env").write_text('LAUNCH="python"\n')
    (tmp_path / "run.sh").write_text("#!/bin/bash\nsource train.env\n$LAUNCH b.py\n")
    assert check(tmp_path) == []
    (tmp_path / "train.env").write_text('LAUNCH="torchrun --nproc_per_node 8"\n')
    assert check(tmp_path) == [("b.py", 2, "DPL001")]


def test_a_script_edited_to_document_its_launch_rebuilds(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "b.py").write_text(LAUNCHED)
    assert check(tmp_path) == []
    (tmp_path / "b.py").write_text('"""\ntorchrun --nproc_per_node 8 b.py\n"""\n' + LAUNCHED)
    assert check(tmp_path) == [("b.py", 5, "DPL001")]
