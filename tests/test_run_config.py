"""One typed run config (popvision_lite/emulator/run_config.py): every field defined once, and the same bad
value refused with the same problem text whether it comes from an ``emulate`` flag, a TOML file, a sweep grid
(command line or file), the ONNX branch's options or the desktop app (tests/gui/test_run_actions.py)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from popvision_lite.emulator.models.config import ModelConfig, make_config
from popvision_lite.emulator.run_config import FIELDS, MODEL_FIELDS, check_field, load_run_config
from popvision_lite.errors import ConfigError
from tests.cli.test_hostile_arguments import ROOT, _run

# field, TOML literal, command-line text, the problem every source reports
BAD = [
    ("hidden", "0", "0", "0 is outside 1 .. 65536"),
    ("batch", "2.5", "2.5", "expected an integer, got 2.5"),
    ("optimizer", '"adamw"', "adamw", "must be one of sgd, momentum, adam, lamb, lars, got 'adamw'"),
    ("layer_split", "[1, 0.25]", "1,0.25", "expected layers per stage in steps of 0.5, got [1, 0.25]"),
    ("available_memory_proportion", "2.0", "2.0", "2.0 is outside 0.01 .. 1.0"),
]


def test_every_model_config_field_has_one_definition():
    assert set(MODEL_FIELDS) == ModelConfig.field_names() - {"model"}
    assert all(f.name == k for k, f in FIELDS.items())


@pytest.mark.parametrize("name", [k for k, f in FIELDS.items() if f.kind == "choice"])
def test_allowed_values_are_those_the_workload_accepts(name):
    """The definitions' allowed values agree with the workload's own whole-config check."""
    base = dict(model="bert", layers=2, ipus=2) if name == "pipeline_placement" else {}
    model = base.pop("model", "bert")
    for v in FIELDS[name].choices:
        assert getattr(make_config(model, **base, **{name: v}), name) == v
    with pytest.raises(ConfigError, match=name):
        make_config(model, **base, **{name: "no-such-value"})


@pytest.mark.parametrize("name,literal,text,problem", BAD, ids=[b[0] for b in BAD])
def test_same_bad_value_same_message_from_every_source(tmp_path, name, literal, text, problem):
    model = "bert" if name == "layer_split" else "mlp" if name != "hidden" else "bert"
    # emulate flag
    rc, msg = _run(["emulate", model, "--" + name.replace("_", "-"), text, "-o", "a.pvl"], tmp_path)
    assert rc == 2 and f"argument --{name.replace('_', '-')}: {problem}" in msg, msg
    # TOML run config, in [model_args] and at the top level
    for body in (f'model = "{model}"\n[model_args]\n{name} = {literal}\n', f'model = "{model}"\n{name} = {literal}\n'):
        (tmp_path / "r.toml").write_text(body)
        rc, msg = _run(["emulate", "--config", "r.toml", "-o", "a.pvl"], tmp_path)
        assert rc == 2 and f"r.toml: field '{name}': {problem}" in msg, msg
        with pytest.raises(ConfigError) as e:
            load_run_config(tmp_path / "r.toml")
        assert str(e.value).endswith(f"field '{name}': {problem}")
    # sweep grid on the command line and in a sweep file
    rc, msg = _run(["sweep", "--model", model, "--grid", f"{name}={text}" if name != "layer_split" else
                    f"{name}=[{text}]", "-o", "out"], tmp_path)
    assert rc == 2 and f"argument --grid: field '{name}': {problem}" in msg, msg
    (tmp_path / "s.toml").write_text(f'model = "{model}"\n[grid]\n{name} = [{literal}]\n')
    rc, msg = _run(["sweep", "s.toml", "-o", "out"], tmp_path)
    assert rc == 2 and f"s.toml: [grid]: field '{name}': {problem}" in msg, msg
    assert not (tmp_path / "a.pvl").exists() and not (tmp_path / "out").exists()


@pytest.mark.parametrize("name,literal,text,problem", [b for b in BAD if b[0] in ("batch", "optimizer",
                                                                                  "available_memory_proportion")])
def test_onnx_options_get_the_same_checks(tmp_path, name, literal, text, problem):
    from popvision_lite.testing.onnx_models import write_tiny_mlp

    model = write_tiny_mlp(tmp_path / "m.onnx")
    flag = "--" + name.replace("_", "-")
    rc, msg = _run(["emulate", "--onnx", str(model), "--training", flag, text, "-o", "a.pvl"], tmp_path)
    assert rc == 2 and f"argument {flag}: {problem}" in msg, msg
    (tmp_path / "r.toml").write_text(f'onnx = "m.onnx"\ntraining = true\n{name} = {literal}\n')
    rc, msg = _run(["emulate", "--config", "r.toml", "-o", "a.pvl"], tmp_path)
    assert rc == 2 and f"r.toml: field '{name}': {problem}" in msg, msg


def test_a_check_across_fields_names_where_the_blamed_field_came_from(tmp_path):
    """heads must divide hidden: the message names the flag, or the file and field, that gave heads."""
    rc, msg = _run(["emulate", "bert", "--hidden", "30", "--heads", "4", "-o", "a.pvl"], tmp_path)
    assert rc == 2 and "argument --heads: hidden size 30 is not divisible by 4 heads" in msg, msg
    (tmp_path / "r.toml").write_text('model = "bert"\nheads = 4\n')
    rc, msg = _run(["emulate", "--config", "r.toml", "--hidden", "30", "-o", "a.pvl"], tmp_path)
    assert rc == 2 and "r.toml: field 'heads': hidden size 30 is not divisible by 4 heads" in msg, msg
    rc, msg = _run(["emulate", "--config", "r.toml", "--heads", "7", "--hidden", "30", "-o", "a.pvl"], tmp_path)
    assert rc == 2 and "argument --heads: hidden size 30 is not divisible by 7 heads" in msg, msg  # the flag won
    assert not (tmp_path / "a.pvl").exists()


def test_every_text_given_for_a_flag_is_checked(tmp_path):
    rc, msg = _run(["emulate", "mlp", "--hidden", "1.5", "--hidden", "16", "-o", "a.pvl"], tmp_path)
    assert rc == 2 and "argument --hidden: expected an integer, got 1.5" in msg, msg


def test_the_command_line_wins_and_origins_follow(tmp_path):
    (tmp_path / "r.toml").write_text('model = "mlp"\nbatch = 4\nhidden = 16\n')
    rc = load_run_config(tmp_path / "r.toml")
    rc.set("batch", "8", "argument", text=True)
    assert rc.model_args == {"batch": 8, "hidden": 16}
    assert rc.origins == {"model": str(tmp_path / "r.toml"), "batch": "argument", "hidden": str(tmp_path / "r.toml")}
    assert rc.model_config(host_check=False) == make_config("mlp", batch=8, hidden=16)


def test_the_sample_configs_parse_to_the_same_runs():
    """A run config file is only read: the ModelConfig it gives is the preset with its fields, unchanged."""
    import tomllib

    from popvision_lite.sweep.grid import count_points, load_sweep_toml

    for path in sorted((ROOT / "sample_configs").glob("*.toml")):
        raw = tomllib.loads(path.read_text())
        if "grid" in raw:  # a sweep file: a run config plus a [grid] table, read by the sweep's own loader
            base, grid, _ = load_sweep_toml(path)
            assert grid == raw["grid"] and count_points(grid) > 1
            continue
        args = {k: v for k, v in raw.items() if k not in ("model", "device", "output", "timing_only", "model_args")}
        args |= raw.get("model_args", {})
        rc = load_run_config(path)
        assert (rc.model, rc.device, rc.output, rc.timing_only) == (raw["model"], raw["device"], raw.get("output"),
                                                                    raw.get("timing_only", False))
        assert rc.model_config(host_check=False) == make_config(raw["model"], **args)


_VALUES = st.recursive(st.none() | st.booleans() | st.integers(-(10 ** 30), 10 ** 30) | st.floats()
                       | st.text(max_size=60), lambda inner: st.lists(inner, max_size=4)
                       | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=8)


@settings(max_examples=400, deadline=None)
@given(name=st.sampled_from(sorted(FIELDS)), value=_VALUES)
def test_any_value_is_accepted_or_refused_with_a_config_error(name, value):
    """Whatever a file or a dialog holds, or a flag's text says: a value, or a ConfigError naming the field."""
    for text in (False, True):
        try:
            check_field(name, str(value) if text else value, "f.toml", text=text)
        except ConfigError as e:
            assert str(e).startswith(f"f.toml: field '{name}"), str(e)  # or an entry of it: 'layer_split[1]'
            assert "\n" not in str(e)


