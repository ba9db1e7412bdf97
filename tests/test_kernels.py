"""The hand-written backward passes in looped.kernels against the plain formulas that
``torch.compile`` traces instead (``F.rms_norm``, ``_rope_qkv_formula``): the same values, float64
gradients checked numerically, and the same gradients as autograd's own, over shapes down to one
token, one head and head dim 2. RoPE is also checked for what makes it RoPE."""

import pytest
import torch
import torch.nn.functional as F

from looped.kernels import _rope_qkv_formula, attention_path, causal_attention, rms_norm, rope_qkv
from looped.model import rope_tables

torch.set_num_threads(1)
SHAPES = [(2, 5, 3, 4), (1, 1, 1, 2), (1, 7, 1, 6), (3, 4, 2, 8)]  # (B, T, heads, head dim)


def case(name, shape, dtype):
    """(function, reference, inputs, which inputs take gradients) for one kernel and shape."""
    b, t, h, d = shape
    g = torch.Generator().manual_seed(0)
    if name == "rms_norm":
        x = torch.randn(b, t, h * d, generator=g, dtype=dtype)
        w = 1 + torch.randn(h * d, generator=g, dtype=dtype)
        return (
            (lambda x, w: rms_norm(x, w, 1e-6)),
            (lambda x, w: F.rms_norm(x, (x.shape[-1],), w, 1e-6)),
            (x, w),
            (True, True),
        )
    cos, sin = (tab.to(dtype) for tab in rope_tables(t, d, 10000.0))
    qkv = torch.randn(b, t, 3 * h * d, generator=g, dtype=dtype)
    fn = lambda x, c, s: rope_qkv(x, c, s, h)  # noqa: E731
    ref = lambda x, c, s: _rope_qkv_formula(x, c, s, h)  # noqa: E731
    return fn, ref, (qkv, cos, sin), (True, False, False)


def _tuple(out):
    return out if isinstance(out, tuple) else (out,)


def _leaves(inputs, grads):
    return [a.clone().requires_grad_(r) for a, r in zip(inputs, grads, strict=True)]


NAMES = ["rms_norm", "rope_qkv"]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name", NAMES)
def test_values_match_the_formula(name, shape):
    fn, ref, args, _ = case(name, shape, torch.float32)
    for got, want in zip(_tuple(fn(*args)), _tuple(ref(*args)), strict=True):
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name", NAMES)
def test_gradients_pass_gradcheck(name, shape):
    fn, _, args, grads = case(name, shape, torch.float64)
    assert torch.autograd.gradcheck(fn, _leaves(args, grads))


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name", NAMES)
def test_gradients_match_autograd_of_the_formula(name, shape):
    fn, ref, args, needs = case(name, shape, torch.float32)
    grads = []
    for f in (fn, ref):
        leaves = _leaves(args, needs)
        outs = _tuple(f(*leaves))
        w = torch.Generator().manual_seed(1)
        sum(o.mul(torch.randn(o.shape, generator=w)).sum() for o in outs).backward()
        grads.append([a.grad for a in leaves if a.requires_grad])
    for got, want in zip(*grads, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", NAMES)
def test_double_backward_fails_loudly(name):
    """The backward passes are not differentiable themselves; a second derivative must raise,
    not return a silently wrong number."""
    fn, _, args, needs = case(name, SHAPES[0], torch.float64)
    leaves = _leaves(args, needs)
    out = _tuple(fn(*leaves))[0]
    (grad,) = torch.autograd.grad(out.square().sum(), leaves[0], create_graph=True)
    with pytest.raises(RuntimeError):
        grad.sum().backward()


def test_bf16_autocast_keeps_dtypes():
    """Under bf16 autocast the projection comes out bf16: q, k and v stay bf16 (what the attention
    matmuls read), and so does the gradient handed back to the projection. RMSNorm of a bf16
    input still computes, and returns, fp32."""
    b, t, h, d = SHAPES[0]
    _, _, (x, c, s), _ = case("rope_qkv", SHAPES[0], torch.float32)
    qkv = x.bfloat16().requires_grad_()
    q, k, v = rope_qkv(qkv, c, s, h)
    assert {q.dtype, k.dtype, v.dtype} == {torch.bfloat16} and q.shape == (b, h, t, d)
    (q.float().sum() + k.float().sum() + v.float().sum()).backward()
    assert qkv.grad.dtype == torch.bfloat16 and qkv.grad.shape == qkv.shape
    xb = torch.randn(2, 3, 8).bfloat16().requires_grad_()
    y = rms_norm(xb, torch.ones(8, dtype=torch.bfloat16), 1e-6)
    assert y.dtype == torch.float32
    y.sum().backward()
    assert xb.grad.dtype == torch.bfloat16


def test_rope_scores_depend_only_on_relative_position():
    """The defining property: the same query and key placed at positions (m, n) or (m + s, n + s)
    give the same dot product after rotation, and the rotation keeps each vector's norm."""
    t, h, d = 12, 1, 8
    cos, sin = rope_tables(t, d, 10000.0)
    g = torch.Generator().manual_seed(0)
    qv, kv = torch.randn(d, generator=g), torch.randn(d, generator=g)
    qkv = torch.zeros(1, t, 3 * h * d)
    qkv[0, :, :d], qkv[0, :, d : 2 * d] = qv, kv  # the same q and k at every position
    q, k, _ = rope_qkv(qkv, cos, sin, h)
    scores = q[0, 0] @ k[0, 0].T  # (T, T): query position m, key position n
    for m, n, s in [(3, 1, 4), (5, 5, 6), (2, 7, 3)]:
        torch.testing.assert_close(scores[m, n], scores[m + s, n + s], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(q[0, 0].norm(dim=-1), qv.norm().expand(t), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("seq", "head_dim", "autocast", "expected"),
    [
        (128, 64, True, "matmul"),
        (256, 16, True, "matmul"),
        (384, 64, True, "fp32"),
        (1024, 64, True, "sdpa"),
        (128, 128, True, "sdpa"),
        (128, 64, False, "sdpa"),
    ],
)
def test_attention_path_follows_the_measured_speeds(seq, head_dim, autocast, expected):
    """CPU bf16 autocast: masked matmuls up to T=256, the fp32 kernel to T=512, then bf16 SDPA;
    without autocast (fp32 training) always SDPA."""
    q = torch.zeros(1, 1, seq, head_dim)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        assert attention_path(q) == expected


@pytest.mark.parametrize("seq", [64, 384])
def test_cpu_bf16_attention_paths_match_sdpa_and_are_causal(seq):
    """Both CPU bf16 fast paths compute the same attention as fp32 SDPA (to bf16 precision), and
    no position sees a later one: changing the last key and value leaves earlier outputs alone."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 2, seq, 32, generator=g) for _ in range(3))
    want = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert attention_path(q) in ("matmul", "fp32")
        got = causal_attention(q, k, v)
        k2, v2 = k.clone(), v.clone()
        k2[:, :, -1], v2[:, :, -1] = 5.0, -5.0
        got2 = causal_attention(q, k2, v2)
    torch.testing.assert_close(got.float(), want, atol=3e-2, rtol=0)
    torch.testing.assert_close(got2[:, :, :-1], got[:, :, :-1], atol=0, rtol=0)
    assert not torch.equal(got2[:, :, -1], got[:, :, -1])
