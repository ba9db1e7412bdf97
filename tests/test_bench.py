"""`scripts/bench.py` at toy size: it runs, writes its record and tables, and its derived numbers are
consistent with the measurements they come from. The speed targets are reported by the
benchmark, never asserted here."""

import importlib.util
import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from looped.errors import UserError
from looped.flops import flops_per_token
from looped.studies.timing import time_min

ROOT = Path(__file__).resolve().parent.parent


def _script():
    """scripts/bench.py as a module (a script, not part of the package)."""
    spec = importlib.util.spec_from_file_location("bench", ROOT / "scripts" / "bench.py")
    module = sys.modules["bench"] = importlib.util.module_from_spec(spec)  # for its dataclasses
    spec.loader.exec_module(module)
    return module


bench = bench_report = bench_cli = _script()

torch.set_num_threads(1)

TOY = replace(bench.QUICK, threads=1, peer=False, precisions=("fp32",))


def test_quick_run_without_peer_writes_consistent_record(tmp_path):
    record = bench.run(TOY)
    js, md = bench_report.write(record, tmp_path)
    assert json.loads(js.read_text()) == json.loads(json.dumps(record))
    assert [r["depth"] for r in record["train"]] == list(TOY.depths)
    mc = bench.looped_config(TOY)
    tokens = TOY.batch_size * TOY.seq_len
    for r in record["train"]:
        assert r["peer_ms"] is None and r["looped_ms"] > 0
        # achieved FLOP/s is looped.flops' count over the measured step time
        expected = flops_per_token(mc, r["depth"], TOY.seq_len) * tokens / (r["looped_ms"] / 1e3)
        assert r["looped_flops_per_s"] == pytest.approx(expected, rel=1e-9)
        assert r["of_ceiling"] == pytest.approx(expected / r["ceiling_flops_per_s"], rel=1e-9)
    # the per-K table covers every depth either schedule can draw
    assert sorted(map(int, record["step_ms_by_depth"])) == list(range(1, 5))
    per_k, real = record["schedule"]
    assert per_k["steps"] == TOY.run_steps and real["steps"] == TOY.real_steps
    # the real run follows the schedules: fixed K=2 for the first half, then uniform 1..4
    depths = real["depths"][TOY.schedule]
    assert depths[:2] == [2, 2] and all(1 <= k <= 4 for k in depths)
    assert record["serve"][0]["modeled_ratio"] > 1
    # the markdown carries every measured row and the machine it ran on
    text = md.read_text()
    assert "AMD" in text or record["machine"]["cpu"] in text
    assert text.count("| fp32 |") >= len(TOY.depths)
    names = {t["target"] for t in record["targets"]}
    assert not any("peer" in n for n in names)  # no peer, no peer target
    # the width scan: every precision x width, the same FLOP accounting, heads of dim 64 (or 1)
    assert [(r["precision"], r["d_model"]) for r in record["widths"]] == [
        (p, d) for p in TOY.precisions for d in TOY.widths
    ]
    for r in record["widths"]:
        wc = bench.looped_config(replace(TOY, d_model=r["d_model"], n_head=r["n_head"]))
        flops = flops_per_token(wc, TOY.width_depth, TOY.seq_len) * tokens
        assert r["looped_flops_per_s"] == pytest.approx(flops / (r["looped_ms"] / 1e3), rel=1e-9)
        assert r["of_ceiling"] == pytest.approx(r["looped_flops_per_s"] / r["ceiling_flops_per_s"])
        assert r["n_head"] == max(1, r["d_model"] // 64) and r["sweep_modeled_ratio"] > 1
    assert "Width scan" in text and text.count("| fp32 | 64 |") == 1


def test_the_deepest_step_runs_before_any_train_row_is_timed(monkeypatch):
    """A CPU step timed before any deep one ran slower than training ever sees it (K=1 took 1.6x
    longer at a 4,096-token head), so the rows are timed after one step at the deepest K."""
    ran: list[tuple[str, int]] = []
    real_step, real_timed = bench._looped_step, bench._timed

    def step(model, opt, x, y, depth, precision):
        inner = real_step(model, opt, x, y, depth, precision)

        def run():
            ran.append(("step", depth))
            return inner()

        return run

    def timed(cfg, fns, device, warmup):
        ran.append(("timed", 0))
        return real_timed(cfg, fns, device, warmup)

    monkeypatch.setattr(bench, "_looped_step", step)
    monkeypatch.setattr(bench, "_timed", timed)
    bench.run(replace(TOY, depths=(1, 2), real_steps=0))
    assert ran[0] == ("step", 2) and ran[1] == ("timed", 0)


def test_bad_arguments_are_user_errors():
    with pytest.raises(UserError, match="precision"):
        bench.run(replace(TOY, precisions=("fp16",)))
    with pytest.raises(UserError, match="depths"):
        bench.run(replace(TOY, depths=(0, 2)))
    with pytest.raises(UserError, match="clock"):
        bench.run(replace(TOY, clock="cpu"))
    with pytest.raises(UserError, match="divisible"):
        bench.run(replace(TOY, n_head=3))


def test_a_bad_comma_list_is_one_line_naming_its_flag():
    with pytest.raises(
        UserError, match=r"--depths '1,x': give comma-separated integers, e.g. 1,4,8,16"
    ):
        bench_cli.main(["--quick", "--depths", "1,x"])
    with pytest.raises(UserError, match=r"--widths '2,y': .* e.g. 256,512"):
        bench_cli.main(["--quick", "--widths", "2,y"])


def test_cli_quick_no_peer_json(tmp_path, capsys):
    argv = ["--quick", "--no-peer", "--threads", "1", "--precisions", "fp32", "--clock", "process"]
    assert bench_cli.main([*argv, "--real-steps", "0", "--json", "--out", str(tmp_path)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads((tmp_path / "bench.json").read_text())
    assert len(printed["schedule"]) == 1  # --real-steps 0 skips the real run
    assert printed["config"]["clock"] == "process"


def test_peer_matches_the_looped_shape_and_is_timed(tmp_path):
    pytest.importorskip("transformers")
    cfg = replace(TOY, peer=True, depths=(1, 2), real_steps=0)
    peer = bench.make_peer(cfg, 2)
    looped = bench.looped_config(cfg)
    # same width, MLP width, vocabulary; K layers; tied head: only the layer count differs
    n_layer = sum(p.numel() for p in peer.model.layers[0].parameters())
    n_block = sum(p.numel() for p in torch.nn.Module.parameters(_block(looped)))
    assert n_layer == n_block and len(peer.model.layers) == 2
    assert peer.lm_head.weight is peer.model.embed_tokens.weight
    record = bench.run(cfg)
    for r in record["train"]:
        assert r["peer_over_looped"] == pytest.approx(r["peer_ms"] / r["looped_ms"])
    assert any(t["target"].startswith("train step: peer") for t in record["targets"])


def _block(cfg):
    from looped.model import LoopedTransformer

    return LoopedTransformer(cfg).block


def test_time_min_rotates_the_order_and_keeps_the_minimum():
    """Warm-up calls first, then each repetition starts one function further along, so no
    function always follows the same one; the result is each function's fastest call."""
    calls = []
    fns = {name: (lambda name=name: calls.append(name)) for name in "abc"}
    best = time_min(fns, warmup=1, reps=3, device=torch.device("cpu"))
    assert "".join(calls) == "abc" + "abc" + "bca" + "cab"
    assert set(best) == set("abc") and all(0 <= t < 1 for t in best.values())


def test_committed_record_renders_to_the_committed_tables_byte_for_byte():
    """bench.md is a pure function of bench.json: re-rendering the committed record gives the
    committed tables (which the README quotes) exactly, so reporting can change without rerunning
    the six-minute benchmark, and a hand edit of either file shows up here."""
    results = ROOT / "results"
    record = json.loads((results / "bench.json").read_text())
    assert bench_report.markdown(record) == (results / "bench.md").read_text()
    # and the targets in the record are what the reporting code judges from its rows
    cfg = replace(bench.BenchConfig(), **_tuples(record["config"]))
    rows = record["train"], record["serve"], record["schedule"]
    assert bench_report.targets(cfg, bench.looped_config(cfg), *rows) == record["targets"]


def _tuples(cfg: dict) -> dict:
    return {k: tuple(v) if isinstance(v, list) else v for k, v in cfg.items()}


def test_the_script_refuses_a_bad_flag_in_one_line():
    """Run as a script, a bad value is one line on stderr and exit status 1, no traceback."""
    import subprocess

    done = subprocess.run(
        [sys.executable, "scripts/bench.py", "--quick", "--depths", "1,x"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        "scripts/bench.py: error: --depths '1,x': give comma-separated integers, e.g. 1,4,8,16"
    ]
