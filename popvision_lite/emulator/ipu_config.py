"""An optimum-graphcore IPU config (``ipu_config.json``, optimum.graphcore.IPUConfig) read as run-config fields.

``emulate --ipu-config ipu_config.json`` runs a model as optimum-graphcore placed it: the keys below map to the
fields of ``run_config.FIELDS`` (each value checked there, so a bad value gets the same message as the flag
would), every key of the file is accounted for: mapped, known but without effect on the emulated step, known
but not modelled, or unknown (listed, never silently dropped).  How optimum-graphcore uses each key is in its
``optimum/graphcore/ipu_configuration.py`` (``IPUConfig.__init__`` and ``_to_options``) and in each model's
``parallelize`` (``optimum/graphcore/models/*/modeling_*.py``; huggingface/optimum-graphcore, e.g. commit
e861355b, where GPT-2 was added): the word embedding is on IPU 0, the layers follow ``layers_per_ipu``, a
pre-training head (BERT's MLM + NSP, RoBERTa's / GPT-2's LM head, tied to the embedding) goes back to IPU 0 -
the wrap placement - and a task head (question answering, classification) on the last IPU.

A value may be given per POD type (``{"pod16": 2, "default": 1}``, optimum-graphcore's ``for_pod_type``): the
``pod_type`` picks it, else ``"default"``.  With ``inference`` the ``inference_*`` keys are used instead of their
training counterparts, as ``IPUConfig._to_options(for_inference=True)`` does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from popvision_lite import input_files
from popvision_lite.errors import ConfigError

POD_TYPES = ("pod4", "pod8", "pod16", "pod32", "pod64", "pod128", "pod256")
# keys optimum-graphcore reads that change nothing in one emulated training step
NO_EFFECT = ("executable_cache_dir", "profile_dir", "seed", "use_popdist", "optimum_version", "transformers_version",
             "output_mode", "sharded_execution_for_inference", "execute_encoder_on_cpu_for_generation",
             "auto_loss_scaling", "explicit_ipu_pipelining")
# keys optimum-graphcore reads that the emulator does not model (said with every run that gives them)
NOT_MODELLED = {
    "enable_half_first_order_momentum": "Adam's first moment in fp16 (the emulator keeps both moments in "
                                        "optimizer_state_dtype, fp32 by default)",
    "serialized_embedding_splits_per_ipu": "an embedding serialised over several IPUs (modelled as "
                                           "embedding_serialization slices on IPU 0)",
    "serialized_projection_splits_per_ipu": "an LM projection serialised over several IPUs",
    "projection_serialization_factor": "a serialised LM projection of an encoder-decoder model",
    "parallelize_kwargs": "model-specific parallelize options",
    "inference_parallelize_kwargs": "model-specific parallelize options",
}
# key -> the training key it replaces when the run is inference
INFERENCE_KEYS = {"inference_device_iterations": "device_iterations",
                  "inference_replication_factor": "replication_factor",
                  "inference_layers_per_ipu": "layers_per_ipu", "inference_ipus_per_replica": "ipus_per_replica",
                  "inference_matmul_proportion": "matmul_proportion",
                  "inference_embedding_serialization_factor": "embedding_serialization_factor",
                  "inference_serialized_embedding_splits_per_ipu": "serialized_embedding_splits_per_ipu",
                  "inference_serialized_projection_splits_per_ipu": "serialized_projection_splits_per_ipu",
                  "inference_projection_serialization_factor": "projection_serialization_factor"}
MAPPED = ("ipus_per_replica", "layers_per_ipu", "replication_factor", "gradient_accumulation_steps",
          "device_iterations", "matmul_proportion", "enable_half_partials", "recompute_checkpoint_every_layer",
          "embedding_serialization_factor", "optimizer_state_offchip", "replicated_tensor_sharding")


@dataclass
class IpuConfigRead:
    """The run-config fields an IPU config gives (``settings``), the IPU-config key each came from
    (``origin``), and every other key by what became of it."""

    path: str
    settings: dict = field(default_factory=dict)
    origin: dict = field(default_factory=dict)
    no_effect: list = field(default_factory=list)
    not_modelled: list = field(default_factory=list)
    unknown: list = field(default_factory=list)

    def notes(self) -> list[str]:
        """One line per key that did not become a setting (for the command's stderr)."""
        out = []
        if self.not_modelled:
            out.append(f"{self.path}: not modelled: " + "; ".join(f"'{k}' ({NOT_MODELLED.get(k, k)})"
                                                                   for k in self.not_modelled))
        if self.unknown:
            out.append(f"{self.path}: unknown key(s), ignored: " + ", ".join(repr(k) for k in self.unknown))
        if self.no_effect:
            out.append(f"{self.path}: no effect on the emulated step: " + ", ".join(self.no_effect))
        return out


def _where(path: str, key: str) -> str:
    return f"{path}: field '{key}'"


def _pod_value(path: str, key: str, value, pod_type: str | None):
    """``value``, or its entry for ``pod_type`` (else "default") when it is a per-POD table."""
    if not isinstance(value, dict):
        return value
    bad = [k for k in value if k not in (*POD_TYPES, "default")]
    if bad:
        raise ConfigError(f"{_where(path, key)}: a per-POD table takes the keys {', '.join(POD_TYPES)} and "
                          f"default, got {', '.join(repr(k) for k in bad)}")
    if pod_type is not None and pod_type in value:
        return value[pod_type]
    if pod_type is not None:
        raise ConfigError(f"{_where(path, key)}: no value for POD type {pod_type!r} (has {', '.join(value)})")
    if "default" not in value:
        raise ConfigError(f"{_where(path, key)}: a value per POD type ({', '.join(value)}) and no default; give "
                          "--pod-type")
    return value["default"]


def _int(path: str, key: str, v, lo: int = 0) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < lo:
        raise ConfigError(f"{_where(path, key)}: expected an integer >= {lo}, got {v!r}")
    return v


def _bool(path: str, key: str, v) -> bool:
    if not isinstance(v, bool):
        raise ConfigError(f"{_where(path, key)}: expected true or false, got {v!r}")
    return v


def _sort_keys(raw: dict, path: str, inference: bool, out: IpuConfigRead) -> dict:
    """{setting: (key it came from, value)} of the keys read; keys without effect on this run (an inference
    run's setting on a training run, a training key an inference_* key replaces) and unknown keys noted in
    ``out``."""
    vals: dict = {}
    for key, value in raw.items():
        if not isinstance(key, str):
            raise ConfigError(f"{path}: keys must be text, got {key!r}")
        if key in INFERENCE_KEYS:
            if inference:
                vals[INFERENCE_KEYS[key]] = (key, value)
            else:
                out.no_effect.append(key)  # the inference run's setting
        elif key in MAPPED or key in NOT_MODELLED:
            if inference and key in INFERENCE_KEYS.values() and any(
                    k in raw for k, v in INFERENCE_KEYS.items() if v == key):
                out.no_effect.append(key)  # the inference_* key replaces it
                continue
            vals[key] = (key, value)
        elif key in NO_EFFECT:
            out.no_effect.append(key)
        else:
            out.unknown.append(key)
    return vals


def _check_layers_per_ipu(path: str, key: str, lpi, ipr: int) -> None:
    """layers_per_ipu: a layer count (>= 0) per IPU of a replica."""
    if not isinstance(lpi, list) or not lpi:
        raise ConfigError(f"{_where(path, key)}: expected a list of layer counts, one per IPU, got {lpi!r}")
    for i, n in enumerate(lpi):
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            what = ("-1 (share the remaining layers) is not supported; give every IPU's layer count"
                    if n == -1 else f"expected a layer count >= 0, got {n!r}")
            raise ConfigError(f"{path}: field '{key}[{i}]': {what}")
    if len(lpi) != ipr:
        raise ConfigError(f"{_where(path, key)}: {len(lpi)} entries but ipus_per_replica is {ipr} (one per "
                          "IPU of a replica)")


def parse_ipu_config(raw, path: str, *, task_head: str = "pretraining", model_family: str = "bert",
                     pod_type: str | None = None, inference: bool = False) -> IpuConfigRead:
    """The run-config settings of the parsed ``ipu_config.json`` ``raw`` (a dict); ConfigError names ``path`` and
    the key.  ``task_head`` and ``model_family`` ("bert" / "gpt") decide where the head goes, as each
    optimum-graphcore model's ``parallelize`` places it."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a JSON object of IPU-config keys, got {type(raw).__name__}")
    if pod_type is not None and pod_type not in POD_TYPES:
        raise ConfigError(f"argument --pod-type: must be one of {', '.join(POD_TYPES)}, got {pod_type!r}")
    out = IpuConfigRead(path=path)
    vals = _sort_keys(raw, path, inference, out)

    def get(name, default=None):
        if name not in vals:
            return default, name
        k, v = vals[name]
        return _pod_value(path, k, v, pod_type), k

    s, origin = out.settings, out.origin

    def put(run_field, value, key):
        s[run_field] = value
        origin[run_field] = key

    ipr, k_ipr = get("ipus_per_replica", 1)
    ipr = _int(path, k_ipr, ipr, 1)
    lpi, k_lpi = get("layers_per_ipu")
    if lpi is not None:
        _check_layers_per_ipu(path, k_lpi, lpi, ipr)
    # the head: a pre-training head (MLM / LM, tied to the word embedding) goes back to IPU 0 (wrap); a task head
    # on the last IPU (sequential) - optimum-graphcore's parallelize
    wrap = task_head == "pretraining" and ipr > 1
    if lpi is not None:
        put("layer_split", list(lpi) + ([0] if wrap else []), k_lpi)
        if ipr > 1:
            put("pipeline_placement", "wrap" if wrap else "sequential", k_lpi)
    elif ipr > 1:
        put("pipeline_stages", ipr, k_ipr)
        if wrap:
            put("pipeline_placement", "wrap", k_ipr)
    rf, k_rf = get("replication_factor", 1)
    rf = _int(path, k_rf, rf, 1)
    put("replicas", rf, k_rf)
    put("ipus", rf * ipr, k_ipr)
    if not inference:
        ga, k_ga = get("gradient_accumulation_steps")
        if ga is not None:
            put("grad_accum", _int(path, k_ga, ga, 1), k_ga)
    di, k_di = get("device_iterations")
    if di is not None:
        put("device_iterations", _int(path, k_di, di, 1), k_di)
    mp, k_mp = get("matmul_proportion")
    if mp is not None:
        if isinstance(mp, list) and len(mp) == 1:
            mp = mp[0]  # optimum-graphcore repeats a one-entry list for every IPU
        if isinstance(mp, list) and len(mp) != ipr:
            raise ConfigError(f"{_where(path, k_mp)}: {len(mp)} values but ipus_per_replica is {ipr} (one value, "
                              "or one per IPU)")
        put("available_memory_proportion", mp, k_mp)
    hp, k_hp = get("enable_half_partials")
    if hp is not None:
        put("partials_type", "half" if _bool(path, k_hp, hp) else "float", k_hp)
    rc, k_rc = get("recompute_checkpoint_every_layer")
    if rc is not None:
        put("recompute", _bool(path, k_rc, rc), k_rc)
    esf, k_esf = get("embedding_serialization_factor")
    if esf is not None:  # 0 / 1 / null: not serialised (optimum-graphcore serialises only when > 1)
        put("embedding_serialization", max(1, _int(path, k_esf, esf, 0)), k_esf)
    off, k_off = get("optimizer_state_offchip")
    if off is not None and not inference:
        put("optimizer_state", "offchip" if _bool(path, k_off, off) else "onchip", k_off)
    rts, k_rts = get("replicated_tensor_sharding")
    if rts is not None and not inference:  # optimum-graphcore turns it off with one replica
        put("rts", _bool(path, k_rts, rts) and rf > 1, k_rts)
    if inference:
        put("training", False, k_ipr)
    for k in NOT_MODELLED:
        if k in vals:
            out.not_modelled.append(vals[k][0])
    return out


def read_ipu_config(path, **kw) -> IpuConfigRead:
    """:func:`parse_ipu_config` of the JSON file at ``path`` (a regular file, size-bounded, UTF-8); ConfigError
    naming the file for a file that cannot be read or is not JSON."""
    p = Path(path)
    err = lambda problem: ConfigError(f"{p}: {problem}")  # noqa: E731
    raw = input_files.parse_json(input_files.read_bytes(p, "config", "IPU config", err), "IPU config", err)
    return parse_ipu_config(raw, str(p), **kw)
