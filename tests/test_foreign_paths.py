"""A config path written for another machine, taken as the repository file it names."""

from __future__ import annotations

from pathlib import Path

from placement_lint.context.configs import ConfigReader
from placement_lint.context.foreign_paths import ForeignPaths


def tree(root: Path, *files: str) -> Path:
    for name in files:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("{}")
    return root


def test_a_dockerfile_copy_says_where_the_repository_is_in_the_image(tmp_path: Path) -> None:
    tree(tmp_path, "configs/ds_zero3.json", "examples/configs/ds_zero3.json")
    (tmp_path / "docker").mkdir()
    (tmp_path / "docker" / "Dockerfile").write_text("FROM x\nWORKDIR /app\nCOPY examples/ ./ex\n")
    taken = ForeignPaths(tmp_path).find("/app/ex/configs/ds_zero3.json")
    assert taken is not None and taken.path == tmp_path / "examples/configs/ds_zero3.json"
    assert taken.rule == "docker/Dockerfile:3 COPY examples/ ./ex in WORKDIR /app"


def test_the_longest_tail_that_names_one_file_is_taken(tmp_path: Path) -> None:
    tree(tmp_path, "configs/ds_zero3.json", "examples/sft/configs/ds_zero3.json")
    taken = ForeignPaths(tmp_path).find("/scratch/me/proj/examples/sft/configs/ds_zero3.json")
    assert taken is not None and taken.path == tmp_path / "examples/sft/configs/ds_zero3.json"


def test_a_tail_two_files_end_with_is_ambiguous(tmp_path: Path) -> None:
    tree(tmp_path, "configs/ds_zero3.json", "examples/configs/ds_zero3.json")
    assert ForeignPaths(tmp_path).find("/scratch/me/proj/configs/ds_zero3.json") is None


def test_the_reader_says_which_rule_matched_and_leaves_relative_paths_alone(tmp_path: Path) -> None:
    tree(tmp_path, "configs/ds_zero3.json")
    reader = ConfigReader(tmp_path)
    assert reader.find("/workspace/configs/ds_zero3.json", tmp_path) == tmp_path / "configs/ds_zero3.json"
    assert reader.note("/workspace/configs/ds_zero3.json").endswith(
        "(the only file of the repository ending in configs/ds_zero3.json)"
    )
    assert reader.find("missing/ds_zero3.json", tmp_path) is None and reader.note("missing/ds_zero3.json") == ""


def test_a_tools_own_file_is_not_taken_for_the_repositorys(tmp_path: Path) -> None:
    tree(tmp_path, "default_config.yaml")
    assert ForeignPaths(tmp_path).find("/root/.cache/huggingface/accelerate/default_config.yaml") is None
