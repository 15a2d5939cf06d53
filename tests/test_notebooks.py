"""Jupyter notebooks: checked like .py files, reported by cell, fixed without touching anything else.

Golden fixtures live in tests/fixtures/notebooks/: `<case>.ipynb`, its findings in `<case>.expected`
(`cell N:row:col CODE message`) and the notebook after `--fix --unsafe-fixes` in
`<case>.fixed.ipynb`. Regenerate with `PLACEMENT_LINT_UPDATE_GOLDENS=1`, then read the diff.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import placement_lint.api
from placement_lint.edits import Edit
from placement_lint.engine import run
from placement_lint.fixes.notebook import NotebookFixError, rewrite
from placement_lint.notebook import PLACEHOLDER, decode_notebook, mask, read_notebook
from placement_lint.results import Finding, RunOptions
from placement_lint.settings import Settings
from placement_lint.source import SourceError

import helpers
from helpers import CODES, SCRIPT, lint_file, lint_repo, notes_of, run_script

FIXTURES = Path(__file__).parent / "fixtures" / "notebooks"
CASES = sorted(p for p in FIXTURES.glob("*.ipynb") if not p.name.endswith(".fixed.ipynb"))
UPDATE = os.environ.get("PLACEMENT_LINT_UPDATE_GOLDENS") == "1"

ZERO3_SETUP = 'args = TrainingArguments("out", deepspeed={"zero_optimization": {"stage": 3}})'
LOADER = 'model = AutoModelForCausalLM.from_pretrained("gpt2", device_map="auto")'
IMPORTS = "from transformers import AutoModelForCausalLM, Trainer, TrainingArguments"


def notebook(*sources: str | list[str], cell_type: str = "code", language: str | None = "python") -> dict[str, object]:
    cells = [
        {"cell_type": cell_type, "execution_count": 1, "metadata": {}, "outputs": [], "source": source} for source in sources
    ]
    metadata = {"language_info": {"name": language}} if language else {}
    return {"cells": cells, "metadata": metadata, "nbformat": 4, "nbformat_minor": 5}


def write(path: Path, data: object, **dump: object) -> Path:
    text = json.dumps(data, **{"indent": 1, "ensure_ascii": False, **dump}) + "\n"  # type: ignore[arg-type]
    path.write_bytes(text.encode("utf-8"))
    return path


def changed_lines(before: bytes, after: bytes) -> list[tuple[str, str]]:
    old, new = before.decode().splitlines(), after.decode().splitlines()
    assert len(old) == len(new), "the JSON kept its line structure"
    return [(a, b) for a, b in zip(old, new, strict=True) if a != b]


def without_sources(data: dict) -> dict:  # type: ignore[type-arg]
    stripped = json.loads(json.dumps(data))
    for cell in stripped["cells"]:
        cell.pop("source")
    return stripped


# -- golden fixtures ------------------------------------------------------------------------------


def _render(result) -> str:  # type: ignore[no-untyped-def]
    return "".join(f"cell {f.cell}:{f.row}:{f.column} {f.code} {f.violation.message}\n{notes_of(f)}" for f in result.findings)


def _golden(path: Path, actual: str | bytes | None) -> None:
    if UPDATE:
        if actual:
            path.write_bytes(actual if isinstance(actual, bytes) else actual.encode("utf-8"))
        elif path.exists():
            path.unlink()
        return
    expected = path.read_bytes() if path.exists() else None
    if isinstance(actual, str):
        actual = actual.encode("utf-8")
    assert (actual or None) == expected, f"{path.name} differs from the run"


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.stem)
def test_findings_match_golden(case: Path) -> None:
    result = lint_file(case)
    assert result.error is None
    assert result.findings, "every notebook fixture shows a finding"
    _golden(case.with_suffix(".expected"), _render(result))


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.stem)
def test_fix_matches_golden_keeps_outputs_and_is_idempotent(case: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    shutil.copytree(case.parent, work)
    target = work / case.name
    first = lint_file(target, fix=True, unsafe_fixes=True)
    assert first.error is None and not first.warnings and first.fixed
    fixed = target.read_bytes()
    _golden(case.with_name(case.stem + ".fixed.ipynb"), fixed)
    before, after = json.loads(case.read_bytes()), json.loads(fixed)
    assert without_sources(after) == without_sources(before), "outputs, metadata, counts untouched"
    assert [type(c["source"]) for c in after["cells"]] == [type(c["source"]) for c in before["cells"]]
    assert fixed == (json.dumps(after, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode(), "as nbformat writes"
    assert all("device_map" in old and "device_map" in new for old, new in changed_lines(case.read_bytes(), fixed))
    second = lint_file(target, fix=True, unsafe_fixes=True)
    assert not second.fixed and target.read_bytes() == fixed, "a second --fix changed the notebook"


def test_deepspeed_notebook_is_found_and_fixed_through_the_cli(tmp_path: Path) -> None:
    """The issue's bar: a DeepSpeed setup cell and an "auto" loader cell, found and fixed, outputs intact."""
    shutil.copytree(
        FIXTURES, tmp_path / "nb", ignore=lambda _, names: [n for n in names if n.endswith(".ipynb") and "train_zero3" not in n]
    )
    found = run_script("check", "--no-cache", "nb", cwd=tmp_path)
    assert found.returncode == 1, found.stderr
    assert "nb/train_zero3.ipynb:cell 5:5:16: DPL001 [*]" in found.stdout
    assert '= set up by: TrainingArguments(deepspeed="ds_z3.json"), cell 4, line 2' in found.stdout
    assert '5 |     device_map="auto",  # spread over the node' in found.stdout  # the cell's own rows
    fixed = run_script("check", "--no-cache", "--fix", "nb", cwd=tmp_path)
    assert fixed.returncode == 0 and "Fixed 1 problem" in fixed.stdout, fixed.stdout + fixed.stderr
    assert (tmp_path / "nb" / "train_zero3.ipynb").read_bytes() == (FIXTURES / "train_zero3.fixed.ipynb").read_bytes()


