"""The numbers README.md and docs/*.md quote from runs of the sample configs, and the POD16 screenshots, made
by one script from fresh runs (issue 46, item 17).

    python -m bench.doc_numbers                      # check every quote against fresh runs (exit 1 if one differs)
    python -m bench.doc_numbers --write              # rewrite the quotes in the docs from fresh runs
    python -m bench.doc_numbers --write --screenshots  # + docs/screenshots/pod16-*.png (offscreen Qt, or DISPLAY)
    python -m bench.doc_numbers --runs pod16_bert    # only the quotes of one run

Runs:

* ``pod16_bert``: ``emulate --config sample_configs/mlperf_v1.1_pod16_bert_large.toml --timing-only`` (about
  8 s CPU).  Every quote of it is CHECKED by tests/project/test_doc_numbers.py: the README's POD16 step, the
  stored steps' seconds, the folded steady-state runs, docs/emulator-fidelity.md's quoted ``emulate`` line.
* ``gpt3_13b``: bench/gpt_scale.py's ``gpt3_13b_pod64`` row (about 16 s CPU, 2.4 GB), the GPT-3-13B row of
  docs/emulator.md.  Checked here only: its CPU seconds and peak RSS are this machine's, so ``--write``
  measures them and the check compares only the run's own numbers (fits, fullest tile, tokens/s, step).

Each quote is a regular expression over one doc whose named groups are the numbers; ``value(facts)`` gives each
group's text from the run's facts.  A quote whose expression no longer matches its doc is an error (the text
moved: fix the expression), so a number cannot silently stop being checked.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
POD16_BERT = ROOT / "sample_configs" / "mlperf_v1.1_pod16_bert_large.toml"
SCREENSHOT_VIEWS = "summary,execution,memory,roofline"  # the pod16-* files the docs show


@dataclass(frozen=True)
class Quote:
    doc: str                     # path under the repository
    pattern: str                 # a regex with one named group per number
    values: dict = field(default_factory=dict)  # group -> fn(facts) -> text
    run: str = "pod16_bert"
    unchecked: tuple = ()        # groups --write sets but the check skips (this machine's CPU / memory)


QUOTES = [
    Quote("README.md", r"undercounts the step \((?P<stored>[\d.]+) s of a (?P<step>[\d.]+) s POD16 step\)",
          {"stored": lambda f: f"{f['stored_s']:.2f}", "step": lambda f: f"{f['step_s']:.2f}"}),
    Quote("README.md", r"\((?P<step>[\d.]+) s as emulated, with the submission's half partials",
          {"step": lambda f: f"{f['step_s']:.2f}"}),
    Quote("README.md", r"the (?P<folded>[\d,]+) folded steady-state runs hatched",
          {"folded": lambda f: f"{f['steady_runs'] - 1:,}"}),
    Quote("docs/emulator-fidelity.md", r'"(?P<sps>[\d,.]+) samples/s \.\.\. error band: (?P<band>[^"]+)"',
          {"sps": lambda f: f"{f['samples_per_s']:,.1f}", "band": lambda f: f["band"]}),
    Quote("docs/emulator.md",
          r"\| `gpt3-13b`, 64 IPUs \| TP 8 x DP 8, phased, GA 16 \| (?P<cpu>[\d.]+) s / (?P<rss>[\d.]+) GiB \| "
          r"(?P<fits>\w+) \| IPU (?P<ipu>\d+) tile (?P<tile>\d+): (?P<peak>[\d,]+) KiB \(variable (?P<var>[\d,]+) "
          r"KiB\) \| (?P<tps>[\d,]+) \| (?P<step>[\d.]+) s \|",
          {"cpu": lambda f: f"{f['cpu_s']:.1f}", "rss": lambda f: f"{f['rss_gib']:.2f}",
           "fits": lambda f: "yes" if f["fits"] else "no", "ipu": lambda f: str(f["peak_ipu"]),
           "tile": lambda f: str(f["peak_tile"]), "peak": lambda f: f"{f['peak_bytes'] / 1024:,.0f}",
           "var": lambda f: f"{f['variable_bytes'] / 1024:,.0f}", "tps": lambda f: f"{f['tokens_per_s']:,.0f}",
           "step": lambda f: f"{f['step_s']:.2f}"},
          run="gpt3_13b", unchecked=("cpu", "rss")),
]


def pod16_bert_facts(profile_path) -> dict:
    """The quoted numbers of the POD16 BERT-Large timing-only profile, read as the app and the API read them."""
    import popvision_lite as pvl
    from popvision_lite.analysis.run_totals import run_totals

    with pvl.open(profile_path) as p:
        rt = run_totals(p)
        ph = p.phases
        steady = ph[ph["kind"] == "steady"]
        facts = dict(step_s=float(rt.step_seconds), stored_s=float(p.steps.seconds.sum()),
                     steady_runs=int(steady["runs_per_step"].iloc[0]) if len(steady) else 1,
                     samples_per_s=float(rt.samples_per_second))
    facts["band"] = pvl.verdict(str(profile_path)).ipu_band.text()  # the band `emulate` prints
    return facts


def emulate_pod16_bert(out) -> Path:
    """``popvision-lite emulate --config <POD16 BERT> --timing-only -o out`` in this process."""
    from popvision_lite.cli import main

    rc = main(["emulate", "--config", str(POD16_BERT), "--timing-only", "-q", "-o", str(out)])
    if rc != 0:
        raise RuntimeError(f"emulate {POD16_BERT.name} exited {rc}")
    return Path(out)


def gpt3_13b_facts(tmp) -> dict:
    """bench/gpt_scale.py's gpt3_13b_pod64 row, measured as that bench measures it."""
    from bench.gpt_scale import ROWS, verdict
    from bench.speed import CLI, measure

    model, args, _ = ROWS["gpt3_13b_pod64"]
    out = os.path.join(tmp, "gpt3_13b.pvl")
    m = measure(CLI + ["emulate", model, *args, "--timing-only", "-q", "-o", out], 900.0)
    if not os.path.exists(out):
        raise RuntimeError(f"emulate {model} failed: {m.get('tail')}")
    v = verdict(out)
    var = dict(v["peak_categories"]).get("variable", 0)
    return dict(cpu_s=m["cpu_s"], rss_gib=m["peak_rss_gb"], fits=v["fits"], peak_ipu=v["peak_ipu"],
                peak_tile=v["peak_tile"], peak_bytes=v["peak_bytes"], variable_bytes=var,
                tokens_per_s=v["samples_per_second"] * v["seq"], step_s=v["step_seconds"])


