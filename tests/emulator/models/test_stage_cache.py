"""The content-keyed cache of compiled stage graphs (emulator/models/stage_cache.py): what it records of a config,
when a kept graph is the same build, and its byte budget."""

from __future__ import annotations

import numpy as np
import pytest

from popvision_lite.emulator.models import stage_cache as SC
from popvision_lite.emulator.models.config import make_config


class _Graph:
    def __init__(self, n):
        self.arrays = [np.zeros(n, np.int64)]


def test_config_reads_records_fields_and_calls_as_the_build_sees_them():
    cfg = make_config("bert-tiny", batch=4)
    view = SC.ConfigReads(cfg)
    assert view.batch == 4 and view.mlm_tokens == cfg.mlm_tokens and view.amp_of(0) == cfg.amp_of(0)
    reads = SC.reads_of(view)
    assert reads["batch"] == "4" and ("amp_of", (0,), ()) in reads and "seq" not in reads
    assert SC.gives_the_same(reads, make_config("bert-tiny", batch=4, layers=7))  # layers never read
    assert not SC.gives_the_same(reads, make_config("bert-tiny", batch=8))
    assert not SC.gives_the_same(reads, make_config("bert-tiny", batch=4, available_memory_proportion=0.5))
    with pytest.raises(AttributeError, match="may not change its config"):
        view.batch = 2


def test_cache_builds_once_per_content_and_keeps_within_its_budget():
    cache = SC.StageGraphCache(budget=3 * 8 * 1000 + 100)
    built = []

    def make(n):
        def build(view):
            built.append(view.batch)
            return _Graph(n)
        return build

    a, hit = cache.build(("dev", 1), make_config("bert-tiny", batch=2), make(1000))
    assert not hit and built == [2]
    b, hit = cache.build(("dev", 1), make_config("bert-tiny", batch=2, layers=9), make(1000))
    assert hit and b is a and built == [2]  # the same reads: the same build
    _, hit = cache.build(("dev", 2), make_config("bert-tiny", batch=2), make(1000))  # other arguments
    assert not hit and len(cache) == 2
    cache.build(("dev", 1), make_config("bert-tiny", batch=4), make(1000))
    cache.build(("dev", 1), make_config("bert-tiny", batch=8), make(1000))  # a fourth: the oldest goes
    assert len(cache) == 3 and cache.nbytes <= cache.budget
    _, hit = cache.build(("dev", 2), make_config("bert-tiny", batch=2), make(1000))
    assert hit  # kept: the first graph was the least recently used, and went
    _, hit = cache.build(("dev", 1), make_config("bert-tiny", batch=2), make(1000))
    assert not hit
    cache.build(("dev", 3), make_config("bert-tiny"), make(10_000))  # over the whole budget: built, not kept
    assert all(e[3] <= cache.budget for e in cache._entries.values())
    assert cache.clear() and len(cache) == 0


def test_retained_bytes_counts_a_text_columns_distinct_strings_once():
    import sys

    names = np.array(["matmul_" + "x" * 100, "add"] * 500, dtype=object)  # a profile text column held as numpy
    n = SC.retained_bytes({"names": names})
    strings = sys.getsizeof(names[0]) + sys.getsizeof(names[1])
    assert n == names.nbytes + strings + len("names")  # the dict key, a str, counted by its length


def test_retained_bytes_counts_arrays_tables_and_strings_once():
    import pandas as pd

    x = np.zeros(1000, np.int64)
    obj = {"a": x, "b": [x, x[:10]], "t": pd.DataFrame({"c": np.zeros(100)}), "s": "abc"}
    n = SC.retained_bytes(obj)
    assert 8000 + 800 + 3 <= n <= 8000 + 800 + 3 + 300  # the view of x and x itself once; the frame's index
