"""The Llama-family decoder as a Flax NNX module (llama, mistral, qwen2, qwen3).

Design choices:
- Every per-layer parameter is stored stacked with a leading "layers" axis ([L, ...]) in
  `LayerStack`; the forward pass runs `jax.lax.scan` over that stacked state (`scan_layers=True`,
  compile time independent of depth) or a Python loop over the same arrays (`scan_layers=False`).
  One parameter layout for both, so checkpoints do not depend on the choice.
- The layer body is wrapped in `jax.checkpoint` with the configured policy (none/full/save_dots/
  offload/offload_input) — remat per layer.
- Attention is injected: `model(ids, positions, segment_ids, attend)`; `attend=None` is the dense
  reference in layers.py. The model holds no mesh; params carry logical axis names
  (`out_sharding` metadata) and activations go through `axes.constrain`.
- `logits(hidden)` is separate and float32 so the loss can compute it chunk by chunk.
- Variable types say what a parameter is (EmbedParam, NormParam, LoraParam, all nnx.Param
  subclasses) so that optimizers select trainable parameters with an nnx type filter (see lora.py).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.ad_checkpoint import checkpoint_name

from bookft.model import layers as L
from bookft.model import short_conv
from bookft.model.axes import active_rules, constrain
from bookft.model.config import LORA_TARGETS, ModelConfig
from bookft.model.rope import rope_cos_sin


class EmbedParam(nnx.Param):
    """Token embedding / lm_head weights."""


class NormParam(nnx.Param):
    """RMSNorm weights."""


class LoraParam(nnx.Param):
    """LoRA adapter matrices (A, B)."""


class ConvParam(nnx.Param):
    """The optional short convolution's taps [W, E, E], a full matrix per tap (short_conv.py)."""


def _dtype(name: str):
    return jnp.dtype(name)


def param_specs(config: ModelConfig) -> dict[str, tuple[type, tuple[int, ...], tuple, str]]:
    """Per-layer param name -> (variable type, shape without L, logical axes without "layers", init)."""
    e, f, hq, hkv, d = (config.hidden_size, config.intermediate_size, config.num_heads,
                        config.num_kv_heads, config.dim_per_head)
    specs = {
        "attn_norm": (NormParam, (e,), ("embed",), "ones"),
        "wq": (nnx.Param, (hq, d, e), ("q_heads", "head_dim", "embed"), "normal"),
        "wk": (nnx.Param, (hkv, d, e), ("kv_heads", "head_dim", "embed"), "normal"),
        "wv": (nnx.Param, (hkv, d, e), ("kv_heads", "head_dim", "embed"), "normal"),
        "wo": (nnx.Param, (e, hq, d), ("embed", "q_heads", "head_dim"), "normal"),
        "mlp_norm": (NormParam, (e,), ("embed",), "ones"),
        "w_gate": (nnx.Param, (f, e), ("mlp", "embed"), "normal"),
        "w_up": (nnx.Param, (f, e), ("mlp", "embed"), "normal"),
        "w_down": (nnx.Param, (e, f), ("embed", "mlp"), "normal"),
    }
    if config.qkv_bias:
        specs["bq"] = (nnx.Param, (hq, d), ("q_heads", "head_dim"), "zeros")
        specs["bk"] = (nnx.Param, (hkv, d), ("kv_heads", "head_dim"), "zeros")
        specs["bv"] = (nnx.Param, (hkv, d), ("kv_heads", "head_dim"), "zeros")
    if config.qk_norm:
        specs["q_norm"] = (NormParam, (d,), ("head_dim",), "ones")
        specs["k_norm"] = (NormParam, (d,), ("head_dim",), "ones")
    r = config.lora.rank
    if r:
        for target in config.lora.targets:
            base, n_in = L.LORA_BASE[target]
            _, shape, axes, _ = specs[base]
            out_shape, in_shape = shape[: len(shape) - n_in], shape[len(shape) - n_in:]
            out_axes, in_axes = axes[: len(axes) - n_in], axes[len(axes) - n_in:]
            specs[f"lora_{target}_a"] = (LoraParam, (r, *in_shape), ("lora_rank", *in_axes), "lora_a")
            specs[f"lora_{target}_b"] = (LoraParam, (*out_shape, r), (*out_axes, "lora_rank"), "zeros")
    return specs


