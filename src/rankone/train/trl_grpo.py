"""RL through TRL's `GRPOTrainer` (`rl.trainer: trl`): the cross-check of rankone's own trainer.

What stays rankone's: the base model, the policy (`make_policy`: FullFT, or peft's LoRA with
rankone's init, alpha and target modules), the task's checker as the reward, the train prompts, the
batch shape, the sampling temperature, the lr, the steps, the run folder (`metrics.jsonl`,
`timings.jsonl`, `weights/`, `snapshots/step<N>/`, `run.json` last) and so the evaluation, which
scores these weights as any run's. What is TRL's: the prompt order, the sampling (`generate`), the
advantages, the loss, the optimizer step (AdamW at weight decay 0) and the checkpoints.

The knobs, as docs/protocol.md's table maps them: `num_generations` = rl.group_size;
`per_device_train_batch_size` = rl.prompts_per_step x rl.group_size (one generation, one optimizer
step a batch: `steps_per_generation` 1, `num_iterations` = rl.epochs); `beta` 0 (no KL, no
reference model); `scale_rewards` and `loss_type` from rl.loss (rankone.objectives.TRL_LOSSES:
rankone's pg has no TRL twin, "dr_grpo" is the nearest, the same sum of ratio x advantage over
tokens over a normaliser constant in the step, which Adam's scaling all but cancels); `epsilon` =
rl.clip_epsilon; constant lr, no warm-up; `top_k` 0, `top_p` 1 and `temperature` =
rollout.temperature, so tokens come from softmax(logits / T) as in rankone's sampler.

What TRL does not have is refused when the config is checked (rankone.checks): the levers and
controls, other baselines, FSDP and vLLM. A run resumes from TRL's newest checkpoint (every
rl.checkpoint_every steps, under `trl/`, with the metrics logged so far beside it); TRL saves its
RNG state with torch.save, so unlike rankone's own checkpoints these are pickles, read back only
from the run's own folder. TRL is an extra: `pip install --no-deps -r envs/bench.txt`.
"""

from __future__ import annotations

import json
import math
import shutil
import time
from pathlib import Path


from rankone.config import RunId, StudyConfig, tail_steps
from rankone.data import read_split
from rankone.info import entropy_bits
from rankone.io import InputError, atomic_path, log, seed_everything
from rankone.objectives import TRL_LOSSES
from rankone.models.load import load_base, make_policy, trainable_parameters
from rankone.paths import snapshot
from rankone.tasks import task_of
from rankone.train.folder import identity, model_card, run_record, steady_adapter_config, write_finished
from rankone.train.rl import unparseable_share

TRL_DIR, STATE = "trl", "rankone_state.json"


class Scored:
    """TRL's reward function: the task's checker on each completion, with the step's own accounting
    (what rankone's trainer logs beside the reward) kept for the step's metrics line."""

    __name__ = "task"  # TRL names its reward columns after the function

    def __init__(self, task, group_size: int):
        self.task, self.G, self.pending = task, group_size, None

    def __call__(self, prompts, completions, answer, **_) -> list[float]:
        texts = [c if isinstance(c, str) else c[-1]["content"] for c in completions]
        rewards = [self.task.reward(t, a) for t, a in zip(texts, answer)]
        groups = [rewards[i : i + self.G] for i in range(0, len(rewards), self.G)]  # TRL repeats each prompt G times
        self.pending = {
            "reward": sum(rewards) / len(rewards),
            "zero_variance_share": sum(len(set(g)) == 1 for g in groups) / len(groups),
            "group_bits": [entropy_bits(g) for g in groups],
            "unparseable_share": unparseable_share(self.task, texts),
            "episodes": len(rewards),
        }
        return rewards


def _callback(cfg: StudyConfig, run: RunId, out_dir: Path, policy, scored: Scored, state: dict, model_dir: Path):
    """The transformers callback that writes rankone's run folder as TRL trains."""
    from transformers import TrainerCallback

    tail = set(tail_steps(cfg.evaluate.at, cfg.rl.steps))

    class RunFolderCallback(TrainerCallback):
        def on_step_begin(self, args, trainer_state, control, **kwargs):
            self.t0 = time.time()

        def on_step_end(self, args, trainer_state, control, **kwargs):
            step = trainer_state.global_step
            state["timings"].append({"step": step - 1, "seconds": time.time() - self.t0})
            if step < cfg.rl.steps and step in tail:
                save_weights(cfg, run, policy, snapshot(out_dir, step), step, model_dir)

        def on_log(self, args, trainer_state, control, logs=None, **kwargs):
            if not logs or "loss" not in logs or scored.pending is None:
                return
            done = scored.pending
            state["info_bound_bits"] += sum(done["group_bits"]) * scored.G
            state["episodes"] += done["episodes"]
            step = len(state["metrics"])
            state["metrics"].append(
                {
                    "step": step,
                    "reward": done["reward"],
                    "train_reward": done["reward"],
                    "zero_variance_share": done["zero_variance_share"],
                    "entropy": logs.get("entropy"),  # TRL's: the learner's mean token entropy
                    "advantage_entropy_bits": sum(done["group_bits"]) / len(done["group_bits"]),
                    "info_bound_bits": state["info_bound_bits"],
                    "episodes": state["episodes"],
                    "grad_norm": logs.get("grad_norm"),
                    "loss": logs["loss"],
                    "unparseable_share": done["unparseable_share"],
                }
            )
            scored.pending = None
            if (step + 1) % cfg.rl.log_every == 0:
                log.info("%s step %d (TRL): reward %.3f", run.path, step + 1, done["reward"])

        def on_save(self, args, trainer_state, control, **kwargs):
            folder = Path(args.output_dir) / f"checkpoint-{trainer_state.global_step}"
            (folder / STATE).write_text(json.dumps(state))

    return RunFolderCallback()


