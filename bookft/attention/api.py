"""make_attention: choose a context-parallel strategy and a local kernel; return `attend`.

`attend(q [B,S,Hq,D], k [B,S,Hkv,D], v, segment_ids [B,S], positions [B,S], window=0) -> [B,S,Hq,D]` is what
the model calls (inside jit; the model knows nothing of meshes). Inputs are global arrays sharded
along S over the context axis (usp: over (context, context_ulysses)) and along B over the batch axes
present in the mesh, in stored order. attend scales q by 1/sqrt(D) (or `scale`). `positions` (RoPE
positions, restarting per document) are not needed by the mask: causal order is the global token
order, recovered from chunk ids; they are accepted for the API.

The stored order cannot be checked from the inputs (inside jit they are tracers), so the caller
names it: `load_balanced=True` (zig-zag, as the data loader lays rows out with load balance) or
False (natural order); there is no default. Callers with a config use `bookft.attention.resolve`,
which decides it (and demotes a strategy to local on one context shard) in one place.

Registries are dicts; each strategy module has `validate(spec)` (mesh checks, at make time) and
`apply(spec, q, k, v, segment_ids)` (shape checks at trace time, then the computation).
"""

from __future__ import annotations

from bookft.attention import allgather, local, ring, ulysses, usp
from bookft.attention.common import MAX_CHUNK, Spec
from bookft.attention.kernel_reference import ReferenceKernel
from bookft.attention.kernel_splash import SplashKernel
from bookft.attention.kernel_xla import XlaKernel
from bookft.errors import AttentionError

STRATEGIES = {"local": local, "allgather": allgather, "ulysses": ulysses, "ring": ring, "usp": usp}
KERNELS = {"splash": SplashKernel, "xla": XlaKernel, "reference": ReferenceKernel}


def _platform(mesh) -> str:
    """Platform the program is compiled for: the mesh's devices (TPU topology devices when AOT
    compiling on a CPU host), else the default backend."""
    import jax

    abstract = getattr(mesh, "abstract_device", None)  # AbstractMesh built with a device kind
    if abstract is not None:
        return abstract.platform
    try:
        return mesh.devices.flat[0].platform
    except (AttributeError, IndexError, TypeError):
        return jax.default_backend()


def pick_kernel(kernel: str, platform: str) -> str:
    """`auto` by the platform compiled for: TPU -> splash (Tokamax's, where installed), else xla.
    On GPU the chunk-pair kernel stays xla: Tokamax's public GPU API gives no chunk-pair kernel with
    segment ids, a float32 lse and a backward from the global lse (docs/parallelism.md)."""
    if kernel != "auto":
        return kernel
    from bookft.attention.kernel_splash import splash_available

    return "splash" if platform == "tpu" and splash_available() else "xla"


def make_attention(
    strategy: str,
    kernel: str,
    mesh=None,
    *,
    context_axis: str = "context",
    ulysses_axis: str = "context_ulysses",
    batch_axes: tuple[str, ...] = ("data", "fsdp"),
    causal: bool = True,
    load_balanced: bool | None = None,
    block_q: int = 512,
    block_kv: int = 512,
    scale: float | None = None,
    max_chunk: int = MAX_CHUNK,
):
    """-> attend(q, k, v, segment_ids, positions). Raises AttentionError for bad names or meshes."""
    if load_balanced is None:
        raise AttentionError("make_attention: say which order the sequence is stored in, load_balanced=True "
                             "(zig-zag, what the data loader's load balance produces) or False (natural "
                             "order); it cannot be seen from the inputs, and the wrong one gives wrong "
                             "attention without an error. bookft.attention.resolve(config, mesh) decides it.")
    if strategy not in STRATEGIES:
        raise AttentionError(
            f"unknown attention strategy {strategy!r}; choose one of {sorted(STRATEGIES)} "
            "(config key attention.strategy)"
        )
    kernel = pick_kernel(kernel, _platform(mesh))
    if kernel not in KERNELS:
        raise AttentionError(
            f"unknown attention kernel {kernel!r}; choose one of {sorted(KERNELS)} (config key attention.kernel)"
        )
    if block_q <= 0 or block_kv <= 0:
        raise AttentionError(f"attention block sizes must be positive, got {block_q=}, {block_kv=}")
    if max_chunk < max(block_q, block_kv):
        raise AttentionError(f"attention.max_chunk ({max_chunk}) must be at least the block sizes "
                             f"({block_q=}, {block_kv=})")
    if strategy == "local":
        mesh = None
    present = tuple(a for a in batch_axes if mesh is not None and a in mesh.axis_names)
    interpret = kernel == "splash" and _platform(mesh) != "tpu"  # TPU (or TPU AOT): real Mosaic
    spec = Spec(
        strategy=strategy,
        kernel=KERNELS[kernel](block_q=block_q, block_kv=block_kv, interpret=interpret),
        mesh=mesh,
        context_axis=context_axis,
        ulysses_axis=ulysses_axis,
        batch_axes=present,
        causal=causal,
        load_balanced=load_balanced,
        scale=scale,
        max_chunk=max_chunk,
    )
    module = STRATEGIES[strategy]
    module.validate(spec)

    def attend(q, k, v, segment_ids=None, positions=None, window: int = 0):
        """window W > 0 (static): sliding-window layer, keys at most W - 1 tokens back."""
        del positions  # the mask is causal in global order + same segment; see module docstring
        return module.apply(spec, q, k, v, segment_ids, int(window or 0))

    attend.spec = spec
    return attend