def test_a_notebook_fixed_from_stdin_comes_back_as_the_notebook(tmp_path: Path) -> None:
    """An editor sends the notebook's JSON and writes back what it gets: the fixed JSON, not its Python."""
    shutil.copytree(FIXTURES, tmp_path / "nb")
    notebook = tmp_path / "nb" / "train_zero3.ipynb"
    fixed = subprocess.run(
        [str(SCRIPT), "check", "--no-cache", "--fix", "--stdin-filename", str(notebook)],
        input=notebook.read_bytes(), capture_output=True, cwd=tmp_path, check=False,
    )  # fmt: skip
    assert fixed.stdout == (FIXTURES / "train_zero3.fixed.ipynb").read_bytes(), fixed.stderr
    text, left = placement_lint.api.fix_source(notebook.read_text(encoding="utf-8"), notebook)
    assert text.encode() == (FIXTURES / "train_zero3.fixed.ipynb").read_bytes() and not left


# -- masking IPython syntax -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        "%pip install -q transformers",
        "!torchrun --nproc_per_node 2 train.py",
        "!!ls",
        "%env CUDA_VISIBLE_DEVICES=0,1",
        "%time model = load()",
        "?model",
        "model?",
        "model.from_pretrained??",
        "%%timeit",  # a cell magic below the first line is a line magic to IPython
    ],
)
def test_ipython_lines_are_masked_and_the_rest_keeps_rows_and_columns(line: str) -> None:
    source = f"import os\nif True:\n    {line}\n    x = 1  # stays\n"
    masked, lines, _ = mask(source)
    ast.parse(masked)
    assert masked.splitlines()[2] == f"    {PLACEHOLDER}"
    assert [m.original for m in lines] == [f"    {line}"]
    assert masked.splitlines()[:2] + masked.splitlines()[3:] == source.splitlines()[:2] + source.splitlines()[3:]


def test_assigned_shell_output_keeps_its_target() -> None:
    masked, _, _ = mask("files = !ls *.json\nout, err = %sx echo hi\n")
    tree = ast.parse(masked)
    assert [ast.unparse(t) for node in tree.body for t in node.targets] == ["files", "(out, err)"]  # type: ignore[attr-defined]


def test_continued_shell_escape_is_masked_whole_and_strings_are_not() -> None:
    source = 'cmd = """\n!not a shell line\n"""\n!accelerate launch \\\n    --num_processes 2 \\\n    train.py\nx = 1  # why?\n'
    masked, lines, _ = mask(source)
    ast.parse(masked)
    assert [m.row for m in lines] == [3, 4, 5]
    assert "!not a shell line" in masked and "x = 1  # why?" in masked


@pytest.mark.parametrize(
    ("cell", "python_body"),
    [("%%bash\naccelerate launch train.py\nfor x in 1 2; do echo $x; done", False), ("%%time\nimport os\nx = 1", True)],
)
def test_cell_magics(cell: str, python_body: bool) -> None:
    masked, lines, magic = mask(cell)
    ast.parse(masked)
    assert magic == cell.splitlines()[0][2:] and lines[0].pinned
    assert (masked.splitlines()[1:] == cell.splitlines()[1:]) is python_body
    assert len(masked.splitlines()) == len(cell.splitlines())


