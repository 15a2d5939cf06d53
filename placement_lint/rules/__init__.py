"""The rules. Each `dplNNN_*.py` module here holds one rule class; they are found by their file name,
so adding a rule is adding its module (plus its catalogue page and fixtures)."""

from __future__ import annotations

import importlib
import pkgutil
import re
from functools import cache

from placement_lint.rules.base import Rule

_RULE_MODULE = re.compile(r"^dpl\d{3}_\w+$")


@cache
def all_rules() -> tuple[type[Rule], ...]:
    found: list[type[Rule]] = []
    for info in pkgutil.iter_modules(__path__):
        if _RULE_MODULE.match(info.name):
            module = importlib.import_module(f"{__name__}.{info.name}")
            found += [
                value
                for value in vars(module).values()
                if isinstance(value, type)
                and issubclass(value, Rule)
                and value is not Rule
                and value.__module__ == module.__name__
            ]
    return tuple(sorted(found, key=lambda rule: rule.code))


def rule_by_code(code: str) -> type[Rule] | None:
    return next((rule for rule in all_rules() if rule.code == code.upper()), None)
