"""The rules. Each `dplNNN_*.py` module here holds one rule class; they are found by their file name,
so adding a rule is adding its module (plus its catalogue page and fixtures)."""

from __future__ import annotations

import importlib
import pkgutil
import re
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # importing the rules imports the analyses: only a run that checks a file does
    from placement_lint.rules.base import Rule

_RULE_MODULE = re.compile(r"^dpl\d{3}_\w+$")


@cache
def _rule_modules() -> tuple[str, ...]:
    return tuple(sorted(info.name for info in pkgutil.iter_modules(__path__) if _RULE_MODULE.match(info.name)))


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
