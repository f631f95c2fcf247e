"""Build the ONNX model zoo the tests and ``bench/onnx_zoo.py`` use (run by hand; the outputs are committed).

    .venv/bin/pip install torch==2.13.0 torchvision transformers onnxscript onnxconverter-common
    .venv/bin/python tests/data/onnx_zoo/make_zoo.py [NAME ...]

Each model is built from its ``transformers`` / ``torchvision`` config with random weights (seeded), shrunk
(few layers, small hidden sizes, small images) so the files stay small, but with the graph patterns the
real exports have: attention through ``scaled_dot_product_attention`` (sdpa) and eager, Hugging Face masks,
T5's relative position buckets, ViT's CLS token, depthwise / grouped convolutions, squeeze-excite, Whisper's
1-D convolutions, Llama's RMSNorm, rotary embeddings, SwiGLU and grouped-query attention, a U-Net's
ConvTranspose and Resize, wav2vec2's InstanceNormalization.

Every model is exported twice: ``NAME.classic.onnx`` (TorchScript exporter, ``dynamo=False``, opset 17, batch
and sequence axes dynamic) and ``NAME.dynamo.onnx`` (torch.export-based exporter, its default opset, static
shapes).  Beside each: ``NAME.EXPORTER.npz`` with the inputs (``in:NAME``), ONNX Runtime's fp32 outputs on
them (``ref:NAME``) and ONNX Runtime's outputs of the same model converted to fp16 with onnxconverter-common
(``ref16:NAME``, inputs rounded to fp16): what a user's own fp16 run gives, the bar the emulator's fp16 run
is judged against.  ``manifest.json`` records the package versions, each model's config and the dims.
Nothing here runs at test time: the tests need only onnx + onnxruntime.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
B = 2  # batch of the saved inputs
S = 8  # sequence length of the saved inputs


def _ids(rng, vocab, shape=(B, S)):
    return rng.integers(0, vocab, size=shape).astype(np.int64)


def _mask():
    m = np.ones((B, S), np.int64)
    m[1, -3:] = 0  # the second sequence padded: the masks' -inf / min-value paths run
    return m


def hf_text(kind, attn):
    """(module, inputs dict, dynamic axes, config dict) of a shrunk Hugging Face text model."""
    import torch
    import transformers as tf

    rng = np.random.default_rng(1)
    if kind == "bert":
        cfg = tf.BertConfig(vocab_size=256, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                            intermediate_size=64, max_position_embeddings=64)
        model = tf.BertModel(cfg, add_pooling_layer=True)
    elif kind == "minilm":  # all-MiniLM-L6-v2's shape class (BERT, 12 heads of 32 -> 12 of 4), mean pooling
        cfg = tf.BertConfig(vocab_size=256, hidden_size=48, num_hidden_layers=2, num_attention_heads=12,
                            intermediate_size=96, max_position_embeddings=64, layer_norm_eps=1e-12)
        model = tf.BertModel(cfg, add_pooling_layer=False)
    else:
        cfg = tf.DistilBertConfig(vocab_size=256, dim=32, n_layers=2, n_heads=4, hidden_dim=64,
                                  max_position_embeddings=64)
        model = tf.DistilBertModel(cfg)
    cfg._attn_implementation = attn
    model.config._attn_implementation = attn

    class Wrap(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = model

        def forward(self, input_ids, attention_mask):
            h = self.m(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
            if kind == "minilm":  # sentence-transformers mean pooling + L2 normalisation
                m = attention_mask.unsqueeze(-1).to(h.dtype)
                e = (h * m).sum(1) / torch.clamp(m.sum(1), min=1e-9)
                return torch.nn.functional.normalize(e, p=2, dim=1)
            return h

    ins = {"input_ids": _ids(rng, 256), "attention_mask": _mask()}
    axes = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"}}
    return Wrap(), ins, axes, cfg.to_dict()


def gpt2():
    import transformers as tf

    cfg = tf.GPT2Config(vocab_size=256, n_embd=32, n_layer=2, n_head=4, n_positions=64)
    model = tf.GPT2Model(cfg)
    return _last_hidden(model, ["input_ids"]), {"input_ids": _ids(np.random.default_rng(2), 256)}, \
        {"input_ids": {0: "batch", 1: "sequence"}}, cfg.to_dict()


def t5():
    import transformers as tf

    cfg = tf.T5Config(vocab_size=256, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=4,
                      relative_attention_num_buckets=8, relative_attention_max_distance=32)
    model = tf.T5Model(cfg)
    rng = np.random.default_rng(3)
    ins = {"input_ids": _ids(rng, 256), "attention_mask": _mask(), "decoder_input_ids": _ids(rng, 256, (B, 4))}
    axes = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"},
            "decoder_input_ids": {0: "batch", 1: "decoder_sequence"}}
    return _last_hidden(model, list(ins)), ins, axes, cfg.to_dict()


def llama():
    import transformers as tf

    cfg = tf.LlamaConfig(vocab_size=256, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    model = tf.LlamaModel(cfg)
    ins = {"input_ids": _ids(np.random.default_rng(4), 256), "attention_mask": _mask()}
    axes = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"}}
    return _last_hidden(model, list(ins), use_cache=False), ins, axes, cfg.to_dict()


def vit():
    import transformers as tf

    cfg = tf.ViTConfig(image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                       intermediate_size=64)
    return _last_hidden(tf.ViTModel(cfg, add_pooling_layer=False), ["pixel_values"]), _image(5), _image_axes(), \
        cfg.to_dict()


def convnext():
    import transformers as tf

    cfg = tf.ConvNextConfig(hidden_sizes=[16, 32, 48, 64], depths=[1, 1, 2, 1], image_size=32)
    return _pooled(tf.ConvNextModel(cfg)), _image(6), _image_axes(), cfg.to_dict()


def whisper_encoder():
    import transformers as tf

    cfg = tf.WhisperConfig(d_model=32, encoder_layers=2, encoder_attention_heads=4, encoder_ffn_dim=64,
                           num_mel_bins=16, max_source_positions=16, vocab_size=256, decoder_layers=1,
                           decoder_attention_heads=4, decoder_ffn_dim=128, pad_token_id=0, bos_token_id=1,
                           eos_token_id=2, decoder_start_token_id=1)
    enc = tf.WhisperModel(cfg).get_encoder()
    x = np.random.default_rng(7).standard_normal((B, 16, 32)).astype(np.float32)
    return _last_hidden(enc, ["input_features"]), {"input_features": x}, {"input_features": {0: "batch"}}, \
        cfg.to_dict()


def audio_encoder(kind):
    """wav2vec2 / HuBERT: a 1-D conv feature extractor on raw audio (GroupNorm with a group per channel after
    the first conv: InstanceNormalization in the exports), a grouped positional conv with weight norm, then a
    transformer encoder."""
    import transformers as tf

    cfg = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
               conv_dim=(16, 16, 16), conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3), num_conv_pos_embeddings=16,
               num_conv_pos_embedding_groups=4, vocab_size=32)
    c = tf.Wav2Vec2Config(**cfg) if kind == "wav2vec2" else tf.HubertConfig(**cfg)
    model = tf.Wav2Vec2Model(c) if kind == "wav2vec2" else tf.HubertModel(c)
    x = np.random.default_rng(10).standard_normal((B, 400)).astype(np.float32)
    return _last_hidden(model, ["input_values"]), {"input_values": x}, {"input_values": {0: "batch"}}, c.to_dict()


def torchvision_model(name):
    import torch  # noqa: F401
    import torchvision.models as tvm
    from torchvision.models import efficientnet as eff
    from torchvision.models import resnet

    if name == "resnet50":  # ResNet-50's layers (3, 4, 6, 3 bottlenecks), every width / 16
        class NarrowResNet50(resnet.ResNet):
            def __init__(self):
                super().__init__(resnet.Bottleneck, [3, 4, 6, 3], num_classes=10)
                self.inplanes = 4
                self.conv1 = torch.nn.Conv2d(3, 4, 7, 2, 3, bias=False)
                self.bn1 = torch.nn.BatchNorm2d(4)
                self.layer1 = self._make_layer(resnet.Bottleneck, 4, 3)
                self.layer2 = self._make_layer(resnet.Bottleneck, 8, 4, stride=2)
                self.layer3 = self._make_layer(resnet.Bottleneck, 16, 6, stride=2)
                self.layer4 = self._make_layer(resnet.Bottleneck, 32, 3, stride=2)
                self.fc = torch.nn.Linear(32 * 4, 10)
        model, cfg = NarrowResNet50(), {"block": "Bottleneck", "layers": [3, 4, 6, 3], "widths": [4, 8, 16, 32]}
    elif name == "mobilenet_v2":
        model = tvm.mobilenet_v2(weights=None, width_mult=0.25, num_classes=10)
        # the last 1x1 conv to 320 channels instead of 1280 (torchvision keeps 1280 at any width_mult)
        from torchvision.ops.misc import Conv2dNormActivation

        last_in = model.features[-1][0].in_channels
        model.features[-1] = Conv2dNormActivation(last_in, 320, kernel_size=1, activation_layer=torch.nn.ReLU6)
        model.classifier[-1] = torch.nn.Linear(320, 10)
        cfg = {"width_mult": 0.25, "last_channel": 320}
    elif name == "mobilenet_v3":
        model, cfg = tvm.mobilenet_v3_small(weights=None, width_mult=0.25, num_classes=10), {"width_mult": 0.25}
    else:
        setting, last = eff._efficientnet_conf("efficientnet_b0", width_mult=0.25, depth_mult=0.5)
        model = eff.EfficientNet(setting, 0.2, last_channel=last, num_classes=10)
        cfg = {"conf": "efficientnet_b0", "width_mult": 0.25, "depth_mult": 0.5}
    _randomise_bn(model)
    return model, _image(8), _image_axes(), cfg


def unet_module():
    """A small U-Net (3 levels, widths 8-16-32): decoder up-steps by ConvTranspose (stride 2) and by bilinear
    Upsample (ONNX Resize), skip connections by Concat, a ConvTranspose head."""
    import torch
    from torch import nn

    def block(i, o):
        return nn.Sequential(nn.Conv2d(i, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU(inplace=True),
                             nn.Conv2d(o, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU(inplace=True))

    class UNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.d1, self.d2, self.d3 = block(3, 8), block(8, 16), block(16, 32)
            self.pool = nn.MaxPool2d(2)
            self.up2 = nn.ConvTranspose2d(32, 16, 2, stride=2)
            self.u2 = block(32, 16)
            self.up1 = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
            self.u1 = block(16 + 8, 8)
            self.head = nn.ConvTranspose2d(8, 2, 3, stride=1, padding=1)

        def forward(self, x):
            a = self.d1(x)
            b = self.d2(self.pool(a))
            c = self.d3(self.pool(b))
            y = self.u2(torch.cat([self.up2(c), b], 1))
            y = self.u1(torch.cat([self.up1(y), a], 1))
            return self.head(y)

    model = UNet()
    _randomise_bn(model)
    return model, _image(9), _image_axes(), {"widths": [8, 16, 32], "up": ["ConvTranspose2d", "Upsample bilinear"]}


def _randomise_bn(model):
    """Running statistics away from (0, 1), so BatchNorm folding is exercised."""
    import torch

    g = torch.Generator().manual_seed(0)
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.copy_(0.1 * torch.randn(m.num_features, generator=g))
            m.running_var.copy_(0.5 + torch.rand(m.num_features, generator=g))


def _image(seed):
    return {"pixel_values": np.random.default_rng(seed).standard_normal((B, 3, 32, 32)).astype(np.float32)}


def _image_axes():
    return {"pixel_values": {0: "batch"}}


def _last_hidden(model, names, **kw):
    import torch

    class Wrap(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = model

        def forward(self, *args):
            return self.m(**dict(zip(names, args, strict=True)), **kw).last_hidden_state
    return Wrap()


def _pooled(model):
    import torch

    class Wrap(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = model

        def forward(self, pixel_values):
            return self.m(pixel_values=pixel_values).pooler_output
    return Wrap()


ZOO = {
    "bert_sdpa": lambda: hf_text("bert", "sdpa"),
    "bert_eager": lambda: hf_text("bert", "eager"),
    "minilm_sdpa": lambda: hf_text("minilm", "sdpa"),
    "minilm_eager": lambda: hf_text("minilm", "eager"),
    "distilbert_sdpa": lambda: hf_text("distilbert", "sdpa"),
    "distilbert_eager": lambda: hf_text("distilbert", "eager"),
    "gpt2": gpt2,
    "t5": t5,
    "llama": llama,
    "vit": vit,
    "convnext": convnext,
    "whisper_encoder": whisper_encoder,
    "resnet50": lambda: torchvision_model("resnet50"),
    "mobilenet_v2": lambda: torchvision_model("mobilenet_v2"),
    "mobilenet_v3": lambda: torchvision_model("mobilenet_v3"),
    "efficientnet_b0": lambda: torchvision_model("efficientnet_b0"),
    "unet": unet_module,
    "wav2vec2": lambda: audio_encoder("wav2vec2"),
}


def export(name, exporter, model, ins, axes, path):
    import torch

    args = tuple(torch.from_numpy(v) for v in ins.values())
    names = list(ins)
    if exporter == "classic":
        torch.onnx.export(model, args, str(path), input_names=names, output_names=["output"], opset_version=17,
                          dynamic_axes=axes, dynamo=False, do_constant_folding=True)
    else:
        prog = torch.onnx.export(model, args, input_names=names, output_names=["output"], dynamo=True,
                                 external_data=False)
        prog.save(str(path), external_data=False)
        drop_stack_traces(path)


def drop_stack_traces(path):
    """Remove torch.export's per-node ``pkg.torch.onnx.stack_trace`` metadata: Python tracebacks that name the
    exporting machine's absolute paths (its venv's site-packages), read by nothing; the other metadata (the
    ``name_scopes`` the importer reads to find layers) stays."""
    import onnx

    m = onnx.load(str(path))

    def graphs(g):
        yield g
        for n in g.node:
            for a in n.attribute:
                if a.HasField("g"):
                    yield from graphs(a.g)
                for sub in a.graphs:
                    yield from graphs(sub)

    nodes = [n for g in graphs(m.graph) for n in g.node] + [n for f in m.functions for n in f.node]
    for n in nodes:
        keep = [p for p in n.metadata_props if p.key != "pkg.torch.onnx.stack_trace"]
        del n.metadata_props[:]
        n.metadata_props.extend(keep)
    onnx.save(m, str(path))


def ort_run(model_bytes, feeds):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(model_bytes, so, providers=["CPUExecutionProvider"])
    return {o.name: r for o, r in zip(sess.get_outputs(), sess.run(None, feeds), strict=True)}


def fp16_reference(path, ins):
    """ONNX Runtime's outputs of the model converted to fp16 (onnxconverter-common), inputs rounded to fp16."""
    import onnx
    from onnxconverter_common import float16

    m = onnx.load(str(path))
    del m.graph.value_info[:]  # stale float32 types of converted Casts' outputs would make the model invalid
    m16 = float16.convert_float_to_float16(m, keep_io_types=False)
    for n in m16.graph.node:  # the converter leaves the model's own Casts to float32: an fp16 run casts to fp16
        for at in n.attribute:
            if n.op_type == "Cast" and at.name == "to" and at.i == onnx.TensorProto.FLOAT:
                at.i = onnx.TensorProto.FLOAT16
    del m16.graph.value_info[:]
    feeds = {k: (v.astype(np.float16) if v.dtype == np.float32 else v) for k, v in ins.items()}
    return {k: np.asarray(v, np.float32) for k, v in ort_run(m16.SerializeToString(), feeds).items()}


