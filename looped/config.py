"""Run configuration: typed dataclasses, a YAML preset, and `key=value` overrides; and `lr_at`,
the learning rate the optim section gives each step.

    cfg = load_config("tiny", ["schedule=fixed:2", "model.d_model=64", "optim.lr=1e-3"])

OmegaConf merges the preset (``looped/configs/NAME.yaml`` or a YAML path) and the overrides,
checking keys and types; ``validate`` checks every value. Each failure is one line naming the key.
"""

from __future__ import annotations

import copy
import functools
import math
import re
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from looped.errors import UserError, first_line
from looped.model import INJECTIONS, LoopedConfig
from looped.schedule_spec import parse_depths, parse_schedule

PRESET_DIR = Path(__file__).parent / "configs"


@dataclass
class DataConfig:
    kind: str = "bios"  # bios (synthetic biographies) | text (shards from `looped data text`)
    # corpus directory; empty with kind=bios generates one in memory from the fields below (a
    # saved corpus keeps them in its bios_config.json); batching.bios_config maps them
    path: str = ""
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
    # warmup as a fraction of the run instead (0 = use warmup_steps): the same share of every
    # length, where a fixed count is a vanishing share of a long run
    warmup_frac: float = 0.0
    lr_schedule: str = "cosine"  # cosine | wsd (warmup-stable-decay)
    decay_frac: float = 0.2  # wsd: fraction of the run spent decaying
    grad_clip: float = 1.0  # max global grad norm; 0 = off


def lr_at(step: int, total_steps: int, optim: OptimConfig) -> float:
    """Learning rate at `step`: linear warmup, then cosine to min, or warmup-stable-decay (WSD:
    runs of different length agree on every LR before the decay, so one can branch off another).
    Like the depth and the batch, a function of the step alone: resumes are bitwise."""
    peak, floor = optim.lr, optim.lr * optim.min_lr_ratio
    warm = min(warmup_of(optim, total_steps), max(total_steps - 1, 0))
    if step < warm:
        return peak * (step + 1) / warm
    if optim.lr_schedule == "cosine":
        progress = (step - warm) / max(1, total_steps - warm - 1)
        return floor + 0.5 * (peak - floor) * (1 + math.cos(math.pi * min(1.0, progress)))
    if optim.lr_schedule == "wsd":
        decay_start = total_steps - max(1, round(optim.decay_frac * total_steps))
        if step < max(decay_start, warm):
            return peak
        progress = (step - decay_start + 1) / max(1, total_steps - decay_start)
        return peak - (peak - floor) * min(1.0, progress)
    raise UserError(f"optim.lr_schedule={optim.lr_schedule!r}: choose cosine or wsd")


def warmup_of(optim: OptimConfig, total_steps: int) -> int:
    """The warmup in steps: `warmup_frac` of the run when set (at least one step), else
    `warmup_steps`."""
    if optim.warmup_frac > 0:
        return max(1, round(optim.warmup_frac * total_steps))
    return optim.warmup_steps


@dataclass
class TrainConfig:
    model: LoopedConfig = field(default_factory=LoopedConfig)  # architecture
    data: DataConfig = field(default_factory=DataConfig)  # what to train on
    optim: OptimConfig = field(default_factory=OptimConfig)  # optimizer and LR schedule
    schedule: str = "fixed:4"  # depth schedule spec, see looped.schedules
    seed: int = 0  # seeds init, data order and the depth schedule
    batch_size: int = 32  # sequences per micro-batch per process
    grad_accum: int = 1  # micro-batches per optimizer step (derived when global_batch is set)
    # each micro-batch draws its own K from the schedule (same expected cost; micro-batch 0 keeps
    # the per-step K): a step's gradient then averages over depths, as in uniform training
    depth_per_micro: bool = False
    global_batch: int = 0  # sequences per step over all processes; 0 = batch_size*grad_accum*world
    # draw a step's batch_size x grad_accum sequences at once and split them into the
    # micro-batches: a K-per-micro-batch run then trains on exactly its K-per-step partner's data
    split_step_batch: bool = False
    seq_len: int = 128  # tokens per training sequence; at most model.seq_len (the RoPE tables)
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
    dtype: str = "fp32"  # fp32 | bf16 (autocast) | auto (bf16 where the hardware has it, else fp32)
    compile: bool = False  # torch.compile the looped block only
    fsdp: bool = False  # shard with FSDP2 under torchrun instead of DDP
    threads: int = 0  # torch CPU threads (0 = torch default)
    tensorboard: bool = False  # also write TensorBoard scalars to RUN/tb (tensorboard extra)
    paper_schedules: list[str] = field(default_factory=list)  # schedules the paper compares here