def test_fixes_never_touch_masked_lines_or_cross_cells() -> None:
    nb = read_notebook(json.dumps(notebook("%%bash\necho hi", "x = 1\n!ls\ny = 2")).encode())
    text = nb.python
    bang = text.index("pass\ny")  # the placeholder of `!ls`
    for edit in (
        Edit(bang, bang + 4, "x = 3"),  # replaces a masked line
        Edit(bang + 2, bang + 2, "x"),  # inserts inside one
        Edit(0, 0, "import os\n"),  # before a cell magic, which must stay first
        Edit(text.index("x = 1") - 2, text.index("x = 1") + 1, "z"),  # spans two cells
    ):
        with pytest.raises(NotebookFixError):
            rewrite(nb, text[: edit.start] + edit.content + text[edit.end :], [[edit]])
    at = text.index("1")
    fine = rewrite(nb, text[:at] + "None" + text[at + 1 :], [[Edit(at, at + 1, "None")]])
    assert [(c.number, c.after) for c in fine.changes] == [(2, "x = None\n!ls\ny = 2")]
    last = text.index("y = 2")  # the cell's last line, with the line break that ends the cell
    gone = rewrite(nb, text[:last], [[Edit(last, len(text), "")]])
    assert [(c.number, c.after) for c in gone.changes] == [(2, "x = 1\n!ls")]


# -- the JSON around the sources ------------------------------------------------------------------


def fix_in(tmp_path: Path, data: object, **dump: object) -> tuple[bytes, bytes]:
    path = write(tmp_path / "train.ipynb", data, **dump)
    before = path.read_bytes()
    result = lint_file(path, fix=True, unsafe_fixes=True)
    assert result.error is None and not result.warnings and result.fixed, (result.error, result.warnings)
    return before, path.read_bytes()


@pytest.mark.parametrize("indent", [1, 2, 4, None])
def test_string_and_list_sources_keep_their_shape_and_indentation(tmp_path: Path, indent: int | None) -> None:
    data = notebook(
        [IMPORTS + "\n", ZERO3_SETUP],
        f"{LOADER}  # spread\nTrainer(model=model, args=args).train()",
        [LOADER.replace("model", "ref") + "\n", "ref.eval()\n"],
    )
    before, after = fix_in(tmp_path, data, indent=indent)
    fixed = json.loads(after)
    assert isinstance(fixed["cells"][1]["source"], str) and isinstance(fixed["cells"][2]["source"], list)
    assert fixed["cells"][1]["source"] == LOADER.replace('"auto"', "None") + "  # spread\nTrainer(model=model, args=args).train()"
    assert fixed["cells"][2]["source"] == [LOADER.replace("model", "ref").replace('"auto"', "None") + "\n", "ref.eval()\n"]
    if indent is not None:
        assert [a.count("device_map") for a, _ in changed_lines(before, after)] == [1, 1]
    else:  # one line of JSON: only the two values changed
        assert before.replace(b'\\"auto\\"', b"None") == after


def test_crlf_inside_sources_is_kept(tmp_path: Path) -> None:
    data = notebook([IMPORTS + "\r\n", ZERO3_SETUP + "\r\n", LOADER + "\r\n", "Trainer(model=model, args=args)\r\n"])
    result = lint_file(write(tmp_path / "train.ipynb", data))
    assert [(f.cell, f.row, f.column) for f in result.findings] == [(1, 3, 65)]
    _, after = fix_in(tmp_path, data)
    assert json.loads(after)["cells"][0]["source"][2] == LOADER.replace('"auto"', "None") + "\r\n"


@pytest.mark.parametrize("ensure_ascii", [True, False])
def test_non_ascii_keeps_the_files_spelling(tmp_path: Path, ensure_ascii: bool) -> None:
    data = notebook(
        "# Überblick\n" + IMPORTS + "\n" + ZERO3_SETUP, [LOADER + "  # répartir sur les GPU\n", "Trainer(model=model, args=args)"]
    )
    before, after = fix_in(tmp_path, data, ensure_ascii=ensure_ascii)
    [(old, new)] = changed_lines(before, after)
    assert ("\\u00e9" in new) is ensure_ascii and ("é" in new) is not ensure_ascii
    assert new == old.replace('\\"auto\\"', "None")
    assert json.loads(after)["cells"][1]["source"][0] == LOADER.replace('"auto"', "None") + "  # répartir sur les GPU\n"


