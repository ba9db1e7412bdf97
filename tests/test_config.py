"""Configs from the command line: flags and `key=value` overrides in any order on every command
that takes overrides, ``--print-config``, and one line with exit status 2 for every bad value a
user can type (each checked with its real constraint) and for a YAML file that does not parse."""

from __future__ import annotations

import pytest

from looped.cli import main as cli
from looped.config import load_config, preset_names, validate
from looped.errors import UserError


def _printed(capsys, argv: list[str]) -> str:
    assert cli(argv) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    return captured.out


def test_train_flags_and_overrides_in_any_order(tmp_path, capsys):
    out = str(tmp_path / "a")
    before = ["max_steps=4", "eval_depths=1-2", "--config", "tiny", "--out", out, "--quiet",
              "--budget-frac", "0.45", "--print-config"]  # fmt: skip
    between = ["--config", "tiny", "max_steps=4", "--out", out, "--quiet", "eval_depths=1-2",
               "--budget-frac", "0.45", "--print-config"]  # fmt: skip
    after = ["--config", "tiny", "--out", out, "--quiet", "--budget-frac", "0.45",
             "--print-config", "max_steps=4", "eval_depths=1-2"]  # fmt: skip
    printed = [_printed(capsys, ["train", *argv]) for argv in (before, between, after)]
    assert printed[0] == printed[1] == printed[2]
    # the overrides and the flag took effect, and the preset's other values are kept
    assert "max_steps: 4\n" in printed[0] and "eval_depths: 1-2\n" in printed[0]
    assert "budget_frac: 0.45\n" in printed[0] and "d_model: 64\n" in printed[0]
    assert printed[0] != _printed(capsys, ["train", "--out", out, "--print-config"])
    assert not (tmp_path / "a").exists()  # --print-config runs nothing


def test_demo_flags_and_overrides_in_any_order(tmp_path, capsys):
    out = str(tmp_path / "d")
    before = ["model.d_model=48", "data.persons=8", "--quick", "--out", out, "--fresh",
              "--seeds", "1", "--print-config"]  # fmt: skip
    between = ["--quick", "model.d_model=48", "--out", out, "data.persons=8", "--fresh",
               "--seeds", "1", "--print-config"]  # fmt: skip
    after = ["--quick", "--out", out, "--fresh", "--seeds", "1", "--print-config",
             "model.d_model=48", "data.persons=8"]  # fmt: skip
    printed = [_printed(capsys, ["demo", *argv]) for argv in (before, between, after)]
    assert printed[0] == printed[1] == printed[2]
    # the command line's overrides come after --quick's own, so they win
    assert "d_model: 48\n" in printed[0] and "persons: 8\n" in printed[0]
    assert "dtype: fp32\n" in printed[0]  # one of --quick's overrides, still there
    assert not (tmp_path / "d").exists()


