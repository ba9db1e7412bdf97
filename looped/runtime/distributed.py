"""What changes when the trainer runs under torchrun (DDP or FSDP2): the process group, the
wrapped model, the gradient sync of micro-batches, a checkpoint's full weights and optimizer
state from sharded parameters, and stop requests. One process (no torchrun) takes the plain path
of each helper. A model is read by its shape (its `config`, its prelude, block and coda stacks):
the runtime imports no model.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterable
from contextlib import nullcontext
from typing import Any

import torch
from torch.nn.parallel import DistributedDataParallel as DDP

from looped.runtime.checkpoint import unique_state_dict
from looped.runtime.device import pick_device


class Dist:
    """torchrun's environment, or a single process."""

    def __init__(self, device_name: str) -> None:
        self.enabled = "RANK" in os.environ and int(os.environ.get("WORLD_SIZE", "1")) > 1
        self.rank = int(os.environ.get("RANK", 0))
        self.local_rank = int(os.environ.get("LOCAL_RANK", 0))
        self.world = int(os.environ.get("WORLD_SIZE", 1))
        self.device = pick_device(device_name, self.local_rank)
        if self.enabled and not torch.distributed.is_initialized():
            if self.device.type == "cuda":
                torch.cuda.set_device(self.device)
            backend = "nccl" if self.device.type == "cuda" else "gloo"
            torch.distributed.init_process_group(backend=backend)

    @property
    def main(self) -> bool:
        return self.rank == 0

    def agree(self, loss: torch.Tensor, stop: bool) -> tuple[torch.Tensor, bool]:
        """Average the loss over processes and OR their stop requests."""
        if not self.enabled:
            return loss, stop
        t = torch.stack([loss, torch.tensor(float(stop), device=self.device)])
        torch.distributed.all_reduce(t)
        return t[0] / self.world, t[1].item() > 0

    def close(self) -> None:
        if self.enabled and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()


def wrap_distributed(
    model: torch.nn.Module, fsdp: bool, dist: Dist, depths: Iterable[int]
) -> torch.nn.Module:
    """The module a step calls: `model` itself in one process or under FSDP2, else DDP."""
    if not dist.enabled:
        return model
    if fsdp:
        # ~1 s to import (and missing from builds without distributed): only a sharded run does
        from torch.distributed.fsdp import fully_shard, register_fsdp_forward_method

        for stack in (model.prelude, model.block, model.coda):
            for layer in stack.layers:
                fully_shard(layer)
        fully_shard(model)
        # Evaluation calls forward_depths, not forward: it must gather the root's shards too.
        register_fsdp_forward_method(model, "forward_depths")
        return model
    device_ids = [dist.device.index] if dist.device.type == "cuda" else None
    # Searching the graph for unused parameters costs time every step, so only when needed.
    return DDP(model, device_ids=device_ids, find_unused_parameters=may_leave_unused(model, depths))


def may_leave_unused(model: torch.nn.Module, depths: Iterable[int]) -> bool:
    """Whether a step at one of `depths` can leave a parameter without a gradient: concat
    injection or the state norm at depth 1 (both act between loops), or truncated backprop with injection none beyond `bptt` (the prelude
    or an untied embedding feeds only the first loop, under no_grad)."""
    cfg, depths = model.config, set(depths)
    if (cfg.injection == "concat" or cfg.state_norm) and 1 in depths:
        return True
    frozen_first = cfg.bptt > 0 and any(d > cfg.bptt for d in depths)
    return (
        frozen_first and cfg.injection == "none" and bool(cfg.n_prelude or not cfg.tie_embeddings)
    )


def no_sync(wrapped: torch.nn.Module, fsdp: bool, dist: Dist, last: bool) -> Any:
    """Skip the gradient all-reduce on all but the last micro-batch of a step."""
    if dist.enabled and fsdp:
        wrapped.set_requires_gradient_sync(last)
        return nullcontext()
    return wrapped.no_sync() if dist.enabled and not last else nullcontext()


def full_state(
    model: torch.nn.Module, optimizer: torch.optim.Optimizer, sharded: bool
) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Unsharded CPU weights (tied ones once) and the optimizer's full state for a checkpoint;
    when sharded, every rank takes part in gathering them."""
    if not sharded:
        return unique_state_dict(model), optimizer.state_dict()
    # torch.distributed.checkpoint takes over a second to import; one process never needs it
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict

    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    weights, opt_state = get_state_dict(model, optimizer, options=options)
    if model.config.tie_embeddings:
        weights.pop("head.weight", None)
    return {k: v.contiguous() for k, v in weights.items()}, opt_state


def load_optimizer_state(
    model: torch.nn.Module, optimizer: torch.optim.Optimizer, state: dict[str, Any], sharded: bool
) -> None:
    """Restore a checkpoint's full optimizer state (scattered to the shards when sharded); torch
    moves the AdamW moments to their parameters' device, "step" stays on the CPU."""
    if not sharded:
        optimizer.load_state_dict(state)
        return
    # torch.distributed.checkpoint: slow to import, see full_state
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

    options = StateDictOptions(full_state_dict=True)
    set_optimizer_state_dict(model, optimizer, state, options=options)


class StopRequested:
    """First Ctrl-C / SIGTERM: finish the step, checkpoint, exit. Second Ctrl-C: stop at once."""

    def __init__(self) -> None:
        self.flag = False
        self._old: dict[int, Any] = {}

    def __enter__(self) -> StopRequested:
        try:
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._old[sig] = signal.signal(sig, self._handle)
        except ValueError:  # not the main thread (e.g. a notebook worker): no handlers
            pass
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        if self.flag and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.flag = True

    def __exit__(self, *exc: Any) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)
