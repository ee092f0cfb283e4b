"""Change sets without a server: the operations, their JSON Lines and triple-file readers, the change set's identity,
and where a batch must end so that running its statements by kind equals running its operations in order."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from engine._errors import InputError, MalformedInputError
from engine.changes.apply import entity_text
from engine.changes.batching import batches as _batches, spool, unspool as _unspool
from engine.changes.ops import (AddTriple, MergeEntity, Op, RemoveEntity, RemoveTriple, SetEntity, checked,
                                op_from_json, op_to_json, read_changes, read_triple_files)
from loaders import SkipLog

from helpers.living import LivingModel


def write(tmp_path: Path, name: str, lines: list[str]) -> str:
    p = tmp_path / name
    p.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(p)


def test_every_op_reads_back_from_its_json() -> None:
    ops: list[Op] = [AddTriple("a", "r", "b"), RemoveTriple("a", "r", "b"), SetEntity("a", name="A"),
                     SetEntity("a", description="d", types=("x", "y")), SetEntity("a", types=("x",), add_types=True),
                     RemoveEntity("a"), MergeEntity("a", "b")]
    for op in ops:
        assert op_from_json(json.loads(json.dumps(op_to_json(op)))) == op


def test_json_lines_with_bad_lines_are_skipped_with_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, "c.jsonl", [
        '{"op": "add", "head": "Heat", "relation": "directed_by", "tail": "Michael Mann"}',
        '{"op": "frob", "key": "x"}',
        '{"op": "merge", "source": "x", "target": "x"}',
        '{"op": "remove", "head": "Heat"}',
        "not json",
        "",
        '{"op": "set", "key": "Heat"}',
        '{"op": "set", "key": "Heat", "name": "Heat (1995)", "types": ["film"]}',
        '{"op": "remove_entity", "key": 1995}',
    ])
    skips = SkipLog()
    ops = list(read_changes(path, on_skip=skips))
    assert ops == [AddTriple("Heat", "directed_by", "Michael Mann", line=1, path=path),
                   SetEntity("Heat", name="Heat (1995)", types=("film",), line=8, path=path),
                   RemoveEntity("1995", line=9, path=path)]
    assert [(e.line, e.reason.split(";")[0]) for e in skips.errors] == [
        (2, "unknown op 'frob'"), (3, "op 'merge': an entity cannot be merged into itself ('x')"),
        (4, "op 'remove': missing key: relation, tail"), (5, "invalid JSON: Expecting value at column 1"),
        (7, "op 'set': nothing to set (give name, description, types and/or aliases, or reset)")]
    assert all(str(e).startswith(f"{path}:{e.line}: ") for e in skips.errors)
    with pytest.raises(MalformedInputError, match=r"c\.jsonl:2: unknown op 'frob'"):
        list(read_changes(path, strict=True))
    with pytest.raises(InputError, match="no such file"):
        read_changes(tmp_path / "missing.jsonl")


def test_two_triple_files_make_removes_then_adds(tmp_path: Path) -> None:
    add = write(tmp_path, "add.txt", ["a|r|b", "c|r|d"])
    remove = write(tmp_path, "remove.tsv", ["a\tr\tz"])
    ops = list(read_triple_files(add=add, remove=remove))
    assert [type(o).__name__ for o in ops] == ["RemoveTriple", "AddTriple", "AddTriple"]
    assert ops[0] == RemoveTriple("a", "r", "z", line=1, path=remove)
    assert ops[2] == AddTriple("c", "r", "d", line=2, path=add)


def test_entity_records_of_an_added_rdf_file_add_names_and_types(tmp_path: Path) -> None:
    add = write(tmp_path, "add.nt", [
        '<http://x/a> <http://x/knows> <http://x/b> .',
        '<http://x/a> <http://www.w3.org/2000/01/rdf-schema#label> "Ada"@en .',
        '<http://x/a> <http://www.w3.org/1999/02/22-rdf-syntax-ns#type> <http://x/Person> .',
    ])
    ops = list(read_triple_files(add=add))
    sets = [o for o in ops if isinstance(o, SetEntity)]
    assert AddTriple("http://x/a", "knows", "http://x/b", line=1, path=add) in ops
    assert {(s.name, s.types, s.add_types) for s in sets} == {("Ada", None, True), (None, ("Person",), True)}


def _raise(err: MalformedInputError) -> None:
    raise err


def test_the_identity_of_a_change_set_is_what_it_does_not_where_it_comes_from(tmp_path: Path) -> None:
    a = [AddTriple("a", "r", "b", line=3, path="x.jsonl"), RemoveEntity("c", line=4, path="x.jsonl")]
    b = [AddTriple("a", "r", "b"), RemoveEntity("c")]
    with open(tmp_path / "1", "w") as f1, open(tmp_path / "2", "w") as f2, open(tmp_path / "3", "w") as f3:
        h1, n1 = spool(a, f1, _raise)
        h2, _ = spool(b, f2, _raise)
        h3, _ = spool(list(reversed(b)), f3, _raise)
    assert n1 == 2 and h1 == h2 != h3
    assert list(_unspool(str(tmp_path / "1"))) == a  # lines and paths travel through the spool file


def test_entity_text() -> None:
    assert entity_text("Heat", None) == "Heat"
    assert entity_text("Heat", "a 1995 film") == "Heat: a 1995 film"


# -- batches: statements run by kind (merges, entity removals, removes, adds, settings, the sweep) must equal the
# operations in order, keys resolved once before each batch (tests/helpers/living.py says what both mean) --
KEYS = ["a", "b", "c", "d"]


@st.composite
def ops_lists(draw: st.DrawFn) -> list[Op]:
    out: list[Op] = []
    for _ in range(draw(st.integers(0, 14))):
        kind = draw(st.sampled_from(["add", "remove", "set", "reset", "remove_entity", "merge"]))
        k1, k2 = draw(st.sampled_from(KEYS)), draw(st.sampled_from(KEYS))
        if kind == "add":
            out.append(AddTriple(k1, draw(st.sampled_from(["r", "s"])), k2))
        elif kind == "remove":
            out.append(RemoveTriple(k1, draw(st.sampled_from(["r", "s"])), k2))
        elif kind == "set":
            out.append(SetEntity(k1, name=draw(st.sampled_from(["N1", "N2"]))))
        elif kind == "reset":
            out.append(SetEntity(k1, reset=True))
        elif kind == "remove_entity":
            out.append(RemoveEntity(k1))
        elif k1 != k2:
            out.append(MergeEntity(k1, k2))
    return out


def by_kind(model: LivingModel, ops: list[Op], size: int) -> list[list[Op]]:
    """Run ``ops`` cut as the applier cuts them, each batch as its statements run it; returns the batches."""
    cut = []
    for b in _batches(ops, size, lambda: dict(model.aliases)):  # (the aliases read after each batch has run)
        model.run_batch(b)
        cut.append(b)
    return cut


@settings(max_examples=400, deadline=None)
@given(ops=ops_lists(), size=st.integers(1, 8))
# found by hypothesis in CI: d merged into a in one batch, then "set d" and "remove a" in the next: the cut compared
# raw keys, so the removal of a ran before the setting of d (an alias of a by then)
@example(ops=[AddTriple("a", "r", "d"), MergeEntity("d", "a"), SetEntity("d", name="N1"), RemoveEntity("a"),
              RemoveEntity("a"), AddTriple("a", "r", "a"), AddTriple("a", "r", "a")], size=2)
# a merge target removed and its alias named in one batch: the batch resolved the alias to the removed target
@example(ops=[AddTriple("a", "r", "c"), AddTriple("b", "r", "d"), MergeEntity("a", "b"), RemoveEntity("b"),
              AddTriple("a", "r", "c")], size=8)
# a merge the KG skips (neither entity exists) taken for an alias by the cutter: a later merge of the same keys,
# which the KG applies, was taken for nothing, and the key it moved was named again in its batch
@example(ops=[MergeEntity("a", "b"), AddTriple("a", "r", "a"), AddTriple("a", "r", "a"), AddTriple("a", "r", "a"),
              AddTriple("a", "r", "b"), MergeEntity("a", "b"), AddTriple("a", "r", "a")], size=2)
# a merge whose source is an alias already (a names b, merged into c)
@example(ops=[AddTriple("a", "r", "c"), AddTriple("b", "r", "d"), AddTriple("c", "s", "d"), MergeEntity("a", "b"),
              MergeEntity("a", "c"), AddTriple("b", "r", "b")], size=8)
def test_batches_by_kind_equal_the_ops_in_order(ops: list[Op], size: int) -> None:
    sequential, batched = LivingModel(), LivingModel()
    sequential.run_all(ops)
    batches = by_kind(batched, ops, size)
    assert [op for b in batches for op in b] == ops
    assert all(1 <= len(b) <= size for b in batches)
    assert batched.state() == sequential.state()


@settings(max_examples=400, deadline=None)
@given(before=ops_lists(), ops=ops_lists(), size=st.integers(1, 8))
# a key merged by an earlier change set, named here by its alias and by its target in one batch: cut on raw keys,
# the removal of the target ran before the setting of its alias (which then made the entity again)
@example(before=[AddTriple("a", "r", "b"), MergeEntity("b", "a")],
         ops=[SetEntity("b", name="N1"), RemoveEntity("a")], size=4)
# the target of an earlier change set's merge removed, its alias named again in the same batch
@example(before=[AddTriple("a", "r", "c"), AddTriple("b", "r", "d"), MergeEntity("a", "b")],
         ops=[RemoveEntity("b"), AddTriple("a", "r", "d")], size=4)
# an entity removal takes the entities that had their last triple with it: a merge of two of them later in the
# batch ran first (merges run before removals) and merged what was to be gone
@example(before=[AddTriple("a", "r", "b")],
         ops=[AddTriple("a", "r", "c"), SetEntity("a", reset=True), SetEntity("a", reset=True), RemoveEntity("a"),
              MergeEntity("b", "c"), AddTriple("a", "r", "a"), AddTriple("a", "r", "a")], size=2)
def test_batches_see_the_aliases_earlier_change_sets_made(before: list[Op], ops: list[Op], size: int) -> None:
    sequential, batched = LivingModel(), LivingModel()
    sequential.run_all(before)
    batched.run_all(before)  # an earlier change set, applied: the KG's aliases are what it left
    sequential.run_all(ops)
    batches = by_kind(batched, ops, size)
    assert [op for b in batches for op in b] == ops
    assert batched.state() == sequential.state()


def test_without_the_kgs_aliases_the_cut_is_wrong() -> None:
    """The example above, cut on raw keys: one batch, whose by-kind run differs from the ops in order (what the
    aliases passed to the cutter prevent)."""
    model, seq = LivingModel(), LivingModel()
    for m in (model, seq):
        m.run_all([AddTriple("a", "r", "b"), MergeEntity("b", "a")])
    ops: list[Op] = [SetEntity("b", name="N1"), RemoveEntity("a")]
    assert len(list(_batches(ops, 4))) == 1 and len(list(_batches(ops, 4, dict(model.aliases)))) == 2
    seq.run_all(ops)
    model.run_batch(ops)
    assert model.state() != seq.state()


def test_a_removed_target_frees_its_alias_within_the_batch_only_after_a_cut() -> None:
    """Removing a merge target changes what its alias resolves to: an operation naming the alias later in the
    batch starts a new one (it would have resolved to the removed target)."""
    ops: list[Op] = [RemoveEntity("b"), AddTriple("a", "r", "z")]
    assert [len(b) for b in _batches(ops, 8, {"a": "b"})] == [1, 1]
    assert [len(b) for b in _batches(ops, 8, {})] == [2]


def test_bad_operations_made_in_python_are_skipped_with_their_index(tmp_path: Path) -> None:
    bad: list[MalformedInputError] = []
    ops = [AddTriple("a", "r", "b"), AddTriple("a", "r", " "), "not an op", MergeEntity("x", "x"),
           SetEntity("a", name="A", reset=True), SetEntity(" a ", description="d")]
    with open(tmp_path / "spool", "w") as f:
        _, n = spool(ops, f, bad.append)
    assert n == 2
    assert [str(e).split(": ", 1)[0] for e in bad] == ["<changes>:2", "<changes>:3", "<changes>:4", "<changes>:5"]
    assert list(_unspool(str(tmp_path / "spool")))[1] == SetEntity("a", description="d", line=6)
    with pytest.raises(MalformedInputError, match="<changes>:2"):
        with open(tmp_path / "spool2", "w") as f:
            spool(ops, f, _raise)


def test_a_reset_reads_back_from_its_json() -> None:
    op = SetEntity("a", reset=True)
    assert op_from_json(json.loads(json.dumps(op_to_json(op)))) == op
    with pytest.raises(MalformedInputError, match="reset makes the entity bare; it takes no name"):
        op_from_json({"op": "set", "key": "a", "reset": True, "name": "A"})


#: field values of triple operations: clean strings (the fast path), strings to trim, empty ones, numbers, other types
_FIELD = st.one_of(st.text(max_size=6), st.sampled_from([" a", "b ", "", " ", "\t", "é"]), st.integers(-3, 3),
                   st.floats(allow_nan=False, width=32), st.booleans(), st.none())


def _round_trip(op: object, index: int) -> object:
    """What ``checked`` did for every operation before its fast path for triples: the JSON Lines reader's rules."""
    try:
        return op_from_json(op_to_json(op), line=op.line or index, path=op.path)  # type: ignore[arg-type, attr-defined]
    except (MalformedInputError, TypeError, ValueError) as e:
        return type(e)


