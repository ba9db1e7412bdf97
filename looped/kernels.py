"""Two layer pieces with hand-written backward passes: RMSNorm, and RoPE on the fused q/k/v
projection.

Why: on a CPU in eager mode a train step spends about a quarter of its time outside the matmuls
and the attention kernel, in elementwise passes over memory. Autograd's generic backward of the
textbook formulas makes more passes than the maths needs: the concatenations that undo the split
of the fused q/k/v projection and rotate-half RoPE's ``chunk``, RMSNorm's seven-op chain. Each
function here makes the fewest passes it can in plain PyTorch and writes input gradients
straight into one buffer, so the fused projection gets its gradient without a concatenation.

The maths is unchanged: ``tests/test_kernels.py`` checks every function and its gradient
against the textbook formula (float64 ``gradcheck`` and fp32 comparison). ``looped bench``
measures the effect against a stacked Hugging Face Llama. They are for eager mode: under
``torch.compile`` (``LoopedTransformer.compile_block``) each function traces its plain formula
instead, which the compiler fuses into fewer passes still.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.autograd.function import once_differentiable


def _compute_dtype(*tensors: Tensor) -> torch.dtype:
    """fp32, or the widest floating dtype among the tensors if that is wider (fp64 in tests)."""
    dtype = torch.float32
    for t in tensors:
        dtype = torch.promote_types(dtype, t.dtype)
    return dtype


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
    """RMSNorm over the last dimension: 9 passes over x forward and backward, not 16.

    Under ``torch.compile`` the plain formula is traced instead: the compiler fuses it better
    than any hand-written backward, and the function here would be an opaque call to it.
    """
    if torch.compiler.is_compiling():
        return F.rms_norm(x.to(_compute_dtype(x, weight)), (x.shape[-1],), weight, eps)
    return _RMSNorm.apply(x, weight, eps)


def _rotate(src: Tensor, cos: Tensor, sin: Tensor, dst: Tensor, sign: float) -> None:
    """dst = src * cos + sign * rotate_half(src) * sin, written in place (rotate-half RoPE).

    sign=+1 is the forward rotation, -1 its transpose (the backward). ``cos`` and ``sin`` are the
    first half of the tables (their two halves are equal), shaped to broadcast against src.
    """
    half = src.shape[-1] // 2
    s1, s2, d1, d2 = src[..., :half], src[..., half:], dst[..., :half], dst[..., half:]
    torch.mul(s1, cos, out=d1).addcmul_(s2, sin, value=-sign)
    torch.mul(s2, cos, out=d2).addcmul_(s1, sin, value=sign)


class _RopeQKV(torch.autograd.Function):
    """(B, T, 3 H D) fused projection -> q and k rotated, and v, each (B, H, T, D).

    All work happens in the projection's own (B, T, 3, H, D) layout, which is contiguous; the
    outputs are (B, H, T, D) views of it, the layout the attention kernels accept as is.
    """

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
    """Split the fused projection into heads and rotate q and k (rotate-half RoPE).

    The gradient of q, k and v lands in one (B, T, 3 H D) buffer, which is what the fused
    projection's backward reads; autograd would build it with concatenations. Everything stays
    in qkv's dtype, the tables included (bf16 under autocast, the dtype the attention matmuls
    read). Under ``torch.compile`` the plain formula is traced instead, for the compiler to fuse
    (the in-place writes into strided views above would break its graph).
    """
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
