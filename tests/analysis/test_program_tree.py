"""The indexed program tree behind the program tree view."""

import pytest

import popvision_lite as pvl
from popvision_lite.analysis.program_tree import ProgramTree, run_cycles
from tests.support.insights_profile import PROGRAMS, write_small


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    path = write_small(tmp_path_factory.mktemp("tree") / "small.pvl")
    with pvl.open(path) as p:
        yield ProgramTree(p), p


def test_structure_matches_parent_ids(tree):
    t, p = tree
    assert [c for c in t.children(-1) if not t.is_unattributed(c)] == [0]
    for pid, parent, *_ in PROGRAMS:
        kids = [q[0] for q in PROGRAMS if q[1] == pid]
        assert t.children(pid) == kids
        assert t.child_count(pid) == len(kids)
        assert [t.child(pid, i) for i in range(len(kids))] == kids
        assert t.parent_of(pid) == parent
        siblings = t.children(parent)
        assert siblings[t.index_in_parent(pid)] == pid
    assert t.path_to(5) == [0, 1, 2, 5]


def test_values(tree):
    t, p = tree
    total = int(p.stored_table("steps")["end_cycle"].max() - p.stored_table("steps")["start_cycle"].min())
    assert run_cycles(p) == total
    name, kind, cycles, pct, code, op = t.values(1)
    assert (name, kind) == ("loop (x2)", "Repeat")
    # cycles of the Repeat = durations of the 6 unrolled body steps
    st = p.stored_table("steps")
    assert cycles == int((st["end_cycle"] - st["start_cycle"])[st["step"] < 6].sum())
    assert pct == pytest.approx(100.0 * cycles / total)
    assert code == 30 and op == ""
    assert t.values(4)[5] == "fwd/matmul"
    assert t.values(0)[3] == pytest.approx(100.0)


def test_node_lookup(tree):
    t, p = tree
    assert t.node_for_step(4) == 4
    assert t.node_for_step(7) == 7
    assert t.node_for_op(1) == 5


def test_nodes_for_op(tree):
    t, p = tree
    assert t.nodes_for_op(0).tolist() == [3, 4]
    assert t.nodes_for_op(2).tolist() == [7]
    assert t.nodes_for_op(99).tolist() == []


def test_find_wraps_and_ignores_case(tree):
    t, p = tree
    assert t.find("FWD/") == 3
    assert t.find("fwd/", after=3) == 4
    assert t.find("fwd/", after=5) == 3  # wraps
    assert t.find("nothing") is None and t.find("") is None


def test_flat_lists_are_grouped_by_their_names_in_time_order():
    """A one-IPU run was a flat list of 470 programs under main: it nests by the ops' name paths (layer0 >
    attention ...), keeping time order, every program still in the tree, groups adding up their members."""
    from pathlib import Path

    import numpy as np

    import popvision_lite as pvl

    path = Path(__file__).resolve().parents[2] / "sample_profiles" / "bert_tiny_mk2.pvl"
    with pvl.open(path) as p:
        t = ProgramTree(p)
        pr = p.stored_table("programs")
    main = int(pr.loc[pr["parent_id"] == -1, "prog_id"].iloc[0])
    flat = [int(i) for i in pr.loc[pr["parent_id"] == main, "prog_id"]]
    assert len(flat) > 100 and t.child_count(main) < 12
    assert t.num_programs == len(pr) and len(t) > len(pr)

    def leaves(node):  # depth-first: the real programs under node, in display order
        out = []
        for c in t.children(node):
            out += leaves(c) if t.is_group(c) else [c]
        return out

    assert leaves(main) == flat  # nothing lost, nothing reordered
    names = [t.label(c) for c in t.children(main)]
    assert "layer0" in names and "layer1" in names
    for g in range(t.num_programs, t.num_grouped):
        kids = t.children(g)
        assert len(kids) >= 2 and t.values(g)[1] == "group"
        assert int(t.cycles[t.row(g)]) == sum(int(t.cycles[t.row(k)]) for k in kids)
        rng = t.step_range(g)
        firsts = [t.first_step[t.row(k)] for k in leaves(g) if t.first_step[t.row(k)] >= 0]
        assert rng[0] == min(firsts)
    assert not np.isin(t.op_id[t.num_programs:t.num_grouped], pr["op_id"].to_numpy()[pr["op_id"] >= 0]).any()