@settings(max_examples=400, deadline=None)
@given(st.sampled_from([AddTriple, RemoveTriple]), _FIELD, _FIELD, _FIELD, st.integers(0, 3),
       st.sampled_from(["", "f"]), st.integers(1, 9))
def test_a_checked_triple_is_what_the_json_lines_rules_make_of_it(kind: type, h: object, r: object, t: object,
                                                                  line: int, path: str, index: int) -> None:
    """The fast path of ``checked`` for triples (fields already clean strings) gives what the round trip through
    JSON gives, and every other value takes the round trip (trimmed, refused, numbers written as JSON)."""
    op = kind(h, r, t, line=line, path=path)
    want = _round_trip(op, index)
    try:
        got: object = checked(op, index)
    except (MalformedInputError, TypeError, ValueError) as e:
        got = type(e)
    assert got == want
    if isinstance(got, (AddTriple, RemoveTriple)):
        assert (got.line, got.path) == (line or index, path)


def test_the_spool_gives_back_every_kind_of_operation(tmp_path: Path) -> None:
    ops: list[Op] = [AddTriple("a", "r", "b", line=1, path="f"), RemoveTriple("a", "r", "b", line=2),
                     SetEntity("a", name="A", aliases=("x",), line=3), SetEntity("b", reset=True, line=4),
                     RemoveEntity("a", line=5), MergeEntity("a", "b", line=6)]
    with open(tmp_path / "spool", "w") as f:
        _, n = spool(ops, f, _raise)
    assert n == len(ops) and list(_unspool(str(tmp_path / "spool"))) == ops