# Fields a `--resume` may change: none changes the weights or the values of the run's records;
# any other field that differs from the checkpoint's config refuses the resume.
RESUMABLE = (
    "eval_interval",  # when evaluations run; each one's numbers do not depend on it
    "log_interval",  # which steps get a train record; the values are the same
    "ckpt_interval",  # when checkpoints are written
    "keep_last",  # how many are kept on disk
    "tensorboard",  # an extra copy of the records
    "threads",  # CPU threads: the same maths (float summation order may differ, not bitwise)
    "device",  # where it runs: comparable results, not bitwise across devices
    "compile",  # torch.compile of the block: the same maths, fused (not bitwise)
    "paper_schedules",  # documentation for `looped flops`, never read by the trainer
)
# Not in it: dtype, eval_depths, eval_batches (the records would change meaning mid-run), fsdp
# (untested across the switch), and every model, data, optimizer, schedule, batch, length field.


def flatten(cfg: Any, prefix: str = "") -> dict[str, Any]:
    """A config as {dotted key: value}, nested dataclasses flattened (model.d_model, ...)."""
    out: dict[str, Any] = {}
    for f in fields(cfg):
        value = getattr(cfg, f.name)
        if is_dataclass(value):
            out.update(flatten(value, f"{prefix}{f.name}."))
        else:
            out[f"{prefix}{f.name}"] = list(value) if isinstance(value, tuple | list) else value
    return out


def differences(
    old: TrainConfig,
    new: TrainConfig,
    allowed: tuple[str, ...] = RESUMABLE,
    only: tuple[str, ...] | None = None,
) -> list[tuple[str, Any, Any]]:
    """(key, old, new) for each differing field outside `allowed` (within `only`)."""
    a, b = flatten(old), flatten(new)
    keys = [k for k in b if only is None or k in only or k.split(".")[0] in only]
    return [(k, a.get(k), b.get(k)) for k in keys if k not in allowed and a.get(k) != b.get(k)]


def preset_names() -> list[str]:
    return sorted(p.stem for p in PRESET_DIR.glob("*.yaml"))


def _preset_path(name: str) -> Path:
    is_yaml = Path(name).suffix in (".yaml", ".yml")
    path = Path(name) if is_yaml else PRESET_DIR / f"{name}.yaml"
    if path.is_file():
        return path
    presets = ", ".join(preset_names())
    if is_yaml:
        raise UserError(f"config file {name} not found; pass a preset ({presets}) or a YAML path")
    raise UserError(f"unknown preset {name!r}; choose one of {presets} or a YAML path")


def load_config(
    preset: str = "tiny", overrides: list[str] | None = None, check: bool = True
) -> TrainConfig:
    """Preset (name or YAML path) + `key=value` overrides -> a checked TrainConfig. ``check=False``
    skips ``validate``: a saved run's config must load under rules added after it trained."""
    path = _preset_path(preset)
    try:
        merged = copy.deepcopy(_preset_base(str(path), path.read_text(encoding="utf-8")))
        if overrides:
            merged.merge_with(*(_parse_override(o) for o in overrides))
        if check:
            validate(merged)  # before to_object, which builds LoopedConfig and runs its own checks
        cfg = OmegaConf.to_object(merged)
    except OmegaConfBaseException as err:
        raise UserError(_one_line(err)) from None
    assert isinstance(cfg, TrainConfig)
    return cfg


@functools.lru_cache(maxsize=64)
def _preset_base(path: str, text: str) -> DictConfig:
    """The schema merged with a preset file's text, built once per file and content: a study
    plans hundreds of runs from one preset, and building the schema is most of a config's cost."""
    return OmegaConf.merge(OmegaConf.structured(TrainConfig), _load_yaml(Path(path), text))


def _load_yaml(path: Path, text: str) -> DictConfig:
    """The mapping in a file's text; a syntax error is one line with the file, line and column."""
    try:
        loaded = OmegaConf.create(text)
    except yaml.YAMLError as err:
        raise UserError(
            f"config file {path} is not valid YAML{_where(err)}; fix it there"
        ) from None
    if not isinstance(loaded, DictConfig):
        raise UserError(f"config file {path} must hold `key: value` lines, not a list")
    return loaded


def _where(err: yaml.YAMLError) -> str:
    """' at line L, column C: problem', plus where the construct it was in began, if elsewhere."""
    mark, context = getattr(err, "problem_mark", None), getattr(err, "context_mark", None)
    text = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    text += f": {getattr(err, 'problem', None) or first_line(err)}"
    if context and mark and (context.line, context.column) != (mark.line, mark.column):
        text += f" ({err.context} at line {context.line + 1}, column {context.column + 1})"
    return text


def _parse_override(override: str) -> DictConfig:
    if "=" not in override:
        raise UserError(f"override {override!r} is not key=value (e.g. schedule=fixed:4)")
    try:
        return OmegaConf.from_dotlist([override])
    except yaml.YAMLError as err:
        problem = getattr(err, "problem", None) or first_line(err)
        raise UserError(
            f"override {override!r}: the value is not valid YAML ({problem}); fix or quote it"
        ) from None


