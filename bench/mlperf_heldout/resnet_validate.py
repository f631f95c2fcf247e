import statistics as st, sys
"""Check of the ResNet image count: per-step time of the simulated 5-step and 6-step epochs of every Graphcore
ResNet-50 set (``--mirrors DIR``: paths.py)."""
from analyse import *
from paths import results_repo
sets=[("v1.0","ipu-pod16-TF1"),("v1.0","ipu-pod64-TF1"),("v1.1","ipu-pod16-TF1"),("v1.1","ipu-pod64-TF1"),("v1.1","ipu-pod128-TF1"),("v1.1","ipu-pod256-TF1"),
      ("v2.0","ipu-pod16-TF1-closed"),("v2.0","ipu-pod64-TF1-closed"),("v2.0","ipu-pod128-TF1-closed"),("v2.0","ipu-pod256-TF1-closed")]
for rnd,s in sets:
    runs=resnet_set(results_repo(rnd),"Graphcore/results/%s/resnet"%s,5)
    # validation of the simulation: per-step time in simulated-5-step vs 6-step epochs (excluding epoch 1)
    five=[];six=[];mism=0
    for r in runs:
        unit=r["ips"]*r["gbs"]
        if r["n_epoch_events"]!=r["epochs"]: mism+=1
        for b in r["blocks"][1:]:
            k=b["n"]//unit; dt=(b["t1"]-b["t0"])/1000
            (five if k==5 else six).append(dt/k)
    S=summarise(runs)
    print(rnd,s,"gbs",runs[0]["gbs"],"ga",runs[0]["ga"],"E",runs[0]["epochs"],"ips",runs[0]["ips"],"status",[r["status"][0] for r in runs],"epoch-event mismatch",mism,
          "| per-step s: 5-step epochs median %.3f (n%d); 6-step epochs median %s (n%d)"%(st.median(five),len(five),("%.3f"%st.median(six)) if six else "-",len(six)))
    print("    med %.1f min %.1f max %.1f pooled %.1f..%.1f agg %.1f e2e %.1f ttt %s"%(S["train_only_sps_median"],S["train_only_sps_min"],S["train_only_sps_max"],S["train_only_pooled_block_min"],S["train_only_pooled_block_max"],S["agg_train_only_sps_median"],S["e2e_sps_median"],S["ttt_min_median"]))
