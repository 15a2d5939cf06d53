"""The text pre-check: could any enabled rule fire in this file? One scan of its bytes answers
(scan.py), with what the launches say of it; a file it lets through is parsed and checked
(checker.py). The engine imports the checker only when some file passes."""

from __future__ import annotations

import re
from pathlib import Path

from placement_lint.context.evidence_text import IN_FILE_EVIDENCE
from placement_lint.context.launches import NOT_LAUNCHED, Launched, Launches
from placement_lint.discover import gitignore_spec, real_path
from placement_lint.patterns import LazyPattern
from placement_lint.results import FileResult, RunOptions, Screened, display_path
from placement_lint.rules import all_rules
from placement_lint.rules.noqa import NOQA_TOKENS, unknown_code
from placement_lint.scan import Found, Present, TokenScanner, in_code
from placement_lint.settings import Settings
from placement_lint.source import MAX_NOTEBOOK_BYTES, SourceError, content_hash, is_notebook, read_bytes

_IN_FILE_LITERALS = IN_FILE_EVIDENCE.literals()
# A noqa comment's DPL codes after it on its line.
_NOQA_TO_LINE_END = LazyPattern(rb"noqa[^\r\n]*", re.IGNORECASE)
_DPL_CODE = LazyPattern(rb"DPL[0-9]+", re.IGNORECASE)
# A Python file this large is generated data, not a training script: it is not parsed (a 10 MB
# one-line list takes CPython's parser seconds and millions of nodes).
MAX_PYTHON_BYTES = 4 * 1024 * 1024
# What PreCheck.worth_parsing_when answers: a rule could fire in the file if no launch reaches it, if one does.
WORTH_ALONE, WORTH_LAUNCHED = 1, 2


def _line_end(raw: bytes, start: int) -> int:
    end = raw.find(b"\n", start)
    return len(raw) if end < 0 else end


