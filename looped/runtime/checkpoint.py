"""Checkpoints that survive a crash at any instant.

``RUN/checkpoints/step_0000120/`` holds ``model.safetensors``, ``state.pt`` (optimizer state,
step, schedule, lineage, run id) and ``config.yaml``, written atomically (`runtime.atomic`)
before the oldest beyond ``keep_last`` are removed. Loading runs no code from the checkpoint.
"""

from __future__ import annotations

import hashlib
import pickle
import re
import shutil
import warnings
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from looped.errors import UserError, first_line
from looped.runtime.atomic import atomic_path

CKPT_DIR = "checkpoints"


def unique_state_dict(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """state_dict without the second name of tied tensors (safetensors refuses shared storage)."""
    seen: set[int] = set()
    out = {}
    for name, t in model.state_dict().items():
        key = t.untyped_storage().data_ptr() if t.device.type != "meta" else id(t)
        if key in seen:
            continue
        seen.add(key)
        out[name] = t.detach().contiguous().cpu()
    return out


def checkpoint_dir(run_dir: str | Path, step: int) -> Path:
    """Where a run's checkpoint of step `step` lives (whether or not it exists yet)."""
    return Path(run_dir) / CKPT_DIR / f"step_{step:07d}"


def save_checkpoint(
    run_dir: str | Path,
    step: int,
    weights: dict[str, torch.Tensor],
    state: dict[str, Any],
    config_yaml: str,
    keep_last: int = 2,
    keep: tuple[int, ...] = (),
) -> Path:
    """Atomically write checkpoint `step` and prune old ones (never those in `keep`)."""
    root = Path(run_dir) / CKPT_DIR
    final = checkpoint_dir(run_dir, step)
    # The three files name each other, so a file copied in from another run is caught on loading.
    state = {**state, "config_sha256": _sha256(config_yaml)}
    meta = {"run_id": str(state.get("run_id", "")), "step": str(step)}
    try:
        root.mkdir(parents=True, exist_ok=True)
        with atomic_path(final) as tmp:
            tmp.mkdir()
            save_file(weights, str(tmp / "model.safetensors"), metadata=meta)
            with open(tmp / "state.pt", "wb") as f:  # a Python file: its OSError says why
                torch.save(state, f)
            (tmp / "config.yaml").write_text(config_yaml)
    except Exception as err:  # disk full, read-only, quota: the previous checkpoint is intact
        previous = list_checkpoints(run_dir)
        kept = f"; {previous[-1][1]} is intact" if previous else ""
        raise UserError(
            f"cannot write checkpoint {final}: {_reason(err)}; free space in {root.parent} (or make "
            f"it writable) and continue with --resume{kept}"
        ) from None
    steps = list_checkpoints(run_dir)
    for old_step, path in steps[:-keep_last] if keep_last > 0 else []:
        if old_step not in keep:
            shutil.rmtree(path, ignore_errors=True)
    for stale in root.glob(".tmp-*"):  # left by a crash mid-write
        shutil.rmtree(stale, ignore_errors=True)
    return final


def list_checkpoints(run_dir: str | Path) -> list[tuple[int, Path]]:
    """Complete checkpoints of a run, oldest first."""
    root = Path(run_dir) / CKPT_DIR
    if not root.is_dir():
        return []
    for old in root.glob(".old-step_*"):  # a crash between the two renames of a re-save
        final = root / old.name.removeprefix(".old-")
        if not final.exists():
            old.rename(final)
        else:
            shutil.rmtree(old, ignore_errors=True)
    found = []
    for p in root.glob("step_*"):
        if (p / "model.safetensors").is_file() and (p / "state.pt").is_file():
            found.append((int(p.name.split("_")[1]), p))
    return sorted(found)


def resolve_checkpoint(path: str | Path) -> Path:
    """A run directory (-> its latest checkpoint) or a checkpoint directory -> checkpoint dir."""
    path = Path(path)
    if (path / "model.safetensors").is_file():
        return path
    if path.is_dir():
        ckpts = list_checkpoints(path)
        if ckpts:
            return ckpts[-1][1]
        raise UserError(f"no checkpoint in {path}; train first or pass a checkpoint directory")
    raise UserError(f"{path} does not exist; pass a run directory or RUN/checkpoints/step_N")


def load_weights(ckpt: Path, model: torch.nn.Module) -> None:
    """Load safetensors weights into `model`, refusing a checkpoint of another architecture."""
    try:
        weights = load_file(str(ckpt / "model.safetensors"))
    except Exception as err:  # truncated or not safetensors at all
        raise damaged(ckpt, "model.safetensors", f"cannot be read ({_reason(err)})") from None
    own, tied = model.state_dict(), getattr(model.config, "tie_embeddings", False)
    missing = [k for k in own if k not in weights and not (tied and k == "head.weight")]
    unexpected = [k for k in weights if k not in own]
    shapes = [k for k, v in weights.items() if k in own and own[k].shape != v.shape]
    if missing or unexpected or shapes:
        what = shapes[:1] or missing[:1] or unexpected[:1]
        raise UserError(
            f"checkpoint {ckpt} is for another architecture (first mismatch: {what[0]}); "
            "use the same model config as the run that wrote it"
        )
    model.load_state_dict(weights, strict=False)


class DamagedCheckpoint(UserError):
    """A checkpoint directory whose files are missing, unreadable or from another run."""


def damaged(ckpt: Path, name: str, problem: str) -> DamagedCheckpoint:
    """The one-line error for a damaged file: which file, what is wrong, and what to do."""
    run = ckpt.parent.parent
    older = [p for s, p in list_checkpoints(run) if p != ckpt and p.name < ckpt.name]
    fix = (
        f"use the previous complete checkpoint {older[-1]} (`--resume` falls back to it by itself)"
        if older
        else "no earlier checkpoint of this run is left; train it again"
    )
    return DamagedCheckpoint(f"checkpoint file {ckpt / name} {problem}; {fix}")


def load_state(ckpt: Path) -> dict[str, Any]:
    """The state, after checking the three files are whole and from one run and step."""
    for name in ("model.safetensors", "state.pt", "config.yaml"):
        if not (ckpt / name).is_file():
            raise damaged(ckpt, name, "is missing")
    try:
        with safe_open(str(ckpt / "model.safetensors"), "pt") as f:
            meta = f.metadata() or {}
    except Exception as err:
        raise damaged(ckpt, "model.safetensors", f"cannot be read ({_reason(err)})") from None
    state = _load_state_file(ckpt)
    step = int(ckpt.name.split("_")[1]) if ckpt.name.startswith("step_") else state.get("step")
    if state.get("step") != step:
        raise damaged(ckpt, "state.pt", f"is the state of step {state.get('step')}, not {step}")
    if "run_id" in state and meta.get("run_id") != state["run_id"]:  # older checkpoints: no id
        raise damaged(ckpt, "state.pt", "is from another run than model.safetensors beside it")
    sha = state.get("config_sha256")
    if sha is not None and sha != _sha256((ckpt / "config.yaml").read_text()):
        raise damaged(ckpt, "config.yaml", "is not the config state.pt was saved with")
    return state


def _load_state_file(ckpt: Path) -> dict[str, Any]:
    """state.pt as data only, by torch's weights-only unpickler (a pickle can call anything); a
    file that needs more is refused before any of it runs, and `--resume` does not fall back."""
    path = ckpt / "state.pt"
    try:
        with warnings.catch_warnings():  # torch's notes on pickle protocols: the line below says it
            warnings.simplefilter("ignore")
            state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        named = re.search(r"GLOBAL (\S+)", str(err))
        inner = err.__cause__ or err.__context__  # the unpickler's reason, not torch's advice
        reason = first_line(inner) if inner is not None else "the weights-only reader refuses it"
        why = f"it is not a pickle of plain data ({reason})"
        if named:
            why = f"loading it would call {named.group(1)}"
        raise UserError(  # not DamagedCheckpoint: `--resume` must not fall back past it
            f"checkpoint file {path} is refused, nothing in it was run: {why}; a checkpoint holds "
            "only tensors, numbers, strings and plain containers, so use one from a source you trust"
        ) from None
    except Exception as err:  # truncated, not a zip archive: damaged
        raise damaged(ckpt, "state.pt", f"cannot be read ({_reason(err)})") from None
    if not isinstance(state, dict):
        raise damaged(ckpt, "state.pt", f"holds a {type(state).__name__}, not a checkpoint state")
    return state


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _reason(err: BaseException) -> str:
    """An OS error's text, also when a library wrapped it, else the message's first line."""
    cause: BaseException | None = err
    while cause is not None:
        if isinstance(cause, OSError) and cause.strerror:
            return cause.strerror
        cause = cause.__cause__ or cause.__context__
    return first_line(err)
