"""The program hierarchy as an indexed tree (pure; the Qt model in gui/ wraps it lazily).

Built once in O(n log n) from the ``programs`` table: children of every node are a slice
of one sorted array, so a view can ask for "child i of node p" without building Python
objects for the whole tree (profiles can hold very many programs).

The top-level rows add up to the total the tree states (the IPU time of one step, ``run_totals``): the IPU time
no program owns gets rows of its own after the programs (kind :data:`UNATTRIBUTED`): the host's per-step terms,
the IPUs waiting at syncs for each other, and the rest (steps of no program, pipeline cycles the profile does not
store).  Without them the programs of a POD16 BERT step added up to 81 % of the stated total (issue 46).
"""

from __future__ import annotations

import numpy as np

from popvision_lite.analysis.selection import program_for_op
from popvision_lite.profile.schema import stored_table

COLUMNS: tuple[str, ...] = ("name", "kind", "cycles / step", "% of IPU time", "code bytes", "op")
GROUP_MIN = 24  # a program with more children than this has them grouped by their names' path
UNATTRIBUTED = "not a program"  # the kind of the rows of IPU time no program owns


def unattributed_rows(rt, programs_cycles: int) -> list[tuple[str, int]]:
    """(name, cycles) of the IPU time of ``rt`` (:class:`~popvision_lite.analysis.run_totals.RunTotals`) that the
    top-level programs (``programs_cycles`` together) do not hold; with them the top level adds up to
    ``rt.ipu_time_cycles`` exactly.  Rows of 0 cycles are left out."""
    host = int(rt.part_cycles.get("host", 0))
    wait = int(rt.waiting_cycles)
    rest = int(rt.ipu_time_cycles) - int(programs_cycles) - host - wait
    if rest < 0:  # weighted program cycles above the phases' recorded ones: take it from the waiting row
        wait, rest = max(wait + rest, 0), 0
    rows = [(f"(host: the IPUs wait for the host; {rt.host_short or 'host terms'})", host),
            ("(waiting at syncs for other IPUs)", wait),
            ("(other: steps of no program, cycles the stored steps do not show)", rest)]
    return [(n, c) for n, c in rows if c > 0]


def run_cycles(profile) -> int:
    """Wall cycles of the run: one training step (``run_totals.step_cycles``; 0 for an empty run)."""
    from popvision_lite.analysis.run_totals import run_totals

    return run_totals(profile).step_cycles


