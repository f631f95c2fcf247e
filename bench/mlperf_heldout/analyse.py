"""Derive the CSV throughput columns for one Graphcore result set (BERT or ResNet) from MLLOG files in a git mirror.
Method reproduces resources/validation/mlperf_training.csv (verified on the v1.1 POD16 rows)."""
import statistics as st, json, sys
from mllog import *

def _sorted(files):
    return sorted(files, key=lambda p: int(re.search(r'(\d+)\.txt$', p).group(1)))

def bert_set(R, d):
    files = _sorted([f for f in git_ls(R, d) if re.search(r'result_\d+\.txt$', f)])
    runs = []
    for f in files:
        ev = parse(git_show(R, f))
        b = bert_blocks(ev)
        rates = [x["n"] / ((x["t1"] - x["t0"]) / 1000) for x in b]
        inc = [x["n"] / ((x["eval_t"] - (x["prev_eval_t"] if x["prev_eval_t"] else x["t0"])) / 1000) for x in b]
        ts = first(ev, "train_samples")["value"]; ts = sum(ts) if isinstance(ts, list) else ts
        rs = first(ev, "run_start")["time_ms"]; rp = first(ev, "run_stop")
        T = sum((x["t1"] - x["t0"]) / 1000 for x in b)
        runs.append(dict(file=f, blocks=b, rates=rates, med=st.median(rates), inc=st.median(inc), agg=ts / T,
                         e2e=ts / ((rp["time_ms"] - rs) / 1000), ttt=(rp["time_ms"] - rs) / 60000,
                         status=rp["metadata"].get("status"), train_samples=ts,
                         gbs=first(ev, "global_batch_size")["value"],
                         ga=(first(ev, "gradient_accumulation_steps") or {}).get("value"),
                         platform=(first(ev, "submission_platform") or {}).get("value"),
                         hp={e["key"]: e["value"] for e in ev if e["key"].startswith("opt_") or e["key"] in ("global_batch_size", "gradient_accumulation_steps", "max_sequence_length", "seed")}))
    return runs

def resnet_set(R, d, logs_per_epoch, batches_per_step=1000):
    files = _sorted([f for f in git_ls(R, d) if re.search(r'result_\d+\.txt$', f)])
    runs = []
    for f in files:
        ev = parse(git_show(R, f))
        gbs = first(ev, "global_batch_size")["value"]
        bs = first(ev, "block_start"); E = bs["metadata"]["epoch_count"]
        imgs, ips = resnet_epoch_images(gbs, E, logs_per_epoch, batches_per_step)
        eps = resnet_epochs(ev)
        blocks = [dict(k=k, t0=t0, t1=t1, n=imgs[k]) for k, t0, t1 in eps]
        rates = [x["n"] / ((x["t1"] - x["t0"]) / 1000) for x in blocks]
        tot = sum(x["n"] for x in blocks)
        bstop = [e for e in ev if e["key"] == "block_stop"][0]["time_ms"]
        rs = first(ev, "run_start")["time_ms"]; rp = first(ev, "run_stop")
        runs.append(dict(file=f, blocks=blocks, rates=rates, med=st.median(rates), inc=None,
                         agg=tot / ((bstop - bs["time_ms"]) / 1000), e2e=tot / ((rp["time_ms"] - rs) / 1000),
                         ttt=(rp["time_ms"] - rs) / 60000, status=rp["metadata"].get("status"), train_samples=tot,
                         gbs=gbs, ga=(first(ev, "gradient_accumulation_steps") or {}).get("value"), ips=ips, epochs=E,
                         n_epoch_events=len(eps),
                         platform=(first(ev, "submission_platform") or {}).get("value"),
                         hp={e["key"]: e["value"] for e in ev if e["key"] in ("global_batch_size", "gradient_accumulation_steps", "opt_name", "lars_opt_base_learning_rate", "model_bn_span", "opt_learning_rate_warmup_epochs", "seed")}))
    return runs

def summarise(runs):
    med = [r["med"] for r in runs]; pool = [x for r in runs for x in r["rates"]]
    succ = [r for r in runs if r["status"] == "success"]
    inc = [r["inc"] for r in runs if r["inc"] is not None]
    S = dict(n_runs=len(runs), n_success=len(succ),
             train_only_sps_median=st.median(med), train_only_sps_min=min(med), train_only_sps_max=max(med),
             train_only_pooled_block_min=min(pool), train_only_pooled_block_max=max(pool),
             incl_eval_sps_median=st.median(inc) if inc else None, incl_eval_sps_min=min(inc) if inc else None,
             incl_eval_sps_max=max(inc) if inc else None,
             agg_train_only_sps_median=st.median([r["agg"] for r in runs]),
             e2e_sps_median=st.median([r["e2e"] for r in runs]),
             ttt_min_median=st.median([r["ttt"] for r in succ]) if succ else None,
             ttt_min_min=min(r["ttt"] for r in succ) if succ else None,
             ttt_min_max=max(r["ttt"] for r in succ) if succ else None)
    return S

def example(runs):
    """The block of the run whose median is the set median (or nearest), whose rate is closest to that run's median."""
    S = summarise(runs)
    r = min(runs, key=lambda r: abs(r["med"] - S["train_only_sps_median"]))
    j = min(range(len(r["rates"])), key=lambda j: abs(r["rates"][j] - r["med"]))
    return r, r["blocks"][j], r["rates"][j]

if __name__ == "__main__":
    R, d, kind = sys.argv[1:4]
    runs = bert_set(R, d) if kind == "bert" else resnet_set(R, d, int(sys.argv[4]))
    for r in runs:
        print(r["file"], r["status"], r["gbs"], r["ga"], r["platform"], "blocks", len(r["blocks"]), "med %.1f" % r["med"], "ts", r["train_samples"])
    print(json.dumps({k: (round(v, 3) if isinstance(v, float) else v) for k, v in summarise(runs).items()}, indent=0))