def test_json_text_outside_the_sources_is_untouched(tmp_path: Path) -> None:
    """Key order, odd spacing, escapes that json would write differently, no trailing newline, a BOM."""
    cell = json.dumps(LOADER + "\n") + ", " + json.dumps("Trainer(model=model, args=args)")
    text = (
        '{"metadata": {"a\\/b": "\\u00e9t\\u00e9"},  "cells" : [\n'
        f'  {{"source": ["{IMPORTS}\\n", {json.dumps(ZERO3_SETUP)}], "cell_type": "code", "outputs": []}},\n'
        f'  {{"outputs": [{{"text": "caf\\u00e9\\/x"}}], "cell_type": "code", "source": [{cell}]}}\n'
        '], "nbformat": 4, "nbformat_minor": 5}'
    )
    path = tmp_path / "train.ipynb"
    raw = b"\xef\xbb\xbf" + text.encode()
    path.write_bytes(raw)
    assert lint_file(path, fix=True).fixed
    assert path.read_bytes() == raw.replace(b'\\"auto\\"', b"None")


@pytest.mark.parametrize("as_list", [False, True])
def test_import_added_by_a_fix_joins_the_imports_cell(tmp_path: Path, as_list: bool) -> None:
    imports = "%%capture\nimport torch\nfrom accelerate import notebook_launcher\nfrom transformers import AutoModelForCausalLM"
    data = notebook(
        imports.splitlines(keepends=True) if as_list else imports,
        [
            "def train():\n",
            "    model = AutoModelForCausalLM.from_pretrained('gpt2', device_map='cuda:0')\n",
            "    model.train()\n",
        ],
        "notebook_launcher(train, num_processes=2)",
    )
    path = write(tmp_path / "train.ipynb", data)
    result = lint_file(path, fix=True, unsafe_fixes=True)
    assert result.fixed and not result.warnings
    fixed = json.loads(path.read_bytes())
    cells = fixed["cells"]
    # Into the cell's statement for accelerate, as isort would (rules/added_imports.py).
    assert "".join(cells[0]["source"]) == imports.replace("import notebook_launcher", "import PartialState, notebook_launcher")
    if as_list:  # one line per element, as nbformat splits them
        assert cells[0]["source"][-2:] == [
            "from accelerate import PartialState, notebook_launcher\n",
            "from transformers import AutoModelForCausalLM",
        ]
    assert "PartialState().local_process_index" in cells[1]["source"][1]
    # Written as nbformat writes, so a new element must be indented as nbformat would indent it.
    assert path.read_bytes() == (json.dumps(fixed, indent=1, ensure_ascii=False) + "\n").encode()
    assert not lint_file(path, fix=True, unsafe_fixes=True).fixed


# -- what is reported -----------------------------------------------------------------------------


def test_cell_numbers_count_every_cell_as_ruff_does(tmp_path: Path) -> None:
    data = notebook(IMPORTS, ZERO3_SETUP, "%pip install x\n" + LOADER, "Trainer(model=model, args=args)")
    data["cells"].insert(0, {"cell_type": "markdown", "metadata": {}, "source": ["# title"]})  # type: ignore[attr-defined]
    data["cells"].insert(2, {"cell_type": "raw", "metadata": {}, "source": "raw"})  # type: ignore[attr-defined]
    write(tmp_path / "train.ipynb", data)
    concise = run_script("check", "--no-cache", "--output-format", "concise", ".", cwd=tmp_path)
    assert concise.stdout.startswith("train.ipynb:cell 5:2:65: DPL001 [*]"), concise.stdout
    full = run_script("check", "--no-cache", ".", cwd=tmp_path)
    assert "cell 4, line 1" in full.stdout and "= trained by: Trainer at cell 6, line 1" in full.stdout
    assert "--> train.ipynb:cell 4:1:1" in full.stdout and "--> train.ipynb:cell 6:1:1" in full.stdout  # each span in its cell
    assert "train.ipynb:cell 5:2:65: DPL001" in full.stdout
    assert "1 | %pip install x\n2 | " + LOADER in full.stdout  # the cell as written, with its own rows
    [item] = json.loads(run_script("check", "--no-cache", "--output-format", "json", ".", cwd=tmp_path).stdout)
    assert item["cell"] == 5 and item["location"] == {"row": 2, "column": 65} and item["noqa_row"] == 2
    assert item["end_location"] == {"row": 2, "column": 71}
    assert item["fix"]["edits"][0]["location"] == {"row": 2, "column": 65}
    assert {"kind": "ZERO3", "where": "train.ipynb:cell 4:1"}.items() <= item["context"][0].items()
    [plain] = json.loads(run_script("check", "--no-cache", "--output-format", "json", ".", cwd=_py_repo(tmp_path)).stdout)
    assert plain["cell"] is None


def _py_repo(tmp_path: Path) -> Path:
    folder = tmp_path / "py"
    folder.mkdir()
    (folder / "train.py").write_text(f"{IMPORTS}\n{ZERO3_SETUP}\n{LOADER}\nTrainer(model=model, args=args)\n")
    return folder


