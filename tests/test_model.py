"""The looped transformer: depth-K forward equals K block applications, the one-pass sweep equals
separate forwards, weights are shared, truncated backprop cuts exactly the early loops."""

import pytest
import torch

from looped.model import LoopedConfig, LoopedTransformer
from looped.runtime.distributed import may_leave_unused

torch.set_num_threads(1)


def tiny(**kw) -> LoopedTransformer:
    torch.manual_seed(0)
    cfg = LoopedConfig(vocab_size=61, seq_len=32, d_model=32, n_head=4, **kw)
    return LoopedTransformer(cfg).eval()


@pytest.fixture
def idx() -> torch.Tensor:
    return torch.randint(0, 61, (2, 16), generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("injection", ["add", "concat", "none"])
@pytest.mark.parametrize("depth", [1, 3, 6])
def test_depth_k_equals_k_block_applications(idx, injection, depth):
    m = tiny(injection=injection, n_prelude=1, n_coda=1)
    cos, sin = m.rope_cos[:16], m.rope_sin[:16]
    e = m.prelude(m.embed(idx), cos, sin)
    h = m.block(e, cos, sin)
    for _ in range(depth - 1):
        x = {"add": h + e, "none": h, "concat": None}[injection]
        if injection == "concat":
            x = m.inject(torch.cat([h, e], dim=-1))
        h = m.block(x, cos, sin)
    expected = m.head(m.norm(m.coda(h, cos, sin)))
    logits, _ = m(idx, depth)
    torch.testing.assert_close(logits, expected, rtol=0, atol=0)


def test_depth_one_is_a_plain_transformer(idx):
    """With any injection, depth 1 is embedding -> block once -> head."""
    outs = [tiny(injection=inj)(idx, 1)[0] for inj in ("add", "concat", "none")]
    torch.testing.assert_close(outs[0], outs[1], rtol=0, atol=0)
    torch.testing.assert_close(outs[0], outs[2], rtol=0, atol=0)


def test_forward_depths_matches_separate_forwards(idx):
    m = tiny(n_coda=1)
    targets = torch.roll(idx, -1, 1)
    sweep = m.forward_depths(idx, [1, 2, 5, 8], targets)
    assert sorted(sweep) == [1, 2, 5, 8]
    for k, (logits, loss) in sweep.items():
        ref_logits, ref_loss = m(idx, k, targets)
        torch.testing.assert_close(logits, ref_logits)
        torch.testing.assert_close(loss, ref_loss)


def test_forward_depths_runs_max_depth_loops_once(idx):
    m = tiny()
    calls = []
    m.block.register_forward_hook(lambda *a: calls.append(1))
    m.forward_depths(idx, range(1, 17), return_logits=False)
    assert len(calls) == 16  # not 1 + 2 + ... + 16 = 136


def test_per_token_loss_matches_mean(idx):
    m = tiny()
    targets = torch.roll(idx, -1, 1)
    targets[:, -3:] = -100
    _, per_token = m(idx, 3, targets, reduction="none")
    _, mean = m(idx, 3, targets)
    assert per_token.shape == idx.shape
    assert torch.all(per_token[:, -3:] == 0)
    torch.testing.assert_close(per_token.sum() / (targets != -100).sum(), mean)


def test_weights_are_shared_across_depths():
    m = tiny(n_prelude=1, n_coda=1)
    n = m.num_params()
    assert all(tiny(n_prelude=1, n_coda=1, max_depth=d).num_params() == n for d in (1, 32))
    # Every block parameter gets gradient from every loop: the grad at depth 4 differs from depth 1.
    idx = torch.randint(0, 61, (2, 8))
    grads = []
    for depth in (1, 4):
        m.zero_grad()
        m(idx, depth, torch.roll(idx, -1, 1))[1].backward()
        grads.append(m.block.layers[0].mlp.up.weight.grad.clone())
    assert not torch.allclose(grads[0], grads[1])


def test_tied_head_shares_the_embedding():
    m = tiny()
    assert m.head.weight is m.embed.weight
    untied = tiny(tie_embeddings=False)
    assert untied.num_params() == m.num_params() + 61 * 32


def test_truncated_backprop_only_last_loops_get_gradient(idx):
    """bptt=n: same forward values; gradients equal those of a graph cut before the last n loops."""
    full, trunc = tiny(), tiny(bptt=2)
    targets = torch.roll(idx, -1, 1)
    lf, loss_full = full(idx, 5, targets)
    lt, loss_trunc = trunc(idx, 5, targets)
    torch.testing.assert_close(lf, lt)
    loss_trunc.backward()
    # Reference: run 3 loops without a graph, then 2 loops with one.
    ref = tiny()
    cos, sin = ref.rope_cos[:16], ref.rope_sin[:16]
    e = ref.embed(idx)
    with torch.no_grad():
        h = ref.block(e, cos, sin)
        for _ in range(2):
            h = ref.block(h + e, cos, sin)
    for _ in range(2):
        h = ref.block(h + e, cos, sin)
    ref.output(h, targets)[1].backward()
    for (name, p), q in zip(trunc.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, msg=name)


def test_hidden_states_has_one_state_per_loop(idx):
    m = tiny()
    states = m.hidden_states(idx, 4)
    assert len(states) == 4 and states[0].shape == (2, 16, 32)
    torch.testing.assert_close(m.output(states[-1])[0], m(idx, 4)[0])


@pytest.mark.parametrize("bad", [0, -1, 17, 2.0, 2.5, "4", True, None])
def test_bad_depth_raises_value_error_naming_value_and_range(idx, bad):
    m = tiny()
    with pytest.raises(ValueError, match=r"depth=.*1\.\.16"):
        m(idx, bad)
    with pytest.raises(ValueError, match=r"depth=.*1\.\.16"):
        m.forward_depths(idx, [1, bad])


def test_bad_config_raises():
    with pytest.raises(ValueError, match="divisible"):
        LoopedConfig(d_model=30, n_head=4)
    with pytest.raises(ValueError, match="injection"):
        LoopedConfig(injection="mul")


def test_sequence_longer_than_rope_table_fails_clearly():
    m = tiny()
    with pytest.raises(ValueError, match="seq_len"):
        m(torch.zeros(1, 33, dtype=torch.long), 1)


@pytest.mark.slow
def test_compiled_block_matches_eager(idx):
    """The presets that compile (``compile: true``) trace the block as one graph (looped.kernels
    hands the compiler its plain formulas), with the same loss and gradients as eager."""
    torch.manual_seed(0)
    eager = tiny()
    compiled = tiny()
    compiled.compile_block(fullgraph=True)  # a graph break would raise
    losses = []
    for m in (eager, compiled):
        _, loss = m(idx, depth=3, targets=idx)
        loss.backward()
        losses.append(loss)
    torch.testing.assert_close(losses[0], losses[1], rtol=1e-5, atol=1e-6)
    for (name, p), q in zip(eager.named_parameters(), compiled.parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-6, msg=name)


@pytest.mark.parametrize(("autocast", "sdpa_calls"), [(True, 0), (False, 2)])
def test_the_model_runs_attention_by_the_chosen_path(monkeypatch, autocast, sdpa_calls):
    """Under CPU bf16 autocast at T=8, head dim 64, the layers take the masked-matmul path and
    never call SDPA; in fp32 every loop calls SDPA."""
    calls = []
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def spy(*args, **kwargs):
        calls.append(1)
        return sdpa(*args, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", spy)
    model = LoopedTransformer(LoopedConfig(vocab_size=32, seq_len=8, d_model=128, n_head=2))
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        logits, _ = model(torch.randint(0, 32, (1, 8)), depth=2)
    assert len(calls) == sdpa_calls and torch.isfinite(logits).all()


UNUSED_CASES = [  # injection, bptt, prelude, tied, state_norm
    ("add", 0, 1, True, False),
    ("concat", 0, 0, True, False),
    ("none", 1, 1, True, False),
    ("none", 1, 0, False, False),
    ("none", 1, 0, True, False),
    ("add", 1, 1, False, False),
    ("concat", 1, 1, True, False),
    ("add", 0, 0, True, True),
    ("none", 1, 1, True, True),
]


@pytest.mark.parametrize("injection, bptt, prelude, tied, state_norm", UNUSED_CASES)
def test_may_leave_unused_says_exactly_when_a_parameter_gets_no_gradient(
    injection, bptt, prelude, tied, state_norm
):
    """What DDP's find_unused_parameters is derived from, checked against a real backward."""
    shape = {"vocab_size": 32, "seq_len": 8, "d_model": 16, "n_head": 2, "max_depth": 4}
    cfg = LoopedConfig(
        **shape,
        injection=injection,
        bptt=bptt,
        n_prelude=prelude,
        tie_embeddings=tied,
        state_norm=state_norm,
    )
    model = LoopedTransformer(cfg)
    idx = torch.randint(0, 32, (2, 8))
    for depth in (1, 2, 3):
        model.zero_grad(set_to_none=True)
        model(idx, depth=depth, targets=idx)[1].backward()
        unused = [n for n, p in model.named_parameters() if p.grad is None]
        assert may_leave_unused(model, [depth]) == bool(unused), (depth, unused)


@pytest.mark.parametrize("injection", ["add", "concat"])
def test_with_the_state_norm_depth_k_equals_k_block_applications_on_the_normed_state(
    idx, injection
):
    m = tiny(injection=injection, state_norm=True)
    cos, sin = m.rope_cos[:16], m.rope_sin[:16]
    e = m.embed(idx)
    h = m.block(e, cos, sin)
    for _ in range(4):
        s = m.state_norm(h)
        x = s + e if injection == "add" else m.inject(torch.cat([s, e], dim=-1))
        h = m.block(x, cos, sin)
    logits, _ = m(idx, 5)
    torch.testing.assert_close(logits, m.head(m.norm(h)), rtol=0, atol=0)
    # depth 1 never touches it: a plain transformer, as without the norm
    torch.testing.assert_close(m(idx, 1)[0], tiny(injection=injection)(idx, 1)[0], rtol=0, atol=0)


def test_the_state_norm_off_adds_nothing_and_on_draws_the_same_other_weights():
    """Off: the state dict a committed run saved loads as it is. On: one weight vector more, and
    every other weight starts equal, so a run with it differs by the norm alone."""
    plain, normed = tiny(), tiny(state_norm=True)
    assert plain.state_norm is None and "state_norm.weight" not in plain.state_dict()
    extra = set(normed.state_dict()) - set(plain.state_dict())
    assert extra == {"state_norm.weight"}
    for name, value in plain.state_dict().items():
        torch.testing.assert_close(normed.state_dict()[name], value, rtol=0, atol=0)
    assert normed.num_params() == plain.num_params() + 32


def test_the_state_norm_keeps_the_state_scale_from_growing_with_depth(idx):
    """Why it exists: with "add" injection the state's RMS grows loop by loop; normed before each
    loop, the block's input stays at the scale of one normed state plus the embedding."""

    def rms_growth(m: LoopedTransformer) -> float:
        with torch.no_grad():
            for p in m.block.parameters():  # a block whose output adds to its input every loop
                p.mul_(4)
            states = m.hidden_states(idx, 16)
        rms = [h.pow(2).mean().sqrt().item() for h in states]
        return rms[-1] / rms[1]

    assert rms_growth(tiny()) > 2 * rms_growth(tiny(state_norm=True))
