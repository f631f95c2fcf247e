"""Bench: full-size imported models - peak memory of full numerics, CPU of timing-only, a training step.

    python -m bench.onnx_memory                       # every model
    python -m bench.onnx_memory bert_base gpt2        # these only
    python -m bench.onnx_memory --cache DIR           # keep the exported files in DIR (reused when present)

Needs torch 2.13, torchvision and transformers (``tests/data/onnx_zoo/make_zoo.py``'s packages).  Each model is
built at its published size with random (seeded) weights - BERT-base (110 M parameters), GPT-2 small (124 M),
DistilBERT (66 M), ViT-S/16 (22 M), ResNet-50 (25.6 M), MobileNetV2 (3.5 M) - and exported once with the
TorchScript exporter (``dynamo=False``, opset 17; the text models' batch and sequence dynamic), GPT-2 with
torch.export's (the TorchScript exporter has no ``aten::diff``, which transformers 5's causal mask uses).  Then, each in a
child process of its own (its peak RSS is its own: ``ru_maxrss``), as ``popvision-lite emulate --onnx`` runs it:

* ``full``: full numerics at batch 1 (sequence 128, 224x224 images) in fp16 against ONNX Runtime: CPU seconds,
  peak RSS of the whole process (import, graph, emulation, the ONNX Runtime reference) - the issue-47 target is
  at most 3 GB for any model of at most 130 M parameters;
* ``timing``: timing-only inference at batch 2: CPU seconds (the MobileNetV2 / ResNet-50 ratio: target 2x);
* ``train``: a timing-only ``--training`` step (ViT-S/16 at batch 8 in the issue).

CPU seconds, not wall: the machine is shared.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SEQ = 128


def _text(kind):
    import torch
    import transformers as tf

    if kind == "bert_base":
        model = tf.BertModel(tf.BertConfig(), add_pooling_layer=False)
    elif kind == "distilbert":
        model = tf.DistilBertModel(tf.DistilBertConfig())
    else:
        model = tf.GPT2Model(tf.GPT2Config())
    names = ["input_ids"] if kind == "gpt2" else ["input_ids", "attention_mask"]

    class Wrap(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = model

        def forward(self, *args):
            kw = {"use_cache": False} if kind == "gpt2" else {}
            return self.m(**dict(zip(names, args, strict=True)), **kw).last_hidden_state
    rng = np.random.default_rng(1)
    ins = {"input_ids": rng.integers(0, 1000, size=(1, SEQ)).astype(np.int64)}
    if "attention_mask" in names:
        ins["attention_mask"] = np.ones((1, SEQ), np.int64)
    return Wrap(), ins, {k: {0: "batch", 1: "sequence"} for k in ins}


def _vision(kind):
    import torch
    import torchvision.models as tvm
    import transformers as tf

    if kind == "vit_s16":
        cfg = tf.ViTConfig(hidden_size=384, num_hidden_layers=12, num_attention_heads=6, intermediate_size=1536,
                           image_size=224, patch_size=16)
        inner = tf.ViTModel(cfg, add_pooling_layer=False)

        class Wrap(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.m = inner

            def forward(self, pixel_values):
                return self.m(pixel_values=pixel_values).last_hidden_state
        model = Wrap()
    elif kind == "resnet50":
        model = tvm.resnet50(weights=None)
    else:
        model = tvm.mobilenet_v2(weights=None)
    x = np.random.default_rng(2).standard_normal((1, 3, 224, 224)).astype(np.float32)
    return model, {"pixel_values": x}, {"pixel_values": {0: "batch"}}


MODELS = {"bert_base": lambda: _text("bert_base"), "gpt2": lambda: _text("gpt2"),
          "distilbert": lambda: _text("distilbert"), "vit_s16": lambda: _vision("vit_s16"),
          "resnet50": lambda: _vision("resnet50"), "mobilenet_v2": lambda: _vision("mobilenet_v2")}
STAGES = ("full", "timing", "train")
TRAIN_BATCH = {"vit_s16": 8}
TIMING_BATCH = 2  # issue 47 measured MobileNetV2 / ResNet-50 timing-only at batch 2 (22 s vs 8.8 s)


def export(name: str, folder: Path) -> Path:
    """The model's .onnx file in ``folder`` (exported when it is not there yet) and its inputs' .npz."""
    path = folder / f"{name}.onnx"
    if path.exists() and path.with_suffix(".npz").exists():
        return path
    import torch

    from bench.onnx_wild import _zoo

    _zoo()._torchvision_without_its_extension()
    torch.manual_seed(0)
    model, ins, axes = MODELS[name]()
    model.eval()
    args = tuple(torch.from_numpy(v) for v in ins.values())
    tmp = folder / f"{name}.part.onnx"
    with torch.no_grad():
        try:
            torch.onnx.export(model, args, str(tmp), input_names=list(ins), output_names=["output"],
                              opset_version=17, dynamic_axes=axes, dynamo=False, do_constant_folding=True)
        except Exception:  # GPT-2 in transformers 5: the TorchScript exporter has no aten::diff (its mask)
            prog = torch.onnx.export(model, args, input_names=list(ins), output_names=["output"], dynamo=True,
                                     external_data=False)
            prog.save(str(tmp), external_data=False)
    np.savez(path.with_suffix(".npz"), **ins)
    tmp.rename(path)
    return path


def one(path: str, stage: str, name: str) -> dict:
    """Run one stage (in the child process)."""
    from popvision_lite.emulator.onnx_import import emulate_onnx

    with np.load(Path(path).with_suffix(".npz")) as z:
        ins = {k: z[k] for k in z.files}
    t0 = time.process_time()
    rec = {"model": name, "stage": stage}
    if stage == "full":
        r = emulate_onnx(path, inputs=ins)
        rec["checks"] = {k: {"passed": bool(c["passed"]), "max_rel": c.get("max_rel_err")}
                         for k, c in r.numeric_checks.items()}
    elif stage == "timing":
        r = emulate_onnx(path, batch=TIMING_BATCH, seq=SEQ, timing_only=True)
        rec["batch"] = TIMING_BATCH
    else:
        b = TRAIN_BATCH.get(name, 1)
        r = emulate_onnx(path, batch=b, seq=SEQ, timing_only=True, training=True)
        rec["batch"] = b
    rec.update(cpu_s=time.process_time() - t0, fits=bool(r.fits), cycles=int(r.total_cycles),
               rss_gb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20)
    return rec


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="*", help=f"default: all of {', '.join(MODELS)}")
    ap.add_argument("--stages", default=",".join(STAGES))
    ap.add_argument("--cache", help="folder for the exported files (kept; default: a temporary folder)")
    ap.add_argument("--json", help="also write the rows to this file")
    ap.add_argument("--one", nargs=3, metavar=("PATH", "STAGE", "NAME"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print("MEM-ROW " + json.dumps(one(*args.one)), flush=True)
        return 0
    import tempfile

    unknown = sorted(set(args.models) - set(MODELS))
    if unknown:
        ap.error(f"unknown model(s) {', '.join(unknown)}; choose from {', '.join(MODELS)}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="onnx_memory_") as tmp:
        folder = Path(args.cache or tmp)
        folder.mkdir(parents=True, exist_ok=True)
        print(f"{'model':<14}{'stage':<8}{'CPU s':>8}{'RSS GB':>8}{'cycles':>12}  checks")
        for name in args.models or list(MODELS):
            path = export(name, folder)
            for stage in args.stages.split(","):
                out = subprocess.run([sys.executable, "-m", "bench.onnx_memory", "--one", str(path), stage, name],
                                     capture_output=True, text=True, cwd=ROOT)
                tagged = [x for x in out.stdout.splitlines() if x.startswith("MEM-ROW ")]
                rec = json.loads(tagged[-1][8:]) if tagged else {
                    "model": name, "stage": stage, "error": " ".join(out.stderr.strip().splitlines()[-1:])[:300]}
                rows.append(rec)
                if "error" in rec:
                    print(f"{name:<14}{stage:<8}  ERROR {rec['error']}", flush=True)
                    continue
                checks = ", ".join(f"{k} {'pass' if c['passed'] else 'FAIL'} {c['max_rel']:.1e}"
                                   for k, c in rec.get("checks", {}).items())
                print(f"{name:<14}{stage:<8}{rec['cpu_s']:>8.1f}{rec['rss_gb']:>8.2f}{rec['cycles']:>12,}  {checks}",
                      flush=True)
    if args.json:
        from popvision_lite.atomic_io import write_bytes_atomic

        write_bytes_atomic(args.json, json.dumps(rows, indent=1).encode())
    print("BENCH-RESULT " + json.dumps({"bench": "onnx_memory", "rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
