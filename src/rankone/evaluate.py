"""The evaluate stage: every trained run on val and test.

One job per (regime, model, method) evaluates all its learning rates and seeds, so
data, tokenizer, base model and rollout engine load once (a process per run cost more
than the evaluation itself). Sampling goes through the configured rollout engine
(vLLM where `rollout.engine: vllm`), `evaluate.batch_prompts` prompts per call. Greedy
accuracy, sampled pass@1 and mean reward for both regimes (and, on a task that states a
confidence, the sampled completions' Brier score and calibration error); for SFT also the
negative log-likelihood of the answers (test NLL); for SFT, and for RL on a table of
known entropy (facts), the final total NLL of the training set and the bits absorbed:
its drop from the base model to the trained one. For RL, the final weights' sharpening
profile (`profile`: greedy accuracy and pass@k on the whole test split, rankone.rollouts.profile)
of the runs that judge: the confirmation runs where the regime has them (the sweep only chooses
the lr on val, and the profile's samples cost about three scores), else the sweep's.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch

from rankone.config import RunId, StudyConfig, lora_rank, tail_steps
from rankone.info import NATS_TO_BITS
from rankone.data import read_split
from rankone.io import InputError, log, provenance, read_json, seed_everything, write_jsonl
from rankone.device import autocast, resolve
from rankone.models.load import load_base, load_policy
from rankone.models.sequences import completion_logprobs, encode_completions, encode_prompts
from rankone.paths import snapshot
from rankone.rollouts import make_engine
from rankone.rollouts.profile import greedy_accuracy as profile_greedy
from rankone.rollouts.profile import pass_at_k, profile, sample_all
from rankone.tasks.confidence import calibration
from rankone.tasks import measures_storage, task_of


@torch.no_grad()
def answer_nll_nats(
    model, tokenizer, rows: list[dict], batch_size: int = 512, dtype: str = "float32"
) -> tuple[float, int]:
    """Total NLL (nats) of the answers (+<eos>) given the prompts, and the token count."""
    total, tokens = 0.0, 0
    for i in range(0, len(rows), batch_size):
        chunk = rows[i : i + batch_size]
        prompt_ids_B_L, prompt_mask_B_L = encode_prompts(tokenizer, [r["prompt"] for r in chunk])
        completion_B_C, mask_B_C = encode_completions(tokenizer, [r["answer"] for r in chunk])
        with autocast(model.device, dtype):
            logprobs_B_C = completion_logprobs(model, prompt_ids_B_L, prompt_mask_B_L, completion_B_C, mask_B_C)
        total -= float(logprobs_B_C.sum())
        tokens += int(mask_B_C.sum())
    return total, tokens


def scoring_engine(
    cfg: StudyConfig,
    model,
    tokenizer,
    engine: str = "hf",
    model_dir: Path | None = None,
    rank: int | None = None,
    seed: int = 0,
):
    """A rollout engine sampling `model` at the evaluation temperature (rankone.rollouts)."""
    return make_engine(
        engine,
        model,
        tokenizer,
        cfg.evaluate.temperature,
        cfg.rollout.max_new_tokens,
        model_dir,
        rank,
        seed,
        dtype=cfg.dtype,
        options=cfg.rollout,
    )


def greedy_accuracy(cfg: StudyConfig, engine, task, rows: list[dict]) -> float:
    """Share of `rows` whose greedy completion `engine`'s policy gets right."""
    return profile_greedy(engine, task, rows, cfg.evaluate.batch_prompts)


