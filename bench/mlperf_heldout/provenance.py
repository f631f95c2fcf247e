"""The per-row sections of resources/validation/PROVENANCE.md, from build.py's OUT/mlperf_heldout.csv and
OUT/details.json, written to OUT/provenance_rows.md (``--out DIR``: paths.py)."""
import csv, json
from paths import OUT
rows = list(csv.DictReader(open(OUT / "mlperf_heldout.csv")))
det = {d["id"]: d for d in json.load(open(OUT / "details.json"))}
L = []
for r in rows:
    d = det[r["id"]]
    L.append(f"### {r['id']}\n")
    L.append(f"- System: {r['system']}; {r['accelerators']}; n_accel {r['n_accel']}; benchmark {r['benchmark']} ({r['division']})")
    L.append(f"- Repo / commit: `{r['repo']}` @ `{r['commit']}`")
    L.append(f"- Result files: `{r['results_path']}` ({r['n_runs']} runs, {r['n_success']} with run_stop status success)")
    L.append(f"- Config: `{r['config_path']}`")
    L.append(f"- Config summary: GBS {r['gbs']} = micro-batch {r['micro_batch']} x GA {r['grad_accum']} x replicas {r['replicas_or_dp']}"
             + (" x 2 sequences/pack (avg_seq_per_pack)" if r['benchmark'] == 'BERT' else "")
             + f"; pipeline {r['pipeline_stages']}; precision {r['precision']}; optimizer {r['optimizer']}; optimizer state off-chip: {r['opt_state_offchip']}; RTS: {r['replicated_tensor_sharding']}; recompute: {r['recompute']}; availableMemoryProportion {r['available_memory_proportion']}")
    L.append(f"- Train-only samples/s: median {r['train_only_sps_median']} (min {r['train_only_sps_min']}, max {r['train_only_sps_max']}); pooled per-block {r['train_only_pooled_block_min']}..{r['train_only_pooled_block_max']}"
             + (f"; incl. eval {r['incl_eval_sps_median']} ({r['incl_eval_sps_min']}..{r['incl_eval_sps_max']})" if r['incl_eval_sps_median'] else "; incl.-eval: not derivable (all evals run after the training block)")
             + f"; aggregate train-only {r['agg_train_only_sps_median']}; end-to-end {r['e2e_sps_median']}; TTT {r['ttt_min_median']} min ({r['ttt_min_min']}..{r['ttt_min_max']}, successful runs)")
    L.append(f"- Worked example: {r['arithmetic_example']}")
    L.append(f"- Notes: {r['notes']}")
    L.append("- Per run (file, status, blocks/epochs, per-run median of block rates, aggregate, TTT min, logged seed):\n")
    L.append("  | file | status | blocks | median sps | agg sps | TTT min | seed |")
    L.append("  |---|---|---|---|---|---|---|")
    for x in d["runs"]:
        L.append(f"  | {x['file'].split('/')[-1]} | {x['status']} | {x['n_blocks']} | {x['median']} | {x['agg']} | {x['ttt_min']} | {x['seed']} |")
    L.append("")
open(OUT / "provenance_rows.md", "w").write("\n".join(L))
