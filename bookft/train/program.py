"""The train program: the abstract train state, its shardings and the jitted step, built once.

`bookft train` (trainer.py), `bookft plan` (plan/build.py lowers it for a TPU topology), `bookft
plan --measure`, the needle probe and benchmarks/train.py all run this one program, so what plan
says fits is what train runs.

Design choices:
- `build_program(cfg, mesh)` resolves the attention once (bookft.attention.resolve: the strategy
  that runs on this mesh, its zig-zag balance, the sequence multiple), takes the model's abstract
  state (ShapeDtypeStructs: no memory), derives every sharding from the logical axis names
  (bookft.parallel.rules) and jits `train_step(state, frozen, batch)` with donated state.
- Nothing is allocated until `init_state()`: parameters are created directly in their shardings
  (each device receives only its shard of the host-drawn values, `jax.make_array_from_callback`),
  or streamed from an HF folder tensor by tensor with the same shardings; the optimizer state is
  created by a jitted `tx.init` with its out_shardings. No array is ever placed whole and then
  resharded.
- `abstract_inputs(seq_len)` gives plan its ShapeDtypeStructs for `step.lower(...)`.
- The optimizer (its schedule follows the realised curriculum, gate.py) can be rebuilt with
  `with_config(cfg)`: a new step over the same state layout.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from bookft.attention.resolution import AxesChoice, Resolved, choose_axes, resolve
from bookft.errors import ConfigError
from bookft.parallel.distributed import start
from bookft.parallel.mesh import make_mesh, resolve_axis_sizes
from bookft.train.config import RunConfig
from bookft.train.optimizer import make_optimizer
from bookft.train.step import (
    BATCH_FIELDS,
    StepSettings,
    jit_train_step,
    make_train_step,
    opt_state_shardings,
    shardings_by_path,
    state_shardings,
)


def resolve_model_config(cfg: RunConfig, model_path) -> RunConfig:
    """With an HF folder (--model or model.hf_path) its config.json gives the model's shape; the run
    config keeps its knobs (dtypes, remat, LoRA, rope theta override)."""
    from bookft.model import config_from_hf, read_hf_config
    from bookft.model.config import KNOBS

    path = model_path or cfg.model.hf_path
    if path is None:
        if cfg.model.rope_scaling is not None:
            raise ConfigError("model.rope_scaling extends a loaded model's RoPE: give the model (--model HF_DIR "
                              "or model.hf_path), or set model.rope directly for a preset shape")
        return cfg
    knobs = {k: getattr(cfg.model, k) for k in KNOBS}
    knobs["hf_path"] = str(path)
    mc = config_from_hf(read_hf_config(path), f"{path}/config.json", **knobs)
    return dataclasses.replace(cfg, model=mc)


def n_devices(cfg: RunConfig) -> int:
    """All devices; on CPU with `parallel.cpu_devices` set, that many simulated ones."""
    n = len(jax.devices())
    if jax.default_backend() == "cpu" and 0 < cfg.parallel.cpu_devices <= n:
        return cfg.parallel.cpu_devices
    return n


def choose_mesh_axes(cfg: RunConfig, n: int) -> tuple[RunConfig, AxesChoice]:
    """The run config with `attention.strategy: auto` decided and, for usp without a
    context_ulysses axis, the context axis split (bookft.attention.resolution.choose_axes)."""
    sizes = resolve_axis_sizes(cfg.parallel.mesh, n)
    choice = choose_axes(cfg.attention, sizes, num_heads=cfg.model.num_heads, num_kv_heads=cfg.model.num_kv_heads)
    if choice.strategy != cfg.attention.strategy or choice.sizes != sizes:
        cfg = dataclasses.replace(
            cfg, attention=dataclasses.replace(cfg.attention, strategy=choice.strategy),
            parallel=dataclasses.replace(cfg.parallel, mesh=dict(choice.sizes)))
    return cfg, choice


def train_mesh(cfg: RunConfig) -> tuple[RunConfig, object, AxesChoice]:
    """(cfg with its attention choice made, the mesh over this job's devices, the choice)."""
    start(cfg.parallel)  # simulated CPU devices, multi-host runtime: before any device is touched
    devices = jax.devices()[: n_devices(cfg)]
    left_out = sorted(set(range(jax.process_count())) - {d.process_index for d in devices})
    if left_out:  # every host of a job feeds the mesh; one without devices in it would wait forever
        raise ConfigError(f"the mesh's {len(devices)} devices leave out process(es) {left_out} of the "
                          f"job's {jax.process_count()}; set parallel.cpu_devices to the whole job's count")
    cfg, choice = choose_mesh_axes(cfg, len(devices))
    return cfg, make_mesh(cfg.parallel, devices), choice


def _with_shardings(abstract, shardings):
    return jax.tree.map(lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s), abstract, shardings)


def _plain(tree):
    return jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), tree)


