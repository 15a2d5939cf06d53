"""The value flow walks each scope once: its cost grows with the code, not with the questions.

Counted, not timed: the statements the flow visits while every load of a long generated `main()`
is asked about, at one length and at twice that. Before the one-pass flow, each question walked the
scope from its start, so the count grew with the square of the length (and each visit copied the
whole state, which is the third power the issue measured)."""

from __future__ import annotations

import ast

import pytest

from placement_lint.analysis import dataflow
from placement_lint.analysis.dataflow import ABSENT, Resolver
from placement_lint.distributed import Mode, Setup

ZERO3 = Setup(Mode.DEEPSPEED, zero_stage=3)

# A block of a long training function: argument handling, an if/else, a kwargs dict, a load, a
# move, a loop, a `with` and a `try`, the names fresh per block or shared by every block.
BLOCK = """\
    if args.variant_{i} == "a":
        kwargs = {{"torch_dtype": torch.bfloat16, "device_map": "auto"}}
    else:
        kwargs = {{"torch_dtype": torch.float16}}
    kwargs["trust_remote_code"] = args.trust
    model{suffix} = AutoModelForCausalLM.from_pretrained(args.model, **kwargs)
    if args.move:
        model{suffix} = model{suffix}.to(device)
    for step in range(args.steps):
        with torch.autocast("cuda"):
            batch = next(loader)
        try:
            loss = model{suffix}(**batch).loss
        except RuntimeError:
            continue
"""


def long_main(blocks: int, fresh_names: bool) -> str:
    body = "".join(BLOCK.format(i=i, suffix=f"_{i}" if fresh_names else "") for i in range(blocks))
    return "def main():\n    args = parse()\n    device = 'cuda'\n    loader = iter([])\n" + body


def visits_answering_every_load(source: str, monkeypatch: pytest.MonkeyPatch) -> int:
    """The bindings the flow makes (`_bind`, once per assignment it walks past) while every load's
    values are asked for."""
    count = 0
    bind = Resolver._bind

    def counted(self, *args):  # type: ignore[no-untyped-def]
        nonlocal count
        count += 1
        return bind(self, *args)

    monkeypatch.setattr(Resolver, "_bind", counted)
    module = ast.parse(source)
    resolver = Resolver(module, ZERO3)
    loads = [n for n in ast.walk(module) if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "from_pretrained"]
    for load in loads:
        for keyword in load.keywords:
            assert keyword.arg is None
            found = resolver.key_candidates(keyword.value, "device_map")
            assert found is not None and {c.value is ABSENT for c in found} == {True, False}
        resolver.candidates(load.args[0])
    monkeypatch.undo()
    return count


@pytest.mark.parametrize("fresh_names", [True, False], ids=["fresh names", "shared names"])
def test_the_flow_visits_each_statement_a_bounded_number_of_times(fresh_names: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    short = visits_answering_every_load(long_main(40, fresh_names), monkeypatch)
    long = visits_answering_every_load(long_main(80, fresh_names), monkeypatch)
    assert long <= 2.05 * short, (short, long)  # each question walked from the start: 4x
    statements = sum(isinstance(n, ast.stmt) for n in ast.walk(ast.parse(long_main(80, fresh_names))))
    assert long <= 3 * statements  # an assignment in a loop is walked thrice


def test_a_question_about_a_point_the_walk_has_not_reached_sees_nothing_bound_there() -> None:
    """A condition in a loop reading a name bound further down the body: the earlier pass of the
    body binds it, so the walk is not asked for a state it has not recorded; at the first pass's
    point itself the condition is undecided, and both branches stay."""
    source = (
        "def main():\n"
        "    mode = None\n"
        "    for step in steps:\n"
        "        if mode == 'spread':\n"
        "            device_map = 'auto'\n"
        "        else:\n"
        "            device_map = None\n"
        "        mode = other\n"
        "        load(device_map=device_map)\n"
    )
    module = ast.parse(source)
    call = module.body[0].body[1].body[-1].value  # type: ignore[attr-defined]
    values = [c.value.value for c in Resolver(module, ZERO3).candidates(call.keywords[0].value)]  # type: ignore[union-attr]
    assert set(values) == {"auto", None}


def test_the_state_keeps_a_dicts_entries_in_the_order_they_were_stored_across_a_join() -> None:
    source = (
        "def main():\n"
        "    kw = {'a': 1}\n"
        "    if flag:\n"
        "        kw['b'] = 2\n"
        "    else:\n"
        "        kw['c'] = 3\n"
        "    kw['lm_head'] = 0\n"
        "    load(device_map=kw)\n"
    )
    module = ast.parse(source)
    resolver = Resolver(module, ZERO3)
    name = module.body[0].body[-1].value.keywords[0].value  # type: ignore[attr-defined]
    entries = resolver.map_entries(name)
    assert entries is not None
    assert [v.value for v in entries.values] == [1, 2, 3, 0]  # type: ignore[attr-defined]
    state = resolver._state_before(module.body[0], name)
    assert state.keys_under("kw") == ("kw[[?]]", "kw[a]", "kw[b]", "kw[c]", "kw[lm_head]")
    # The display's lack of `b` on the else path is an absence there, not an unknown.
    assert [b.value for b in state["kw[b]"]][-1] is ABSENT


def test_the_flow_module_says_how_it_works_and_what_it_costs() -> None:
    doc = dataflow.__doc__ or ""
    assert "The algorithm." in doc and "Cost:" in doc