def _one_line(err: OmegaConfBaseException) -> str:
    msg = str(err).splitlines()[0]
    key = getattr(err, "full_key", None)
    if "not in struct" in msg or "Key '" in msg and "not" in msg:
        return f"unknown config key {key!r}; see `looped train --help` or looped/config.py for the fields"
    return f"bad config value for {key!r}: {msg}" if key else f"bad config: {msg}"


def to_yaml(cfg: TrainConfig) -> str:
    """The resolved config as YAML, loadable again with load_config(path). Built once per config
    (keyed by its repr: a config changed in place is another key), since every checkpoint writes
    it and OmegaConf takes tens of milliseconds, as long as a toy run's step."""
    key = repr(cfg)
    if (known := _YAML.get(key)) is None:
        if len(_YAML) > 512:  # a long-lived process (a notebook) plans thousands of configs
            _YAML.clear()
        known = _YAML[key] = OmegaConf.to_yaml(OmegaConf.structured(cfg))
    return known


_YAML: dict[str, str] = {}


# -- validation ------------------------------------------------------------------------------
POSITIVE = (  # sizes and rates that must be > 0
    "model.vocab_size",
    "model.seq_len",
    "model.d_model",
    "model.n_head",
    "model.n_block",
    "model.max_depth",
    "model.rope_base",
    "model.norm_eps",
    "model.init_std",
    "model.init_loops",
    "data.persons",
    "data.bios_per_person",
    "optim.lr",
    "batch_size",
    "grad_accum",
    "seq_len",
    "log_interval",
    "eval_batches",
    "keep_last",
)
NON_NEGATIVE = (  # counts and amounts where 0 means "off" or "derive it"
    "model.d_ff",
    "model.n_prelude",
    "model.n_coda",
    "model.bptt",
    "optim.weight_decay",
    "optim.warmup_steps",
    "optim.grad_clip",
    "global_batch",
    "max_steps",
    "max_tokens",
    "budget_flops",
    "budget_frac",
    "full_budget_flops",
    "eval_interval",
    "ckpt_interval",
    "threads",
)
FRACTIONS = ("optim.min_lr_ratio", "optim.decay_frac", "optim.warmup_frac")  # in [0, 1]
CHOICES = {  # fields with a fixed set of names
    "model.injection": INJECTIONS,
    "data.kind": ("bios", "text"),
    "optim.lr_schedule": ("cosine", "wsd"),
    "dtype": ("fp32", "bf16", "auto"),
}
DEVICE = re.compile(r"auto|cpu|mps|cuda(:\d+)?")


def validate(cfg: Any) -> None:
    """Check every value a user can type; raise a one-line UserError naming the key, the value and
    what is allowed. Works on a TrainConfig and on the merged OmegaConf tree before it."""
    get = functools.partial(_get, cfg)
    for key in POSITIVE:
        if not get(key) > 0:
            raise UserError(f"{key}={get(key)} must be positive")
    for key in NON_NEGATIVE:
        if get(key) < 0:
            raise UserError(f"{key}={get(key)} must be >= 0 (0 means off or derived)")
    for key in FRACTIONS:
        if not 0 <= get(key) <= 1:
            raise UserError(f"{key}={get(key)} must be a fraction in [0, 1]")
    if not all(0 <= b < 1 for b in cfg.optim.betas):
        raise UserError(f"optim.betas={list(cfg.optim.betas)} must both be in [0, 1)")
    for key, names in CHOICES.items():
        if get(key) not in names:
            raise UserError(f"{key}={get(key)!r} is not known; choose one of {', '.join(names)}")
    if not DEVICE.fullmatch(cfg.device):
        raise UserError(f"device={cfg.device!r} is not known; use auto, cpu, cuda, cuda:N or mps")
    _check_shapes(cfg)


def _check_shapes(cfg: Any) -> None:
    """Constraints between fields: head shape, sequence lengths, depths within max_depth."""
    m = cfg.model
    if m.d_model % m.n_head:
        raise UserError(f"model.d_model={m.d_model} must be divisible by model.n_head={m.n_head}")
    head_dim = m.d_model // m.n_head
    if head_dim % 2:
        raise UserError(f"head dim model.d_model / model.n_head = {head_dim} must be even for RoPE")
    if cfg.seq_len > m.seq_len:
        raise UserError(
            f"seq_len={cfg.seq_len} exceeds model.seq_len={m.seq_len}; raise model.seq_len"
        )
    top = parse_schedule(cfg.schedule, cfg.seed).max_depth()
    if top > m.max_depth:
        raise UserError(
            f"schedule {cfg.schedule} reaches K={top} above model.max_depth={m.max_depth}"
        )
    if max(parse_depths(cfg.eval_depths)) > m.max_depth:
        raise UserError(f"eval_depths={cfg.eval_depths} goes above model.max_depth={m.max_depth}")
    for spec in cfg.paper_schedules:
        parse_schedule(spec)


def _get(cfg: Any, key: str) -> Any:
    return functools.reduce(getattr, key.split("."), cfg)