def score(cfg: StudyConfig, engine, task, rows: list[dict], seed: int, kept: list | None = None) -> dict:
    """Greedy accuracy, sampled pass@1 and pass@k, mean reward of `engine`'s policy on `rows`; each
    sample (prompt, reference answer, completion, reward) appended to `kept` when given."""
    e = cfg.evaluate
    prompts, answers = [r["prompt"] for r in rows], [r["answer"] for r in rows]
    accuracy = greedy_accuracy(cfg, engine, task, rows)
    torch.manual_seed(seed)
    n = e.samples_per_prompt
    sampled = sample_all(engine, prompts, n, e.batch_prompts)
    rewards = [task.reward(t, answers[i // n]) for i, t in enumerate(sampled)]
    correct = [sum(r > 0 for r in rewards[i * n : (i + 1) * n]) for i in range(len(rows))]
    if kept is not None:
        kept += [
            {"prompt": prompts[i // n], "answer": answers[i // n], "completion": t, "reward": r}
            for i, (t, r) in enumerate(zip(sampled, rewards))
        ]
    return {
        "prompts": len(rows),
        "greedy_accuracy": accuracy,
        "pass_at_1": sum(r > 0 for r in rewards) / len(rewards),
        **{f"pass_at_{k}": sum(pass_at_k(n, c, k) for c in correct) / len(rows) for k in range(2, n + 1)},
        "mean_reward": sum(rewards) / len(rewards),
        **(calibration(sampled, rewards) if task.states_confidence else {}),
    }


class Scorer:
    """The rollout engine of one evaluate job, started for its first run and synced to each next
    one (a vLLM start costs more than scoring a tiny model)."""

    def __init__(self, cfg: StudyConfig, model_dir: Path, method: str):
        self.cfg, self.model_dir, self.method, self.engine = cfg, model_dir, method, None

    def __call__(self, model, tokenizer, seed: int):
        if self.engine is None:
            self.engine = scoring_engine(
                self.cfg, model, tokenizer, self.cfg.rollout.engine, self.model_dir, lora_rank(self.method), seed
            )
        else:
            self.engine.sync(model)
        return self.engine

    def close(self) -> None:
        if self.engine is not None:
            self.engine.close()


def checkpoints(cfg: StudyConfig, run: RunId, train_dir: Path, steps_completed: int) -> list[tuple[int, Path]]:
    """(step, weights folder) of every late checkpoint of a completed run (evaluate.at of its
    regime's steps), the final weights last. A run that stopped early (the variance filter's
    episode budget) has only the checkpoints it reached."""
    planned = tail_steps(cfg.evaluate.at, getattr(cfg, run.regime).steps)
    found = [(s, snapshot(train_dir, s)) for s in planned if s < steps_completed]
    missing = [str(p) for _, p in found if not p.is_dir()]
    if missing:
        raise InputError(
            f"{run.path}: missing snapshots {', '.join(missing)}: retrain the run (the train stage "
            "saves them at evaluate.at)"
        )
    return [*found, (steps_completed, train_dir / "weights")]


def score_splits(
    cfg: StudyConfig, run: RunId, model, tokenizer, engine, task, splits: dict, kept: list | None = None
) -> dict:
    """Val and test scores of one set of weights (for SFT also the answers' NLL); on a table of
    known bits also the greedy recall of the whole table (`table`). The test split's samples are
    appended to `kept` when given."""
    result = {}
    for split in ("val", "test"):
        rows = splits[split]
        result[split] = score(cfg, engine, task, rows, run.seed, kept if split == "test" else None)
        if run.regime == "sft":
            nats, tokens = answer_nll_nats(model, tokenizer, rows, dtype=cfg.dtype)
            result[split]["nll"] = nats / tokens
            result[split]["nll_bits_per_token"] = nats / tokens * NATS_TO_BITS
    if task.stores_table and "train" in splits:  # greedy recall of every key, without the probes' sampling
        rows = splits["train"]  # noise (which n x (1 - H(a)) multiplies by the table's size)
        result["table"] = {"keys": len(rows), "greedy_accuracy": greedy_accuracy(cfg, engine, task, rows)}
    return result


def evaluate_run(
    cfg: StudyConfig,
    run: RunId,
    model_dir: Path,
    splits: dict,
    base_train_nats: float | None,
    train_dir: Path,
    scorer: Scorer,
    kept: list | None = None,
) -> dict:
    """A run's scores at each late checkpoint (`checkpoints`, for the tail score) and, as `val` and
    `test`, at its final weights; the same seed before each, so checkpoints differ by weights only.
    Each checkpoint's test samples are appended to `kept` when given, each with the run and step."""
    trained = read_json(train_dir / "run.json")
    result: dict = {"run": run.path, "status": trained["status"]}
    if trained["status"] != "completed":
        return result
    task, scored = task_of(cfg.tasks[run.regime]), []
    for step, weights in checkpoints(cfg, run, train_dir, trained["steps_completed"]):
        seed_everything(run.seed, cfg.threads)
        model, tokenizer = load_policy(model_dir, weights, run.method, cfg.dtype, resolve(cfg.device))
        engine = scorer(model, tokenizer, run.seed)
        mine = [] if kept is not None else None
        scored.append({"step": step, **score_splits(cfg, run, model, tokenizer, engine, task, splits, mine)})
        if mine is not None:
            kept += [{"run": run.path, "step": step, "split": "test", **s} for s in mine]
    result.update({k: scored[-1][k] for k in ("val", "test")}, checkpoints=scored)
    if "profile" in splits:  # the final weights' sharpening profile on the whole test split
        s = cfg.sharpening
        sequences = cfg.evaluate.batch_prompts * cfg.evaluate.samples_per_prompt
        result["profile"] = profile(engine, task, splits["profile"], s.samples, s.pass_at, sequences, run.seed)
    if base_train_nats is not None:
        final_nats, _ = answer_nll_nats(model, tokenizer, splits["train"], dtype=cfg.dtype)
        result["train_nll_bits_base"] = base_train_nats * NATS_TO_BITS
        result["train_nll_bits_final"] = final_nats * NATS_TO_BITS
        result["bits_absorbed"] = (base_train_nats - final_nats) * NATS_TO_BITS
    log.info("%s: val %s", run.path, result["val"])
    return result


def run(cfg: StudyConfig, regime: str, model: str, method: str, at) -> list[dict]:
    """Evaluate every run of (regime, model, method); write one JSON line per run."""
    started = time.time()
    runs = [r for r in cfg.runs() if (r.regime, r.model, r.method) == (regime, model, method)]
    if not runs:
        raise ValueError(f"no runs for {regime}/{model}/{method} in the study's grid")
    data_dir, model_dir = at.data(regime), at.model(model)
    splits = {s: read_split(data_dir, s)[: cfg.evaluate.n_prompts] for s in ("val", "test")}
    if regime == "rl" and regime not in cfg.confirmed_regimes():  # the runs that judge: the sharpening
        splits["profile"] = read_split(data_dir, "test")  # profile on the whole test split (not the sweep's)
    base_train_nats = None
    if measures_storage(cfg, regime):  # bits stored, the same estimator in both regimes
        splits["train"] = read_split(data_dir, "train")
        base, tokenizer = load_base(model_dir, cfg.dtype, resolve(cfg.device))
        base_train_nats, _ = answer_nll_nats(base, tokenizer, splits["train"], dtype=cfg.dtype)
        del base
    scorer, kept = Scorer(cfg, model_dir, method), [] if cfg.evaluate.log_samples else None
    try:
        results = [evaluate_run(cfg, r, model_dir, splits, base_train_nats, at.train(r), scorer, kept) for r in runs]
    finally:
        scorer.close()
    if kept is not None:  # before metrics.jsonl, the stage's declared output, is written
        write_jsonl(at.evaluation(regime, model, method).with_name("samples.jsonl"), kept)
    prov = provenance(cfg, "evaluate", None, started, regime)
    write_jsonl(at.evaluation(regime, model, method), [{**r, "provenance": prov} for r in results])
    return results