def _init(kind: str, key: jax.Array, shape: tuple[int, ...], config: ModelConfig, dtype) -> jax.Array:
    if kind == "ones":
        return jnp.ones(shape, dtype)
    if kind == "zeros":
        return jnp.zeros(shape, dtype)
    if kind == "lora_a":  # PEFT: kaiming-uniform(a=sqrt(5)) = U(-1/sqrt(fan_in), 1/sqrt(fan_in))
        bound = 1.0 / np.sqrt(np.prod(shape[2:]))
        return jax.random.uniform(key, shape, dtype, -bound, bound)
    return (config.init_std * jax.random.normal(key, shape, jnp.float32)).astype(dtype)


def _param(cls: type, value: jax.Array, axes: tuple) -> nnx.Param:
    return cls(value, out_sharding=axes, eager_sharding=False)


class LayerStack(nnx.Module):
    """All decoder layers' parameters, each stacked along a leading "layers" axis."""

    def __init__(self, config: ModelConfig, *, rngs: nnx.Rngs):
        self.names = tuple(param_specs(config))
        dtype = _dtype(config.param_dtype)
        for name, (cls, shape, axes, kind) in param_specs(config).items():
            value = _init(kind, rngs.params(), (config.num_layers, *shape), config, dtype)
            setattr(self, name, _param(cls, value, ("layers", *axes)))

    def arrays(self) -> dict[str, jax.Array]:
        return {name: getattr(self, name)[...] for name in self.names}


class Decoder(nnx.Module):
    """model(input_ids [B,S], positions [B,S], segment_ids [B,S], attend=None) -> hidden [B,S,E]."""

    def __init__(self, config: ModelConfig, *, rngs: nnx.Rngs):
        if config.lora.rank and any(t not in LORA_TARGETS for t in config.lora.targets):
            raise ValueError(f"bad LoRA targets {config.lora.targets}")
        self.config = config
        dtype = _dtype(config.param_dtype)
        v, e = config.vocab_size, config.hidden_size
        self.embed = _param(EmbedParam, _init("normal", rngs.params(), (v, e), config, dtype), ("vocab", "embed"))
        self.layers = LayerStack(config, rngs=rngs)
        self.final_norm = _param(NormParam, jnp.ones((e,), dtype), ("embed",))
        if config.short_conv:
            self.conv = _param(ConvParam, jnp.zeros((config.short_conv, e, e), dtype), (None, "embed", None))
        if not config.tie_embeddings:
            self.lm_head = _param(EmbedParam, _init("normal", rngs.params(), (v, e), config, dtype),
                                  ("vocab", "embed"))

    def __call__(self, input_ids: jax.Array, positions: jax.Array, segment_ids: jax.Array | None = None,
                 attend: L.Attend | None = None) -> jax.Array:
        hidden, _ = self.run(input_ids, positions, segment_ids, attend)
        return hidden

    def run(self, input_ids, positions, segment_ids=None, attend=None, return_kv: bool = False):
        """Forward pass; with return_kv also the per-layer (k, v), each [L, B, S, Hkv, D]."""
        config = self.config
        attend = attend or L.reference_attention
        compute = _dtype(config.compute_dtype)
        if segment_ids is None:
            segment_ids = jnp.ones_like(input_ids)
        if config.short_conv:  # a tiny-model option: the table is gathered, the taps are ids
            taps = short_conv.earlier_ids(input_ids, positions, segment_ids, config.short_conv)
            table = constrain(self.embed[...].astype(compute), ("vocab", None))
            x = short_conv.apply(table, self.conv[...], taps)
        else:
            x = _lookup(self.embed[...].astype(compute), input_ids)  # cast first: bf16 bytes move
        x = constrain(x, ("batch", "seq", "embed"))
        cos, sin = rope_cos_sin(config, positions)

        # static per layer (its window); mixed local/global layers are unrolled
        windows = config.layer_windows
        scanned = config.scan_layers and len(set(windows)) == 1

        def make_body(window):
            def body(x, p):
                x = checkpoint_name(x, "layer_input")  # what remat "offload_input" moves to host memory
                return L.layer(p, x, cos, sin, segment_ids, positions, attend, config, return_kv, window)

            if config.remat != "none":
                body = jax.checkpoint(body, policy=L.remat_policy(config.remat),
                                      prevent_cse=not scanned)
            return body

        stacked = self.layers.arrays()
        if scanned:
            x, kv = jax.lax.scan(make_body(windows[0]), x, stacked)
        else:
            bodies = {w: make_body(w) for w in set(windows)}
            outs = []
            for i in range(config.num_layers):
                x, kv_i = bodies[windows[i]](x, {k: a[i] for k, a in stacked.items()})
                outs.append(kv_i)
            kv = jax.tree.map(lambda *a: jnp.stack(a), *outs) if return_kv else None
        hidden = L.rms_norm(x, self.final_norm[...], config.rms_norm_eps)
        return hidden, kv

    def output_embedding(self) -> jax.Array:
        return (self.embed if self.config.tie_embeddings else self.lm_head)[...]

    def logits(self, hidden: jax.Array) -> jax.Array:
        """hidden [B,s,E] -> logits [B,s,V] float32 (lm_head, or the tied embedding)."""
        w = self.output_embedding().astype(hidden.dtype)
        out = jnp.einsum("bse,ve->bsv", hidden, w, preferred_element_type=jnp.float32)
        return constrain(out, ("batch", "seq", "vocab"))