class ProgramTree:
    """Parent/child index over ``profile.programs`` plus the display values of each node."""

    def __init__(self, profile):
        pr = stored_table(profile, "programs")
        self.ids = pr["prog_id"].to_numpy().astype(np.int64)
        self.parent = pr["parent_id"].to_numpy().astype(np.int64)
        self.kind = pr["kind"].astype(str).to_numpy()
        self.name = pr["name"].astype(str).to_numpy()
        self.op_id = pr["op_id"].to_numpy().astype(np.int64)
        from popvision_lite.analysis.run_totals import run_totals

        rt = run_totals(profile)
        # cycles per training step (stored steps weighted by their runs, children included), and the share of
        # the IPU time summed over the replica's IPUs: the numbers every other view uses
        self.cycles = np.rint(rt.program_cycles).astype(np.int64)
        self.code_bytes = pr["code_bytes"].to_numpy().astype(np.int64)
        self.repeat = pr["repeat"].to_numpy().astype(np.int64)
        self.first_step = pr["first_step"].to_numpy().astype(np.int64)
        self.last_step = pr["last_step"].to_numpy().astype(np.int64)
        n = len(self.ids)
        # the reader's validator guarantees dense ids and parents before children; a ProfileData built
        # in memory is checked here too: a duplicate id would crash the tree view, a parent cycle would make
        # path_to loop for ever, prog_id 2^31-1 would allocate 16 GiB
        bad = (self.ids != np.arange(n)) | (self.parent < -1) | (self.parent >= np.arange(n))
        if bad.any():
            from popvision_lite.errors import ProfileError

            i = int(np.flatnonzero(bad)[0])
            raise ProfileError(getattr(profile, "path", "<profile>"),
                               f"table 'programs' row {i}: prog_id {int(self.ids[i])} / parent_id "
                               f"{int(self.parent[i])} break the tree (ids dense from 0, parent before child)")
        self.num_programs = n  # ids from here on are groups made by _group_flat_lists (not in the profile)
        ops = stored_table(profile, "ops")
        self._op_names = dict(zip(ops["op_id"].to_numpy().tolist(), ops["name"].astype(str).tolist(),
                                  strict=True))
        self._group_flat_lists()
        self.num_grouped = len(self.ids)  # ids from here on are rows of IPU time no program owns
        self._add_unattributed(rt)
        n = len(self.ids)
        size = n
        # row of a prog_id in the arrays above (ids are dense but do not rely on order)
        self._row = np.full(size, -1, dtype=np.int64)
        self._row[self.ids] = np.arange(n)
        # children grouped by parent: parent -1 (roots) first; table order kept inside a group (a group made by
        # _group_flat_lists sits where its first member was)
        pos = np.concatenate([np.arange(self.num_programs), self._group_pos]) if n > self.num_programs \
            else np.arange(n)
        order = np.lexsort((pos, self.parent))
        self._child_rows = order
        sorted_par = self.parent[order]
        keys = np.arange(-1, size)
        self._child_start = np.searchsorted(sorted_par, keys, side="left")
        self._child_stop = np.searchsorted(sorted_par, keys, side="right")
        # index of each row among its siblings
        self._sibling_index = np.empty(n, dtype=np.int64)
        self._sibling_index[order] = np.arange(n) - self._child_start[sorted_par + 1]
        self.total_cycles = rt.ipu_time_cycles
        self._profile = profile
        self._lower: np.ndarray | None = None  # lower-cased names, built on the first find()

    # ------------------------------------------------------------ grouping
    def _group_flat_lists(self) -> None:
        """Nest long flat lists the way their ops are named, as PopVision nests its programs: the children of a
        program with more than GROUP_MIN of them are grouped by runs of consecutive children whose names share a
        path component ('layer0/attention/qk' -> layer0 > attention), level by level.  Groups are extra nodes
        with ids from ``num_programs`` on (kind "group"): their cycles and code bytes are their members' sums;
        the order of the children (time order) is kept, so a name that comes back later makes a second group."""
        names = [self._op_names.get(int(o), "") or str(nm) for o, nm in zip(self.op_id, self.name, strict=True)]
        parts = [nm.split("/") for nm in names]
        kids: dict[int, list[int]] = {}
        for i, par in enumerate(self.parent.tolist()):
            kids.setdefault(par, []).append(i)
        new_parent = self.parent.copy()
        extra: list[tuple[int, str, list[int]]] = []  # (parent id, name, member rows)
        next_id = self.num_programs

        def group(members: list[int], depth: int, parent_id: int) -> None:
            nonlocal next_id
            i = 0
            while i < len(members):
                key = parts[members[i]][depth] if len(parts[members[i]]) > depth + 1 else None
                j = i + 1
                while key is not None and j < len(members) and len(parts[members[j]]) > depth + 1 \
                        and parts[members[j]][depth] == key:
                    j += 1
                run = members[i:j]
                if key is not None and len(run) >= 2 and len(run) < len(members):
                    gid = next_id
                    next_id += 1
                    extra.append((parent_id, key, run))
                    for m in run:
                        if new_parent[m] == parent_id:
                            new_parent[m] = gid
                    group(run, depth + 1, gid)
                elif key is not None and len(run) == len(members) and depth < 8:
                    group(run, depth + 1, parent_id)  # every member shares this level: look one deeper
                i = j

        for par, members in kids.items():
            if par >= 0 and len(members) > GROUP_MIN:
                group(members, 0, par)
        self._group_pos = np.zeros(0, dtype=np.int64)
        if not extra:
            return
        # members of nested groups: the deepest group is their parent (set last in the recursion above); a
        # group's own parent is the group or program it was made in
        g = len(extra)
        gids = np.arange(self.num_programs, self.num_programs + g, dtype=np.int64)
        grow = {int(gid): k for k, gid in enumerate(gids)}
        g_parent = np.array([p for p, _, _ in extra], dtype=np.int64)
        rows_of = [np.array(m, dtype=np.int64) for _, _, m in extra]
        self._group_pos = np.array([int(r.min()) for r in rows_of], dtype=np.int64)

        def total(arr, agg):
            return np.array([agg(arr[r]) for r in rows_of], dtype=arr.dtype)

        fs = np.where(self.first_step >= 0, self.first_step, np.iinfo(np.int64).max)
        first = total(fs, np.min)
        first[first == np.iinfo(np.int64).max] = -1
        self.parent = np.concatenate([new_parent, g_parent])
        self.ids = np.concatenate([self.ids, gids])
        self.kind = np.concatenate([self.kind, np.full(g, "group", dtype=object)]).astype(str)
        self.name = np.concatenate([self.name.astype(object), np.array([nm for _, nm, _ in extra], dtype=object)])
        self.op_id = np.concatenate([self.op_id, np.full(g, -1, dtype=np.int64)])
        # only the members directly under each group add up (a nested group's members are counted once, in it)
        direct = [np.array([m for m in r if new_parent[m] == gids[k]] + [], dtype=np.int64)
                  for k, r in enumerate(rows_of)]
        cyc = np.zeros(g, dtype=np.int64)
        code = np.zeros(g, dtype=np.int64)
        for k in range(g - 1, -1, -1):  # children groups were made after their parents: sum bottom-up
            cyc[k] += int(self.cycles[direct[k]].sum()) if len(direct[k]) else 0
            code[k] += int(self.code_bytes[direct[k]].sum()) if len(direct[k]) else 0
            par = int(g_parent[k])
            if par in grow:
                cyc[grow[par]] += cyc[k]
                code[grow[par]] += code[k]
        self.cycles = np.concatenate([self.cycles, cyc])
        self.code_bytes = np.concatenate([self.code_bytes, code])
        self.repeat = np.concatenate([self.repeat, np.ones(g, dtype=np.int64)])
        self.first_step = np.concatenate([self.first_step, first])
        self.last_step = np.concatenate([self.last_step, total(self.last_step, np.max)])

    def _add_unattributed(self, rt) -> None:
        """Append the top-level rows of :func:`unattributed_rows` (after every program and group)."""
        roots = self.parent == -1
        extra = unattributed_rows(rt, int(self.cycles[roots].sum()))
        if not extra:
            return
        k = len(extra)
        start = len(self.ids)
        self.ids = np.concatenate([self.ids, np.arange(start, start + k, dtype=np.int64)])
        self.parent = np.concatenate([self.parent, np.full(k, -1, np.int64)])
        self.kind = np.concatenate([self.kind.astype(object), np.full(k, UNATTRIBUTED, dtype=object)]).astype(str)
        self.name = np.concatenate([self.name.astype(object), np.array([n for n, _ in extra], dtype=object)])
        self.op_id = np.concatenate([self.op_id, np.full(k, -1, np.int64)])
        self.cycles = np.concatenate([self.cycles, np.array([c for _, c in extra], np.int64)])
        for attr, fill in (("code_bytes", 0), ("repeat", 1), ("first_step", -1), ("last_step", -1)):
            setattr(self, attr, np.concatenate([getattr(self, attr), np.full(k, fill, np.int64)]))
        # after everything else at the top level
        self._group_pos = np.concatenate([self._group_pos, np.arange(start, start + k, dtype=np.int64) + 10 ** 12])

    def is_group(self, prog_id: int) -> bool:
        """A node made by the grouping of a flat list (no program of the profile)."""
        return self.num_programs <= prog_id < self.num_grouped

    def is_unattributed(self, prog_id: int) -> bool:
        """A top-level row of IPU time that no program owns (:func:`unattributed_rows`)."""
        return prog_id >= self.num_grouped

    def step_range(self, prog_id: int) -> tuple[int, int] | None:
        """(first, last + 1) of the steps a node issued, children included; None when it issued none."""
        r = self._row[prog_id]
        a, b = int(self.first_step[r]), int(self.last_step[r])
        return (a, b + 1) if a >= 0 and b >= a else None

    # ------------------------------------------------------------ structure
    def __len__(self) -> int:
        return len(self.ids)

    def row(self, prog_id: int) -> int:
        return int(self._row[prog_id])

    def child_count(self, prog_id: int) -> int:
        """Children of a node; prog_id -1 means the invisible root (top-level programs)."""
        k = prog_id + 1
        return int(self._child_stop[k] - self._child_start[k])

    def child(self, prog_id: int, i: int) -> int:
        k = prog_id + 1
        return int(self.ids[self._child_rows[self._child_start[k] + i]])

    def children(self, prog_id: int) -> list[int]:
        k = prog_id + 1
        return self.ids[self._child_rows[self._child_start[k]:self._child_stop[k]]].tolist()

    def parent_of(self, prog_id: int) -> int:
        return int(self.parent[self._row[prog_id]])

    def index_in_parent(self, prog_id: int) -> int:
        return int(self._sibling_index[self._row[prog_id]])

    def path_to(self, prog_id: int) -> list[int]:
        """Ancestors from the top level down to ``prog_id`` included."""
        path = [prog_id]
        while (p := self.parent_of(path[-1])) >= 0:
            path.append(p)
        return path[::-1]

    # ------------------------------------------------------------ values
    def op_name(self, prog_id: int) -> str:
        op = int(self.op_id[self._row[prog_id]])
        return self._op_names.get(op, "") if op >= 0 else ""

    def pct_of_run(self, prog_id: int) -> float:
        if self.total_cycles <= 0:
            return 0.0
        return 100.0 * float(self.cycles[self._row[prog_id]]) / self.total_cycles

    def label(self, prog_id: int) -> str:
        r = self._row[prog_id]
        name = self.name[r]
        if self.kind[r] == "Repeat" and self.repeat[r] > 1:
            name = f"{name} (x{int(self.repeat[r])})"
        return name

    def values(self, prog_id: int) -> tuple:
        """Display row for COLUMNS (numbers stay numbers; the view formats them)."""
        r = self._row[prog_id]
        return (self.label(prog_id), str(self.kind[r]), int(self.cycles[r]), self.pct_of_run(prog_id),
                int(self.code_bytes[r]), self.op_name(prog_id))

    def value(self, prog_id: int, col: int):
        """One cell of :meth:`values` (cheaper when a view asks cell by cell)."""
        r = self._row[prog_id]
        if col == 0:
            return self.label(prog_id)
        if col == 1:
            return str(self.kind[r])
        if col == 2:
            return int(self.cycles[r])
        if col == 3:
            return self.pct_of_run(prog_id)
        if col == 4:
            return int(self.code_bytes[r])
        return self.op_name(prog_id)

    def find(self, text: str, after: int | None = None) -> int | None:
        """Next program (table order, wrapping) after ``after`` whose name contains ``text``
        (case-insensitive); None when none does."""
        if not text:
            return None
        if self._lower is None:
            self._lower = np.char.lower(self.name.astype(str))
        hits = np.flatnonzero(np.char.find(self._lower, text.lower()) >= 0)
        if len(hits) == 0:
            return None
        start = -1 if after is None else int(self._row[after])
        j = np.searchsorted(hits, start, side="right")
        return int(self.ids[hits[j % len(hits)]])

    def nodes_for_op(self, op_id: int) -> np.ndarray:
        """Topmost nodes of an op (its parent belongs to another op), in table order."""
        mine = np.flatnonzero(self.op_id == op_id)
        if len(mine) == 0:
            return np.zeros(0, dtype=np.int64)
        par = self.parent[mine]
        par_op = np.where(par >= 0, self.op_id[self._row[np.clip(par, 0, None)]], -2)
        return self.ids[mine[par_op != op_id]]

    def node_for_op(self, op_id: int) -> int | None:
        return program_for_op(self._profile, op_id)

    def node_for_step(self, step: int) -> int | None:
        """The leaf program that issued BSP ``step``."""
        st = stored_table(self._profile, "steps")
        hit = st["prog_id"].to_numpy()[st["step"].to_numpy() == step]
        return int(hit[0]) if len(hit) else None
