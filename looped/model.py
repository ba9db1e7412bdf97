"""The looped (weight-tied) transformer: P, then block A applied K times, then H.

    idx -> P (token embedding, optional prelude layers)            = e
        -> A applied K times with shared weights                   h_1 = A(e)
                                                                   h_k = A(inject(h_{k-1}, e))
           (with state_norm, h_{k-1} is RMS-normed before the injection)
        -> H (optional coda layers, final RMSNorm, LM head)        logits

Parameters do not grow with K; compute does (``looped.flops``). Layers are pre-norm Llama-style
(RMSNorm, RoPE attention, SwiGLU, no biases; speed paths in ``looped.kernels``). Injection feeds
the embedding back before every loop after the first: "add" (h + e), "concat" (W [h; e]), "none".

    model = LoopedTransformer(LoopedConfig(vocab_size=512, d_model=128, n_head=4))
    logits, loss = model(idx, depth=4, targets=targets)
    per_depth = model.forward_depths(idx, range(1, 17), targets)   # one pass of 16 loops
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import Tensor, nn

from looped.kernels import causal_attention, rms_norm, rope_qkv

INJECTIONS = ("add", "concat", "none")


@dataclass
class LoopedConfig:
    vocab_size: int = 512  # tokenizer vocabulary size
    seq_len: int = 256  # longest sequence the RoPE tables cover
    d_model: int = 128  # residual stream width
    n_head: int = 4  # attention heads (head dim = d_model / n_head)
    d_ff: int = 0  # SwiGLU hidden width; 0 = 8/3 * d_model rounded up to a multiple of 64
    n_prelude: int = 0  # unshared layers in P, after the embedding
    n_block: int = 1  # layers in the looped block A (applied `depth` times)
    n_coda: int = 0  # unshared layers in H, before the final norm and head
    injection: str = "add"  # how the embedding re-enters each loop: add | concat | none
    tie_embeddings: bool = True  # share the embedding matrix with the LM head
    max_depth: int = 16  # largest loop count accepted by forward()
    bptt: int = 0  # truncated backprop: gradients through the last `bptt` loops only; 0 = all
    rope_base: float = 10000.0  # RoPE frequency base
    norm_eps: float = 1e-6  # RMSNorm epsilon
    init_std: float = 0.02  # std of the normal init of weights
    # applications of the block the residual init counts: the output projections start at
    # init_std / sqrt(2 x (prelude + init_loops x block + coda layers)); 1 counts the block once
    # (GPT-2's rule), max_depth counts every application a deep loop makes
    init_loops: int = 1
    # an RMSNorm on the recurrent state before each loop after the first (h_k = A(inject(
    # norm(h_{k-1}), e))): the state's scale no longer grows with K, as in sandwich-norm
    # recurrent-depth models; off by default, and off adds no parameter
    state_norm: bool = False

    def __post_init__(self) -> None:
        if self.d_model % self.n_head:
            raise ValueError(f"d_model={self.d_model} must be divisible by n_head={self.n_head}")
        if (self.d_model // self.n_head) % 2:
            raise ValueError(f"head dim {self.d_model // self.n_head} must be even for RoPE")
        if self.injection not in INJECTIONS:
            raise ValueError(f"injection={self.injection!r}: choose one of {', '.join(INJECTIONS)}")
        if self.n_block < 1:
            raise ValueError(f"n_block={self.n_block}: the looped block needs at least 1 layer")
        if self.init_loops < 1:
            raise ValueError(f"init_loops={self.init_loops} must be >= 1")
        if self.max_depth < 1 or self.bptt < 0:
            raise ValueError(f"max_depth={self.max_depth} must be >= 1 and bptt={self.bptt} >= 0")

    @property
    def ff_dim(self) -> int:
        """The SwiGLU hidden width actually used (d_ff, or its default when 0)."""
        return self.d_ff or 64 * math.ceil(8 * self.d_model / 3 / 64)

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_head


def fit_vocab(configured: int, needed: int) -> int:
    """The configured vocabulary, or `needed` rounded up to a multiple of 64 if larger."""
    return configured if configured >= needed else 64 * math.ceil(needed / 64)


def check_depth(depth: object, max_depth: int) -> int:
    """Return ``depth`` as an int, or raise ValueError naming the value and the allowed range."""
    if isinstance(depth, bool) or not isinstance(depth, int | torch.SymInt):
        if isinstance(depth, float) and depth.is_integer():
            raise ValueError(f"depth={depth!r} must be an int in 1..{max_depth}, not a float")
        raise ValueError(f"depth={depth!r} must be an integer in 1..{max_depth}")
    if not 1 <= depth <= max_depth:
        raise ValueError(f"depth={depth} is outside the allowed range 1..{max_depth}")
    return int(depth)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: Tensor) -> Tensor:
        return rms_norm(x, self.weight, self.eps)


def rope_tables(seq_len: int, head_dim: int, base: float) -> tuple[Tensor, Tensor]:
    """cos/sin tables of shape (seq_len, head_dim) for rotate-half RoPE."""
    inv_freq = 1.0 / base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    angles = torch.outer(torch.arange(seq_len, dtype=torch.float32), inv_freq)
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos(), angles.sin()


class Attention(nn.Module):
    def __init__(self, cfg: LoopedConfig) -> None:
        super().__init__()
        self.n_head = cfg.n_head
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=False)  # fused q, k, v
        self.proj = nn.Linear(cfg.d_model, cfg.d_model, bias=False)

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        q, k, v = rope_qkv(self.qkv(x), cos, sin, self.n_head)  # each (B, H, T, D)
        y = causal_attention(q, k, v)
        return self.proj(rearrange(y, "b h t d -> b t (h d)"))


class SwiGLU(nn.Module):
    def __init__(self, cfg: LoopedConfig) -> None:
        super().__init__()
        self.up = nn.Linear(cfg.d_model, 2 * cfg.ff_dim, bias=False)  # fused gate and up
        self.down = nn.Linear(cfg.ff_dim, cfg.d_model, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        gate, up = self.up(x).chunk(2, dim=-1)
        return self.down(F.silu(gate) * up)


class Layer(nn.Module):
    """One pre-norm transformer layer: x + attn(norm(x)), then x + mlp(norm(x))."""

    def __init__(self, cfg: LoopedConfig) -> None:
        super().__init__()
        self.attn_norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.attn = Attention(cfg)
        self.mlp_norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.mlp = SwiGLU(cfg)

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        x = x + self.attn(self.attn_norm(x), cos, sin)
        return x + self.mlp(self.mlp_norm(x))


class Stack(nn.Module):
    """A few layers applied in order; the looped block A is one of these."""

    def __init__(self, cfg: LoopedConfig, n_layers: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(Layer(cfg) for _ in range(n_layers))

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        for layer in self.layers:
            x = layer(x, cos, sin)
        return x


class LoopedTransformer(nn.Module):
    def __init__(self, cfg: LoopedConfig) -> None:
        super().__init__()
        self.config = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.prelude = Stack(cfg, cfg.n_prelude)
        self.block = Stack(cfg, cfg.n_block)  # A: the shared weights applied `depth` times
        self.coda = Stack(cfg, cfg.n_coda)
        self.norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        if cfg.tie_embeddings:
            self.head.weight = self.embed.weight
        cos, sin = rope_tables(cfg.seq_len, cfg.head_dim, cfg.rope_base)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        self.apply(self._init_weights)
        # Residual output projections start smaller so the stream does not grow with depth.
        n_layers = cfg.n_prelude + cfg.init_loops * cfg.n_block + cfg.n_coda
        for name, p in self.named_parameters():
            if name.endswith(("attn.proj.weight", "mlp.down.weight")):
                nn.init.normal_(p, std=cfg.init_std / math.sqrt(2 * n_layers))
        # The concat map is made last and starts as "add" (W [h; e] = h + e), so every injection
        # mode draws the same initial weights everywhere else.
        self.inject = None
        if cfg.injection == "concat":
            self.inject = nn.Linear(2 * cfg.d_model, cfg.d_model, bias=False)
            eye = torch.eye(cfg.d_model)
            with torch.no_grad():
                self.inject.weight.copy_(torch.cat([eye, eye], dim=1))
        # Last too, and it draws no random numbers: every other weight starts as it does without it.
        self.state_norm = RMSNorm(cfg.d_model, cfg.norm_eps) if cfg.state_norm else None

    def _init_weights(self, module: nn.Module) -> None:
        if isinstance(module, nn.Linear | nn.Embedding):
            nn.init.normal_(module.weight, std=self.config.init_std)

    def num_params(self, non_embedding: bool = False) -> int:
        """Parameter count (tied weights once); `non_embedding` drops the embedding matrix."""
        n = sum(p.numel() for p in self.parameters())
        return n - self.embed.weight.numel() if non_embedding else n

    def compile_block(self, **kwargs: object) -> None:
        """Compile the looped block only: one graph serves every depth."""
        self.block.compile(**kwargs)

    # -- the three parts --------------------------------------------------------------------
    def _rope(self, t: int) -> tuple[Tensor, Tensor]:
        if t > self.config.seq_len:
            raise ValueError(f"sequence length {t} exceeds config.seq_len={self.config.seq_len}")
        return self.rope_cos[:t], self.rope_sin[:t]

    def embed_input(self, idx: Tensor) -> Tensor:
        """P: token embedding and prelude layers -> e, shape (B, T, d)."""
        cos, sin = self._rope(idx.shape[1])
        return self.prelude(self.embed(idx), cos, sin)

    def loops(self, e: Tensor, depth: int, bptt: int | None = None) -> Iterator[Tensor]:
        """Yield the hidden state after each of `depth` applications of A; with truncated backprop
        (`bptt` > 0) the first depth - bptt loops run under no_grad: same values, shorter graph."""
        cos, sin = self._rope(e.shape[1])
        bptt = self.config.bptt if bptt is None else bptt
        n_frozen = max(0, depth - bptt) if bptt > 0 and torch.is_grad_enabled() else 0
        h = e
        for k in range(depth):
            with torch.no_grad() if k < n_frozen else nullcontext():
                x = e if k == 0 else self._inject(h, e)
                h = self.block(x, cos, sin)
            yield h

    def _inject(self, h: Tensor, e: Tensor) -> Tensor:
        if self.state_norm is not None:
            h = self.state_norm(h)
        if self.config.injection == "add":
            return h + e
        if self.config.injection == "concat":
            return self.inject(torch.cat([h, e], dim=-1))
        return h

    def output(
        self, h: Tensor, targets: Tensor | None = None, reduction: str = "mean"
    ) -> tuple[Tensor, Tensor | None]:
        """H: coda, final norm, LM head; cross-entropy with targets (-100 ignored)."""
        cos, sin = self._rope(h.shape[1])
        logits = self.head(self.norm(self.coda(h, cos, sin)))
        if targets is None:
            return logits, None
        loss = F.cross_entropy(
            logits.float().flatten(0, 1), targets.flatten(), ignore_index=-100, reduction=reduction
        )
        return logits, loss.view_as(targets) if reduction == "none" else loss

    # -- public forwards --------------------------------------------------------------------
    def forward(
        self, idx: Tensor, depth: int, targets: Tensor | None = None, reduction: str = "mean"
    ) -> tuple[Tensor, Tensor | None]:
        """Logits (B, T, V) at loop count `depth`, and the loss when `targets` is given."""
        depth = check_depth(depth, self.config.max_depth)
        h = deque(self.loops(self.embed_input(idx), depth), maxlen=1)[0]  # keep only the last state
        return self.output(h, targets, reduction)

    def forward_depths(
        self,
        idx: Tensor,
        depths: Iterable[int],
        targets: Tensor | None = None,
        reduction: str = "mean",
        return_logits: bool = True,
    ) -> dict[int, tuple[Tensor | None, Tensor | None]]:
        """{depth: (logits, loss)} for every depth from ONE pass of max(depths) loops."""
        wanted = sorted({check_depth(d, self.config.max_depth) for d in depths})
        if not wanted:
            raise ValueError("depths is empty; ask for at least one serving depth, e.g. 1-16")
        out: dict[int, tuple[Tensor | None, Tensor | None]] = {}
        for k, h in enumerate(self.loops(self.embed_input(idx), wanted[-1]), start=1):
            if k in wanted:
                logits, loss = self.output(h, targets, reduction)
                out[k] = (logits if return_logits else None, loss)
        return out

    def hidden_states(self, idx: Tensor, depth: int) -> list[Tensor]:
        """The residual stream after each loop, [h_1, ..., h_depth] (for probing dynamics)."""
        depth = check_depth(depth, self.config.max_depth)
        return list(self.loops(self.embed_input(idx), depth))
