"""What a repository pins (context/pins.py): each file format, specifiers that do not parse, and the
three-way answer rules ask ("all below the boundary", "none below", "cannot tell")."""

from __future__ import annotations

from pathlib import Path

import pytest

from placement_lint.context.pins import Pin, below, read_pins


def pins_of(tmp_path: Path, files: dict[str, str]) -> dict[str, list[tuple[str, str]]]:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    found: dict[str, list[tuple[str, str]]] = {}
    for pin in read_pins(tmp_path).pins:
        found.setdefault(pin.package, []).append((pin.specifier, pin.where))
    return found


def test_requirements_files_with_extras_markers_comments_and_options(tmp_path: Path) -> None:
    found = pins_of(
        tmp_path,
        {
            "requirements.txt": "-r base.txt\n--extra-index-url https://x\ntorch\n"
            "transformers[torch]==4.44.2 ; python_version >= '3.9'  # tested\n"
            "peft @ git+https://github.com/huggingface/peft\n",
            "requirements-train.txt": "accelerate>=0.27,<1.0\nDeepSpeed~=0.14.0\n",
            "requirements/sglang.txt": "trl>=0.12\n",  # one integration's extras: not read
        },
    )
    assert found == {
        "transformers": [("==4.44.2", "requirements.txt:4")],
        "accelerate": [("<1.0,>=0.27", "requirements-train.txt:1")],
        "deepspeed": [("~=0.14.0", "requirements-train.txt:2")],
    }


def test_pyproject_pep621_and_poetry(tmp_path: Path) -> None:
    found = pins_of(
        tmp_path,
        {
            "pyproject.toml": '[project]\nname = "x"\ndependencies = ["transformers>=5.0"]\n'
            '[project.optional-dependencies]\ntrain = ["trl==0.27.0"]\n'
            '[tool.poetry.dependencies]\naccelerate = "^0.34.2"\npeft = { version = "~0.13", extras = ["x"] }\n'
            'deepspeed = "0.15.4"\n[tool.poetry.group.dev.dependencies]\ntransformers = "^4.36.0b1"\n',
        },
    )
    assert found["transformers"] == [(">=5.0", "pyproject.toml [project]")]
    assert found["trl"] == [("==0.27.0", "pyproject.toml [project.optional-dependencies] train")]
    assert found["accelerate"] == [("<0.35,>=0.34.2", "pyproject.toml [tool.poetry]")]
    assert found["peft"] == [("<0.14,>=0.13", "pyproject.toml [tool.poetry]")]
    assert found["deepspeed"] == [("==0.15.4", "pyproject.toml [tool.poetry]")]


def test_setup_py_literal_and_named_list(tmp_path: Path) -> None:
    found = pins_of(
        tmp_path,
        {
            "setup.py": 'DEPS = ["accelerate==0.21.0"]\nsetup(name="x", install_requires=DEPS,\n'
            '      extras_require={"ds": ["deepspeed>=0.12"]})\n'
            "setup(install_requires=[f'transformers=={VERSION}'])\n",
        },
    )
    assert found == {"accelerate": [("==0.21.0", "setup.py:1")], "deepspeed": [(">=0.12", "setup.py:3")]}


def test_conda_environment_with_pip_section(tmp_path: Path) -> None:
    found = pins_of(
        tmp_path,
        {
            "environment.yml": "dependencies:\n  - python=3.11\n  - transformers=4.36\n  - accelerate==0.25.0\n"
            "  - pip:\n    - trl==0.7.4\n",
        },
    )
    assert found["transformers"] == [("==4.36.*", "environment.yml (conda)")]
    assert found["accelerate"] == [("==0.25.0", "environment.yml (conda)")]
    assert found["trl"] == [("==0.7.4", "environment.yml (pip)")]


def test_unparseable_specifiers_and_files_are_notes_not_crashes(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("transformers>=4.x\naccelerate==1.2.0\n")
    (tmp_path / "pyproject.toml").write_text("[project\nnot toml")
    (tmp_path / "setup.py").write_text("setup(install_requires=[\n")
    (tmp_path / "environment.yml").write_text("dependencies:\n  - pip:\n    - peft==0.13.2\n    - trl==latest\n")
    found = read_pins(tmp_path)
    assert sorted(p.package for p in found.pins) == ["accelerate", "peft"]
    assert any("environment.yml (pip): trl '==latest'" in note for note in found.notes)
    assert any("requirements.txt:1: transformers '>=4.x'" in note for note in found.notes)
    assert any(note.startswith("pyproject.toml: not read") for note in found.notes)
    assert any(note.startswith("setup.py: not read") for note in found.notes)


@pytest.mark.parametrize(
    ("specifier", "expected"),
    [
        ("==4.44.2", True),
        ("<5", True),
        ("<=4.57.3", True),
        (">=4.36,<4.40", True),
        ("~=4.36", True),  # >=4.36, <5
        ("==4.*", True),
        (">=5.0", False),
        ("==5.0.1", False),
        ("~=5.1", False),
        (">4.0", None),
        ("<=5.0", None),
        ("", None),
        ("!=4.44.0", None),
    ],
)
def test_below_a_boundary(specifier: str, expected: bool | None) -> None:
    pin = Pin("transformers", specifier, "requirements.txt:1")
    verdict = below((pin,), "transformers", "5.0")
    assert (verdict if verdict in (False, None) else True) == expected
    if expected:
        assert verdict == pin


def test_pins_that_disagree_or_name_another_package_say_nothing() -> None:
    old = Pin("accelerate", "==0.27.2", "requirements.txt:2")
    new = Pin("accelerate", ">=1.0", "pyproject.toml [project]")
    assert below((old, new), "accelerate", "1.0") is None
    assert below((old,), "transformers", "5.0") is None


def test_binary_huge_and_outside_files_are_not_read(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    outside = tmp_path / "elsewhere.txt"
    outside.write_text("transformers==4.0.0\n")
    (root / "requirements.txt").symlink_to(outside)
    (root / "requirements-dev.txt").write_bytes(b"\x00\xff\xfe accelerate==\x00\n" * 10)
    (root / "requirements-big.txt").write_text("trl==0.20.0\n" + "#" * 300_000)
    found = read_pins(root)
    assert found.pins == ()
