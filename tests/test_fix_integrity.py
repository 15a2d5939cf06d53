"""--fix changes only the reported spans: every other byte (BOM, CRLF, tabs, comments, encoding) stays."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from helpers import lint_file

TEMPLATE = (
    "# -*- coding: {cookie} -*-\n"
    "# caf\u00e9 \u2014 a comment that must survive\n"
    "from transformers import AutoModelForCausalLM, Trainer, TrainingArguments\n"
    "\n"
    "if True:\n"
    "\targs = TrainingArguments('out', deepspeed={{'zero_optimization': {{'stage': 3}}}})\n"
    "\tmodel = AutoModelForCausalLM.from_pretrained('gpt2',   device_map = 'auto' )  # keep me\n"
    "\tTrainer(model=model, args=args).train()\n"
)


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
@pytest.mark.parametrize(
    ("cookie", "encoding", "bom"), [("utf-8", "utf-8", False), ("utf-8", "utf-8", True), ("latin-1", "latin-1", False)]
)
def test_only_the_value_changes(tmp_path: Path, newline: str, cookie: str, encoding: str, bom: bool) -> None:
    text = TEMPLATE.format(cookie=cookie).replace("\u2014", "-" if encoding == "latin-1" else "\u2014")
    raw = (b"\xef\xbb\xbf" if bom else b"") + text.replace("\n", newline).encode(encoding)
    path = tmp_path / "train.py"
    path.write_bytes(raw)
    result = lint_file(path, fix=True)
    assert result.error is None and not result.warnings
    assert path.read_bytes() == raw.replace(b"device_map = 'auto' )", b"device_map = None )")


def test_clean_file_is_not_rewritten(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_text("import deepspeed\nmodel = AutoModelForCausalLM.from_pretrained('gpt2', device_map=None)\n")
    before = path.stat()
    lint_file(path, fix=True)
    after = path.stat()
    assert (before.st_ino, before.st_mtime_ns) == (after.st_ino, after.st_mtime_ns)


def test_fix_is_refused_when_the_file_changed_on_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from placement_lint.fixes import write

    path = tmp_path / "train.py"
    source = "import torch.distributed as dist\ndist.init_process_group('nccl')\nm = X.from_pretrained('g', device_map='auto')\nTrainer(model=m)\n"
    path.write_text(source)
    real = write.write_atomically

    def edit_then_write(target: Path, data: bytes, expected: bytes) -> None:
        target.write_text(source + "# someone else's edit\n")
        real(target, data, expected)

    monkeypatch.setattr("placement_lint.fixes.write.write_atomically", edit_then_write)
    result = lint_file(path, fix=True)
    assert any("changed while it was being checked" in w for w in result.warnings)
    assert path.read_text().endswith("# someone else's edit\n")


def test_symlinked_file_is_fixed_through_the_link(tmp_path: Path) -> None:
    real = tmp_path / "real.py"
    real.write_text(
        "import torch.distributed as dist\ndist.init_process_group('nccl')\nm = X.from_pretrained('g', device_map='auto')\nTrainer(model=m)\n"
    )
    link = tmp_path / "link.py"
    os.symlink(real, link)
    lint_file(link, fix=True)
    assert link.is_symlink() and "device_map=None" in real.read_text()


def test_a_fix_that_would_break_the_file_is_reverted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from placement_lint.edits import Edit, Fix

    path = tmp_path / "train.py"
    source = "import torch.distributed as dist\ndist.init_process_group('nccl')\nm = X.from_pretrained('g', device_map='auto')\nTrainer(model=m)\n"
    path.write_text(source)
    original = Fix.__new__

    def broken(cls, applicability, message, edits):  # type: ignore[no-untyped-def]
        return original(cls, applicability, message, tuple(Edit(e.start, e.end, "None(((") for e in edits))

    monkeypatch.setattr(Fix, "__new__", staticmethod(broken))
    result = lint_file(path, fix=True)
    assert any("would not parse" in w for w in result.warnings)
    assert path.read_text() == source


def test_a_setup_guard_around_the_value_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_text(
        "import torch.distributed as dist\ndist.init_process_group('nccl')\n"
        "m = X.from_pretrained('g', device_map=None if is_deepspeed_zero3_enabled() else 'cuda:0')\nTrainer(model=m)\n"
    )
    lint_file(path, fix=True, unsafe_fixes=True)
    assert 'device_map=None if is_deepspeed_zero3_enabled() else {"": PartialState().local_process_index})' in path.read_text()


def test_a_kwargs_dict_shared_by_two_loads_gets_an_unsafe_fix(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_text(
        "import torch.distributed as dist\ndist.init_process_group('nccl')\nkw = dict(device_map='auto')\n"
        "m = X.from_pretrained('m', **kw)\nj = X.from_pretrained('j', **kw)\nTrainer(model=m)\nj.generate()\n"
    )
    [finding] = lint_file(path).findings
    assert finding.violation.fix is not None and finding.violation.fix.applicability.value == "unsafe"


def test_a_dataclass_default_never_gets_a_safe_fix(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_text(
        "from dataclasses import dataclass, field\nimport torch.distributed as dist\n\n\n@dataclass\nclass Args:\n"
        "    device_map: str = field(default='auto')\n\n\ndist.init_process_group('nccl')\nargs = Args()\n"
        "m = X.from_pretrained('m', device_map=args.device_map)\nTrainer(model=m)\n"
    )
    [finding] = lint_file(path).findings
    assert finding.row == 7 and finding.violation.fix.applicability.value == "unsafe"


def test_the_lossless_gate_refuses_bytes_libcst_cannot_parse_back_unless_the_original_is_beyond_it() -> None:
    from placement_lint.fixes.write import NotLossless, verify_lossless

    original = b"m = load('g', device_map='auto')\n"
    verify_lossless(original, b"m = load('g', device_map=None)\n")
    with pytest.raises(NotLossless):
        verify_lossless(original, b"m = load('g', device_map=None(((\n")
    # Lone CR line endings: LibCST cannot reproduce the original, so ast's check is the only gate.
    verify_lossless(b"a = 1\rm = load('g', device_map='auto')\r", b"a = 1\rm = load('g', device_map=None(((\r")