def check(quotes, facts: dict, write: bool = False) -> list[str]:
    """Compare (or, with ``write``, rewrite) every quote; returns the differences found ("doc: group quoted X,
    run Y") and the quotes that match nothing."""
    problems = []
    by_doc: dict[str, list[Quote]] = {}
    for q in quotes:
        by_doc.setdefault(q.doc, []).append(q)
    for doc, qs in by_doc.items():
        path = ROOT / doc
        text = path.read_text(encoding="utf-8")
        for q in qs:
            m = re.search(q.pattern, text)
            if m is None:
                problems.append(f"{doc}: the quote /{q.pattern[:60]}/ is not in the doc any more")
                continue
            new = []
            for name, fn in q.values.items():
                want = fn(facts[q.run])
                if m.group(name) != want and (write or name not in q.unchecked):
                    problems.append(f"{doc}: {name} quoted {m.group(name)!r}, the run gives {want!r}")
                new.append((m.start(name), m.end(name), want))
            if write:
                for a, b, want in sorted(new, reverse=True):
                    text = text[:a] + want + text[b:]
        if write:
            path.write_text(text, encoding="utf-8")
    return problems


def screenshots(profile: Path, out: Path) -> None:
    """docs/screenshots/pod16-<view>-<theme>.png of the fresh profile (bench/gui_screenshots.py, offscreen)."""
    env = dict(os.environ)
    if not env.get("DISPLAY"):
        env["QT_QPA_PLATFORM"] = "offscreen"
    subprocess.run([sys.executable, "-m", "bench.gui_screenshots", str(profile), "--out", str(out), "--prefix",
                    "pod16-", "--views", SCREENSHOT_VIEWS], cwd=ROOT, env=env, check=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--write", action="store_true", help="rewrite the quotes from the fresh runs")
    ap.add_argument("--screenshots", action="store_true", help="also the POD16 screenshots (docs/screenshots)")
    ap.add_argument("--runs", default="pod16_bert,gpt3_13b", help="comma-separated: pod16_bert, gpt3_13b")
    args = ap.parse_args(argv)
    runs = set(args.runs.split(","))
    facts: dict = {}
    with tempfile.TemporaryDirectory(prefix="pvl_docnum_") as tmp:
        pvl_path = None
        if "pod16_bert" in runs:
            pvl_path = emulate_pod16_bert(Path(tmp) / "pod16.pvl")
            facts["pod16_bert"] = pod16_bert_facts(pvl_path)
        if "gpt3_13b" in runs:
            facts["gpt3_13b"] = gpt3_13b_facts(tmp)
        problems = check([q for q in QUOTES if q.run in runs], facts, write=args.write)
        for p in problems:
            print(p)
        if args.screenshots and pvl_path is not None:
            screenshots(pvl_path, ROOT / "docs" / "screenshots")
    if args.write:
        print(f"rewrote {len(problems)} quoted numbers")
        return 0
    print(f"{len(problems)} quoted numbers differ from the fresh runs" if problems else "every quote matches")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