def _lookup(table: jax.Array, input_ids: jax.Array) -> jax.Array:
    """Embedding lookup [V, E] x [B, S] -> [B, S, E] (the caller constrains it to the tokens' sharding).

    When the sharding rules name "table_embed" (the FSDP axes of the table's embed dim), every
    device looks all the tokens up in its own embed columns and one all-to-all hands each device its
    tokens' full rows: no device holds the whole table, and the gradient is a scatter-add into the
    local [V, E/n] slice instead of a full-size [V, E] one. Otherwise the embed dim is gathered
    first, so the output takes the tokens' sharding instead of being replicated and re-split.
    """
    active = active_rules()
    if active is not None and "table_embed" in active[1]:
        table = constrain(table, (None, "table_embed"))
        # the rows stay split by embed columns until the caller's constraint moves them (the
        # all-to-all); a sharding constraint's transpose constrains the cotangent alike, so the
        # backward scatter-adds into the local columns rather than building the whole [V, E]
        rows = jnp.take(table, constrain(input_ids, (None, None)), axis=0)
        return constrain(rows, (None, None, "table_embed"))
    return jnp.take(constrain(table, ("vocab", None)), input_ids, axis=0)


def _host_values(kind: str, shape: tuple[int, ...], std: float, seed: int, index: int) -> np.ndarray:
    """float32 initial values drawn on the host; one PCG64 stream per (seed, parameter index)."""
    if kind == "ones":
        return np.ones(shape, np.float32)
    if kind == "zeros":
        return np.zeros(shape, np.float32)
    rng = np.random.default_rng([seed, index])
    if kind == "lora_a":
        bound = 1.0 / np.sqrt(np.prod(shape[2:]))
        return rng.uniform(-bound, bound, shape).astype(np.float32)
    return std * rng.standard_normal(shape, dtype=np.float32)


def init_model(config: ModelConfig, seed: int = 0, *, place=None) -> Decoder:
    """A randomly initialised Decoder (normal(init_std) weights, unit norms, zero biases/LoRA B).

    Values are drawn on the host with numpy (jax's random init compiles for 10-20 s on a busy
    CPU), identically eagerly and under a trace: under jit/eval_shape each parameter comes from a
    `jax.pure_callback`, so `nnx.eval_shape(lambda: init_model(c))` costs nothing and
    `jax.jit(lambda: init_model(c), out_shardings=...)` gives the same values as an eager call.
    (`Decoder(config, rngs=nnx.Rngs(seed))` draws with jax instead; different values.)
    `place(path, values, sds) -> array`, if given, creates each parameter where it belongs from
    `values()` (the host array): the caller's sharding, so nothing is placed whole and resharded.
    """
    graphdef, state = nnx.split(abstract_model(config))
    kinds = {name: spec[3] for name, spec in param_specs(config).items()}
    kinds.update(embed="normal", lm_head="normal", final_norm="ones", conv="zeros")
    tracing = isinstance(jnp.zeros(()), jax.core.Tracer)
    for index, (path, var) in enumerate(sorted(state.flat_state(), key=lambda kv: kv[0])):
        sds = var.get_value()
        args = (kinds[path[-1]], tuple(sds.shape), config.init_std, seed, index)
        if place is not None:
            value = place(path, lambda args=args, dtype=sds.dtype: _host_values(*args).astype(dtype), sds)
        elif tracing:
            def host(args=args, dtype=sds.dtype):
                return _host_values(*args).astype(dtype)
            value = jax.pure_callback(host, jax.ShapeDtypeStruct(sds.shape, sds.dtype))
        else:
            value = jnp.asarray(_host_values(*args), dtype=sds.dtype)
        var.set_value(value)
    return nnx.merge(graphdef, state)


def abstract_model(config: ModelConfig) -> Decoder:
    """A Decoder whose params are ShapeDtypeStructs (no memory), for loading and planning."""
    return nnx.eval_shape(lambda: Decoder(config, rngs=nnx.Rngs(params=0)))
