"""One resolution of the attention section for a mesh: the strategy that runs, its balance, its lengths.

Every caller (train, plan, eval, the needle probe, benchmarks) goes through here, so the rules are
written once:
- `choose_axes(config, sizes, ...)`, before the mesh exists: `strategy: auto` picks a strategy
  from the context degree, the head counts and the kernel; `usp` on a mesh without a
  `context_ulysses` axis splits the context axis itself into (context / u, u) with u = gcd(context,
  KV heads) (or the configured ulysses degree). Both say what they did in `why`.
- `resolve(config, mesh)`: the strategy is demoted to `local` when the mesh has no context split
  (cp == 1: the same kernel on the whole sequence); zig-zag load balance applies only when the
  strategy is not local; a row length must be a multiple of `seq_multiple` (cp, or 2 * cp with
  zig-zag). `attend()` then builds the attention function with exactly that layout.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from bookft.errors import AttentionError, ConfigError

CONTEXT_AXES = ("context", "context_ulysses")


def context_degree(mesh) -> int:
    """Number of sequence shards of `mesh` (1 without one): the product of its context axes."""
    if mesh is None:
        return 1
    return math.prod(mesh.shape.get(a, 1) for a in CONTEXT_AXES)


@dataclass(frozen=True)
class AxesChoice:
    strategy: str  # what the config asked, with `auto` replaced by the choice
    sizes: dict[str, int]  # mesh axis sizes to build the mesh with
    why: str = ""  # one line when bookft chose or changed something, else ""


def ulysses_degree(ctx: int, num_kv_heads: int, want: int | None = None) -> int:
    """The usp all-to-all degree over `ctx` context devices: `want` when it divides ctx, else
    gcd(ctx, KV heads), the largest degree that splits the KV heads without replicating them."""
    return want if want and want > 0 and ctx % want == 0 else math.gcd(ctx, num_kv_heads)


def auto_strategy(cp: int, num_heads: int, num_kv_heads: int, kernel: str) -> tuple[str, str]:
    """(strategy, why) for `strategy: auto` over `cp` context shards.

    Ulysses moves heads instead of sequence (two all-to-alls per layer, no ring steps), so it is
    preferred over the degree the KV heads allow, u = gcd(cp, KV heads) (beyond that it would
    replicate KV heads); the rest of the degree becomes a ring (usp), and with u = 1 a plain ring,
    whose K/V blocks stay O(S / cp) per device whatever the head counts."""
    if cp <= 1:
        return "local", "auto: one context shard, so the local kernel on the whole sequence"
    u = math.gcd(cp, num_kv_heads)
    heads = f"{num_heads} q / {num_kv_heads} KV heads, context degree {cp}, kernel {kernel}"
    if u == cp and num_heads % cp == 0:
        return "ulysses", f"auto: ulysses ({heads}: the KV heads split {cp} ways, so all-to-all over heads)"
    if u > 1:
        return "usp", (f"auto: usp ({heads}: ulysses over {u} = gcd(context, KV heads), "
                       f"ring over the other {cp // u})")
    return "ring", f"auto: ring ({heads}: the KV heads do not split over the context axis)"


def choose_axes(config, sizes: dict[str, int], *, num_heads: int, num_kv_heads: int) -> AxesChoice:
    """The strategy and mesh axis sizes for attention section `config` on resolved axis `sizes`."""
    sizes = dict(sizes)
    cp = sizes.get("context", 1) * sizes.get("context_ulysses", 1)
    strategy, why = config.strategy, ""
    if strategy == "auto":
        strategy, why = auto_strategy(cp, num_heads, num_kv_heads, config.kernel)
        if strategy == "ulysses" and sizes.get("context_ulysses", 1) > 1:
            strategy = "usp"  # a configured inner axis stays what it is
    if strategy == "usp" and "context_ulysses" not in sizes:
        ctx = sizes.pop("context", 1)
        u = ulysses_degree(ctx, num_kv_heads)
        sizes = {**sizes, "context": ctx // u, "context_ulysses": u}
        why = (why + "; " if why else "") + (
            f"usp: the mesh has no context_ulysses axis, so its context axis of {ctx} is split into "
            f"ring {ctx // u} x ulysses {u} (u = gcd(context, KV heads {num_kv_heads}); set "
            "parallel.mesh.context_ulysses to choose)")
    return AxesChoice(strategy, sizes, why)


@dataclass(frozen=True)
class Resolved:
    """What runs: `strategy` over `cp` context shards, in zig-zag order of degree `balance` (1 = natural)."""

    requested: str
    strategy: str
    kernel: str
    cp: int
    balance: int
    seq_multiple: int
    config: object
    mesh: object

    @property
    def load_balanced(self) -> bool:
        return self.balance > 1

    def check_seq_len(self, row_len: int) -> None:
        if row_len % self.seq_multiple:
            zig = " with zig-zag load balancing" if self.seq_multiple > self.cp else ""
            raise AttentionError(
                f"sequence length {row_len} is not divisible by {self.seq_multiple} (strategy {self.strategy} "
                f"over {self.cp} context shards{zig}); choose a multiple of it")

    def attend(self):
        """The attention function for this resolution (bookft.attention.api.make_attention)."""
        from bookft.attention.api import make_attention

        a = self.config
        return make_attention(self.strategy, a.kernel, self.mesh, causal=a.causal,
                              load_balanced=self.load_balanced, block_q=a.block_q, block_kv=a.block_kv,
                              max_chunk=a.max_chunk)


def resolve(config, mesh, *, sliding_window: int = 0, layer_windows=()) -> Resolved:
    """The effective attention for section `config` on `mesh` (None: one device)."""
    if any(layer_windows) and config.kernel == "auto":
        config = dataclasses.replace(config, kernel="xla")  # windows: the xla kernel masks inside a pair
    if any(layer_windows) and config.kernel == "splash":
        raise ConfigError(f"model.sliding_window={sliding_window}: sliding-window layers need "
                          "attention.kernel: xla (the splash kernel here takes static masks only)")
    if config.strategy == "auto":
        raise AttentionError("attention.strategy auto is chosen before the mesh is built "
                             "(bookft.attention.resolution.choose_axes)")
    cp = context_degree(mesh)
    strategy = config.strategy if cp > 1 else "local"  # nothing to split: the kernel on the whole sequence
    balance = cp if (config.load_balance and strategy != "local") else 1
    multiple = cp * (2 if balance > 1 else 1)
    return Resolved(requested=config.strategy, strategy=strategy, kernel=config.kernel, cp=cp, balance=balance,
                    seq_multiple=multiple, config=config, mesh=mesh if strategy != "local" else None)
