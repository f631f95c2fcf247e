"""Bench: models outside the ONNX zoo, built and exported at run time as a new user would, one line each.

    python -m bench.onnx_wild                  # every model, both exporters
    python -m bench.onnx_wild roberta swin     # these models only
    python -m bench.onnx_wild --exporters classic

Needs torch 2.13, torchvision, transformers, onnxscript and onnxruntime (``tests/data/onnx_zoo/make_zoo.py``'s
packages). Each model is built from its ``transformers`` / ``torchvision`` config with random (seeded) weights,
shrunk (two layers, small widths, batch 2, sequence 8, 32x32 images), exported by both torch exporters with
``make_zoo.export`` (TorchScript ``dynamo=False`` opset 17 with dynamic batch / sequence, and torch.export's
default) into a temporary folder (nothing is kept), and run, in a child process of its own, through
``emulate_onnx`` as ``popvision-lite emulate --onnx FILE`` does: a timing-only inference step (fits, ops), full
numerics in fp32 against ONNX Runtime on the same inputs (max |error| relative to the output's max, the check's
verdict), and a timing-only ``--training`` step. A stage that fails prints its error (type and message): an
export or import failure ends the model's line, a numerics or training failure is reported beside the others.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
B, S = 2, 8


def _zoo():
    """``tests/data/onnx_zoo/make_zoo.py`` (its export, input and wrapper helpers)."""
    spec = importlib.util.spec_from_file_location("make_zoo", ROOT / "tests" / "data" / "onnx_zoo" / "make_zoo.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _first(model, names, **kw):
    """A module returning the first output (``last_hidden_state``) of a Hugging Face model called by keywords."""
    import torch

    class Wrap(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = model

        def forward(self, *args):
            return self.m(**dict(zip(names, args, strict=True)), **kw)[0]
    return Wrap()


def _text(cls_name, cfg_name, seed, decoder=False, **cfg):
    """A shrunk Hugging Face text model on (input_ids, attention_mask)."""
    import transformers as tf

    zoo = _zoo()
    c = getattr(tf, cfg_name)(**cfg)
    model = getattr(tf, cls_name)(c)
    rng = np.random.default_rng(seed)
    vocab = cfg.get("vocab_size", 256)
    ins = {"input_ids": zoo._ids(rng, vocab), "attention_mask": zoo._mask()}
    axes = {k: {0: "batch", 1: "sequence"} for k in ins}
    kw = {"use_cache": False} if decoder else {}
    return _first(model, list(ins), **kw), ins, axes


_ENC = dict(vocab_size=256, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
            max_position_embeddings=64)
_DEC = dict(vocab_size=256, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
            max_position_embeddings=64)


def bart():
    import transformers as tf

    zoo = _zoo()
    cfg = tf.BartConfig(vocab_size=256, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                        decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64)
    rng = np.random.default_rng(11)
    ins = {"input_ids": zoo._ids(rng, 256), "attention_mask": zoo._mask(), "decoder_input_ids": zoo._ids(rng, 256, (B, 4))}
    axes = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"},
            "decoder_input_ids": {0: "batch", 1: "decoder_sequence"}}
    return _first(tf.BartModel(cfg), list(ins), use_cache=False), ins, axes


def whisper():
    import transformers as tf

    zoo = _zoo()
    cfg = tf.WhisperConfig(d_model=32, encoder_layers=2, encoder_attention_heads=4, encoder_ffn_dim=64,
                           num_mel_bins=16, max_source_positions=16, vocab_size=256, decoder_layers=2,
                           decoder_attention_heads=4, decoder_ffn_dim=64, max_target_positions=32, pad_token_id=0,
                           bos_token_id=1, eos_token_id=2, decoder_start_token_id=1)
    rng = np.random.default_rng(12)
    ins = {"input_features": rng.standard_normal((B, 16, 32)).astype(np.float32),
           "decoder_input_ids": zoo._ids(rng, 256, (B, 4))}
    axes = {"input_features": {0: "batch"}, "decoder_input_ids": {0: "batch", 1: "decoder_sequence"}}
    return _first(tf.WhisperModel(cfg), list(ins), use_cache=False), ins, axes


def clip_text():
    return _text("CLIPTextModel", "CLIPTextConfig", 13, **_ENC)


def _image_model(cls_name, cfg_name, seed, pooled=False, size=32, **cfg):
    import transformers as tf

    zoo = _zoo()
    model = getattr(tf, cls_name)(getattr(tf, cfg_name)(**cfg))
    wrap = zoo._pooled(model) if pooled else _first(model, ["pixel_values"])
    x = np.random.default_rng(seed).standard_normal((B, 3, size, size)).astype(np.float32)
    return wrap, {"pixel_values": x}, zoo._image_axes()


def torchvision_wild(name):
    import torch
    import torchvision.models as tvm
    from torchvision.models import densenet, resnet, vgg

    zoo = _zoo()
    size = 32
    if name == "densenet":
        model = densenet.DenseNet(growth_rate=8, block_config=(2, 2, 2, 2), num_init_features=16, bn_size=2,
                                  num_classes=10)
    elif name == "vgg":
        model = vgg.VGG(vgg.make_layers([8, "M", 16, "M", 32, 32, "M", 32, "M"], batch_norm=True), num_classes=10,
                        init_weights=True)
        model.classifier = torch.nn.Sequential(torch.nn.Linear(32 * 7 * 7, 64), torch.nn.ReLU(True),
                                               torch.nn.Dropout(), torch.nn.Linear(64, 10))
        size = 112  # four 2x2 max pools to its 7x7 adaptive pool, as 224 gives 7x7 after five
    elif name == "squeezenet":
        model = tvm.squeezenet1_1(weights=None, num_classes=10)
        size = 64
    elif name == "shufflenet_v2":
        model = tvm.shufflenet_v2_x0_5(weights=None, num_classes=10)
    elif name == "regnet":
        from torchvision.models.regnet import BlockParams, RegNet

        model = RegNet(BlockParams.from_init_params(depth=4, w_0=8, w_a=8.0, w_m=2.0, group_width=4, se_ratio=0.25),
                       stem_width=8, num_classes=10)
    elif name == "inception_v3":
        model = tvm.inception_v3(weights=None, num_classes=10, aux_logits=False, init_weights=False)
        size = 75  # the smallest image its stride-2 stages take
    elif name == "mnasnet":
        model = tvm.mnasnet0_5(weights=None, num_classes=10)
    elif name == "resnext":  # ResNeXt blocks (32 groups x 4 wide at full size): 8 groups, [1, 1, 1, 1] blocks
        model = resnet.ResNet(resnet.Bottleneck, [1, 1, 1, 1], num_classes=10, groups=8, width_per_group=4)
    zoo._randomise_bn(model)
    x = np.random.default_rng(15).standard_normal((B, 3, size, size)).astype(np.float32)
    return model, {"pixel_values": x}, zoo._image_axes()


WILD = {
    "roberta": lambda: _text("RobertaModel", "RobertaConfig", 21, **{**_ENC, "pad_token_id": 1}),
    "albert": lambda: _text("AlbertModel", "AlbertConfig", 22, embedding_size=16, **_ENC),
    "electra": lambda: _text("ElectraModel", "ElectraConfig", 23, embedding_size=16, **_ENC),
    "xlm_roberta": lambda: _text("XLMRobertaModel", "XLMRobertaConfig", 24, **{**_ENC, "pad_token_id": 1}),
    "bart": bart,
    "whisper": whisper,
    "clip_text": clip_text,
    "clip_vision": lambda: _image_model("CLIPVisionModel", "CLIPVisionConfig", 25, image_size=32, patch_size=8,
                                        hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                        intermediate_size=64),
    "deit": lambda: _image_model("DeiTModel", "DeiTConfig", 26, image_size=32, patch_size=8, hidden_size=32,
                                 num_hidden_layers=2, num_attention_heads=4, intermediate_size=64),
    "swin": lambda: _image_model("SwinModel", "SwinConfig", 27, image_size=32, patch_size=2, embed_dim=16,
                                 depths=[1, 1], num_heads=[2, 4], window_size=4),
    "segformer": lambda: _image_model("SegformerModel", "SegformerConfig", 28, num_encoder_blocks=2, depths=[1, 1],
                                      sr_ratios=[2, 1], hidden_sizes=[16, 32], num_attention_heads=[1, 2],
                                      patch_sizes=[7, 3], strides=[4, 2], mlp_ratios=[2, 2]),
    "wav2vec2": lambda: _zoo().audio_encoder("wav2vec2")[:3],  # since committed to the zoo
    "hubert": lambda: _zoo().audio_encoder("hubert")[:3],
    "mistral": lambda: _text("MistralModel", "MistralConfig", 31, decoder=True, num_key_value_heads=2,
                             sliding_window=4, **_DEC),
    "qwen2": lambda: _text("Qwen2Model", "Qwen2Config", 32, decoder=True, num_key_value_heads=2, **_DEC),
    "phi": lambda: _text("PhiModel", "PhiConfig", 33, decoder=True, partial_rotary_factor=0.5, **_DEC),
    "falcon": lambda: _text("FalconModel", "FalconConfig", 34, decoder=True, vocab_size=256, hidden_size=32,
                            num_hidden_layers=2, num_attention_heads=4),
    "mpt": lambda: _text("MptModel", "MptConfig", 35, decoder=True, vocab_size=256, d_model=32, n_layers=2, n_heads=4,
                         max_seq_len=64),
    "bloom": lambda: _text("BloomModel", "BloomConfig", 36, decoder=True, vocab_size=256, hidden_size=32, n_layer=2,
                           n_head=4),
    "convnext_v2": lambda: _image_model("ConvNextV2Model", "ConvNextV2Config", 37, pooled=True,
                                        hidden_sizes=[16, 32, 48, 64], depths=[1, 1, 1, 1], image_size=32),
    **{n: (lambda n=n: torchvision_wild(n)) for n in ("densenet", "vgg", "squeezenet", "shufflenet_v2", "regnet",
                                                      "inception_v3", "mnasnet", "resnext")},
    "unet": lambda: _zoo().unet_module()[:3],  # since committed to the zoo (its ConvTranspose and Resize)

}


# ---------------------------------------------------------------- issue 47: the architectures of the second round


def _audio(cls_name, cfg_name, seed, **cfg):
    import transformers as tf

    model = getattr(tf, cls_name)(getattr(tf, cfg_name)(**cfg))
    x = np.random.default_rng(seed).standard_normal((B, 400)).astype(np.float32)
    return _first(model, ["input_values"]), {"input_values": x}, {"input_values": {0: "batch"}}


def lstm_gru():
    """A 2-layer bidirectional LSTM then a GRU over its outputs, on (batch, time, features)."""
    import torch

    class Rnn(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = torch.nn.LSTM(16, 24, num_layers=2, batch_first=True, bidirectional=True)
            self.gru = torch.nn.GRU(48, 20, batch_first=True)
            self.head = torch.nn.Linear(20, 8)

        def forward(self, x):
            y, _ = self.lstm(x)
            z, _ = self.gru(y)
            return self.head(z)
    x = np.random.default_rng(41).standard_normal((B, S, 16)).astype(np.float32)
    return Rnn(), {"x": x}, {"x": {0: "batch", 1: "sequence"}}


def convnext_1d():
    """A 1-D ConvNeXt (audio / time-series): a stride-4 stem, blocks of a depthwise Conv1d (kernel 7), LayerNorm
    over channels, Linear 4x, GELU, Linear, layer scale and a residual; downsampling between stages."""
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.dw = nn.Conv1d(d, d, 7, padding=3, groups=d)
            self.ln = nn.LayerNorm(d, eps=1e-6)
            self.pw1, self.pw2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
            self.gamma = nn.Parameter(torch.full((d,), 0.5))

        def forward(self, x):
            y = self.dw(x).transpose(1, 2)
            y = self.pw2(nn.functional.gelu(self.pw1(self.ln(y)))) * self.gamma
            return x + y.transpose(1, 2)

    class ConvNeXt1d(nn.Module):
        def __init__(self, dims=(16, 32)):
            super().__init__()
            self.stem = nn.Conv1d(4, dims[0], 4, stride=4)
            self.s1 = nn.Sequential(Block(dims[0]), Block(dims[0]))
            self.down = nn.Conv1d(dims[0], dims[1], 2, stride=2)
            self.s2 = nn.Sequential(Block(dims[1]), Block(dims[1]))
            self.head = nn.Linear(dims[1], 5)

        def forward(self, x):
            y = self.s2(self.down(self.s1(self.stem(x))))
            return self.head(y.mean(-1))
    x = np.random.default_rng(42).standard_normal((B, 4, 64)).astype(np.float32)
    return ConvNeXt1d(), {"x": x}, {"x": {0: "batch"}}


WILD.update({
    "deberta_v2": lambda: _text("DebertaV2Model", "DebertaV2Config", 51, **{**_ENC, "relative_attention": True,
                                                                            "position_buckets": 8,
                                                                            "pos_att_type": ["p2c", "c2p"]}),
    "gpt_neox": lambda: _text("GPTNeoXModel", "GPTNeoXConfig", 52, decoder=True, **_DEC),
    "gemma2": lambda: _text("Gemma2Model", "Gemma2Config", 53, decoder=True, num_key_value_heads=2, head_dim=8,
                            sliding_window=4, **_DEC),
    "opt": lambda: _text("OPTModel", "OPTConfig", 54, decoder=True, vocab_size=256, hidden_size=32,
                         num_hidden_layers=2, num_attention_heads=4, ffn_dim=64, max_position_embeddings=64,
                         word_embed_proj_dim=32),
    "mamba": lambda: _text("MambaModel", "MambaConfig", 55, decoder=True, vocab_size=256, hidden_size=32,
                           state_size=4, num_hidden_layers=2, expand=2, conv_kernel=4, time_step_rank=4),
    # initializer_range 0.2: at the default 0.02 the activations of the random model decay to exactly zero by the
    # last stage (5e-36, then 0 in fp32), an all-zero output the numerics check refuses to pass
    "mobilevit": lambda: _image_model("MobileViTModel", "MobileViTConfig", 56, pooled=True, image_size=32,
                                      hidden_sizes=[16, 24, 32], neck_hidden_sizes=[8, 8, 16, 16, 24, 24, 32],
                                      num_attention_heads=2, initializer_range=0.2),
    # LeViT's three stages (two attention subsamplings) need 4x4 tokens: a 64x64 image, 16x16 patches
    "levit": lambda: _image_model("LevitModel", "LevitConfig", 57, pooled=True, size=64, image_size=64,
                                  hidden_sizes=[32, 48, 64], num_attention_heads=[2, 3, 4], depths=[1, 1, 1],
                                  key_dim=[8, 8, 8], mlp_ratio=[2, 2, 2], attention_ratio=[2, 2, 2], patch_size=16),
    "beit": lambda: _image_model("BeitModel", "BeitConfig", 58, image_size=32, patch_size=8, hidden_size=32,
                                 num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                                 use_relative_position_bias=True),
    "wav2vec2_conformer": lambda: _audio("Wav2Vec2ConformerModel", "Wav2Vec2ConformerConfig", 59, hidden_size=32,
                                         num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                                         conv_dim=(16, 16, 16), conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3),
                                         num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4,
                                         conv_depthwise_kernel_size=7, position_embeddings_type="rotary",
                                         vocab_size=32),
    "lstm_gru": lstm_gru,
    "convnext_1d": convnext_1d,
    "squeezebert": lambda: _text("SqueezeBertModel", "SqueezeBertConfig", 60, embedding_size=32, q_groups=2,
                                 k_groups=2, v_groups=2, post_attention_groups=2, intermediate_groups=4,
                                 output_groups=4, **_ENC),
    "funnel": lambda: _text("FunnelModel", "FunnelConfig", 61, vocab_size=256, block_sizes=[1, 1], d_model=32,
                            n_head=4, d_head=8, d_inner=64, max_position_embeddings=64),
})


def _err(e) -> str:
    msg = " ".join(str(e).split())
    return f"{type(e).__name__}: {msg[:240]}"


def one(name: str, exporter: str, tmp: str, repeat: int = 1) -> dict:
    """Build, export and measure one model (runs in the child process)."""
    import onnx
    import torch

    from popvision_lite.emulator.onnx_import import emulate_onnx

    zoo = _zoo()
    zoo._torchvision_without_its_extension()
    rec = {"model": name, "exporter": exporter}
    torch.manual_seed(0)
    path = Path(tmp) / f"{name}.{exporter}.onnx"
    try:
        model, ins, axes = WILD[name]()
        model.eval()
        with torch.no_grad():
            zoo.export(name, exporter, model, ins, axes, path)
        m = onnx.load(str(path), load_external_data=False)
        ins = {i.name: ins[i.name] for i in m.graph.input if i.name in ins}
        rec.update(node_types=len({n.op_type for n in m.graph.node}), op_types=sorted({n.op_type for n in m.graph.node}))
    except Exception as e:
        rec["export_error"] = _err(e)
        return rec
    try:
        t0 = time.process_time()
        run = emulate_onnx(path, inputs=ins, timing_only=True)
        rec.update(ok=True, ops=run.num_ops, fits=bool(run.fits), cycles=int(run.total_cycles),
                   cpu_s=time.process_time() - t0)
    except Exception as e:
        rec.update(ok=False, error=_err(e))
        return rec
    try:
        outs = []
        for _ in range(repeat):  # the same file, the same seed: the same verdict and the same values every time
            r = emulate_onnx(path, inputs=ins, precision="fp32")
            (c,) = (v for k, v in r.numeric_checks.items() if k != "intermediates")
            mid = r.numeric_checks.get("intermediates", {})
            outs.append((np.concatenate([np.ravel(v) for v in r.outputs.values()]),
                         tuple(v["passed"] for v in r.numeric_checks.values())))
        rec["fp32"] = {"passed": bool(c["passed"] and mid.get("passed", True)), "max_rel": c["max_rel_err"],
                       "mid_rel": mid.get("max_rel_err"), "mid_compared": mid.get("compared", 0),
                       "mid_failed": [f["name"] for f in mid.get("failed", [])[:3]], "problem": c.get("problem"),
                       "runs": repeat, "identical": all(np.array_equal(o[0], outs[0][0]) and o[1] == outs[0][1]
                                                        for o in outs),
                       "notes": [n for n in r.notes if "seeded" in n]}
    except Exception as e:
        rec["fp32"] = {"error": _err(e)}
    try:
        t = emulate_onnx(path, inputs=ins, timing_only=True, training=True)
        rec["training"] = {"fits": bool(t.fits), "cycles": int(t.total_cycles)}
    except Exception as e:
        rec["training"] = {"error": _err(e)}
    return rec


def line(rec) -> str:
    head = f"{rec['model']:<15}{rec['exporter']:<8}"
    if "export_error" in rec:
        return head + f"{'EXPORT':>7}  {rec['export_error']}"
    if not rec.get("ok"):
        return head + f"{'ERROR':>7}{rec.get('node_types', 0):>6}  {rec.get('error')}"
    f32, tr = rec["fp32"], rec["training"]
    num = f"{f32['max_rel']:.1e}" + ("" if f32["passed"] else "!") if "max_rel" in f32 else "error"
    mid = (f"{f32['mid_rel']:.1e}/{f32['mid_compared']}" if f32.get("mid_rel") is not None else "-") \
        if "max_rel" in f32 else ""
    flips = ("same" if f32["identical"] else "FLIPS") if f32.get("runs", 1) > 1 else ""
    train = ("fits" if tr["fits"] else "NO FIT") if "fits" in tr else "error"
    out = (head + f"{'ok':>7}{rec['node_types']:>6}{rec['ops']:>5}{'yes' if rec['fits'] else 'NO':>5}"
           f"{num:>10}{mid:>13}{flips:>6}{train:>8}")
    errs = [f"{k}: {v['error']}" for k, v in (("fp32", f32), ("training", tr)) if "error" in v]
    errs += [f"fp32: {f32['problem']}"] if f32.get("problem") else []
    errs += [f"intermediates failed: {', '.join(f32['mid_failed'])}"] if f32.get("mid_failed") else []
    return out + ("  " + "; ".join(errs) if errs else "")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="*", help=f"default: all of {', '.join(WILD)}")
    ap.add_argument("--exporters", default="classic,dynamo")
    ap.add_argument("--json", help="also write the rows to this file")
    ap.add_argument("--repeat", type=int, default=1, help="run the fp32 check this many times (same verdict and "
                                                          "values each time?)")
    ap.add_argument("--one", nargs=3, metavar=("MODEL", "EXPORTER", "DIR"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print("WILD-ROW " + json.dumps(one(*args.one, repeat=args.repeat)))
        return 0
    unknown = sorted(set(args.models) - set(WILD))
    if unknown:
        ap.error(f"unknown model(s) {', '.join(unknown)}; choose from {', '.join(WILD)}")
    print(f"{'model':<15}{'export':<8}{'import':>7}{'types':>6}{'ops':>5}{'fits':>5}{'fp32 err':>10}"
          f"{'inner/count':>13}{'runs':>6}{'train':>8}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="onnx_wild_") as tmp:
        for name in args.models or list(WILD):
            for exporter in args.exporters.split(","):
                out = subprocess.run([sys.executable, "-m", "bench.onnx_wild", "--one", name, exporter, tmp,
                                      "--repeat", str(args.repeat)],
                                     capture_output=True, text=True, cwd=ROOT)
                tagged = [x for x in out.stdout.splitlines() if x.startswith("WILD-ROW ")]
                rec = json.loads(tagged[-1][9:]) if tagged else {
                    "model": name, "exporter": exporter, "ok": False,
                    "error": "child died: " + " ".join(out.stderr.strip().splitlines()[-1:])[:240]}
                rows.append(rec)
                print(line(rec), flush=True)
    exported = [r for r in rows if "export_error" not in r]
    ok = [r for r in exported if r.get("ok")]
    passed = [r for r in ok if r["fp32"].get("passed")]
    trained = [r for r in ok if "fits" in r["training"]]
    print(f"\n{len(exported)}/{len(rows)} export; of those {len(ok)} import and run, {len(passed)} pass fp32 numerics "
          f"(error relative to the output's max; '!' = failed), {len(trained)} run a training step")
    if args.json:
        from popvision_lite.atomic_io import write_bytes_atomic

        write_bytes_atomic(args.json, json.dumps(rows, indent=1).encode())
    print("BENCH-RESULT " + json.dumps({"bench": "onnx_wild", "rows": len(rows), "exported": len(exported),
                                        "imported": len(ok), "numerics_passed": len(passed),
                                        "trained": len(trained)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
