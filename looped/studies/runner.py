"""Train a set of runs on a pool of single-threaded worker processes, parents before children.

Every study plans its runs as `Planned`s (`engine.plan`), hands them to `execute`, then reads
what they wrote (`studies.results`). Two single-threaded workers use a 2-core machine
better than one two-threaded process; finished runs are reused.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing as mp
import os
import queue as queue_lib
import shutil
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

from looped.config import TrainConfig, differences, load_config, to_yaml
from looped.errors import UserError
from looped.flops import schedule_flops, tokens_per_step
from looped.runtime.atomic import write_text_atomic
from looped.runtime.checkpoint import checkpoint_dir, list_checkpoints
from looped.runtime.lock import dir_lock
from looped.schedule_spec import parse_schedule
from looped.studies.results import diverged
from looped.training.trainer import train


@dataclass
class Planned:
    """One planned run, the one run type of every study: what the pool trains (its config, steps,
    the run it branches off and the checkpoints its branches need) and what it is to the study."""

    name: str  # directory name under runs/
    cfg: TrainConfig
    schedule: str  # the studied schedule (`engine.MICRO` included; the trained one: cfg.schedule)
    steps: int = 0  # total optimizer steps (0: the planner derives them from the config)
    parent: str | None = None  # run this one branches off
    branch_step: int = 0  # step of the parent checkpoint it continues
    save_steps: list[int] = field(default_factory=list)  # checkpoints its children need
    eval_steps: list[int] = field(default_factory=list)  # extra evaluations (before the switch)
    may_diverge: bool = False  # a sweep run: a non-finite loss is a result (diverged), not an error
    priority: int = 0  # lower starts first (then the costliest): e.g. whole seeds before new ones
    budget: float = 0.0  # bios: fraction of the full modeled-FLOP budget (0: a run of given steps)
    # bios: "main", "tokens" (equal tokens), "depth" (Fig. 5), "catchup" or "sweep", "+"-joined
    group: str = "main"

    @property
    def seed(self) -> int:
        return self.cfg.seed

    @property
    def lr(self) -> float:
        return self.cfg.optim.lr

    def flops(self, steps: int | None = None) -> float:
        """Modeled training FLOPs of its first `steps` steps (all by default), at the depths its
        schedule expects."""
        cfg, n = self.cfg, self.steps if steps is None else steps
        schedule = parse_schedule(cfg.schedule, cfg.seed)
        return schedule_flops(cfg.model, schedule, n, tokens_per_step(cfg), cfg.seq_len)


# -- execution -------------------------------------------------------------------------------
def plain_lines() -> bool:
    """Whether progress goes out as plain lines: a log file gets no escape-code redraws; a
    terminal and a notebook (tqdm.auto's widgets) get bars."""
    with contextlib.suppress(ImportError):  # IPython is there only where a notebook runs
        from IPython import get_ipython

        shell = get_ipython()
        if shell is not None and "IPKernelApp" in shell.config:
            return False
    isatty = getattr(sys.stderr, "isatty", None)
    return not (isatty and isatty())


def run_line(name: str, summary: dict) -> str:
    """The line a finished run prints when the output is not a terminal (`summary`: `train`'s)."""
    if "diverged" in summary:
        return f"finished {name}: diverged ({summary['diverged']})"
    took = f"{summary['steps']} steps, {summary['wall']:.1f}s"
    return f"finished {name}: {took}, final loss {summary['final_loss']:.3f}"


_progress: Any = None  # in a worker: the queue its progress goes to (set when it starts)
# a run with no checkpoint interval of its own is checkpointed this many times, so that a session's
# end or a crash costs at most this share of a long run (checkpoints change no score: RESUMABLE)
SAFE_CHECKPOINTS = 10
STATUS_EVERY = 600.0  # seconds between a log file's progress lines (a terminal has its bars)


# What a worker imports before its first run: torch, the trainer, and torch._dynamo, which the
# first optimizer loads. Spawned afresh, each worker of each pool paid for these imports (a few
# seconds); a fork server imports them once per process, and each worker is a fork of it.
PRELOAD = [__name__, "torch._dynamo"]
# variables read once, when the interpreter or torch's CPU libraries load: a worker forked from
# the server keeps the server's values (torch itself sets others, such as its compile cache's
# directory, after import: those are passed on by `_start_worker` and change nothing here)
IMPORT_ENV = (
    "ATEN_CPU_CAPABILITY",
    "MKL_CBWR",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "PYTHONHASHSEED",
)
# torch._dynamo and torch._inductor read their configs' variables when the server imports them;
# the cache directory is the one torch sets itself, after import, and reads at use
IMPORT_PREFIXES = ("TORCHDYNAMO_", "TORCHINDUCTOR_")
SET_BY_TORCH = ("TORCHINDUCTOR_CACHE_DIR",)
_served: tuple | None = None  # the fingerprint the fork server imported under (None: no server)


def _fingerprint() -> tuple:
    """What the server's imports depend on: the package's sources and the import-time variables."""
    sources = sorted(
        (str(f), f.stat().st_mtime_ns) for f in Path(__file__).parents[1].rglob("*.py")
    )
    env = [(k, os.environ.get(k)) for k in IMPORT_ENV]
    env += sorted(
        (k, v)
        for k, v in os.environ.items()
        if k.startswith(IMPORT_PREFIXES) and k not in SET_BY_TORCH
    )
    return tuple(sources), tuple(env)


def _pool_context() -> Any:
    """Workers forked from one server that has the imports (started by the first pool, reused by
    every later one); it has run no torch operation, so no thread pool is inherited. Workers are
    spawned instead where there is no fork server (Windows), and once the sources or an
    import-time variable changed since the server started (an edit in a long-lived notebook
    kernel), so that a run never trains with code older than the parent's."""
    global _served
    now = _fingerprint()
    _served = _served or now
    if "forkserver" not in mp.get_all_start_methods() or now != _served:
        return mp.get_context("spawn")
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    return ctx


def worker_pool(workers: int) -> tuple[ProcessPoolExecutor, Any]:
    """A pool of `workers` processes that start in this process's directory and environment,
    and the queue their progress comes back on."""
    ctx = _pool_context()
    progress = ctx.Queue()
    here = (progress, dict(os.environ))
    pool = ProcessPoolExecutor(workers, mp_context=ctx, initializer=_start_worker, initargs=here)
    return pool, progress


def _start_worker(progress: Any, env: dict[str, str]) -> None:
    """A worker's progress queue (best-effort: nothing outlives a killed demo), the parent's
    environment as it is now (the fork server kept that of the first pool; multiprocessing
    itself brings the working directory), and a watchdog that ends it once its parent dies."""
    global _progress
    _progress = progress
    progress.cancel_join_thread()
    os.environ.clear()
    os.environ.update(env)
    threading.Thread(target=_exit_with_parent, daemon=True).start()


def _exit_with_parent() -> None:
    """Exit once the parent has died, even while it is an unreaped zombie: its end of the pipe
    multiprocessing keeps to each worker closes then. Checkpoints are atomic, so the next demo
    retrains the run."""
    if (parent := mp.parent_process()) is not None:
        parent.join()
        os._exit(1)


def _run_one(run: Planned, run_dir: str, branch_dir: str | None) -> dict:
    """One run in a worker process: single-threaded, progress sent to the parent's queue."""
    torch.set_num_threads(1)
    last = [0.0]

    def on_step(done: int, total: int, loss: float, depth: int) -> None:
        now = time.time()
        if now - last[0] > 0.25 or done == total:
            last[0] = now
            _progress.put((run.name, done, total, loss, depth))

    steps = {"save_steps": tuple(run.save_steps), "eval_steps": tuple(run.eval_steps)}
    # an interrupted run (`_to_train` kept only one of this config) goes on where it stopped
    start = {"resume": True} if list_checkpoints(run_dir) else {"branch_from": branch_dir}
    # `steps`, not `max_steps`: a run sized by its FLOP budget has max_steps 0
    every = run.cfg.ckpt_interval or max(1, run.steps // SAFE_CHECKPOINTS)
    cfg = replace(run.cfg, ckpt_interval=every)
    try:
        return train(cfg, run_dir, on_step=on_step, quiet=True, **start, **steps)
    except UserError as err:
        if not (run.may_diverge and "loss became" in str(err)):
            raise
        return mark_diverged(Path(run_dir), run.cfg, str(err))


def mark_diverged(run_dir: Path, cfg: TrainConfig, why: str) -> dict:
    """Record a sweep run whose loss diverged: its config and a summary that says so."""
    summary = {"diverged": why, "steps": 0, "wall": 0.0, "final_loss": float("nan")}
    with dir_lock(run_dir, "looped train"):  # a run directory has one writer, this one too
        write_text_atomic(run_dir / "config.yaml", to_yaml(cfg))
        write_text_atomic(run_dir / "summary.json", json.dumps(summary))
    return summary


def _on_disk(spec: Planned, runs_dir: Path) -> str:
    """What a run's directory holds of the same config: "finished" (with every checkpoint its
    children need), "interrupted" (stopped before its end, by a crash, a kill or a session's end,
    with a checkpoint to go on from: it resumes, so hours of a long run are not trained twice),
    or "" (nothing to reuse)."""
    run_dir = runs_dir / spec.name
    if not _same_config(run_dir / "config.yaml", spec.cfg):
        return ""
    if not (run_dir / "summary.json").is_file():
        return "interrupted" if list_checkpoints(run_dir) else ""
    if diverged(run_dir):
        return "finished" if spec.may_diverge else ""
    kept = all(checkpoint_dir(run_dir, s).is_dir() for s in spec.save_steps)
    return "finished" if kept else ""


def _same_config(path: Path, cfg: TrainConfig) -> bool:
    """Whether a run directory's config is this run's, up to the fields a resume may change (the
    checkpoint interval `_run_one` adds among them)."""
    if not path.is_file():
        return False
    try:
        return not differences(load_config(str(path), check=False), cfg)
    except UserError:  # unreadable: not this run's
        return False


def _to_train(specs: list[Planned], runs_dir: Path, fresh: bool) -> dict[str, Planned]:
    """The unfinished runs and their children (to (re)train), their old directories removed
    unless interrupted (those resume)."""
    todo = {s.name: s for s in specs if fresh or _on_disk(s, runs_dir) != "finished"}
    for spec in specs:  # parents come first: this reaches grandchildren too
        if spec.parent in todo:
            todo.setdefault(spec.name, spec)
    for name, spec in todo.items():
        if fresh or _on_disk(spec, runs_dir) != "interrupted":
            shutil.rmtree(runs_dir / name, ignore_errors=True)
    return todo


class _Bars:
    """An overall bar in modeled GFLOPs and one bar per busy worker, fed by the workers' (name,
    step, total, loss, depth) messages; in a log file (no bars), a status line instead. A run
    resumed from an earlier sitting's checkpoint counts only the steps it has left, so the time
    left is not read off work that took no time here."""

    def __init__(self, todo: dict[str, Planned], disable: bool, runs_dir: Path) -> None:
        self.todo, self.disable = todo, disable
        # modeled FLOPs each run trains itself (a branch leaves its parent's share out)
        self.costs = {
            n: p.flops() - (p.flops(p.branch_step) if p.parent else 0.0) for n, p in todo.items()
        }
        self.seen = {n: _start(p, runs_dir) for n, p in todo.items()}  # steps counted, per run
        self.left = {n: self._share(p, p.steps - self.seen[n]) for n, p in todo.items()}
        self.done, self.t0, self.finished = 0.0, time.time(), 0
        fmt = "{l_bar}{bar}| {n:.0f}/{total:.0f} GFLOP [{elapsed}<{remaining}]"
        total = sum(self.left.values())
        self.overall = tqdm(total=total, desc="runs", disable=disable, position=0, bar_format=fmt)
        self.slots: dict[str, Any] = {}

    def _share(self, spec: Planned, steps: int) -> float:
        """GFLOPs of `steps` of the run's own steps (those after its branch point)."""
        return max(0, steps) / max(1, spec.steps - spec.branch_step) * self.costs[spec.name] / 1e9

    def open(self, spec: Planned) -> None:
        self.slots[spec.name] = tqdm(  # at the lowest line free below the overall bar
            total=spec.steps,
            initial=self.seen[spec.name],
            desc=spec.name,
            leave=False,
            disable=self.disable,
            dynamic_ncols=True,
        )

    def _count(self, name: str, step: int) -> None:
        """The run has reached `step`: what it trained since the last count is done."""
        work = self._share(self.todo[name], step - self.seen[name])  # an older resume: none
        self.seen[name] = max(self.seen[name], step)
        self.done += work
        self.overall.update(work)

    def close(self, name: str) -> None:
        """A run ended (finished or diverged): its steps are done, even the ones it never took."""
        if name in self.slots:
            self.slots.pop(name).close()
        self._count(name, self.todo[name].steps)
        self.finished += 1

    def drain(self, progress: Any) -> None:
        while True:
            try:
                name, done, total, loss, depth = progress.get_nowait()
            except (queue_lib.Empty, EOFError, OSError):
                return
            if name not in self.todo:  # not this call's run
                continue
            if name in self.slots:
                self.slots[name].update(done - self.slots[name].n)
                self.slots[name].set_postfix(loss=f"{loss:.3f}", K=depth, refresh=True)
            self._count(name, done)

    def status(self) -> str:
        """ "3/14 runs, 27% of the modeled work, about 4 h 10 min left": the time left is the
        work left at this sitting's rate so far (every worker's progress counted)."""
        total = sum(self.left.values())
        frac = min(1.0, self.done / total) if total > 1e-9 else 1.0
        said = f"{self.finished}/{len(self.todo)} runs, {100 * frac:.0f}% of the modeled work"
        if 0 < frac < 1 and self.finished < len(self.todo):
            said += f", {_left((time.time() - self.t0) * (1 - frac) / frac)}"
        return said

    def finish(self) -> None:
        self.overall.n = self.overall.total
        self.overall.close()


def _start(spec: Planned, runs_dir: Path) -> int:
    """Where a run starts this sitting: its newest checkpoint (an earlier sitting's), else its
    branch point (0 for a run from scratch)."""
    saved = list_checkpoints(runs_dir / spec.name)
    return max(spec.branch_step, saved[-1][0] if saved else 0)


def _left(seconds: float) -> str:
    """ "about 4 h 10 min left", "about 12 min left", "under a minute left": as precise as an
    estimate deserves."""
    minutes = round(seconds / 60)
    if minutes < 1:
        return "under a minute left"
    if minutes < 60:
        return f"about {minutes} min left"
    return f"about {minutes // 60} h {minutes % 60} min left"


def execute(specs: list[Planned], runs_dir: Path, workers: int, fresh: bool, quiet: bool) -> int:
    """Train the runs on a process pool, parents first; return how many were trained (finished
    ones are reused unless `fresh`)."""
    todo = _to_train(specs, runs_dir, fresh)
    if not todo:
        return 0
    lines = not quiet and plain_lines()
    bars = _Bars(todo, quiet or lines, runs_dir)
    pool, progress = worker_pool(workers)
    try:
        _drive(pool, progress, todo, runs_dir, workers, bars, lines)
    except BaseException:  # a run failed, or Ctrl-C: do not wait for the other workers' runs
        for process in list((getattr(pool, "_processes", None) or {}).values()):
            process.kill()  # a busy worker: Python < 3.14 has no public way to stop one
        pool.shutdown(wait=True, cancel_futures=True)  # quick now: it only cleans up
        raise
    pool.shutdown()
    bars.finish()
    return len(todo)


def _drive(pool, progress, todo, runs_dir: Path, workers: int, bars: _Bars, lines: bool):
    """Submit runs as their parents finish, by priority then costliest first, until all are
    done; a worker's error is re-raised here."""
    running: dict[Any, str] = {}
    done: set[str] = set()

    def ready() -> list[Planned]:
        busy = done | set(running.values())
        waiting = [s for s in todo.values() if s.name not in busy]
        ok = [s for s in waiting if s.parent not in todo or s.parent in done]  # None: not in todo
        return sorted(ok, key=lambda s: (s.priority, -bars.costs[s.name]))

    said = time.time()
    while len(done) < len(todo):
        if lines and time.time() - said > STATUS_EVERY:  # a log file hears how far it is
            print(f"progress: {bars.status()}", flush=True)
            said = time.time()
        while len(running) < workers and ready():
            spec = ready()[0]
            parent = runs_dir / spec.parent if spec.parent else None
            branch = str(checkpoint_dir(parent, spec.branch_step)) if parent else None
            bars.open(spec)
            running[pool.submit(_run_one, spec, str(runs_dir / spec.name), branch)] = spec.name
        finished, _ = wait(list(running), 0.3, return_when=FIRST_COMPLETED)
        bars.drain(progress)
        for future in finished:
            name = running.pop(future)
            summary = _unless_stopped(name, future.result())  # a worker's error re-raised here
            bars.drain(progress)
            bars.close(name)
            done.add(name)
            if "diverged" in summary:  # its children cannot branch off it: diverged too
                for child in _diverge_children(name, todo, runs_dir, lines):
                    done.add(child)
                    bars.close(child)
            if lines:
                print(f"{run_line(name, summary)} [{bars.status()}]", flush=True)
                said = time.time()
    bars.drain(progress)


def _unless_stopped(name: str, summary: dict) -> dict:
    """A run's summary, unless a stop signal reached its worker (it saved and returned)."""
    if "stopped" in summary:
        raise UserError(
            f"{name} stopped at step {summary['stopped']} (its checkpoint is saved); "
            "run the same command again to continue"
        )
    return summary


def _diverge_children(name: str, todo, runs_dir: Path, lines: bool) -> list[str]:
    """Mark every run branching off the diverged run `name`, directly or through others,
    diverged too; return their names."""
    found = [name]
    while more := [n for n, s in todo.items() if s.parent in found and n not in found]:
        found += more
    why = f"its parent {name} diverged"
    for child in found[1:]:
        mark_diverged(runs_dir / child, todo[child].cfg, why)
        if lines:
            print(run_line(child, {"diverged": why}), flush=True)
    return found[1:]
