"""Discovery: which files a walk finds, with .gitignore files at every level and excludes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from placement_lint.discover import discover, real_path, repository_root
from placement_lint.settings import Settings

from helpers import CODES


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / ".git").mkdir()
    (tmp_path / ".gitignore").write_text("*.tmp.py\n/top_only.py\nbuild_*/\n")
    for name in ["train.py", "top_only.py", "a.tmp.py", "sub/train.py", "sub/top_only.py", "sub/b.tmp.py",
                 "sub/local.py", "sub/deeper/local.py", "sub/deeper/keep.py", "other/local.py",
                 "build_x/gen.py", "sub/build_y/gen.py", ".venv/lib.py"]:  # fmt: skip
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x = 1\n")
    (tmp_path / "sub" / ".gitignore").write_text("local.py\n!deeper/keep.py\n")
    return tmp_path


def found(repo: Path, *given: str, **settings: object) -> list[str]:
    paths = [repo / g for g in given] if given else [repo]
    result = discover(paths, Settings(root=repo, codes=CODES, **settings))  # type: ignore[arg-type]
    return [p.relative_to(repo).as_posix() for p in result.files]


def test_every_gitignore_on_the_way_down_applies(repo: Path) -> None:
    assert found(repo) == ["other/local.py", "sub/deeper/keep.py", "sub/top_only.py", "sub/train.py", "train.py"]


def test_a_walk_below_the_root_keeps_the_gitignore_files_above_it(repo: Path) -> None:
    assert found(repo, "sub") == ["sub/deeper/keep.py", "sub/top_only.py", "sub/train.py"]
    assert found(repo, "sub/deeper") == ["sub/deeper/keep.py"]


def test_respect_gitignore_off_finds_everything_but_the_default_excludes(repo: Path) -> None:
    assert ".venv/lib.py" not in found(repo, respect_gitignore=False)
    assert len(found(repo, respect_gitignore=False)) == 12


def test_glob_excludes_match_from_the_project_root(repo: Path) -> None:
    assert found(repo, extend_exclude=("sub/deeper/",)) == ["other/local.py", "sub/top_only.py", "sub/train.py", "train.py"]


def test_a_named_file_is_found_even_when_ignored(repo: Path) -> None:
    assert found(repo, "a.tmp.py") == ["a.tmp.py"]


def test_files_come_with_the_status_the_walk_saw(repo: Path) -> None:
    result = discover([repo], Settings(root=repo, codes=CODES))
    assert set(result.statuses) == set(result.names)
    assert all(result.statuses[name].st_size == os.stat(name).st_size for name in result.names)
    assert result.files == [Path(name) for name in result.names]


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symlinks")
def test_the_walk_gives_each_file_its_resolved_path(tmp_path: Path) -> None:
    """Launch evidence is keyed by resolved paths: the walk resolves them without a system call per file."""
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "train.py").write_text("x = 1\n")
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "linked.py").symlink_to(tmp_path / "real" / "train.py")
    (tmp_path / "project" / "own.py").write_text("x = 2\n")
    (tmp_path / "here").symlink_to(tmp_path / "project", target_is_directory=True)
    result = discover([tmp_path / "here"], Settings(root=tmp_path, codes=CODES))
    assert sorted(os.path.basename(name) for name in result.names) == ["linked.py", "own.py"]
    assert {name: result.resolved(name) for name in result.names} == {name: str(Path(name).resolve()) for name in result.names}
    assert result.resolved(str(tmp_path / "here" / "own.py")) == str(tmp_path / "project" / "own.py")


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symlinks")
def test_real_path_resolves_linked_folders_and_files(tmp_path: Path) -> None:
    (tmp_path / "real" / "inner").mkdir(parents=True)
    (tmp_path / "real" / "inner" / "train.py").write_text("x = 1\n")
    (tmp_path / "link").symlink_to(tmp_path / "real", target_is_directory=True)
    (tmp_path / "file_link.py").symlink_to(tmp_path / "real" / "inner" / "train.py")
    expected = (tmp_path / "real" / "inner" / "train.py").resolve()
    assert real_path(tmp_path / "link" / "inner" / "train.py") == expected
    assert real_path(tmp_path / "file_link.py") == expected


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symlinks")
def test_a_linked_folder_belongs_to_the_repository_of_its_target(tmp_path: Path) -> None:
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    (tmp_path / "repo" / "sub").mkdir()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "link").symlink_to(tmp_path / "repo" / "sub", target_is_directory=True)
    assert repository_root(tmp_path / "elsewhere" / "link") == (tmp_path / "repo").resolve()


def test_gitignore_files_above_the_project_root_stop_at_it(tmp_path: Path) -> None:
    """A walk that starts above the project (its pyproject.toml) applies the outer .gitignore outside
    the project only, as discovery did before it walked with strings."""
    (tmp_path / ".git").mkdir()
    (tmp_path / ".gitignore").write_text("gen_*.py\n")
    project = tmp_path / "project"
    project.mkdir()
    for path in (tmp_path / "gen_a.py", tmp_path / "keep.py", project / "gen_b.py", project / "train.py"):
        path.write_text("x = 1\n")
    result = discover([tmp_path], Settings(root=project, codes=CODES))
    assert [p.relative_to(tmp_path).as_posix() for p in result.files] == ["keep.py", "project/gen_b.py", "project/train.py"]


def _listing_reversed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Folders list in the reverse of sorted order: the walk must not depend on the order they list in."""
    real_scandir = os.scandir

    class Reversed:
        def __init__(self, folder: str) -> None:
            with real_scandir(folder) as listing:
                self.entries = sorted(listing, key=lambda entry: entry.name, reverse=True)

        def __enter__(self) -> list[os.DirEntry[str]]:
            return self.entries

        def __exit__(self, *_: object) -> None:
            return None

    monkeypatch.setattr(os, "scandir", Reversed)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.skipif(not hasattr(os, "link"), reason="needs hard links")
