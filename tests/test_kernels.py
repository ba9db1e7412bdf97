"""The hand-written backward passes in looped.kernels against the textbook formulas: the same
values, float64 gradients checked numerically, and the same gradients as autograd's own."""

import pytest
import torch

from looped.kernels import rms_norm, rope_qkv
from looped.model import rope_tables

torch.set_num_threads(1)
B, T, H, D = 2, 5, 3, 4


def rms_norm_ref(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rope_qkv_ref(qkv, cos, sin, n_head):
    b, t, _ = qkv.shape
    q, k, v = qkv.view(b, t, 3, n_head, -1).permute(2, 0, 3, 1, 4)

    def rotate(x):
        x1, x2 = x.chunk(2, dim=-1)
        return x * cos + torch.cat([-x2, x1], dim=-1) * sin

    return rotate(q), rotate(k), v


def _inputs(dtype):
    g = torch.Generator().manual_seed(0)
    cos, sin = (t.to(dtype) for t in rope_tables(T, D, 10000.0))
    return {
        "rms_norm": (torch.randn(B, T, 8, generator=g, dtype=dtype), 1 + torch.randn(8, generator=g, dtype=dtype)),
        "rope_qkv": (torch.randn(B, T, 3 * H * D, generator=g, dtype=dtype), cos, sin),
    }  # fmt: skip


CASES = {
    "rms_norm": (lambda x, w: rms_norm(x, w, 1e-6), lambda x, w: rms_norm_ref(x, w, 1e-6)),
    "rope_qkv": (lambda x, c, s: rope_qkv(x, c, s, H), lambda x, c, s: rope_qkv_ref(x, c, s, H)),
}


def _tuple(out):
    return out if isinstance(out, tuple) else (out,)


@pytest.mark.parametrize("name", list(CASES))
def test_values_match_the_formula(name):
    fn, ref = CASES[name]
    args = _inputs(torch.float32)[name]
    for got, want in zip(_tuple(fn(*args)), _tuple(ref(*args)), strict=True):
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", list(CASES))
def test_gradients_pass_gradcheck(name):
    fn, _ = CASES[name]
    args = [
        a.requires_grad_(i == 0 or name == "rms_norm")
        for i, a in enumerate(_inputs(torch.float64)[name])
    ]
    assert torch.autograd.gradcheck(fn, args)


@pytest.mark.parametrize("name", list(CASES))
def test_gradients_match_autograd_of_the_formula(name):
    fn, ref = CASES[name]
    grads = []
    for f in (fn, ref):
        args = [
            a.clone().requires_grad_(i == 0 or name == "rms_norm")
            for i, a in enumerate(_inputs(torch.float32)[name])
        ]
        outs = _tuple(f(*args))
        w = torch.Generator().manual_seed(1)
        sum(o.mul(torch.randn(o.shape, generator=w)).sum() for o in outs).backward()
        grads.append([a.grad for a in args if a.requires_grad])
    for got, want in zip(*grads, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_bf16_autocast_keeps_dtypes():
    """Under bf16 autocast the projection comes out bf16: q, k and v stay bf16 (what the attention
    matmuls read), and so does the gradient handed back to the projection."""
    x, c, s = _inputs(torch.float32)["rope_qkv"]
    qkv = x.bfloat16().requires_grad_()
    q, k, v = rope_qkv(qkv, c, s, H)
    assert {q.dtype, k.dtype, v.dtype} == {torch.bfloat16} and q.shape == (B, H, T, D)
    (q.float().sum() + k.float().sum() + v.float().sum()).backward()
    assert qkv.grad.dtype == torch.bfloat16 and qkv.grad.shape == qkv.shape