def test_train_help_shows_an_override_after_a_flag(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli(["train", "--help"])
    assert exit_.value.code == 0
    text = capsys.readouterr().out
    assert "--budget-frac 0.45 schedule=fixed:2" in text and "KEY=VALUE" in text
    assert "--print-config" in text


def test_every_preset_passes_validation():
    for name in preset_names():
        validate(load_config(name))


def test_validate_checks_a_config_built_in_code():
    cfg = load_config("tiny")
    validate(cfg)
    cfg.optim.lr_schedule = "linear"
    with pytest.raises(UserError, match=r"optim.lr_schedule='linear' is not known; choose"):
        validate(cfg)


BAD_OVERRIDES = [
    ("model.d_model=-5", "model.d_model=-5 must be positive"),
    ("model.n_head=0", "model.n_head=0 must be positive"),
    ("model.max_depth=0", "model.max_depth=0 must be positive"),
    ("model.n_block=0", "model.n_block=0 must be positive"),
    ("model.norm_eps=0", "model.norm_eps=0.0 must be positive"),
    ("model.d_ff=-1", "model.d_ff=-1 must be >= 0"),
    ("model.bptt=-2", "model.bptt=-2 must be >= 0"),
    ("model.d_model=66", "model.d_model=66 must be divisible by model.n_head=4"),
    ("model.n_head=64", "must be even for RoPE"),
    ("model.injection=sum", "model.injection='sum' is not known; choose one of add, concat, none"),
    ("model.d_model=abc", "bad config value for 'model.d_model'"),
    ("batch_size=0", "batch_size=0 must be positive"),
    ("grad_accum=-1", "grad_accum=-1 must be positive"),
    ("max_steps=-1", "max_steps=-1 must be >= 0"),
    ("budget_frac=-0.5", "budget_frac=-0.5 must be >= 0"),
    ("seq_len=999", "seq_len=999 exceeds model.seq_len=128"),
    ("optim.lr=0", "optim.lr=0.0 must be positive"),
    ("optim.min_lr_ratio=1.5", "optim.min_lr_ratio=1.5 must be a fraction in [0, 1]"),
    ("optim.decay_frac=-0.1", "optim.decay_frac=-0.1 must be a fraction in [0, 1]"),
    ("optim.betas=[0.9,1.0]", "optim.betas=[0.9, 1.0] must both be in [0, 1)"),
    ("optim.lr_schedule=linear", "optim.lr_schedule='linear' is not known; choose one of cosine, wsd"),
    ("data.kind=web", "data.kind='web' is not known; choose one of bios, text"),
    ("data.persons=0", "data.persons=0 must be positive"),
    ("dtype=fp16", "dtype='fp16' is not known; choose one of fp32, bf16"),
    ("device=tpu", "device='tpu' is not known"),
    ("schedule=bogus:3", "bad depth schedule 'bogus:3'"),
    ("schedule=fixed:32", "reaches K=32 above model.max_depth=16"),
    ("eval_depths=0-3", "below 1"),
    ("eval_depths=1-32", "goes above model.max_depth=16"),
    ("paper_schedules=[fixed:x]", "bad depth schedule 'fixed:x'"),
    ("nosuch.key=1", "unknown config key 'nosuch'"),
    ("tiny", "override 'tiny' is not key=value"),
]  # fmt: skip


@pytest.mark.parametrize("override, message", BAD_OVERRIDES)
def test_bad_values_exit_2_with_one_line(tmp_path, capsys, override, message):
    # --print-config would print and exit 0 if a check were missing; nothing is trained either way
    argv = ["train", "--out", str(tmp_path / "r"), "--print-config", override]
    assert cli(argv) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert captured.out == "" and len(err.splitlines()) == 1 and "Traceback" not in err
    assert err.startswith("looped train: error: ") and message in err


def test_demo_checks_its_overrides_the_same_way(tmp_path, capsys):
    assert cli(["demo", "--quick", "--out", str(tmp_path), "model.d_model=-5"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "model.d_model=-5 must be positive" in err


@pytest.mark.parametrize(
    "text, where",
    [
        ("not a yaml: [\n", "line 2, column 1"),  # the unclosed list runs to the end of the file
        ("model:\n  d_model: 64\n   n_head: 4\n", "line 3, column 10"),
        ("seq_len: 64\nschedule: 'fixed:4\n", "scalar at line 2, column 11"),  # its opening quote
    ],
)
def test_yaml_syntax_error_names_file_line_and_column(tmp_path, capsys, text, where):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    assert cli(["train", "--config", str(path), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert f"config file {path} is not valid YAML" in err and where in err


def test_yaml_file_that_is_not_a_mapping_is_one_line(tmp_path, capsys):
    path = tmp_path / "list.yaml"
    path.write_text("- 1\n- 2\n")
    assert cli(["train", "--config", str(path), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err and str(path) in err


def test_a_saved_run_config_loads_unchecked_for_evaluation(tmp_path):
    """Evaluating a checkpoint reads its config with check=False: a training-time rule must not
    make an existing run unreadable; a fresh load of the same file still refuses it."""
    from looped.config import TrainConfig, to_yaml

    cfg = TrainConfig()
    cfg.model.max_depth = 4  # eval_depths stays 1-16: train would refuse this, eval must not
    (tmp_path / "config.yaml").write_text(to_yaml(cfg))
    assert load_config(str(tmp_path / "config.yaml"), check=False) == cfg
    with pytest.raises(UserError, match="eval_depths=1-16 goes above model.max_depth=4"):
        load_config(str(tmp_path / "config.yaml"))


def test_a_config_changed_in_place_writes_its_new_values(tmp_path):
    """to_yaml builds each config's YAML once: a config changed after its first YAML must not
    get the old text (a checkpoint would record values the run did not train with)."""
    from looped.config import TrainConfig, to_yaml

    cfg = TrainConfig()
    first = to_yaml(cfg)
    cfg.optim.lr, cfg.max_steps = 0.123, 77
    (tmp_path / "config.yaml").write_text(to_yaml(cfg))
    assert to_yaml(cfg) != first and load_config(str(tmp_path / "config.yaml")) == cfg


def test_a_preset_file_edited_between_loads_gives_its_new_values(tmp_path):
    """Each preset file is parsed once per content: an edit (a notebook rewriting its YAML)
    is read at the next load, and one load's overrides never reach the next."""
    path = tmp_path / "mine.yaml"
    path.write_text("max_steps: 10\n")
    assert load_config(str(path), ["seed=3"]).seed == 3
    assert load_config(str(path)).seed == load_config("tiny").seed  # not the last load's override
    path.write_text("max_steps: 20\n")
    assert load_config(str(path)).max_steps == 20
