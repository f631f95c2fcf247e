"""Export a PyTorch / Hugging Face model to ONNX, then emulate it on the IPU emulator.

    python examples/onnx_from_pytorch.py                 # a small PyTorch MLP (needs torch)
    python examples/onnx_from_pytorch.py --hf prajjwal1/bert-tiny   # a Hugging Face model (needs transformers)
    python examples/onnx_from_pytorch.py --no-torch      # no torch: a BERT layer built with onnx.helper

Same as the command line:  popvision-lite emulate --onnx model.onnx --batch 2 --seq 16 -o run.pvl
Then open run.pvl in the app (popvision-lite run.pvl) or in a notebook (pvl.open).
"""

from __future__ import annotations

import argparse
import sys

import popvision_lite as pvl


def export_torch_mlp(path):
    import torch

    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 10)).eval()
    x = torch.randn(2, 64)
    torch.onnx.export(model, (x,), path, input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}}, opset_version=17, dynamo=False)


def export_hf(path, name):
    # the same as:  optimum-cli export onnx --model NAME out_dir/   (then use out_dir/model.onnx)
    import torch
    from transformers import AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(name)
    model = AutoModel.from_pretrained(name).eval()
    enc = tok(["hello world"], return_tensors="pt", padding="max_length", max_length=16)
    torch.onnx.export(model, (enc["input_ids"], enc["attention_mask"]), path,
                      input_names=["input_ids", "attention_mask"], output_names=["last_hidden_state"],
                      dynamic_axes={"input_ids": {0: "batch", 1: "sequence"},
                                    "attention_mask": {0: "batch", 1: "sequence"}}, opset_version=17,
                      dynamo=False)


def build_without_torch(path):
    import onnx

    from popvision_lite.emulator.onnx_import import builders

    onnx.save(builders.bert_layer(hidden=64, heads=4), path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hf", metavar="MODEL", help="a Hugging Face model name (needs transformers)")
    ap.add_argument("--no-torch", action="store_true", help="build a BERT layer with onnx.helper instead")
    ap.add_argument("-o", "--output", default="onnx_run.pvl")
    args = ap.parse_args()
    path = "model.onnx"
    if args.no_torch:
        build_without_torch(path)
    elif args.hf:
        export_hf(path, args.hf)
    else:
        export_torch_mlp(path)
    run, profile = pvl.emulate_onnx(path, args.output, batch=2, seq=16)
    print(f"{run.num_ops} ops, {run.total_cycles:,} cycles ({run.seconds * 1e3:.3f} ms), fits: {run.fits}")
    for name, c in run.numeric_checks.items():
        print(f"  {name}: vs ONNX Runtime max abs err {c['max_abs_err']:.2e} -> {'ok' if c['passed'] else 'FAILED'}")
    print(f"profile: {args.output} ({len(profile.ops)} ops)")
    return 0 if all(c["passed"] for c in run.numeric_checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