def test_diff_shows_each_changed_cell_and_writes_nothing(tmp_path: Path) -> None:
    path = write(tmp_path / "train.ipynb", notebook(IMPORTS, ZERO3_SETUP, LOADER + "\nTrainer(model=model, args=args)"))
    before = path.read_bytes()
    result = run_script("check", "--no-cache", "--diff", ".", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stdout == (
        "--- a/train.ipynb:cell 3\n+++ b/train.ipynb:cell 3\n@@ -1,2 +1,2 @@\n"
        f"-{LOADER}\n+{LOADER.replace(chr(34) + 'auto' + chr(34), 'None')}\n Trainer(model=model, args=args)\n"
    )
    assert path.read_bytes() == before


def test_noqa_and_pragma_work_in_cells(tmp_path: Path) -> None:
    write(tmp_path / "a.ipynb", notebook(IMPORTS, ZERO3_SETUP, LOADER + "  # noqa: DPL001\nTrainer(model=model, args=args)"))
    write(tmp_path / "b.ipynb", notebook("# placement-lint: context=zero3\n" + IMPORTS, LOADER))
    result = lint_repo(tmp_path)
    assert [(f.display, f.cell, f.row) for f in result.findings] == [("b.ipynb", 2, 1)]


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b'{"cells": [{"cell_type": "code", "source": "x = 1"', "invalid JSON"),
        (b'{"cells": {}}', 'no "cells" list'),
        (b'{"cells": [{"cell_type": "code", "source": 3}]}', "neither a string nor a list"),
        (
            b'{"cells": [{"cell_type": "code", "source": "x = 1"}, {"cell_type": "code", "source": "x = (\\ndevice_map=0, deepspeed=1"}]}',
            "cannot parse: cell 2, line",
        ),
        (b"\xff\xfe{}", "not valid UTF-8"),
    ],
)
def test_a_malformed_notebook_is_named_exit_2_and_the_rest_is_checked(tmp_path: Path, data: bytes, reason: str) -> None:
    (tmp_path / "broken.ipynb").write_bytes(data)
    write(tmp_path / "train.ipynb", notebook(IMPORTS, ZERO3_SETUP, LOADER + "\nTrainer(model=model, args=args)"))
    result = run_script("check", "--no-cache", ".", cwd=tmp_path)
    assert result.returncode == 2
    assert "error: broken.ipynb: " in result.stderr and reason in result.stderr, result.stderr
    assert "train.ipynb:cell 3:1:65: DPL001" in result.stdout


def test_a_broken_cell_is_named_and_the_other_cells_are_still_checked(tmp_path: Path) -> None:
    broken = "x = f(\n  a=1\n  b=2,\n)\n"  # trl's sft_qwen_vl.ipynb: a comma left out
    path = write(tmp_path / "train.ipynb", notebook(IMPORTS, ZERO3_SETUP, broken, LOADER + "\nTrainer(model=model, args=args)"))
    before = path.read_bytes()
    result = run_script("check", "--no-cache", "--output-format", "concise", ".", cwd=tmp_path)
    assert result.returncode == 2
    assert "error: train.ipynb: cannot parse: cell 3, line 2: " in result.stderr, result.stderr
    assert "(its other cells were checked)" in result.stderr
    assert "train.ipynb:cell 4:1:65: DPL001 device_map" in result.stdout, result.stdout  # no [*]: no fix offered
    fixed = run_script("check", "--no-cache", "--fix", "--unsafe-fixes", ".", cwd=tmp_path)
    assert fixed.returncode == 2 and path.read_bytes() == before  # a notebook that does not parse is never written
    many = [broken] * 9  # past MAX_BROKEN_CELLS: the notebook is only named
    write(tmp_path / "train.ipynb", notebook(IMPORTS, ZERO3_SETUP, *many, LOADER + "\nTrainer(model=model, args=args)"))
    result = run_script("check", "--no-cache", ".", cwd=tmp_path)
    assert result.returncode == 2 and "DPL001" not in result.stdout
    assert "(its other cells were checked)" not in result.stderr