class PreCheck:
    """The enabled rules' token checks, the scan that answers them and the launches; picklable, so
    worker processes can use it."""

    def __init__(self, settings: Settings, options: RunOptions, cwd: Path, launches: Launches | None = None) -> None:
        self.settings = settings
        self._root = settings.root.resolve()  # per-file patterns match paths relative to it
        self.options = options
        self.cwd = cwd
        # Evidence from the repository's launch scripts, per resolved file path, what of the file runs
        # under it ("__main__": its module-level code; other names: what importers use of it), and
        # what importers do with what its functions return.
        self.launches = launches or Launches()
        enabled = set(settings.enabled_codes())
        self.rules = [rule() for rule in all_rules() if rule.code in enabled]
        self.known_codes = frozenset(rule.code for rule in all_rules())  # a noqa naming another is a mistake
        self.anchors = tuple({token for rule in self.rules for token in rule.anchor_tokens()})
        # What a rule that reads code needs in it (a noqa comment is DPL100's, in a comment by design).
        self._code_anchors = tuple(
            {token for rule in self.rules if not rule.checks_suppressions for token in rule.anchor_tokens()}
        )
        self._scanner: TokenScanner | None = None  # built on first use, in the process that uses it
        # The rules the pre-check asks: with --ignore-noqa, DPL100 has no comments to judge.
        self._prechecked = [rule for rule in self.rules if not (rule.checks_suppressions and options.ignore_noqa)]
        self._per_file_context = [(gitignore_spec([pattern]), name) for pattern, name in settings.per_file_context]

    def display(self, path: Path) -> str:
        return display_path(path, self.cwd)

    def __getstate__(self) -> dict[str, object]:
        return {**self.__dict__, "_scanner": None}  # the compiled automaton does not pickle; each worker builds its own

    @property
    def scanner(self) -> TokenScanner:
        """One pass over a file answers every token question the pre-check asks (placement_lint/scan.py)."""
        if self._scanner is None:
            tokens = [*self.anchors, *_IN_FILE_LITERALS, *NOQA_TOKENS]
            for rule in self._prechecked:
                tokens += [*rule.triggers, *rule.pre_check_tokens]
            self._scanner = TokenScanner(sorted(set(tokens)))
        return self._scanner

    def worth_parsing(self, raw: bytes, path: Path | str) -> bool:
        """The text pre-check: could any enabled rule fire in this file?"""
        return bool(self.worth_parsing_when(raw, path, None))

    def worth_parsing_when(self, raw: bytes, path: Path | str, launched: tuple[bool, ...] | None = (False, True)) -> int:
        """The text pre-check, for whether launches reach the file or not: WORTH_ALONE is set if a rule
        could fire with no launch reaching it, WORTH_LAUNCHED if one could with one (both answer
        without the launch context, so a spare process can ask while it is built). `launched` None:
        for what the launches say of this file, asked only of a file that holds an anchor."""
        if is_notebook(path):
            from placement_lint.notebook import python_bytes

            try:
                raw = python_bytes(Path(path), raw)  # the code cells, not the JSON (which escapes quotes)
            except SourceError:
                return WORTH_ALONE | WORTH_LAUNCHED  # check() names the problem
        scanner = self.scanner
        found = scanner.found(raw)
        if not scanner.holds_any(raw, found, self.anchors):
            return self._mistaken_suppression(raw, found)
        text, raw = raw, Present(raw, found, scanner)  # the checks below ask the scan, not the bytes again
        if launched is None:
            launched = (bool(self._launch_evidence(path).evidence),)
        # Which rules could fire depends on the context, so the context is decided first: it is
        # rare, and the rules' token checks are then run only in the form that can matter.
        rules = self._prechecked
        verdict = 0
        for reached in launched:
            if reached or self._context_without_launch(raw, path):
                worth = any(rule.could_fire(raw) for rule in rules) or (
                    reached and any(rule.could_fire_when_launched(raw) for rule in rules if not rule.checks_suppressions)
                )
            else:
                worth = any(rule.could_fire_without_context(raw) for rule in rules)
            verdict |= (WORTH_LAUNCHED if reached else WORTH_ALONE) if worth else 0
        if verdict and not self._anchored_in_code(text, found):
            return 0  # its anchors are all in docstrings and comments (a suppression comment is read all the same)
        return verdict or self._mistaken_suppression(text, found)

    def _anchored_in_code(self, raw: bytes, found: Found | None) -> bool:
        """Does an anchor stand in the file's code, not only in its docstrings and comments (a library
        keeps usage examples there: diffusers' pipelines hold `from_pretrained(..., device_map=...)` in
        a string constant, 116 of the 271 files it let through, 5 MB)? Rules read code only. A file
        with a noqa comment is read all the same: DPL100 judges its comments."""
        if self.scanner.holds_any(raw, found, NOQA_TOKENS):
            return True
        return in_code(raw, self._code_anchors)

    def _mistaken_suppression(self, raw: bytes, found: Found | None) -> int:
        """A file no rule can speak about is still parsed if a noqa comment in it seems to name a DPL
        code no rule has: its warning is due whatever the file holds, as ruff's is."""
        scanner = self.scanner
        if self.options.ignore_noqa or not scanner.holds_any(raw, found, NOQA_TOKENS):
            return 0
        # The rest of each line from where the scan saw `noqa` (a case-insensitive pattern over the
        # whole file cost 80 ms over diffusers, whose files are full of `# noqa: F401`).
        starts = [start for index, start, _ in found.matches if scanner.tokens[index] in NOQA_TOKENS] if found else []
        if starts:
            comments = [raw[start : _line_end(raw, start)] for start in starts]
        else:  # no automaton, or an occurrence it did not report
            comments = [match.group() for match in _NOQA_TO_LINE_END.finditer(raw)]
        for comment in comments:
            if b"dpl" in comment.lower():
                for code in _DPL_CODE.finditer(comment):
                    if unknown_code(code.group().upper().decode(), self.known_codes):
                        return WORTH_ALONE | WORTH_LAUNCHED
        return 0

    def has_context_tokens(self, raw: bytes, path: Path | str) -> bool:
        """Could this file be distributed: an override, launch evidence, or a token of in-file evidence."""
        return bool(self._launch_evidence(path).evidence) or self._context_without_launch(raw, path)

    def _context_without_launch(self, raw: bytes, path: Path | str) -> bool:
        if self.options.context or self.settings.context or self._configured_context(path):
            return True
        return IN_FILE_EVIDENCE.search(raw) is not None

    def _launch_evidence(self, path: Path | str) -> Launched:
        if not self.launches:
            return NOT_LAUNCHED
        return self.launches.get(real_path(path))

    def pre_check(
        self, name: Path | str, raw: bytes | None, hashing: bool, digest: str | None = None, worth: bool = False
    ) -> Screened:
        """Read a file (unless `raw` holds it) and run the text pre-check; `hashing`: the cache needs
        its digest (`digest`, when the caller already hashed `raw`); `worth`: the caller knows the
        text pre-check lets it through. `name` may be the path as text: a Path is made only for a file
        with something to say (making one for each of transformers' 2,860 files cost 8 ms)."""
        try:
            if raw is None:
                raw = read_bytes(name)
        except OSError as exc:
            path = Path(name)
            return Screened(
                None, FileResult(self.display(path), error=f"cannot read: {exc.strerror or exc}", path=path), cacheable=False
            )
        if hashing and digest is None:
            digest = content_hash(raw)
        if not worth and not self.worth_parsing(raw, name):
            return Screened(digest)
        limit = MAX_NOTEBOOK_BYTES if is_notebook(name) else MAX_PYTHON_BYTES
        if len(raw) > limit:
            path = Path(name)
            warning = f"{self.display(path)}: skipped, larger than {limit // 1024 // 1024} MiB"
            return Screened(digest, FileResult(self.display(path), path=path, warnings=[warning]), cacheable=False)
        return Screened(digest, raw=raw)

    def _relative(self, path: Path | str) -> str:
        try:
            return real_path(path).relative_to(self._root).as_posix()
        except ValueError:
            return Path(path).name

    def _configured_context(self, path: Path | str) -> str | None:
        if not self._per_file_context:
            return None
        relative = self._relative(path)
        for spec, name in self._per_file_context:
            if spec.match_file(relative):
                return name
        return None
