"""The numbers README.md and docs/*.md quote from the POD16 BERT-Large sample config equal a fresh run
(issue 46, item 17).  bench/doc_numbers.py holds every quote with the expression that finds it and writes
them all (and the POD16 screenshots) from fresh runs; this checks its cheap run, the timing-only POD16
BERT-Large (about 8 s CPU): the README's POD16 step (1.81 s) and the stored steps' share of it (0.11 s),
the folded steady-state runs (183), and docs/emulator-fidelity.md's quoted ``emulate`` throughput and error
band.  The GPT-3-13B row of docs/emulator.md is checked by the script only (16 s CPU, 2.4 GB)."""

from __future__ import annotations

import pytest


def test_every_quote_still_names_its_place_in_the_docs():
    from bench.doc_numbers import QUOTES, check

    fake = {"pod16_bert": dict(step_s=99.0, stored_s=9.0, steady_runs=1000, samples_per_s=1.5, band="x"),
            "gpt3_13b": dict(cpu_s=1.0, rss_gib=1.0, fits=True, peak_ipu=9, peak_tile=9, peak_bytes=1024,
                             variable_bytes=1024, tokens_per_s=1.0, step_s=99.0)}
    problems = check(QUOTES, fake)
    assert not [p for p in problems if "not in the doc" in p], problems
    # numbers unlike the docs' are reported, each quote's: the check can fail
    assert {p.split(":")[0] for p in problems} == {q.doc for q in QUOTES}
    assert any("'1.81'" in p or "quoted" in p for p in problems)


@pytest.mark.slow
def test_quoted_pod16_bert_numbers_match_a_fresh_run(pod16_bert_large):
    """The run is the session's ``pod16_bert_large`` fixture (tests/conftest.py): ``emulate --config`` of the
    sample config, as bench/doc_numbers.py runs it; tests/analysis/test_error_band.py reads its prediction."""
    from bench.doc_numbers import QUOTES, check, pod16_bert_facts

    facts = {"pod16_bert": pod16_bert_facts(pod16_bert_large.profile)}
    problems = check([q for q in QUOTES if q.run == "pod16_bert"], facts)
    assert not problems, "run `python -m bench.doc_numbers --write --screenshots`:\n" + "\n".join(problems)
