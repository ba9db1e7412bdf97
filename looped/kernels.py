"""Speed paths of the layers: RMSNorm and RoPE (on the fused q/k/v projection) with hand-written
backward passes, and the choice of attention kernel by measured speed.

On a CPU in eager mode a quarter of a step goes to elementwise passes over memory; each function
here makes the fewest it can in plain PyTorch, with the maths unchanged (``tests/test_kernels.py``
checks it). Under ``torch.compile`` each traces its plain formula instead.
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.autograd.function import once_differentiable


def _compute_dtype(*tensors: Tensor) -> torch.dtype:
    """fp32, or the widest floating dtype among the tensors if that is wider (fp64 in tests)."""
    return functools.reduce(torch.promote_types, (t.dtype for t in tensors), torch.float32)


class _RMSNorm(torch.autograd.Function):
    """y = w * x / sqrt(mean(x^2) + eps), computed in fp32 (fp64 if x or w is) like F.rms_norm."""

    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, eps: float) -> Tensor:
        xf = x.to(_compute_dtype(x, weight))
        rstd = torch.rsqrt(xf.square().mean(-1, keepdim=True) + eps)
        ctx.save_for_backward(xf, weight, rstd)
        ctx.in_dtype = x.dtype
        return (xf * rstd).mul_(weight)

    @staticmethod
    @once_differentiable  # the backward is not itself differentiable: fail loudly on double grad
    def backward(ctx, grad: Tensor) -> tuple[Tensor | None, Tensor | None, None]:
        # dx = rstd * (g w - xhat * mean(g w xhat)), dw = sum over tokens of g xhat
        xf, weight, rstd = ctx.saved_tensors
        grad = grad.to(xf.dtype)
        xhat = xf * rstd
        dw = (grad * xhat).flatten(0, -2).sum(0) if ctx.needs_input_grad[1] else None
        gw = grad * weight
        dot = (gw * xhat).mean(-1, keepdim=True)
        dx = torch.addcmul(gw, xhat, dot, value=-1).mul_(rstd).to(ctx.in_dtype)
        return dx, dw, None


def rms_norm(x: Tensor, weight: Tensor, eps: float) -> Tensor:
    """RMSNorm over the last dimension: 9 passes over x forward and backward, not 16."""
    if torch.compiler.is_compiling():
        return F.rms_norm(x.to(_compute_dtype(x, weight)), (x.shape[-1],), weight, eps)
    return _RMSNorm.apply(x, weight, eps)


def _rotate(src: Tensor, cos: Tensor, sin: Tensor, dst: Tensor, sign: float) -> None:
    """dst = src * cos + sign * rotate_half(src) * sin in place; sign=-1 is the backward. ``cos``
    and ``sin`` are the first half of the tables (their two halves are equal)."""
    half = src.shape[-1] // 2
    s1, s2, d1, d2 = src[..., :half], src[..., half:], dst[..., :half], dst[..., half:]
    torch.mul(s1, cos, out=d1).addcmul_(s2, sin, value=-sign)
    torch.mul(s2, cos, out=d2).addcmul_(s1, sin, value=sign)


class _RopeQKV(torch.autograd.Function):
    """(B, T, 3 H D) fused projection -> q and k rotated, and v, each a (B, H, T, D) view of
    the contiguous (B, T, 3, H, D) layout, which the attention kernels accept as is."""

    @staticmethod
    def forward(ctx, qkv: Tensor, cos: Tensor, sin: Tensor, n_head: int) -> tuple[Tensor, ...]:
        b, t, three_d = qkv.shape
        x = qkv.view(b, t, 3, n_head, three_d // (3 * n_head))
        half = x.shape[-1] // 2
        # Tables in qkv's dtype (as Hugging Face's Llama does): mixed dtypes would make every
        # kernel below write a temporary and copy it, three times slower under bf16 autocast.
        cos, sin = (tab[:, None, None, :half].to(qkv.dtype) for tab in (cos, sin))  # T 1 1 D/2
        out = torch.empty_like(x)
        _rotate(x[:, :, :2], cos, sin, out[:, :, :2], 1.0)
        out[:, :, 2].copy_(x[:, :, 2])
        ctx.save_for_backward(cos, sin)
        q, k, v = out.transpose(1, 3).unbind(2)  # (B, H, 3, T, D) -> three (B, H, T, D)
        return q, k, v

    @staticmethod
    @once_differentiable
    def backward(ctx, dq: Tensor, dk: Tensor, dv: Tensor) -> tuple[Tensor, None, None, None]:
        cos, sin = ctx.saved_tensors
        b, h, t, d = dq.shape
        dx = torch.empty(b, t, 3, h, d, dtype=dq.dtype, device=dq.device)
        for i, g in enumerate((dq, dk)):  # (B, H, T, D) in, (B, T, H, D) slots out
            _rotate(g.transpose(1, 2), cos[:, 0], sin[:, 0], dx[:, :, i], -1.0)
        dx[:, :, 2].copy_(dv.transpose(1, 2))
        return dx.view(b, t, 3 * h * d), None, None, None


def rope_qkv(qkv: Tensor, cos: Tensor, sin: Tensor, n_head: int) -> tuple[Tensor, Tensor, Tensor]:
    """Split the fused projection into heads and rotate q and k (rotate-half RoPE), in qkv's
    dtype; the gradients land in one (B, T, 3 H D) buffer (autograd would concatenate)."""
    if torch.compiler.is_compiling():
        return _rope_qkv_formula(qkv, cos, sin, n_head)
    return _RopeQKV.apply(qkv, cos, sin, n_head)


def _rope_qkv_formula(qkv: Tensor, cos: Tensor, sin: Tensor, n_head: int) -> tuple[Tensor, ...]:
    """The textbook rotate-half RoPE on the split projection (what ``_RopeQKV`` computes)."""
    b, t, _ = qkv.shape
    q, k, v = qkv.view(b, t, 3, n_head, -1).permute(2, 0, 3, 1, 4)  # three (B, H, T, D)
    cos, sin = cos.to(qkv.dtype), sin.to(qkv.dtype)

    def rotate(x: Tensor) -> Tensor:
        x1, x2 = x.chunk(2, dim=-1)
        return x * cos + torch.cat([-x2, x1], dim=-1) * sin

    return rotate(q), rotate(k), v


def attention_path(q: Tensor) -> str:
    """Which attention kernel is fastest for these queries: "sdpa", "fp32" or "matmul".

    Under CPU bf16 autocast (head dim <= 64), flash is slower in bf16 than in fp32 at short
    sequences (1.6x at T=128, torch 2.13), and bf16 matmuls beat both up to T=256 (keeping the
    T x T scores, bf16 softmax as Hugging Face's eager attention). Elsewhere bf16 flash wins.
    """
    cpu_bf16 = (
        q.device.type == "cpu"
        and torch.is_autocast_enabled("cpu")
        and torch.get_autocast_dtype("cpu") == torch.bfloat16
        and q.shape[-1] <= 64
    )
    if not cpu_bf16 or q.shape[-2] > 512:
        return "sdpa"
    return "matmul" if q.shape[-2] <= 256 else "fp32"


def causal_attention(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
    """softmax(q k^T / sqrt(d) + causal mask) v over (B, H, T, d), by the fastest path."""
    path = attention_path(q)
    if path == "matmul":
        t = q.shape[-2]
        scores = (q @ k.transpose(-1, -2)) * q.shape[-1] ** -0.5
        future = torch.ones(t, t, dtype=torch.bool, device=q.device).triu(1)
        return scores.masked_fill(future, float("-inf")).softmax(-1) @ v
    if path == "fp32":
        with torch.autocast("cpu", enabled=False):
            return F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=True)
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)
