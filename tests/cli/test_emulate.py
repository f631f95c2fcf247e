"""`popvision-lite emulate` and TOML run configs: summary, exit codes 0 / 2 / 3, messages name the field."""

import pytest

import popvision_lite as pvl
from popvision_lite.cli import main
from popvision_lite.emulator.run_config import load_run_config
from popvision_lite.errors import ConfigError

SMALL = ["--batch", "8", "--hidden", "16", "-q"]


def test_emulate_ok_writes_profile_and_summary(tmp_path, capsys):
    out = tmp_path / "mlp.pvl"
    rc = main(["emulate", "mlp", *SMALL, "--precision", "fp32", "-o", str(out)])
    assert rc == 0
    text = capsys.readouterr().out
    for needle in ("fits: yes", "peak tile memory:", "total cycles:", "ms at 1.325 GHz",
                   "time split of one step (IPU time summed over 1 IPU): compute",
                   "numeric checks vs numpy reference: 11/11 passed"):
        assert needle in text
    with pvl.open(out) as p:
        assert p.run["fits"] is True and p.run["model"] == "mlp"
        checks = p.run["numeric_checks"]
        assert len(checks) == 11 and all(c["passed"] for c in checks.values())
        assert p.run["config"]["hidden"] == 16 and p.run["config"]["precision"] == "fp32"
        # the summary's total cycles equal the profile's
        assert f"total cycles: {p.run['total_cycles']:,}" in text


def test_a_pipelined_runs_split_is_the_one_info_prints(tmp_path, capsys):
    """A pipelined run stores a few pipeline cycles of its step (5 of 18 here) besides its once-a-step phases;
    the line emulate prints is the whole step's split, from analysis.run_totals on the written profile as
    ``info`` prints it, not the stored steps' durations added up (which gave stream copy 91 % here, where
    the step spends 42 % of its IPU time streaming the LAMB state)."""
    import re

    import numpy as np

    from popvision_lite.analysis.run_totals import PART_OF_KIND, PARTS, run_totals
    from popvision_lite.profile import schema

    out = tmp_path / "pipe.pvl"
    rc = main(["emulate", "bert-tiny", "--layers", "4", "--batch", "4", "--seq", "64", "--ipus", "4", "--replicas",
               "2", "--pipeline-stages", "2", "--grad-accum", "16", "--optimizer", "lamb", "--optimizer-state",
               "offchip", "--host-framework", "none", "--timing-only", "-q", "-o", str(out)])
    assert rc == 0
    text = capsys.readouterr().out
    line = next(x for x in text.splitlines() if x.startswith("time split"))
    assert line.startswith("time split of one optimizer step (IPU time summed over 2 IPUs of one replica): ")
    printed = {m[0]: (int(m[1].replace(",", "")), float(m[2]))
               for m in re.findall(r"(\w+) ([\d,]+) cycles \(([\d.]+)%", line)}
    with pvl.open(out) as p:
        rt = run_totals(p)
        steps = p.stored_table("steps")
    assert printed == {k: (rt.part_cycles[k], round(100 * rt.part_share[k], 1)) for k in PARTS}
    assert f"waiting for other IPUs {rt.waiting_cycles:,}" in line
    assert main(["info", str(out)]) == 0
    info = capsys.readouterr().out
    for k in PARTS:
        assert re.search(rf"{k} +{rt.part_cycles[k]:,} cycles +{100 * rt.part_share[k]:.1f}%", info), k
    # what the line used to add up: the stored steps, which overstate the stream phases many times
    dur = (steps["end_cycle"] - steps["start_cycle"]).to_numpy()
    stored_stream = dur[steps["kind"].to_numpy() == schema.STEP_KIND_CODE["stream_copy"]].sum() / dur.sum()
    assert PART_OF_KIND["stream_copy"] == "stream" and stored_stream > rt.part_share["stream"] + 0.3
    assert 0.3 < rt.part_share["stream"] < 0.6 and np.isclose(sum(rt.part_share.values()), 1.0)


def test_a_pipelined_inference_run_is_not_labelled_an_optimizer_step(tmp_path, capsys):
    """Issue 47: ``emulate bert-base --inference`` printed its cycles as "(one optimizer step)"; an inference run
    has no optimizer: both the cycles line and the time split say "one inference step"."""
    out = tmp_path / "inf.pvl"
    rc = main(["emulate", "bert-tiny", "--layers", "2", "--batch", "2", "--seq", "16", "--inference", "--timing-only",
               "-q", "-o", str(out)])
    assert rc == 0
    text = capsys.readouterr().out
    assert "optimizer step" not in text
    assert "(one inference step)" in next(x for x in text.splitlines() if x.startswith("total cycles:"))
    assert next(x for x in text.splitlines() if x.startswith("time split")).startswith(
        "time split of one inference step")


