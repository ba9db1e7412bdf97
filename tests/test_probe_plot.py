"""The update-benefit probe and `looped plot --runs` on tiny real runs."""

import pytest
import torch

from looped.cli import main as cli
from looped.config import load_config
from looped.eval.evaluate import load_model
from looped.studies.probes import one_update, update_benefit
from looped.training.trainer import train

SMALL = ["model.d_model=32", "model.n_head=2", "data.persons=12", "batch_size=4", "seq_len=64",
         "model.seq_len=64", "eval_batches=1", "eval_depths=1-4", "log_interval=1", "threads=1"]  # fmt: skip


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs")
    train(load_config("tiny", SMALL + ["max_steps=6", "eval_interval=0"]), out / "ff", quiet=True)
    train(
        load_config("tiny", SMALL + ["max_steps=6", "eval_interval=0", "schedule=fixed:2"]),
        out / "k2",
        quiet=True,
    )
    return out


def test_one_update_leaves_the_original_untouched(run):
    from looped.runtime import checkpoint as ckpt_lib

    model, cfg = load_model(run / "ff")
    state = ckpt_lib.load_state(ckpt_lib.resolve_checkpoint(run / "ff"))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    x = torch.randint(0, cfg.model.vocab_size, (2, 16))
    updated = one_update(model, state["optimizer"], cfg.optim, 1e-3, x, x, 4)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert any(not torch.equal(before[k], v) for k, v in updated.state_dict().items())


def test_update_benefit_is_shallow_minus_deep_nll(run):
    res = update_benefit(run / "ff", [1, 2, 4], n_batches=2, shallow=2, deep=4, eval_batches=1)
    assert res["depths"] == [1, 2, 4] and len(res["per_batch"]) == 2
    for d in (1, 2, 4):
        assert res["benefit"][d] == pytest.approx(sum(p[d] for p in res["per_batch"]) / 2)
    # the same update depth on both sides gives exactly zero benefit
    same = update_benefit(run / "ff", [1, 2], n_batches=1, shallow=3, deep=3, eval_batches=1)
    assert all(v == 0 for v in same["benefit"].values())


def test_probe_and_plot_commands(run, tmp_path, capsys):
    probe = ["probe", "--run", str(run / "ff"), "--depths", "1-2", "--batches", "1"]
    assert cli([*probe, "--shallow", "1", "--deep", "2", "--plot", str(tmp_path / "p.png")]) == 0
    assert (tmp_path / "p.png").stat().st_size > 1000
    assert cli(["plot", "--runs", str(run), "--out", str(tmp_path / "figs")]) == 0
    names = sorted(p.name for p in (tmp_path / "figs").glob("*.png"))
    assert names == ["fig2_nll_vs_flops.png", "fig3_loss_trajectory.png", "fig8_nll_by_depth.png"]
    assert cli(["plot", "--runs", str(tmp_path / "empty")]) == 2


def test_one_update_accumulates_micro_batches_like_one_big_batch(run):
    from looped.runtime import checkpoint as ckpt_lib

    model, cfg = load_model(run / "ff")
    state = ckpt_lib.load_state(ckpt_lib.resolve_checkpoint(run / "ff"))
    x = torch.randint(0, cfg.model.vocab_size, (4, 16), generator=torch.Generator().manual_seed(0))
    whole = one_update(model, state["optimizer"], cfg.optim, 1e-3, x, x, 3)
    parts = one_update(model, state["optimizer"], cfg.optim, 1e-3, x, x, 3, micro_batch=2)
    for (name, a), b in zip(whole.state_dict().items(), parts.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6, msg=name)


def test_gradient_agreement_is_the_cosine_of_the_backward_gradients(run):
    """Each depth's vector is exactly what loss.backward() leaves in .grad, the cosine matrix is
    symmetric with a unit diagonal, and the survival ratio is |mean g| / mean |g|."""
    from looped.studies.probes import depth_gradients, gradient_agreement

    model, cfg = load_model(run / "ff")
    model.train()
    x = torch.randint(0, cfg.model.vocab_size, (2, 16))
    y = torch.randint(0, cfg.model.vocab_size, (2, 16))
    grads = depth_gradients(model, x, y, [1, 3])
    model.zero_grad(set_to_none=True)
    model(x, 3, y)[1].backward()
    params = [p for p in model.parameters() if p.requires_grad]
    manual = torch.cat(
        [(p.grad if p.grad is not None else torch.zeros_like(p)).flatten() for p in params]
    )
    assert torch.allclose(grads[3], manual, rtol=1e-5, atol=1e-7)
    res = gradient_agreement(model, x, y, [1, 2, 4])
    cos = torch.tensor(res["cosine"])
    assert torch.allclose(cos, cos.T) and torch.allclose(cos.diagonal(), torch.ones(3), atol=1e-5)
    assert (cos.abs() <= 1 + 1e-5).all() and cos[0, 2] < 1 - 1e-4  # depths 1 and 4 differ
    g = torch.stack(list(depth_gradients(model, x, y, [1, 2, 4]).values()))
    assert res["mean_survives"] == pytest.approx(
        float(g.mean(0).norm() / g.norm(dim=1).mean()), rel=1e-5
    )


def test_grad_cosine_command(run, capsys):
    assert cli(["probe", "--run", str(run / "ff"), "--grad-cosine", "1,4", "--batches", "1"]) == 0
    out = capsys.readouterr().out
    assert "gradient cosine" in out and "K=4" in out and "mean of the gradients" in out
