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


# An elif chain's links, each a different way of changing the state: shared and fresh names, a name
# bound before the chain, entries of a dict built before it and of dicts the branches build, a branch that
# leaves, conditions the setup decides either way, and a nested chain.
CHAIN_LINKS = [
    """    {kw} args.model_type == "type_{i}":
        model = load_{i}()
        kwargs["device_map"] = "auto"
""",
    """    {kw} args.model_type == "fresh_{i}":
        kwargs_{i} = {{"torch_dtype": "bf16"}}
        if args.load_in_4bit:
            kwargs_{i}["device_map"] = "auto"
        model_{i} = load(**kwargs_{i})
""",
    """    {kw} args.model_type == "rebound_{i}":
        kwargs = {{}}
        device_map = None
""",
    """    {kw} args.model_type == "leaves_{i}":
        raise ValueError("{i}")
""",
    """    {kw} is_deepspeed_zero3_enabled():
        device_map = "never_{i}"
""",
    """    {kw} not is_deepspeed_zero3_enabled():
        model = "only_{i}"
        kwargs_0 = {{}}
""",
    """    {kw} args.model_type == "nested_{i}":
        if args.a:
            device_map = "a_{i}"
        elif args.b:
            device_map = "b_{i}"
            kwargs["trust"] = True
        else:
            kwargs.pop("device_map")
""",
    """    {kw} args.model_type == "options_{i}":
        options = {{"key_{i}": {i}}}
""",
]


def chain_source(order: list[int], ending: str, in_loop: bool = False) -> str:
    links = "".join(CHAIN_LINKS[link].format(kw="if" if i == 0 else "elif", i=i) for i, link in enumerate(order))
    header = "def main():\n    args = parse()\n    model = None\n    device_map = 'start'\n    kwargs = {'torch_dtype': 'fp16'}\n"
    if in_loop:  # walked past thrice: an earlier pass with conditions undecided, the recording, the state handed on
        links = "    for step in steps:\n" + "".join(f"    {line}\n" for line in (links + ending).splitlines())
        ending = "        load(model, device_map=device_map)\n"
    return header + links + ending + "    load(model, device_map=device_map, **kwargs)\n"


def recorded_states(module: ast.Module) -> list[tuple[object, ...]]:
    """Every state the walk of main() recorded, as comparable values: each key's bindings (as a question
    reads them) and each dict's keys."""
    resolver = Resolver(module, ZERO3)
    function = module.body[0]
    flow = resolver._record_scope(function)
    states = [*(flow.before[id(s)] for s in ast.walk(function) if isinstance(s, ast.stmt) and id(s) in flow.before), flow.end]
    return [
        (
            sorted(
                (key, [tuple(map(id, b[:2])) + (b[2], b[3]) for b in resolver._bindings_read(bindings)])
                for key, bindings in state.values.items()
            ),
            sorted(state.entries.items()),
        )
        for state in states
    ]


CHAINS = [
    ([0, 1, 2, 3, 4, 5, 6, 0, 1, 2], "    else:\n        raise SystemExit\n"),
    ([1, 1, 1, 1, 1], ""),
    ([0, 0, 0, 2, 0, 0], "    else:\n        model = 'fallback'\n"),
    ([3, 3, 1, 3], "    else:\n        return\n"),
    ([4, 1, 5, 0, 2, 6, 6], "    else:\n        kwargs['device_map'] = 'else'\n"),
    ([5, 6, 0, 3], ""),
    ([2, 6, 1, 4, 0], "    else:\n        kwargs_1 = {'x': 1}\n"),
    ([7, 1, 7, 0, 7, 7], "    else:\n        options = {'other': 0}\n"),
]


