"""What the RL and SFT trainers share: setting a run up, checkpoints, writing outputs.

A run folder holds `metrics.jsonl` (one line per step, byte-reproducible),
`timings.jsonl` (seconds per step), `weights/` (the adapter or the full model,
safetensors) and `run.json`, written last, which marks it complete. While a run is
going, `checkpoint.pt` (written atomically every `checkpoint_every` steps) holds the
trainable weights, optimizer state and metrics so far; a rerun resumes from it and
ends with the same bytes as an uninterrupted run. It is removed when the run ends.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from rankone.config import RunId, StudyConfig
from rankone.io import atomic_path, log, provenance, seed_everything, write_json, write_jsonl
from rankone.models.load import load_base, make_policy, trainable_parameters


@dataclass
class Run:
    cfg: StudyConfig
    run: RunId
    out_dir: Path
    policy: torch.nn.Module
    tokenizer: object
    optimizer: torch.optim.Optimizer
    started: float = field(default_factory=time.time)
    metrics: list[dict] = field(default_factory=list)  # deterministic: same config + seed, same bytes
    timings: list[dict] = field(default_factory=list)  # wall-clock seconds per step, kept apart
    state: dict = field(default_factory=dict)  # trainer's running totals, checkpointed with the rest

    @classmethod
    def start(cls, cfg: StudyConfig, run: RunId, model_dir: Path, out_dir: Path) -> Run:
        started = time.time()
        seed_everything(run.seed, cfg.threads)
        model, tokenizer = load_base(model_dir)
        policy = make_policy(model, run.rank, cfg.lora.alpha, cfg.scope(run.method))
        policy.train()
        # Constant learning rate, no warmup, no weight decay: as in the original runs.
        optimizer = torch.optim.Adam(cls._trainable(policy), lr=run.lr)
        log.info("%s: %d trainable parameters", run.path, trainable_parameters(policy))
        ctx = cls(cfg, run, out_dir, policy, tokenizer, optimizer, started)
        ctx._resume()
        return ctx

    @staticmethod
    def _trainable(policy) -> list[torch.nn.Parameter]:
        return [p for p in policy.parameters() if p.requires_grad]

    @property
    def checkpoint_path(self) -> Path:
        return self.out_dir / "checkpoint.pt"

    @property
    def start_step(self) -> int:
        return len(self.metrics)

    def _identity(self) -> dict:
        return {"run": self.run.path, "config": self.cfg.digest(self.run.regime, "lora", f"tasks.{self.run.regime}")}

    def _resume(self) -> None:
        if not self.checkpoint_path.is_file():
            return
        ckpt = torch.load(self.checkpoint_path, weights_only=False)
        if ckpt["identity"] != self._identity():
            log.warning("%s: ignoring a checkpoint from another config", self.run.path)
            return
        result = self.policy.load_state_dict(ckpt["params"], strict=False)
        if result.unexpected_keys:
            raise RuntimeError(f"{self.checkpoint_path}: unexpected keys {result.unexpected_keys[:3]}")
        self.optimizer.load_state_dict(ckpt["optimizer"])
        self.metrics, self.timings, self.state = ckpt["metrics"], ckpt["timings"], ckpt["state"]
        log.info("%s: resumed from step %d", self.run.path, self.start_step)

    def checkpoint(self, every: int, total: int) -> None:
        """After a step: every `every` steps (not the last), save everything needed to resume."""
        done = len(self.metrics)
        if done % every or done >= total:
            return
        trainable = {n for n, p in self.policy.named_parameters() if p.requires_grad}
        params = {k: v for k, v in self.policy.state_dict().items() if k in trainable}
        with atomic_path(self.checkpoint_path) as tmp:
            torch.save({"identity": self._identity(), "params": params, "optimizer": self.optimizer.state_dict(),
                        "metrics": self.metrics, "timings": self.timings, "state": self.state}, tmp)

    def step_optimizer(self, loss: torch.Tensor) -> float:
        """Backward + step; returns the gradient norm."""
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(self._trainable(self.policy), float("inf")).item()
        self.optimizer.step()
        return grad_norm

    def finish(self, status: str, extra: dict | None = None) -> dict:
        """Write metrics and weights, then run.json last (the completion marker)."""
        write_jsonl(self.out_dir / "metrics.jsonl", self.metrics)
        write_jsonl(self.out_dir / "timings.jsonl", self.timings)
        with atomic_path(self.out_dir / "weights") as tmp:
            self.policy.save_pretrained(tmp)
        info = {
            "run": self.run.path,
            "regime": self.run.regime,
            "model": self.run.model,
            "method": self.run.method,
            "rank": self.run.rank,
            "lr": self.run.lr,
            "seed": self.run.seed,
            "status": status,
            "steps_completed": len(self.metrics),
            "trainable_parameters": trainable_parameters(self.policy),
            "train_seconds": round(sum(t["seconds"] for t in self.timings), 2),
            **self.state,
            **(extra or {}),
            "provenance": provenance(self.cfg.digest(), self.run.seed, self.started),
            "resolved_config": self.cfg.model_dump(mode="json"),
        }
        write_json(self.out_dir / "run.json", info)
        self.checkpoint_path.unlink(missing_ok=True)
        return info


def diverged(loss: float) -> bool:
    return not math.isfinite(loss)