def test_no_code_cells_and_other_languages_are_clean(tmp_path: Path) -> None:
    write(tmp_path / "notes.ipynb", notebook("# device_map='auto' under deepspeed=", cell_type="markdown"))
    write(tmp_path / "empty.ipynb", {"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
    write(tmp_path / "r.ipynb", notebook(ZERO3_SETUP + "\n" + LOADER, language="R"))
    result = run_script("check", "--no-cache", ".", cwd=tmp_path)
    assert result.returncode == 0 and "All checks passed!" in result.stdout, result.stdout + result.stderr
    assert decode_notebook(tmp_path / "notes.ipynb", (tmp_path / "notes.ipynb").read_bytes()).text == ""


def test_precheck_reads_the_code_not_the_json(tmp_path: Path) -> None:
    """In JSON, `{"deepspeed": ...}` is spelled `{\\"deepspeed\\": ...}`: the pre-check must see the code."""
    raw = json.dumps(notebook('config = {"deepspeed": "ds.json"}\nload(device_map=None)')).encode()
    assert b'\\"deepspeed\\":' in raw
    checker = helpers.checker(tmp_path)
    assert checker.worth_parsing(raw, tmp_path / "train.ipynb")
    assert not checker.worth_parsing(raw, tmp_path / "train.py"), "the JSON spelling alone would be skipped"


def test_discovery_respects_excludes_and_gitignore(tmp_path: Path) -> None:
    data = notebook(IMPORTS, ZERO3_SETUP, LOADER + "\nTrainer(model=model, args=args)")
    for folder in ("", "legacy", "scratch", ".ipynb_checkpoints"):
        (tmp_path / folder).mkdir(exist_ok=True)
        write(tmp_path / folder / "train.ipynb", data)
    (tmp_path / ".gitignore").write_text("scratch/\n")
    settings = Settings(root=tmp_path, codes=CODES, extend_exclude=("legacy",))
    result = run([tmp_path], settings, RunOptions(), tmp_path)
    assert sorted(f.display for f in result.findings) == ["train.ipynb"]


def test_cached_findings_keep_their_cells(tmp_path: Path) -> None:
    write(tmp_path / "train.ipynb", notebook(IMPORTS, ZERO3_SETUP, LOADER + "\nTrainer(model=model, args=args)"))
    settings = Settings(root=tmp_path, codes=CODES)
    first = run([tmp_path], settings, RunOptions(), tmp_path, tmp_path / ".cache")
    second = run([tmp_path], settings, RunOptions(), tmp_path, tmp_path / ".cache")
    where = [[(f.cell, f.row, f.column, f.violation.message) for f in r.findings] for r in (first, second)]
    assert where[0] == where[1] and where[0][0][:3] == (3, 1, 65)


# -- launch evidence ------------------------------------------------------------------------------


TRAIN_PY = "from transformers import AutoModelForCausalLM\nmodel = AutoModelForCausalLM.from_pretrained('x', device_map='auto')\n"


@pytest.mark.parametrize(
    ("cells", "where"),
    [
        (["%pip install accelerate", "!accelerate launch --multi_gpu train.py"], "cell 2:1"),
        (["x = 1", "!torchrun --nproc_per_node 2 \\\n    train.py --epochs 1"], "cell 2:1"),
        (["%%bash\nexport NCCL_DEBUG=INFO\ndeepspeed --num_gpus 2 train.py"], "cell 1:3"),
        (["%cd scripts", "!torchrun --nproc_per_node 2 ../train.py"], "cell 2:1"),
    ],
)
def test_shell_escapes_in_a_notebook_launch_scripts(tmp_path: Path, cells: list[str], where: str) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "scripts").mkdir()
    (tmp_path / "train.py").write_text(TRAIN_PY)
    write(tmp_path / "run.ipynb", notebook(*cells))
    result = run_script("check", "--no-cache", "--output-format", "concise", ".", cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "train.py:2:62: DPL001" in result.stdout and f"(launched by run.ipynb:{where})" in result.stdout


def test_a_shell_escape_that_only_mentions_a_launcher_launches_nothing(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "train.py").write_text(TRAIN_PY)
    write(tmp_path / "run.ipynb", notebook('print("!torchrun --nproc_per_node 2 train.py")', "# !deepspeed train.py"))
    assert run_script("check", "--no-cache", ".", cwd=tmp_path).returncode == 0


def test_a_markdown_cell_s_fenced_block_launches_as_a_doc_s_does(tmp_path: Path) -> None:
    """A markdown cell is documentation: its fenced shell blocks are read as a README's, in cell order
    with the code cells; a `cd` in one moves the next markdown cell's commands, not the kernel's."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "train.py").write_text(TRAIN_PY)
    (tmp_path / "train.py").write_text(TRAIN_PY)
    cells = [
        {"cell_type": "markdown", "metadata": {}, "source": "Run it:\n\n```bash\ncd scripts\n```\n"},
        {
            "cell_type": "code",
            "metadata": {},
            "outputs": [],
            "execution_count": 1,
            "source": "!torchrun --nproc_per_node 2 train.py",
        },
        {"cell_type": "markdown", "metadata": {}, "source": "```\n$ torchrun --nproc_per_node 4 train.py\n```"},
    ]
    write(tmp_path / "run.ipynb", {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
    result = run_script("check", "--no-cache", "--output-format", "concise", ".", cwd=tmp_path)
    assert "scripts/train.py:2:62: DPL001" in result.stdout and "(launched by run.ipynb:cell 3:2)" in result.stdout
    assert "train.py:2:62: DPL001" in result.stdout.replace("scripts/train.py", "") and "run.ipynb:cell 2:1" in result.stdout
    prose = [
        {
            "cell_type": "markdown",
            "metadata": {},
            "source": "Run `torchrun --nproc_per_node 4 train.py`\nor torchrun --nproc_per_node 8 train.py.\n",
        }
    ]
    write(tmp_path / "run.ipynb", {"cells": prose, "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
    assert run_script("check", "--no-cache", ".", cwd=tmp_path).returncode == 0, "prose names a command, a reader runs none"


def test_notebook_launcher_is_evidence_for_the_notebook(tmp_path: Path) -> None:
    data = notebook(
        "from accelerate import notebook_launcher\nfrom transformers import AutoModelForCausalLM",
        "def train():\n    model = AutoModelForCausalLM.from_pretrained('gpt2', device_map='auto')\n    return model",
        "notebook_launcher(train, num_processes=2)",
    )
    result = lint_file(write(tmp_path / "train.ipynb", data))
    assert [(f.code, f.cell, f.row) for f in result.findings] == [("DPL001", 2, 2)]
    assert "notebook_launcher(num_processes=2), cell 3, line 1" in str(result.findings[0].violation.notes)
    one = json.loads(json.dumps(data).replace("num_processes=2", "num_processes=1"))
    assert lint_file(write(tmp_path / "one.ipynb", one)).findings == []


def test_read_notebook_names_the_reason() -> None:
    with pytest.raises(SourceError, match="cell 2 is not an object"):
        read_notebook(b'{"cells": [{"cell_type": "code", "source": ""}, 3]}')


# -- every rule fixture, as a notebook ------------------------------------------------------------

RULE_CASES = sorted(p for p in (FIXTURES.parent).glob("DPL*/bad_*.py") if not p.name.endswith(".fixed.py"))


def as_cells(text: str) -> tuple[list[str], list[str]]:
    """A script as a notebook author splits it: a cell per block of top-level code, no final newline;
    and the blank lines between them, to join the cells back."""
    parts = re.split(r"(\n\n+)(?=\S)", text.rstrip("\n"))
    return parts[0::2], parts[1::2]


def joined(cells: list[str], separators: list[str]) -> str:
    return "".join(cell + separator for cell, separator in zip(cells, [*separators, "\n"], strict=True))


@pytest.mark.parametrize("case", RULE_CASES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_rule_fixture_finds_and_fixes_the_same_as_a_notebook(case: Path, tmp_path: Path) -> None:
    text = case.read_text(encoding="utf-8")
    cells, separators = as_cells(text)
    if "\r" in text or joined(cells, separators) != text:
        pytest.skip("the cells would not join back to the same script")
    work = tmp_path / "work"
    shutil.copytree(case.parent, work)
    data = notebook(*[cell.splitlines(keepends=True) for cell in cells])
    data["cells"].insert(1, {"cell_type": "markdown", "metadata": {}, "source": ["Notes"]})  # type: ignore[attr-defined]
    path = write(work / (case.stem + ".ipynb"), data)
    rule = (case.parent.name,)  # opt-in rules (DPL100) are on for their own fixtures
    script = lint_file(case, rule)
    found = lint_file(path, rule)
    assert len(cells) > 1 and found.findings
    assert [(f.code, f.violation.fix is not None) for f in found.findings] == [
        (f.code, f.violation.fix is not None) for f in script.findings
    ]
    fixed = lint_file(path, rule, fix=True, unsafe_fixes=True)
    assert fixed.error is None and not fixed.warnings
    golden = case.with_name(case.stem + ".fixed.py")
    sources = ["".join(c["source"]) for c in json.loads(path.read_bytes())["cells"] if c["cell_type"] == "code"]
    assert joined(sources, separators) == (golden.read_text(encoding="utf-8") if golden.exists() else text)
    # What the fixing run reports as left is what a new check of the written notebook finds, cells and lines included.
    assert _shown(fixed.findings) == _shown(lint_file(path, rule).findings)


def test_findings_left_after_a_fix_that_adds_a_line_name_the_fixed_cells(tmp_path: Path) -> None:
    data = notebook(
        "import torch.distributed as dist\nfrom transformers import AutoModelForCausalLM",
        'dist.init_process_group("nccl")',
        'model = AutoModelForCausalLM.from_pretrained("m", device_map="cuda:0")',
        "model.is_parallelizable = True",
    )
    path = write(tmp_path / "train.ipynb", data)
    fixed = lint_file(path, fix=True, unsafe_fixes=True)  # DPL003's fix imports PartialState: cell 1 grows
    assert [f.code for f in fixed.findings] == ["DPL010"] and "cell 2, line 1" in str(fixed.findings[0].violation.notes)
    assert _shown(fixed.findings) == _shown(lint_file(path).findings)


def test_show_fixes_names_a_notebook_fix_by_cell_and_line(tmp_path: Path) -> None:
    shutil.copytree(FIXTURES, tmp_path / "nb")
    shown = run_script("check", "--no-cache", "--diff", "--show-fixes", "nb", cwd=tmp_path)
    assert "- nb/train_zero3.ipynb:" in shown.stderr + shown.stdout
    assert "cell 5:5  DPL001" in shown.stderr + shown.stdout  # where `check` reports it: cell 5, line 5


def _shown(findings: list[Finding]) -> list[tuple[object, ...]]:
    return [(f.code, f.cell, f.row, f.column, f.message, f.context.evidence) for f in findings]


# -- the machine formats --------------------------------------------------------------------------


def test_machine_formats_locate_a_notebook_finding_by_cell(tmp_path: Path) -> None:
    """A notebook's rows are in its cells, not in the JSON file a CI viewer shows: like ruff, the
    location formats fall back to line 1 and the text formats name the cell."""
    import xml.etree.ElementTree as ET

    from test_formats import _official_schema

    (tmp_path / ".git").mkdir()
    write(
        tmp_path / "train.ipynb", notebook(IMPORTS, ZERO3_SETUP, "%pip install x\n" + LOADER, "Trainer(model=model, args=args)")
    )

    def output(name: str) -> str:
        return run_script("check", "--no-cache", "--output-format", name, ".", cwd=tmp_path).stdout

    assert "  cell 3:2:65 DPL001 [*]" in output("grouped")
    github = output("github")
    assert "line=1,col=1,endLine=1,endColumn=1," in github and "::train.ipynb:cell 3:2:65: DPL001" in github
    [issue] = json.loads(output("gitlab"))
    assert issue["location"] == {"path": "train.ipynb", "lines": {"begin": 1, "end": 1}}
    case = ET.fromstring(output("junit")).find(".//testcase")
    assert case is not None and "line" not in case.attrib and case.find("failure").text.startswith("cell 3, line 2, col 65")  # type: ignore[union-attr]
    log = json.loads(output("sarif"))
    [result] = log["runs"][0]["results"]
    assert result["locations"][0]["physicalLocation"]["region"]["startLine"] == 1 and "fixes" not in result
    assert "snippet" not in result["locations"][0]["physicalLocation"]["region"]  # the text is not at the file's line 1
    assert result["properties"]["cell"] == 3 and result["properties"]["cellLine"] == 2
    assert result["relatedLocations"][0]["physicalLocation"] == {
        "artifactLocation": {"uri": "train.ipynb", "uriBaseId": "%SRCROOT%"}
    }
    from jsonschema import Draft4Validator

    assert [e.message for e in Draft4Validator(_official_schema()).iter_errors(log)] == []


def test_a_notebook_is_decoded_once_per_text_from_launch_context_to_fix(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The launch context reads the `!` cell, the pre-check and the check read the code cells, the fix
    reads its result back: one JSON decode of the notebook as found, one of the notebook as fixed."""
    import placement_lint.notebook as notebook_module

    write(tmp_path / "train.py", "print('trained')\n")
    path = write(
        tmp_path / "run.ipynb",
        notebook(
            "!accelerate launch --num_processes 2 train.py", IMPORTS, ZERO3_SETUP, LOADER, "Trainer(model=model, args=args)"
        ),
    )
    found = path.read_text(encoding="utf-8")
    decoded: list[str] = []

    def counting_loads(text: str) -> object:
        decoded.append(text)
        return json.loads(text)

    monkeypatch.setattr(notebook_module, "_DECODED", {})  # nothing decoded before this run
    monkeypatch.setattr(notebook_module, "_decoded_bytes", 0)
    counting_json = type("CountingJson", (), {"loads": staticmethod(counting_loads), "JSONDecodeError": json.JSONDecodeError})
    monkeypatch.setattr(notebook_module, "json", counting_json)
    result = run([tmp_path], Settings(root=tmp_path, codes=CODES), RunOptions(fix=True, jobs=1), cwd=tmp_path)
    [checked] = [file for file in result.files if file.path == path]
    assert checked.fixed, "the notebook was fixed"
    assert decoded == [found, path.read_text(encoding="utf-8")]
    assert not checked.findings
