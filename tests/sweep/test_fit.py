"""The fit advisor end to end (sweep/fit.py), with real emulation on a local Dask cluster: a one-layer GPT that
does not fit on one IPU of the tests' 92-tile device (tests/support/fit_search.py), searched up to 2 IPUs.  The search runs once per session
(the ``fit_small`` fixture); the CLI and a resumed search reuse its folder without emulating again."""

import json
import math
from pathlib import Path

import pytest

import popvision_lite as pvl
from popvision_lite.analysis.fit_constraint import TOTAL_BYTES
from popvision_lite.cli.main import main
from popvision_lite.devices import chip_price, load_device
from popvision_lite.emulator.run_config import RunConfig
from popvision_lite.sweep.fit import fit_advice
from popvision_lite.sweep.fit_result import BEST_TOML, FITS, OVER, SUMMARY
from popvision_lite.sweep.fit_space import FIT_ROLES, Space
from tests.support.fit_search import MAX_IPUS, SMALL


def test_the_answer_fits_when_emulate_runs_it(fit_small, tmp_path):
    adv = fit_small
    assert adv.fits and not adv.base_fits and adv.best is adv.options[0]
    best = adv.best
    # one IPU cannot hold it as given; two of tensor parallelism can with every setting as given, and one can with
    # the LM head's vocabulary serialised: the answer is the cheaper of what fits
    assert best.chips <= MAX_IPUS and set(best.changes) <= set(FIT_ROLES)
    as_given_tp2 = [o for o in adv.options if o.changes.keys() <= {"ipus", "tensor_parallel"} and o.chips == 2]
    assert as_given_tp2 and best.cost_per_million_usd <= as_given_tp2[0].cost_per_million_usd
    toml = Path(adv.folder) / BEST_TOML
    assert toml.read_text(encoding="utf-8").endswith(best.toml())
    out = tmp_path / "best.pvl"
    assert main(["emulate", "--config", str(toml), "-o", str(out), "-q"]) == 0   # 0: fits (3 would be out of memory)
    with pvl.open(out) as p:
        assert p.run["fits"] and p.run["samples_per_second"] == pytest.approx(best.samples_per_second, rel=1e-9)


def test_options_are_the_emulated_rows_priced_by_the_one_price(fit_small):
    adv = fit_small
    price = chip_price(load_device(SMALL["device"])).usd_per_chip_hour
    costs = [o.cost_per_million_usd for o in adv.options]
    assert costs == sorted(costs) and len(adv.options) >= 2
    for o in adv.options:
        assert o.cost_per_million_usd == pytest.approx(price * o.chips * 1e6 / o.samples_per_second / 3600)
        assert o.seconds_per_sample == pytest.approx(1 / o.samples_per_second)
        with pvl.open(o.profile) as p:             # its emulation, in the search folder
            assert p.run["fits"] and int(p.run["config"]["ipus"]) == o.chips
    df = pvl.open_sweep(adv.folder)               # every emulated candidate as one sweep table
    assert len(df) == adv.emulations and set(df["status"]) == {"ok"}
    assert int(df["fits"].sum()) == sum(t.status == FITS for t in adv.trials)


def test_it_starts_from_what_binds_and_accounts_for_every_candidate(fit_small):
    adv = fit_small
    assert adv.base_binding is not None and adv.base_binding.cause == TOTAL_BYTES
    base = next(t for t in adv.trials if t.phase == "as given")
    assert base.status == OVER and base.chips == 1
    assert all(t.reason for t in adv.trials if not t.emulated)  # every candidate not emulated says why
    assert all(t.chips <= MAX_IPUS for t in adv.trials)
    # the run as given, the given frontier of each tensor-parallel axis (2), the lean frontier, the saver levels,
    # one rung of each of the three savers that are not monotone, one saver back off: 9
    assert adv.emulations == sum(t.emulated for t in adv.trials) and adv.emulations <= 9
    assert any(t.cand.place.tp2 == 2 and t.fits for t in adv.trials)   # the 2-D axis is searched (hidden 128 / 2)
    text = adv.text()
    assert "Cheapest configuration that fits (emulated)" in text and f"emulate --config {adv.folder}" in text
    frame = adv.to_frame()
    assert len(frame) == len(adv.trials) and set(frame["status"]) <= {"fits", "over", "implied", "dominated"}


