"""The wording the rules share: a finding's headline and notes, and the consequences they name."""

from __future__ import annotations

from typing import TYPE_CHECKING

from placement_lint.context.evidence import ZERO3_INIT_OFF, Context
from placement_lint.distributed import Mode, Setup
from placement_lint.edits import Fix

if TYPE_CHECKING:  # made only for findings: a clean run never creates their classes
    from placement_lint.rules.spans import Note

HEADLINE_LIMIT = 160


class Message:
    """What a rule says of a finding: a short headline (what is wrong, under which setup), then one
    fact per note. The path (launch, config, imports, consumer) is added from the evidence. A plain
    class: every rule module imports it, and a named tuple's class costs a clean run its creation."""

    __slots__ = ("headline", "error", "help", "facts")

    def __init__(
        self,
        headline: str,
        error: str | None = None,  # what the library raises at run time
        help: str | None = None,  # what to do; the fix's safety is added when there is a fix
        facts: tuple[tuple[str, str], ...] = (),  # (label, text) more facts: why TRL keeps "auto", what happens
    ) -> None:
        self.headline = headline
        self.error = error
        self.help = help
        self.facts = facts

    @classmethod
    def of(cls, text: str) -> Message:
        """A message written as one string: its headline, and the whole text as a note when it is too long
        to be one (nothing is lost; the rule should say it as a Message)."""
        if len(text) <= HEADLINE_LIMIT:
            return cls(text)
        return cls(text, facts=(("message", text),))

    def notes(self, fix: Fix | None) -> tuple[Note, ...]:
        from placement_lint.rules.spans import Note

        said = [Note(*fact) for fact in self.facts]
        if self.error:
            said.append(Note("error", self.error))
        if self.help:
            safety = "" if fix is None else " (safe fix)" if fix.safe else " (unsafe fix)"
            said.append(Note("help", f"{self.help}{safety}"))
        return tuple(said)


def headline(text: str) -> str:
    """At most HEADLINE_LIMIT characters: a long value written in the code is what gets cut."""
    return text if len(text) <= HEADLINE_LIMIT else text[: HEADLINE_LIMIT - 3] + "..."


def under(setup: Setup) -> str:
    """`under DeepSpeed ZeRO-3`, for a headline."""
    return f"under {setup.describe()}"


PER_PROCESS_MAP = '{"": PartialState().local_process_index}'
# What the libraries raise, quoted the same way by every rule that predicts it (domain.md §1.2).
ZERO3_LOAD_ERROR = 'transformers raises "DeepSpeed Zero-3 is not compatible with passing a `device_map`" at load time'
SPREAD_PREPARE_ERROR = (
    "accelerate raises \"You can't train a model that has been loaded with `device_map='auto'` in any distributed mode\""
)


DDP_WRAP_ERROR = (
    'PyTorch raises "DistributedDataParallel device_ids and output_device arguments only work with '
    'single-device/multiple-device GPU modules or CPU modules"'
)


def spread_prepare_consequence(context: Context, auto: bool = False) -> str:
    """What a model spread over several GPUs meets at `prepare`: accelerate's check since 0.22.0
    (accelerator.py); a repository pinned below it reaches DDP's own error under DDP instead. And
    `"auto"` (`auto`) on transformers 4.50-4.53 under a launcher's WORLD_SIZE becomes tensor
    parallelism instead of a spread (domain.md §1.3 M4; removed in 4.54.0, PR #38942)."""
    if context.setup.mode is Mode.DDP and auto and context.pinned_below("transformers", "4.50") is False:
        pin = context.pinned_below("transformers", "4.54")
        if pin:
            return (
                f'with {pin}, from_pretrained turns device_map="auto" into tensor parallelism when WORLD_SIZE is set '
                "(transformers 4.50-4.53), and DDP then fails on its DTensor parameters (accelerate >= 1.9: "
                '"Your model contains `DTensor` parameters, which is incompatible with DDP")'
            )
    if context.setup.mode is Mode.DDP:
        pin = context.pinned_below("accelerate", "0.22")
        if pin:
            return f"accelerate checks for this only since 0.22, so with {pin} {DDP_WRAP_ERROR} when it wraps the model"
    return SPREAD_PREPARE_ERROR


def zero3_load_consequence(context: Context, instead: str) -> str:
    """What a device_map under ZeRO-3 leads to at load time. Usually ZERO3_LOAD_ERROR; but when the
    run's accelerate config turns `zero3_init_flag` off and the repository pins accelerate below 1.0,
    accelerate creates no HfDeepSpeedConfig (before 1.0, `DeepSpeedPlugin.set_deepspeed_weakref` did
    only with the flag on; PR #3097 made it unconditional), so the load does not fail: `instead` says
    what happens then."""
    if not any(ZERO3_INIT_OFF in e.text for e in context.deciding):
        return ZERO3_LOAD_ERROR
    pin = context.pinned_below("accelerate", "1.0")
    if pin is None:
        return (
            f"{ZERO3_LOAD_ERROR} on accelerate >= 1.0 (before 1.0, with {ZERO3_INIT_OFF}, the load does not fail and {instead})"
        )
    if pin is False:
        return ZERO3_LOAD_ERROR
    return f"with {pin} and {ZERO3_INIT_OFF} transformers does not see ZeRO-3 when the model loads, so the load does not fail and {instead}"
