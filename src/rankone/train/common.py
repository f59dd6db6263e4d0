"""What the RL and SFT trainers share: setting a run up and writing its outputs.

A run folder holds `metrics.jsonl` (one line per step, byte-reproducible),
`timings.jsonl` (seconds per step), `weights/` (the adapter or the full model,
safetensors) and `run.json`, written last, which marks it complete.
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

    @classmethod
    def start(cls, cfg: StudyConfig, run: RunId, model_dir: Path, out_dir: Path) -> Run:
        started = time.time()
        seed_everything(run.seed, cfg.threads)
        model, tokenizer = load_base(model_dir)
        policy = make_policy(model, run.rank, cfg.lora.alpha, cfg.lora.target_modules)
        policy.train()
        params = [p for p in policy.parameters() if p.requires_grad]
        # Constant learning rate, no warmup, no weight decay: as in the original runs.
        optimizer = torch.optim.Adam(params, lr=run.lr)
        log.info("%s: %d trainable parameters", run.path, trainable_parameters(policy))
        return cls(cfg, run, out_dir, policy, tokenizer, optimizer, started)

    def step_optimizer(self, loss: torch.Tensor) -> float:
        """Backward + step; returns the gradient norm."""
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        params = [p for p in self.policy.parameters() if p.requires_grad]
        grad_norm = torch.nn.utils.clip_grad_norm_(params, float("inf")).item()
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
            "train_seconds": round(time.time() - self.started, 2),
            **(extra or {}),
            "provenance": provenance(self.cfg.digest(), self.run.seed, self.started),
        }
        write_json(self.out_dir / "run.json", info)
        return info


def diverged(loss: float) -> bool:
    return not math.isfinite(loss)