def test_progress_bar_on_stderr(tmp_path, capsys):
    rc = main(["emulate", "mlp", "--batch", "8", "--hidden", "16", "--timing-only", "-o", str(tmp_path / "a.pvl")])
    assert rc == 0
    err = capsys.readouterr().err
    assert "100% done" in err and "compiling" in err


@pytest.mark.parametrize("argv,needle", [
    (["emulate", "mlp", "--batch", "0", "-o", "x.pvl"], "--batch"),
    (["emulate", "mlp", "--device", "gpu9000", "-o", "x.pvl"], "--device"),
    (["emulate", "vgg16", "-o", "x.pvl"], "MODEL"),  # (resnet is a bundled model now)
    (["emulate", "mlp", "--precision", "fp8", "-o", "x.pvl"], "--precision"),
])
def test_bad_arguments_exit_2_naming_the_argument(argv, needle, capsys):
    try:  # argparse's own refusals exit; a field's value is refused by its definition, which returns 2
        rc = main(argv)
    except SystemExit as e:
        rc = e.code
    assert rc == 2
    assert needle in capsys.readouterr().err


def test_semantic_errors_exit_2(tmp_path, capsys):
    assert main(["emulate", "bert", "--hidden", "30", "--heads", "4", "-o", str(tmp_path / "x.pvl")]) == 2
    assert "--heads" in capsys.readouterr().err
    assert main(["emulate", "mlp", "--ipus", "5", "-o", str(tmp_path / "x.pvl")]) == 2  # 3 layers < 5 stages
    assert "--ipus" in capsys.readouterr().err
    assert main(["emulate", "mlp"]) == 2
    assert "-o/--output" in capsys.readouterr().err
    assert not (tmp_path / "x.pvl").exists()


def test_config_file_and_override(tmp_path, capsys):
    cfg = tmp_path / "run.toml"
    out = tmp_path / "from_config.pvl"
    cfg.write_text(f'model = "mlp"\ndevice = "bow"\noutput = "{out}"\ntiming_only = true\n'
                   '[model_args]\nbatch = 8\nhidden = 16\nlayers = 2\n')
    assert main(["emulate", "--config", str(cfg), "--layers", "3", "-q"]) == 0
    with pvl.open(out) as p:
        assert p.target.device == "ipu-bow"
        assert p.run["timing_only"] is True
        assert p.run["config"]["layers"] == 3 and p.run["config"]["batch"] == 8


@pytest.mark.parametrize("body,field", [
    ('model = "mlp"\n[model_args]\nbatchsize = 8\n', "batchsize"),
    ('model = "mlp"\n[model_args]\nbatch = "eight"\n', "batch"),
    ('model = "transformerXL"\n', "model"),
    ('model = "mlp"\ndevice = "tpu"\n', "device"),
    ('model = "mlp"\ntiming_only = "yes"\n', "timing_only"),
    ('model = "mlp"\n[model_args\n', "not valid TOML"),
])
def test_bad_config_names_field(tmp_path, body, field, capsys):
    cfg = tmp_path / "bad.toml"
    cfg.write_text(body)
    with pytest.raises(ConfigError, match=field):
        load_run_config(cfg)
    assert main(["emulate", "--config", str(cfg), "-o", str(tmp_path / "x.pvl")]) == 2
    err = capsys.readouterr().err
    assert str(cfg) in err and field in err


def test_out_of_memory_exit_3_and_profile_written(tmp_path, capsys):
    out = tmp_path / "oom.pvl"
    rc = main(["emulate", "mlp", "--device", "mk1", "--hidden", "8192", "--layers", "1", "--batch", "4",
               "--inference", "--precision", "fp32", "--timing-only", "-q", "-o", str(out)])
    assert rc == 3
    captured = capsys.readouterr()
    assert "fits: NO" in captured.out and "worst: tile" in captured.out
    assert "out of memory" in captured.err
    # what binds it and the search for what fits, not generic advice (analysis/fit_constraint.py, sweep/fit.py)
    assert f"to find a configuration that fits: popvision-lite fit {out}" in captured.err
    with pvl.open(out) as p:
        assert f"why: {pvl.binding_constraint(p).headline()}" in captured.err
        assert p.run["fits"] is False
        by_tile = p.stored_table("memory_by_tile")
        assert by_tile["over_capacity"].any()
        worst = by_tile["total"].idxmax()
        assert f"tile {worst} " in captured.out
