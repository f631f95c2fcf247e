"""Parse MLLOG result files from a git mirror and compute throughput variants."""
import json, re, subprocess, statistics as st, sys

def git_show(repo, path, rev="HEAD"):
    return subprocess.run(["git", "-C", repo, "show", f"{rev}:{path}"], capture_output=True, text=True, check=True).stdout

def git_ls(repo, prefix, rev="HEAD"):
    out = subprocess.run(["git", "-C", repo, "ls-tree", "-r", "--name-only", rev, prefix], capture_output=True, text=True, check=True).stdout
    return [l for l in out.splitlines() if l]

def parse(text):
    ev = []
    for line in text.splitlines():
        i = line.find(":::MLLOG")
        if i < 0:
            continue
        try:
            d = json.loads(line[i + 8:].strip())
        except json.JSONDecodeError:
            continue
        ev.append(d)
    return ev

def first(ev, key):
    for e in ev:
        if e["key"] == key:
            return e
    return None

def all_(ev, key):
    return [e for e in ev if e["key"] == key]

def bert_blocks(ev):
    """Pair each block_start/block_stop; samples of block k = epoch_num(eval k) - epoch_num(eval k-1)."""
    out = []
    starts = all_(ev, "block_start"); stops = all_(ev, "block_stop"); evals = all_(ev, "eval_accuracy")
    prev_epoch = 0
    prev_eval_t = None
    for k, (s, p) in enumerate(zip(starts, stops)):
        e = evals[k] if k < len(evals) else None
        if e is None:
            break
        n = e["metadata"]["epoch_num"] - prev_epoch
        out.append(dict(k=k, t0=s["time_ms"], t1=p["time_ms"], n=n, eval_t=e["time_ms"], prev_eval_t=prev_eval_t,
                        epoch_num=e["metadata"]["epoch_num"]))
        prev_epoch = e["metadata"]["epoch_num"]; prev_eval_t = e["time_ms"]
    return out

def resnet_epoch_images(gbs, epochs, logs_per_epoch, batches_per_step=1000, N=1281167):
    """Re-simulate the train.py (Graphcore TF1 MLPerf ResNet) loop: images processed between EPOCH_START(k)
    and EPOCH_STOP(k), for k = 1..epochs. Returns dict epoch -> images, and iterations_per_step."""
    import math
    ipe = N // gbs
    iterations = N * epochs // gbs
    log_freq = ipe // logs_per_epoch
    ips = log_freq if log_freq < batches_per_step else log_freq // int(round(log_freq / batches_per_step))
    imgs = {}
    i = 0; log_epoch = 1; cur = 1; count = 0
    while i < iterations:
        epoch = float(gbs * (i + ips)) / N
        if math.floor(epoch) == log_epoch and int(round(epoch)) != int(round(epochs)):
            imgs[log_epoch] = count; count = 0
            log_epoch = round(epoch) + 1
        count += ips * gbs
        i += ips
        if round(epoch) == epochs and i >= iterations:
            imgs[log_epoch] = count; count = 0
    return imgs, ips

def resnet_epochs(ev):
    """List of (epoch_num, t_start, t_stop) from epoch_start/epoch_stop pairs."""
    st_ = {}; out = []
    for e in ev:
        if e["key"] == "epoch_start":
            st_[e["metadata"]["epoch_num"]] = e["time_ms"]
        elif e["key"] == "epoch_stop":
            k = e["metadata"]["epoch_num"]
            if k in st_:
                out.append((k, st_[k], e["time_ms"]))
    return out