@pytest.mark.parametrize("in_loop", [False, True], ids=["in the body", "in a loop"])
@pytest.mark.parametrize(("order", "ending"), CHAINS)
def test_an_elif_chain_joined_link_by_link_records_the_states_nested_ifs_record(
    order: list[int], ending: str, in_loop: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = ast.parse(chain_source(order, ending, in_loop))
    chained = recorded_states(module)
    monkeypatch.setattr(dataflow, "_is_elif", lambda stmt: False)  # each `elif` an `if` in the one before's `else`
    assert recorded_states(module) == chained


def keys_joined(branches: int, monkeypatch: pytest.MonkeyPatch) -> int:
    """The keys the joins of one elif chain of fresh names look at."""
    count = 0
    merge = dataflow.merge

    def counted(states, written, *args):  # type: ignore[no-untyped-def]
        nonlocal count
        count += len(written) if len(states) > 1 else 0
        return merge(states, written, *args)

    monkeypatch.setattr(dataflow, "merge", counted)
    recorded_states(ast.parse(chain_source([1] * branches, "    else:\n        raise SystemExit\n")))
    monkeypatch.undo()
    return count


def test_the_joins_down_an_elif_chain_look_at_the_keys_each_branch_writes_not_those_written_below(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    short, long = keys_joined(40, monkeypatch), keys_joined(80, monkeypatch)
    assert long <= 2.1 * short, (short, long)  # every key bound further down: 4x


def consumer_searches(blocks: int, monkeypatch: pytest.MonkeyPatch) -> int:
    """How many times the model flow looks for where a value goes, asked where every load of a model
    moved and re-wrapped block after block (`model = model.to(...)`, each result read by the next) goes."""
    from placement_lint.analysis import flow as flow_module
    from placement_lint.analysis.names import ImportTable

    lines = ["from transformers import AutoModelForCausalLM, Trainer", "import torch", "", "def main():"]
    lines.append('    model = AutoModelForCausalLM.from_pretrained("m")')
    for number in range(blocks):
        lines += [f"    model = model.to('cuda:{number % 2}')", "    model = torch.compile(model)"]
    lines += ["    Trainer(model=model).train()", ""]
    module = ast.parse("\n".join(lines))
    resolver = Resolver(module, Setup(Mode.FSDP))
    model_flow = flow_module.ModelFlow(module, ImportTable.of(module, resolver.index.nodes), resolver)
    count = 0
    find = model_flow._find_consumers

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        nonlocal count
        count += 1
        return find(*args, **kwargs)

    monkeypatch.setattr(model_flow, "_find_consumers", counted)
    calls = [node for node in resolver.index.calls if isinstance(node.func, ast.Attribute)]
    for call in calls:
        model_flow.consumers(call)
    return count


def test_a_model_moved_again_and_again_is_followed_once_from_each_point(monkeypatch: pytest.MonkeyPatch) -> None:
    short, long = consumer_searches(20, monkeypatch), consumer_searches(40, monkeypatch)
    assert long <= 2.2 * short, (short, long)


def items_joined(blocks: int, monkeypatch: pytest.MonkeyPatch) -> int:
    """The items the joins of a function store, whose `model` is re-bound under nested ifs block after
    block, so a binding of every block before reaches each join."""
    block = "    if args.a_{i}:\n        if args.b_{i}:\n            model = load({i})\n    use(model)\n"
    source = "def main(args):\n    model = None\n" + "".join(block.format(i=i) for i in range(blocks))
    count = 0
    merge = dataflow.merge

    def counted(states, written, *args):  # type: ignore[no-untyped-def]
        nonlocal count
        joined = merge(states, written, *args)
        count += sum(len(joined.get(key) or ()) for key in written) if len(states) > 1 else 0
        return joined

    monkeypatch.setattr(dataflow, "merge", counted)
    module = ast.parse(source)
    Resolver(module, ZERO3)._record_scope(module.body[0])
    monkeypatch.undo()
    return count


def test_a_join_stores_what_its_branches_changed_not_everything_that_reaches_it(monkeypatch: pytest.MonkeyPatch) -> None:
    short, long = items_joined(40, monkeypatch), items_joined(80, monkeypatch)
    assert long <= 2.1 * short, (short, long)  # a binding per block before, rebuilt at each join: 4x


def test_a_binding_carried_through_a_branch_keeps_its_condition_past_the_joins_inside_the_other() -> None:
    source = (
        "def main(args):\n"
        "    x = 1\n"
        "    if args.c:\n"
        "        x = None\n"
        "    else:\n"
        "        for step in range(3):\n"
        "            try:\n"
        "                step = step + 1\n"
        "            except Exception:\n"
        "                if args.bits in [4, 8]:\n"
        "                    x = None\n"
        "    use(x)\n"
    )
    module = ast.parse(source)
    read = next(n for n in ast.walk(module) if isinstance(n, ast.Name) and n.id == "x" and isinstance(n.ctx, ast.Load))
    found = Resolver(module, ZERO3).bindings("x", read)
    assert found is not None
    first = next(b for b in found if b.statement.lineno == 2)
    assert {(test.lineno, taken) for test, taken in first.path} == {(3, False)}, "x = 1 reaches only where args.c is false"
