"""popvision_lite.value_checks: the reusable checks other sub-commands and config fields use."""

from __future__ import annotations

import argparse
import math

import pytest

from popvision_lite import value_checks as v
from popvision_lite.errors import ConfigError


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, True, "3", None, 1e300])
def test_check_number_refuses_non_finite_wrong_type_and_out_of_range(value):
    with pytest.raises(ConfigError, match="^where: lr: "):
        v.check_number("lr", value, 0, 10, where="where")


def test_check_number_integers():
    assert v.check_number("batch", 8.0, 1, 16, integer=True) == 8
    with pytest.raises(ConfigError, match="integer"):
        v.check_number("batch", 2.5, 1, 16, integer=True)
    with pytest.raises(ConfigError, match="outside"):
        v.check_number("batch", 10 ** 20, 1, 16, integer=True)


def test_arg_number_is_an_argparse_type():
    p = argparse.ArgumentParser()
    p.add_argument("--dpi", type=v.arg_number(1, 9600))
    assert p.parse_args(["--dpi", "300"]).dpi == 300
    for bad in ("nan", "inf", "1e300", "0", "x"):
        with pytest.raises(SystemExit):
            p.parse_args(["--dpi", bad])


def test_ranges_are_checked_before_expansion():
    import tracemalloc

    tracemalloc.start()  # expanding either range would allocate gigabytes; checking it first allocates ~nothing
    try:
        with pytest.raises(ConfigError, match="more than"):
            v.parse_int_ranges("0-1000000000000", "--tiles", max_count=1000)
        with pytest.raises(ConfigError, match="outside"):
            v.parse_int_ranges("0-99999999", "--tiles", 0, 1471)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20
    assert v.parse_int_ranges("0-3,7", "--tiles", 0, 10) == [0, 1, 2, 3, 7]
    assert v.parse_int_ranges("0-3,7", "--tiles", 0, 10, expand=False) == [(0, 3), (7, 7)]


def test_depth_is_checked_without_recursion():
    deep = []
    cur = deep
    for _ in range(100_000):
        cur.append([])
        cur = cur[0]
    with pytest.raises(ConfigError, match="nested more than 8"):
        v.check_depth(deep, "cfg.toml")
    v.check_depth({"a": {"b": [1, 2]}}, "cfg.toml")


def test_small_text_limits(tmp_path):
    big = tmp_path / "big.toml"
    big.write_bytes(b"#" * (v.MAX_CONFIG_BYTES + 1))
    with pytest.raises(ConfigError, match="bytes"):
        v.read_small_text(big)
    with pytest.raises(ConfigError, match="cannot read config file: it is a folder"):
        v.read_small_text(tmp_path)
    ok = tmp_path / "ok.toml"
    ok.write_text("a = 1\n")
    assert v.read_small_text(ok) == "a = 1\n"