def _typed(f) -> tuple[list[str], object]:
    """A command line giving run-config field ``f`` a value other than its default, and that value as TOML types it."""
    lo, hi = f.bounds
    if f.kind == "bool":
        flag, value = f.cli_switches[-1]
        return [flag], value
    if f.kind == "choice":
        return [f.flag, f.choices[-1]], f.choices[-1]
    if f.kind == "device":
        return [f.flag, "bow"], "ipu-bow"
    if f.kind == "layer_split":
        return [f.flag, "1,1.5"], [1, 1.5]
    if f.kind == "fractions":
        return [f.flag, "0.25,0.5"], [0.25, 0.5]
    v = hi if f.kind == "int" else (lo + hi) / 2
    return [f.flag, str(v)], v


@pytest.mark.parametrize("name", [k for k in FIELDS if k not in ("model", "output")])
def test_every_run_config_field_is_on_every_surface(name, tmp_path):
    """A field defined in run_config.FIELDS reaches every surface from that one definition (issue 50: ffn, lr
    and outline had no emulate flag though TOML and the app took them): the emulate flag (its switches for a bool)
    gives the same value as the field written in a TOML run config, and a sweep grid may vary it.  The app's
    dialogs are checked in tests/gui/test_run_actions.py (every run-config field offered)."""
    import argparse

    from popvision_lite.cli import emulate
    from popvision_lite.sweep.grid import grid_fields

    f = FIELDS[name]
    p = argparse.ArgumentParser()
    emulate.add_arguments(p)
    argv, value = _typed(f)
    from_flag = emulate.from_args(p.parse_args(argv))
    literal = str(value).lower() if isinstance(value, bool) else repr(value).replace("'", '"')
    (tmp_path / "r.toml").write_text(f"{name} = {literal}\n")
    from_toml = load_run_config(tmp_path / "r.toml")
    assert from_flag.model_args == from_toml.model_args and (from_flag.device, from_flag.timing_only) == \
        (from_toml.device, from_toml.timing_only)
    got = getattr(from_flag, name) if name in ("device", "timing_only") else from_flag.model_args[name]
    assert got == value
    assert name in grid_fields()


def test_conflicting_switches_of_one_field_are_refused(tmp_path):
    rc, msg = _run(["emulate", "bert-tiny", "--training", "--inference", "-o", "a.pvl"], tmp_path)
    assert rc == 2 and "argument --inference: not allowed with --training" in msg, msg
    rc, msg = _run(["emulate", "bert-tiny", "--no-outline", "--outline", "-o", "a.pvl"], tmp_path)
    assert rc == 2 and "argument --outline: not allowed with --no-outline" in msg, msg
