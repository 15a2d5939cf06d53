"""The text of in-file evidence: what the pre-check looks for before a file is parsed.

Apart from the detectors (in_file.py) so that the pre-check reads it without importing the analyses.
"""

from __future__ import annotations

import re

from placement_lint.patterns import LazyPattern


# The text of every kind of strong evidence `InFileEvidence` recognises (and the pragma). A file
# with none of it can only be distributed through its launchers or an override, so it is not
# parsed for in-file evidence. Keep this in step with the detectors in in_file.py: a test checks it.
class _AnyOf:
    """Patterns that each start with literal text. A pattern runs only where its literal occurs:
    `bytes in` finds (or rules out) a literal far faster than `re` scans for a pattern's prefix,
    and most files hold none of them (8x faster on transformers than searching every pattern).
    The patterns of one literal are searched as one (`fsdp(?:\\s*=[^=]|_config\\s*=[^=]|...)`): a file
    that holds the literal is scanned once for it, not once a pattern (143 of transformers' files
    mention fsdp: 11.5 ms for four scans each). Each is compiled when its literal is first found."""

    def __init__(self, *patterns: tuple[bytes, bytes]) -> None:
        grouped: dict[bytes, list[bytes]] = {}
        for literal, pattern in patterns:
            grouped.setdefault(literal, []).append(pattern)
        self.patterns = [(literal, LazyPattern(_one_of(literal, group))) for literal, group in grouped.items()]

    def literals(self) -> list[bytes]:
        return [literal for literal, _ in self.patterns]

    def search(self, data: bytes) -> re.Match[bytes] | None:
        for literal, pattern in self.patterns:
            if literal in data:
                match = pattern.search(data)
                if match:
                    return match
        return None


def _one_of(literal: bytes, patterns: list[bytes]) -> bytes:
    """One pattern matching where any of `patterns` does, their common literal start written once so
    that `re` still looks for it first."""
    if len(patterns) == 1:
        return patterns[0]
    if re.escape(literal) == literal and all(pattern.startswith(literal) for pattern in patterns):
        return literal + b"(?:" + b"|".join(pattern[len(literal) :] for pattern in patterns) + b")"
    return b"|".join(b"(?:" + pattern + b")" for pattern in patterns)


# A callee the detectors qualify through the imports may be written under another name: the text
# then holds its import (`DistributedDataParallel as Wrap`, `import deepspeed as ds`, `from deepspeed
# import initialize`), not its call. A mere mention (a docstring's `FullyShardedDataParallel`) is none.
_GAP = rb"(?:\s|\\\r?\n|#[^\n]*)*"  # spaces, line breaks, a line continuation, comments
_CALLED = _GAP + rb"(?:\(|as\s)"
# What may stand between `import` and an imported name: names, spaces, commas, a parenthesis, a line
# continuation, and comments. A comment is taken whole, up to its line's end, or as the last thing
# before the name: written as `(?:[\w\s,(\\]|#[^\n]*)*?` a comment could end at any of its characters,
# and a file whose `import deepspeed` is followed by lines of names and comments (DeepSpeedExamples'
# test-stable-diffusion.py) backtracked for longer than any run (the same strings match either way).
_IMPORTED = rb"(?:[\w\s,(\\]|#[^\n]*\n)*?(?:#[^\n]*?)?"
IN_FILE_EVIDENCE = _AnyOf(
    (b"deepspeed", rb"deepspeed\s*=[^=]"),
    (b"deepspeed", rb"deepspeed[\"']\s*:"),
    (b"deepspeed", rb"deepspeed\.initialize"),
    (b"deepspeed", rb"deepspeed[\w.]*" + _GAP + rb"as\s"),
    (b"deepspeed", rb"deepspeed[\w.]*" + _GAP + rb"import" + _IMPORTED + rb"\b(?:initialize|init_distributed|zero|Init)\b"),
    (b"fsdp", rb"fsdp\s*=[^=]"),
    (b"fsdp", rb"fsdp_config\s*=[^=]"),
    (b"fsdp", rb"fsdp[\"']\s*:"),
    (b"fsdp", rb"fsdp_config[\"']\s*:"),
    (b"_plugin", rb"_plugins?\s*=[^=]"),
    (b"HfDeepSpeedConfig", rb"HfDeepSpeedConfig" + _CALLED),
    (b"DeepSpeedPlugin", rb"DeepSpeedPlugin" + _CALLED),
    (b"FullyShardedDataParallel", rb"FullyShardedDataParallel(?:Plugin)?" + _CALLED),
    (b"init_process_group", rb"init_process_group" + _CALLED),
    (b"init_distributed", rb"init_distributed" + _CALLED),
    (b"DistributedDataParallel", rb"DistributedDataParallel" + _CALLED),
    (b"fully_shard", rb"fully_shard" + _CALLED),
    (b"FSDP", rb"FSDP" + _CALLED),
    (b"DDP", rb"DDP" + _CALLED),
    (b"spawn", rb"spawn" + _CALLED),
    (b"notebook_launcher", rb"notebook_launcher" + _CALLED),
    (b"TorchTrainer", rb"TorchTrainer" + _CALLED),
    (b"zero.Init", rb"zero\.Init" + _GAP + rb"\("),
    (b"placement-lint:", rb"placement-lint:"),
)