def test_the_lower_bound_never_exceeds_what_the_emulator_keeps_on_chip(fit_small):
    """The bound prunes before emulation, so it must stay below the emulated always-live training state."""
    adv = fit_small
    rc = RunConfig.from_mapping(dict(SMALL), "test")
    sp = Space(rc, MAX_IPUS, 1)
    for t in adv.trials:
        if not t.emulated:
            continue
        lb = sp.lower_bound(t.cand)
        with pvl.open(Path(adv.folder) / t.row["profile"]) as p:
            ts = p.run["training_state"]
        kept = max(s["mib"]["weights"] * (0 if t.cand.saver("streaming_weights") else 1) + s["mib"]["grad_accum"]
                   + s["mib"]["optimizer_state_onchip"] for s in ts) * 2**20
        assert lb["bytes"] <= kept + 1


def test_a_repeated_search_resumes_from_its_folder(fit_small, capsys):
    """The same command into the same folder: every candidate is on disk, nothing is emulated again and no
    cluster is started; the answer is the same."""
    adv = fit_small
    again = fit_advice(dict(SMALL), max_ipus=MAX_IPUS, out=adv.folder)
    assert again.resumed == again.emulations == adv.emulations and again.best.text == adv.best.text
    assert again.cpu_seconds == pytest.approx(adv.cpu_seconds)   # the rows' own CPU, not run again
    args = ["fit", SMALL["model"], *[x for k, v in SMALL.items() if k != "model"
                                     for x in (f"--{k.replace('_', '-')}", str(v))],
            "--max-ipus", str(MAX_IPUS), "-o", adv.folder, "-q", "--json"]
    assert main(args) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["best"]["text"] == adv.best.text and got["best"]["chips"] == adv.best.chips
    assert json.loads((Path(adv.folder) / SUMMARY).read_text(encoding="utf-8"))["fits"] is True


@pytest.mark.parametrize("argv, needle", [
    (["fit"], "MODEL|PROFILE.pvl: required"),
    (["fit", "nosuch"], "unknown model"),
    (["fit", "gpt2-small", "--image", "3"], "--image: model 'gpt2-small' does not use it"),
    (["fit", "gpt2-small", "--ipus", "2", "--replicas", "3"], "replicas"),
])
def test_bad_input_exits_2_naming_the_problem(argv, needle, capsys):
    assert main(argv) == 2
    assert needle in capsys.readouterr().err


def test_a_profile_with_model_flags_is_refused(tmp_path, capsys):
    p = Path(__file__).resolve().parents[2] / "sample_profiles" / "bert_large_1ipu_oom.pvl"
    assert main(["fit", str(p), "--batch", "2"]) == 2
    assert "give a profile or a model with its flags, not both" in capsys.readouterr().err
    assert main(["fit", str(p), "--inference"]) == 2   # a bool field's switch names itself
    assert "argument --inference: give a profile or a model" in capsys.readouterr().err
    assert main(["fit", str(tmp_path / "missing.pvl")]) == 2


def test_the_advice_has_no_claim_for_numbers_it_does_not_have(fit_small):
    for o in fit_small.options:
        assert math.isfinite(o.samples_per_second) and o.samples_per_second > 0 and o.peak_tile_memory_pct <= 100


def test_a_run_config_takes_a_registered_ipus_id_only_in_the_process_that_registered_it():
    """The search above runs on the tests' device: a run config (and so ``emulate --config``, the sweep's points)
    takes an IPU spec's id that this process registered (``devices.register_device``), as it takes a bundled one;
    a process that did not register it (a fresh ``popvision-lite``) refuses it as an unknown device, and a
    bundled spec that is not an IPU stays refused."""
    from popvision_lite.devices import register_device, unregister_device
    from popvision_lite.emulator.run_config import normalise_device
    from popvision_lite.errors import ConfigError
    from tests.support import devices as test_devices

    dev = SMALL["device"]
    assert RunConfig.from_mapping({"model": "mlp", "device": dev}, "t.toml").device == dev
    unregister_device(dev)
    try:
        with pytest.raises(ConfigError, match=f"t.toml: field 'device': unknown device '{dev}'"):
            RunConfig.from_mapping({"model": "mlp", "device": dev}, "t.toml")
    finally:
        register_device(test_devices.PATH)
    assert normalise_device("Mk2") == "ipu-mk2"
    with pytest.raises(ConfigError, match="unknown device 'a100-80gb'"):
        normalise_device("a100-80gb")