def _torchvision_without_its_extension():
    """Let torchvision's Python models import when its compiled extension cannot load (a CUDA torchvision
    wheel next to a CPU torch): its fake-kernel registrations need the ``nms`` / ``qnms`` op schemas, which
    the extension would define.  The zoo uses no torchvision op."""
    import torch

    try:
        import torchvision  # noqa: F401
        return
    except RuntimeError:
        for k in [m for m in sys.modules if m.startswith("torchvision")]:
            del sys.modules[k]
    lib = torch.library.Library("torchvision", "DEF")  # kept alive in the module for the process
    lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    lib.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    globals()["_TV_LIB"] = lib
    import torchvision  # noqa: F401,F811


def versions():
    import importlib.metadata as md

    out = {"python": sys.version.split()[0]}
    for p in ("torch", "torchvision", "transformers", "onnx", "onnxruntime", "onnxscript", "onnxconverter-common",
              "numpy"):
        try:
            out[p] = md.version(p)
        except md.PackageNotFoundError:
            out[p] = None
    return out


def main(argv=None):
    import onnx
    import torch

    _torchvision_without_its_extension()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help=f"models to build (default: all of {', '.join(ZOO)})")
    ap.add_argument("--exporters", default="classic,dynamo")
    ap.add_argument("--refs-only", action="store_true", help="keep the .onnx files, recompute the .npz references")
    a = ap.parse_args(argv)
    names = a.names or list(ZOO)
    man_path = HERE / "manifest.json"
    manifest = json.loads(man_path.read_text()) if man_path.exists() else {"models": {}}
    manifest["versions"] = versions()
    manifest["note"] = ("built by make_zoo.py: random weights (seeded), shrunk configs; inputs and ONNX Runtime "
                        "references in NAME.EXPORTER.npz")
    for name in names:
        print(f"--- {name}", flush=True)
        torch.manual_seed(0)
        model, ins, axes, cfg = ZOO[name]()
        model.eval()
        entry = manifest["models"].setdefault(name, {})
        entry["config"] = {k: v for k, v in cfg.items() if isinstance(v, int | float | str | bool | list) and
                           not k.startswith("_")}
        entry["inputs"] = {k: [list(v.shape), str(v.dtype)] for k, v in ins.items()}
        with torch.no_grad():
            want = model(*[torch.from_numpy(v) for v in ins.values()]).numpy()
        for exporter in a.exporters.split(","):
            path = HERE / f"{name}.{exporter}.onnx"
            try:
                if not (a.refs_only and path.exists()):
                    with torch.no_grad():
                        export(name, exporter, model, ins, axes, path)
            except Exception as e:  # recorded, so the manifest says which export a torch version cannot do
                entry[exporter] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"}
                print(f"{name} {exporter}: export failed: {entry[exporter]['error']}")
                continue
            m = onnx.load(str(path))
            feeds = {i.name: ins[i.name] for i in m.graph.input if i.name in ins}
            ref = ort_run(m.SerializeToString(), feeds)
            try:
                ref16 = fp16_reference(path, feeds)
                note16 = None
            except Exception as e:  # the converter cannot convert every graph (Cast to float it leaves)
                ref16, note16 = {}, f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
            out = m.graph.output[0].name
            np.savez_compressed(HERE / f"{name}.{exporter}.npz",
                                **{f"in:{k}": v for k, v in feeds.items()},
                                **{f"ref:{k}": v for k, v in ref.items()},
                                **{f"ref16:{k}": v for k, v in ref16.items()})
            opset = max(o.version for o in m.opset_import if o.domain in ("", "ai.onnx"))
            entry[exporter] = {
                "file": path.name, "bytes": path.stat().st_size, "opset": opset, "nodes": len(m.graph.node),
                "ops": sorted({n.op_type for n in m.graph.node}),
                "dims": {i.name: [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim]
                         for i in m.graph.input},
                "ort_vs_torch_max_abs": float(np.abs(ref[out] - want).max()),
                "ort_fp16_vs_fp32_max_abs": float(np.abs(ref16[out] - ref[out]).max()) if ref16 else None,
            }
            if note16:
                entry[exporter]["ort_fp16_error"] = note16
            print(f"{name} {exporter}: {path.stat().st_size / 1e3:.0f} kB, opset {opset}, {len(m.graph.node)} nodes, "
                  f"ORT vs torch {entry[exporter]['ort_vs_torch_max_abs']:.1e}")
    tmp = man_path.with_suffix(".tmp")
    tmp.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    tmp.replace(man_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
