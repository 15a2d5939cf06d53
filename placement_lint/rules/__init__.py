"""The rules. Each `dplNNN_*.py` module here holds one rule class; they are found by their file name,
so adding a rule is adding its module (plus its catalogue page and fixtures).

The pre-check imports every rule for its tokens, also in runs that parse nothing: a rule module
imports the analyses inside the checks that use them (their types for annotations only), not at
its top (tests/test_precheck.py holds this)."""

from __future__ import annotations

import importlib
import importlib.machinery
import os
import re
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # importing the rules imports the analyses: only a run that checks a file does
    from placement_lint.rules.base import Rule

_RULE_MODULE = re.compile(r"^dpl\d{3}_\w+$")


@cache
def _rule_modules() -> tuple[str, ...]:
    """The rule modules' names, from a listing of this folder: every run asks for the codes, and
    importing pkgutil to list it cost more than the listing."""
    try:
        files = os.listdir(__path__[0])
    except OSError:  # not a folder (a zip archive): ask the import system
        import pkgutil

        names = {info.name for info in pkgutil.iter_modules(__path__)}
    else:
        suffixes = tuple(importlib.machinery.all_suffixes())
        names = {name[: -len(suffix)] for name in files for suffix in suffixes if name.endswith(suffix)}
    return tuple(sorted(name for name in names if _RULE_MODULE.match(name)))


def rule_codes() -> tuple[str, ...]:
    """Every rule's code, read off its module's name (`dpl001_...` is DPL001), without importing it."""
    return tuple(name[:6].upper() for name in _rule_modules())


@cache
def all_rules() -> tuple[type[Rule], ...]:
    from placement_lint.rules.base import Rule

    found: list[type[Rule]] = []
    for name in _rule_modules():
        module = importlib.import_module(f"{__name__}.{name}")
        found += [
            value
            for value in vars(module).values()
            if isinstance(value, type) and issubclass(value, Rule) and value is not Rule and value.__module__ == module.__name__
        ]
    return tuple(sorted(found, key=lambda rule: rule.code))


def rule_by_code(code: str) -> type[Rule] | None:
    return next((rule for rule in all_rules() if rule.code == code.upper()), None)