def test_a_file_reached_by_several_paths_is_checked_under_the_first_in_sorted_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reverse: bool
) -> None:
    for folder in ("a", "b", "b/c"):
        (tmp_path / folder).mkdir()
    (tmp_path / "b" / "c" / "x.py").write_text("x = 1\n")
    os.link(tmp_path / "b" / "c" / "x.py", tmp_path / "b" / "y.py")
    os.link(tmp_path / "b" / "c" / "x.py", tmp_path / "z.py")
    os.link(tmp_path / "b" / "c" / "x.py", tmp_path / "a" / "w.py")
    (tmp_path / "b" / "own.py").write_text("x = 2\n")
    if reverse:
        _listing_reversed(monkeypatch)
    result = discover([tmp_path], Settings(root=tmp_path, codes=CODES))
    assert [Path(name).relative_to(tmp_path).as_posix() for name in result.names] == ["a/w.py", "b/own.py"]
    assert set(result.statuses) == set(result.real_names) == set(result.names)
    assert result.folders == {str(tmp_path / "a"), str(tmp_path / "b")}


@pytest.mark.skipif(not hasattr(os, "link"), reason="needs hard links")
def test_a_file_named_first_on_the_command_line_keeps_its_name(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.py").write_text("x = 1\n")
    os.link(tmp_path / "a" / "x.py", tmp_path / "z.py")
    result = discover([tmp_path / "z.py", tmp_path], Settings(root=tmp_path, codes=CODES))
    assert result.names == [str(tmp_path / "z.py")]


def test_unreadable_folders_are_named_in_sorted_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for folder in ("a", "b", "c"):
        (tmp_path / folder).mkdir()
    real_scandir = os.scandir

    def scandir(folder: str) -> object:
        if os.path.basename(folder) in ("a", "c"):
            raise PermissionError(folder)
        return real_scandir(folder)

    monkeypatch.setattr(os, "scandir", scandir)
    result = discover([tmp_path], Settings(root=tmp_path, codes=CODES))
    assert result.unreadable == [tmp_path / "a", tmp_path / "c"]


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symlinks")
def test_the_walk_finds_each_folders_repository_root_as_repository_root_does(tmp_path: Path) -> None:
    """The walk works the roots out from the listings it holds; asked folder by folder, the answer is the same."""
    from placement_lint import discover as discovery

    top = tmp_path / "top"
    for folder in ("archive/examples/chat", "archive/nested/.git", "archive/nested/deep", "plain/inner", "linked_target/x"):
        (top / folder).mkdir(parents=True)
    (top / "archive" / "requirements-dev.txt").write_text("numpy\n")
    (top / "archive" / "examples" / "chat" / "pyproject.toml").write_text("")
    (top / "plain" / "setup.py").mkdir()  # a folder named like a marker is no marker
    (top / "linked_target" / "environment.yml").write_text("name: x\n")
    (top / "plain" / "inner" / "link").symlink_to(top / "linked_target" / "x", target_is_directory=True)
    for folder in ("archive/examples/chat", "archive/nested/deep", "plain/inner", "linked_target/x", ""):
        (top / folder / "train.py").write_text("x = 1\n")
    linked = top / "plain" / "inner" / "link"
    result = discover([top / "archive", top, linked], Settings(root=top, codes=CODES))
    assert str(linked) in result.roots and len(result.roots) > 8
    for cached in (discovery._shared_folders, discovery._nearest, discovery._outermost_project, discovery._names):
        cached.cache_clear()
    for folder, (real, root) in result.roots.items():
        expected = repository_root(Path(folder))
        assert root == (None if expected is None else str(expected)), folder
        assert real == str(Path(folder).resolve()), folder
    assert result.roots[str(top / "archive" / "nested" / "deep")][1] == str((top / "archive" / "nested").resolve())
    assert result.roots[str(top / "archive" / "examples" / "chat")][1] == str((top / "archive").resolve())
