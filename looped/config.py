"""Run configuration: typed dataclasses, a YAML preset, and `key=value` overrides.

    cfg = load_config("tiny", ["schedule=fixed:2", "model.d_model=64", "optim.lr=1e-3"])

OmegaConf merges the preset over the dataclass defaults and the overrides over that, and checks
every key and type against the dataclasses: an unknown key or a string where a number belongs
fails with one line that names it. Presets live in ``looped/configs/NAME.yaml``; a path to any
YAML file works too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from looped.errors import UserError
from looped.model import LoopedConfig

PRESET_DIR = Path(__file__).parent / "configs"


@dataclass
class DataConfig:
    # bios (synthetic biographies) | text (token shards from `looped data text`)
    kind: str = "bios"
    # corpus directory; empty with kind=bios generates one in memory from the fields below, which
    # a saved corpus ignores (its bios_config.json holds them)
    path: str = ""
    # The bios fields are BiosConfig's under the names `looped data bios` takes on the command
    # line (--persons, --seed): batching.bios_config is the one place that maps them.
    persons: int = 100  # bios: number of persons (BiosConfig.n_persons)
    bios_seed: int = 0  # bios: generator seed, independent of the training seed (BiosConfig.seed)
    bios_per_person: int = 4  # bios: biographies per person in the training text
    two_hop: bool = True  # bios: add the employer-city two-hop queries to evaluation


@dataclass
class OptimConfig:
    lr: float = 3e-3  # peak learning rate (AdamW)
    min_lr_ratio: float = 0.1  # final LR as a fraction of the peak
    betas: tuple[float, float] = (0.9, 0.95)  # AdamW betas
    weight_decay: float = 0.1  # decoupled weight decay on matrices (not on norms or embeddings)
    warmup_steps: int = 50  # linear warmup length
    lr_schedule: str = "cosine"  # cosine | wsd (warmup-stable-decay)
    decay_frac: float = 0.2  # wsd: fraction of the run spent decaying
    grad_clip: float = 1.0  # max global grad norm; 0 = off


@dataclass
class TrainConfig:
    model: LoopedConfig = field(default_factory=LoopedConfig)  # architecture
    data: DataConfig = field(default_factory=DataConfig)  # what to train on
    optim: OptimConfig = field(default_factory=OptimConfig)  # optimizer and LR schedule
    schedule: str = "fixed:4"  # depth schedule spec, see looped.schedules
    seed: int = 0  # seeds init, data order and the depth schedule
    batch_size: int = 32  # sequences per micro-batch per process
    grad_accum: int = 1  # micro-batches per optimizer step (derived when global_batch is set)
    # sequences per optimizer step over all processes; 0 = batch_size*grad_accum*world
    global_batch: int = 0
    # tokens per training sequence; at most model.seq_len (the RoPE tables' length, checked),
    # which may be longer for evaluation queries
    seq_len: int = 128
    max_steps: int = 0  # stop after this many optimizer steps (0 = derive from a budget)
    max_tokens: int = 0  # stop after this many training tokens (0 = unused)
    budget_flops: float = 0.0  # stop when modeled training FLOPs reach this (0 = unused)
    budget_frac: float = 0.0  # budget as a fraction of full_budget_flops (0 = unused)
    full_budget_flops: float = 0.0  # the preset's 100% budget, for budget_frac
    eval_interval: int = 0  # evaluate every N steps (0 = only at the end)
    eval_depths: str = "1-16"  # serving depths for evaluation, e.g. "1-16" or "1,2,4,8"
    eval_batches: int = 4  # batches per NLL evaluation
    ckpt_interval: int = 0  # checkpoint every N steps (0 = only at the end)
    keep_last: int = 2  # checkpoints kept on disk
    log_interval: int = 10  # steps between metrics.jsonl records
    device: str = "auto"  # auto | cpu | cuda | cuda:N
    dtype: str = "fp32"  # fp32 | bf16 (autocast)
    compile: bool = False  # torch.compile the looped block only
    fsdp: bool = False  # shard with FSDP2 under torchrun instead of DDP
    threads: int = 0  # torch CPU threads (0 = torch default)
    # also write TensorBoard scalars to RUN/tb (needs the tensorboard extra)
    tensorboard: bool = False
    paper_schedules: list[str] = field(default_factory=list)  # schedules the paper compares here


def preset_names() -> list[str]:
    return sorted(p.stem for p in PRESET_DIR.glob("*.yaml"))


def _preset_path(name: str) -> Path:
    path = Path(name)
    if path.suffix in (".yaml", ".yml"):
        if not path.is_file():
            raise UserError(
                f"config file {name} not found; pass a preset ({', '.join(preset_names())}) or a YAML path"
            )
        return path
    path = PRESET_DIR / f"{name}.yaml"
    if not path.is_file():
        raise UserError(
            f"unknown preset {name!r}; choose one of {', '.join(preset_names())} or a YAML path"
        )
    return path


def load_config(preset: str = "tiny", overrides: list[str] | None = None) -> TrainConfig:
    """Preset (name or YAML path) + `key=value` overrides -> a checked TrainConfig."""
    schema = OmegaConf.structured(TrainConfig)
    try:
        merged = OmegaConf.merge(schema, OmegaConf.load(_preset_path(preset)))
        if overrides:
            bad = [o for o in overrides if "=" not in o]
            if bad:
                raise UserError(f"override {bad[0]!r} is not key=value (e.g. schedule=fixed:4)")
            merged = OmegaConf.merge(merged, OmegaConf.from_dotlist(list(overrides)))
        cfg = OmegaConf.to_object(merged)
    except OmegaConfBaseException as err:
        raise UserError(_one_line(err)) from None
    assert isinstance(cfg, TrainConfig)
    return cfg


def _one_line(err: OmegaConfBaseException) -> str:
    msg = str(err).splitlines()[0]
    key = getattr(err, "full_key", None)
    if "not in struct" in msg or "Key '" in msg and "not" in msg:
        return f"unknown config key {key!r}; see `looped train --help` or looped/config.py for the fields"
    return f"bad config value for {key!r}: {msg}" if key else f"bad config: {msg}"


def to_yaml(cfg: TrainConfig) -> str:
    """The resolved config as YAML, loadable again with load_config(path)."""
    return OmegaConf.to_yaml(OmegaConf.structured(cfg))


def save_config(cfg: TrainConfig, path: str | Path) -> None:
    Path(path).write_text(to_yaml(cfg))