@dataclass
class Program:
    """The compiled-once train program for one run config on one mesh."""

    cfg: RunConfig
    mesh: object
    attention: Resolved
    attend: object
    graphdef: object
    abs_params: object
    abs_frozen: object
    abs_opt: object
    state_sh: dict  # {"params", "opt_state", "step"} -> shardings
    frozen_sh: object
    tx: object
    schedule: object
    settings: StepSettings
    step: object  # jitted (state, frozen, batch) -> (state, metrics), state donated

    @property
    def strategy(self) -> str:
        return self.attention.strategy

    def with_config(self, cfg: RunConfig) -> Program:
        """The same state layout with the optimizer and step rebuilt for `cfg` (a realised curriculum)."""
        tx, schedule = make_optimizer(cfg.train)
        step = jit_train_step(make_train_step(self.graphdef, tx, self.attend, self.mesh, self.settings),
                              self.state_sh, self.frozen_sh, self.mesh)
        return dataclasses.replace(self, cfg=cfg, tx=tx, schedule=schedule, step=step)

    def batch_shape(self, seq_len: int) -> tuple[int, int, int]:
        a = self.cfg.train.grad_accum
        return (a, max(max(self.cfg.data.batch_size, 1) // a, 1), seq_len)

    def abstract_inputs(self, seq_len: int):
        """(state, frozen, batch) ShapeDtypeStructs for `step.lower` (plan: no weights, no data)."""
        state = {"params": _plain(self.abs_params), "opt_state": _plain(self.abs_opt),
                 "step": jax.ShapeDtypeStruct((), np.int32)}
        shape = self.batch_shape(seq_len)
        batch = {f: jax.ShapeDtypeStruct(shape, np.float32 if f == "weights" else np.int32) for f in BATCH_FIELDS}
        return state, _plain(self.abs_frozen), batch

    def restore_targets(self):
        """(params, opt_state) ShapeDtypeStructs with their shardings, for a checkpoint restore."""
        return (_with_shardings(self.abs_params, self.state_sh["params"]),
                _with_shardings(self.abs_opt, self.state_sh["opt_state"]))

    def state_at(self, step: int, params, opt_state) -> dict:
        return {"params": params, "opt_state": opt_state,
                "step": jax.device_put(jnp.int32(step), self.state_sh["step"])}

    def init_state(self, model_path=None) -> tuple[dict, object]:
        """(state, frozen): parameters (fresh or from an HF folder) and AdamW state, each array
        created directly with its sharding. Under LoRA `params` holds only the trainable variables
        and the base weights are `frozen`, so the optimizer state is adapter-sized."""
        from bookft.model.lora import trainable_filter

        mc, filt = self.cfg.model, trainable_filter(self.cfg.model)
        model_path = model_path or mc.hf_path
        if model_path is not None:
            from bookft.model import load_hf
            from bookft.parallel.rules import logical_to_spec

            mesh = self.mesh
            # streamed tensor by tensor, each placed directly with its target sharding
            model, _ = load_hf(model_path, like=mc, mesh=mesh,
                               shardings=lambda names, shape: logical_to_spec(names, shape, mesh))
        else:
            from bookft.model import abstract_model, init_model

            by_path = dict(nnx.to_flat_state(state_shardings(nnx.state(abstract_model(mc)), self.mesh)))

            def place(path, values, sds):
                host = values()  # the whole tensor drawn once on the host; each device gets its shard
                return jax.make_array_from_callback(sds.shape, by_path[path].get_value(), lambda idx: host[idx])

            model = init_model(mc, seed=self.cfg.train.seed, place=place)
        _, params, frozen = nnx.split(model, filt, ...)
        opt_state = jax.jit(self.tx.init, out_shardings=self.state_sh["opt_state"])(params)
        return self.state_at(0, params, opt_state), frozen


def build_program(cfg: RunConfig, mesh, *, on_nan: str | None = None) -> Program:
    """The train program for `cfg` on `mesh` (nothing allocated; see Program.init_state)."""
    from bookft.model import abstract_model
    from bookft.model.lora import trainable_filter

    mc = cfg.model
    attention = resolve(cfg.attention, mesh, sliding_window=mc.sliding_window, layer_windows=mc.layer_windows)
    attend = attention.attend()
    graphdef, abs_params, abs_frozen = nnx.split(abstract_model(mc), trainable_filter(mc), ...)
    p_sh, f_sh = state_shardings(abs_params, mesh), state_shardings(abs_frozen, mesh)
    tx, schedule = make_optimizer(cfg.train)
    abs_opt = jax.eval_shape(tx.init, abs_params)
    o_sh = opt_state_shardings(abs_opt, shardings_by_path(abs_params, p_sh), mesh)
    rep = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
    state_sh = {"params": p_sh, "opt_state": o_sh, "step": rep}
    settings = StepSettings(loss_chunk=cfg.train.loss_chunk, z_loss=cfg.train.z_loss,
                            on_nan=on_nan or cfg.train.on_nan)
    step = jit_train_step(make_train_step(graphdef, tx, attend, mesh, settings), state_sh, f_sh, mesh)
    return Program(cfg=cfg, mesh=mesh, attention=attention, attend=attend, graphdef=graphdef,
                   abs_params=abs_params, abs_frozen=abs_frozen, abs_opt=abs_opt, state_sh=state_sh,
                   frozen_sh=f_sh, tx=tx, schedule=schedule, settings=settings, step=step)


def check_rows(cfg: RunConfig, program: Program, rows_per_micro: int) -> None:
    """Rows of a micro-batch must split over the data x fsdp axes."""
    nb = math.prod(program.mesh.shape.get(a, 1) for a in ("data", "fsdp"))
    if rows_per_micro % nb:
        raise ConfigError(f"{rows_per_micro} rows per micro-batch cannot be split over "
                          f"data x fsdp = {nb} devices; raise data.batch_size or shrink the mesh")