def save_weights(cfg: StudyConfig, run: RunId, policy, folder: Path, step: int, model_dir: Path) -> None:
    """The policy's save_pretrained, with rankone's model card, written atomically."""
    with atomic_path(folder) as tmp:
        policy.save_pretrained(tmp)
        steady_adapter_config(policy, tmp)
        (tmp / "README.md").write_text(model_card(cfg, run, model_dir, step))


def grpo_config(cfg: StudyConfig, run: RunId, output_dir: Path):
    """rankone's RL settings in TRL's words (the module docstring; docs/protocol.md's table)."""
    import trl

    rl = cfg.rl
    loss_type, scale_rewards = TRL_LOSSES[rl.loss]
    return trl.GRPOConfig(
        output_dir=str(output_dir),
        per_device_train_batch_size=rl.prompts_per_step * rl.group_size,
        gradient_accumulation_steps=1,
        steps_per_generation=1,
        num_generations=rl.group_size,
        num_iterations=rl.epochs,
        max_completion_length=cfg.rollout.max_new_tokens,
        temperature=cfg.rollout.temperature,
        top_p=1.0,
        top_k=0,
        beta=0.0,
        epsilon=rl.clip_epsilon,
        scale_rewards=scale_rewards,
        loss_type=loss_type,
        learning_rate=run.lr,
        lr_scheduler_type="constant",
        warmup_steps=0,
        weight_decay=0.0,
        max_grad_norm=math.inf,  # rankone does not clip RL gradients
        max_steps=rl.steps,
        logging_steps=1,
        save_strategy="steps",
        save_steps=rl.checkpoint_every,
        save_total_limit=2,
        report_to="trackio" if cfg.tracking == "trackio" else "none",  # TRL's own trackio callback
        project=cfg.experiment,
        run_name=run.path,
        trackio_static_space_id=False,  # local only: nothing goes to the Hub
        use_cpu=cfg.device == "cpu",
        bf16=cfg.dtype == "bfloat16",
        seed=run.seed,
        data_seed=run.seed,
        disable_tqdm=True,
        dataloader_num_workers=0,
    )


def train(cfg: StudyConfig, run: RunId, model_dir: Path, data_dir: Path, out_dir: Path) -> dict:
    """One RL run trained by TRL's GRPOTrainer, written as rankone's run folder."""
    try:
        import trl
    except ImportError:
        raise InputError(
            "rl.trainer trl needs TRL, a benchmark extra: pip install --no-deps -r envs/bench.txt"
        ) from None
    from datasets import Dataset
    from transformers import PrinterCallback
    from transformers.trainer_utils import get_last_checkpoint

    started = time.time()
    seed_everything(run.seed, cfg.threads)
    model, tokenizer = load_base(model_dir)
    policy = make_policy(model, run.method, cfg.lora, cfg.scope(run.method))
    task = task_of(cfg.tasks["rl"])
    rows = read_split(data_dir, "train")
    chat = bool(tokenizer.chat_template)  # an instruct model: each prompt one user message, as rankone's sampler
    prompts = [[{"role": "user", "content": r["prompt"]}] if chat else r["prompt"] for r in rows]
    dataset = Dataset.from_list([{"prompt": p, "answer": r["answer"]} for p, r in zip(prompts, rows)])
    out_dir = Path(out_dir)
    resume = get_last_checkpoint(str(out_dir / TRL_DIR)) if (out_dir / TRL_DIR).is_dir() else None
    state = {"identity": identity(cfg, run, model_dir), "metrics": [], "timings": [], "info_bound_bits": 0.0}
    state["episodes"] = 0
    saved = json.loads((Path(resume) / STATE).read_text()) if resume and (Path(resume) / STATE).is_file() else None
    if saved and saved["identity"] == state["identity"]:
        state = saved
        log.info("%s: resuming TRL from %s (step %d)", run.path, resume, len(state["metrics"]))
    elif resume:
        log.warning("%s: ignoring %s: written for another config, code or base model", run.path, resume)
        shutil.rmtree(out_dir / TRL_DIR)
        resume = None
    scored = Scored(task, cfg.rl.group_size)
    trainer = trl.GRPOTrainer(
        model=policy,
        reward_funcs=scored,
        args=grpo_config(cfg, run, out_dir / TRL_DIR),
        train_dataset=dataset,
        processing_class=tokenizer,
        callbacks=[_callback(cfg, run, out_dir, policy, scored, state, Path(model_dir))],
    )
    trainer.remove_callback(PrinterCallback)  # TRL's print of every step's logs; rankone logs every rl.log_every
    log.info("%s: %d trainable parameters, trained by TRL %s", run.path, trainable_parameters(policy), trl.__version__)
    trainer.train(resume_from_checkpoint=resume)
    save_weights(cfg, run, policy, out_dir / "weights", cfg.rl.steps, Path(model_dir))
    info = run_record(
        cfg,
        run,
        "completed" if all(math.isfinite(m["loss"]) for m in state["metrics"]) else "diverged",
        len(state["metrics"]),
        trainable_parameters(policy),
        state["timings"],
        {
            "info_bound_bits": state["info_bound_bits"],
            "episodes": state["episodes"],
            "trainer": f"trl {trl.__version__}",
        },
        started,
    )
    write_finished(out_dir, info, state["metrics"], state["timings"])
    shutil.rmtree(out_dir / TRL_DIR, ignore_errors=True)
    return info
