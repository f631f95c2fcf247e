import json
"""The supplementary table of PROVENANCE.md: Graphcore result sets not in the CSV (``--mirrors DIR``: paths.py)."""
from analyse import *
from paths import results_repo
B=[("v2.0","ipu-pod128-POPART-closed","configs/pod128-closed.json"),("v2.0","ipu-pod256-POPART-closed","configs/pod256-closed.json"),
   ("v2.0","ipu-pod16-PaddlePaddle-closed","run_mlperf_POD16.sh (paddlepaddle)"),("v2.0","ipu-pod64-PaddlePaddle-closed","run_mlperf_POD64.sh (paddlepaddle)"),
   ("v1.1","ipu-pod128-POPART-closed","configs/mk2/pod128-closed.json"),("v1.1","ipu-pod16-POPART-open","configs/mk2/pod16-open.json"),
   ("v1.1","ipu-pod64-POPART-open","configs/mk2/pod64-open.json"),("v1.1","ipu-pod128-POPART-open","configs/mk2/pod128-open.json"),
   ("v1.0","ipu-pod16-POPART-open","configs/mk2/pod16-open.json"),("v1.0","ipu-pod64-POPART-open","configs/mk2/pod64-open.json")]
Rn=[("v2.0","ipu-pod128-TF1-closed","mk2_resnet50_mlperf_pod128_lars",1000),("v2.0","ipu-pod256-TF1-closed","mk2_resnet50_mlperf_pod256_lars",1000),
    ("v1.1","ipu-pod128-TF1","mk2_resnet50_mlperf_pod128_lars",1000),("v1.1","ipu-pod256-TF1","mk2_resnet50_mlperf_pod256_lars",1000)]
out=[]
for rnd,s,c in B:
    runs=bert_set(results_repo(rnd),"Graphcore/results/%s/bert"%s); S=summarise(runs)
    out.append((rnd,s,"BERT",c,runs[0]["gbs"],runs[0]["ga"],S))
for rnd,s,c,bps in Rn:
    runs=resnet_set(results_repo(rnd),"Graphcore/results/%s/resnet"%s,5,bps); S=summarise(runs)
    out.append((rnd,s,"ResNet-50",c,runs[0]["gbs"],runs[0]["ga"],S))
for rnd,s,b,c,g,ga,S in out:
    print("| %s | %s | %s | %s | %s | %s | %d/%d | %.1f | %.1f-%.1f |"%(rnd,s,b,c,g,ga,S["n_success"],S["n_runs"],S["train_only_sps_median"],S["train_only_sps_min"],S["train_only_sps_max"]))
