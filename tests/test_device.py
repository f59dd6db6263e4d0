"""What the GPU path rests on, checked on the CPU: every input on the model's device, bf16
training that keeps small updates, a freshness check that holds in bf16 (hf and vLLM),
micro-batches whose gradients are the whole step's, chunked log-probs equal to one pass,
gradient checkpointing, truncated importance sampling."""

from __future__ import annotations

import copy
import json
import os
import shutil

import pytest
import torch
from safetensors.torch import load_file

from rankone import evaluate
from rankone.config import RunId, lora_rank, validate
from rankone.models import sequences
from rankone.device import autocast
from rankone.models.load import load_base, load_tokenizer, make_policy
from rankone.models.sequences import completion_logprobs, encode_completions, encode_prompts
from rankone.rollouts import make_engine
from rankone.train import TRAINERS
from rankone.train.batch import Batch, Round
from rankone.train.learner import Learner
from rankone.train.pg import (
    Freshness,
    ImportanceSampledPG,
    StaleSamplerError,
    group_advantages,
    importance_ratio,
    policy_gradient_loss,
    sampler_gap,
)
from rankone.train.sft import accumulate

from .conftest import real_config, shared_dir

# SmolLM2-135M's first 4 of its 30 layers, with its embeddings, final norm and tokenizer: on an
# AVX2-only CPU (no bf16 matmul instructions) a bf16 step of the whole model took minutes, most of
# it in backward. The cut model keeps what these tests rest on, the real weights' bf16 noise floor
# (step-0 gap 1.3e-2 here, against 1e-6 in fp32), at about a seventh of the cost.
SHORT_LAYERS = 4


@pytest.fixture(scope="session")
def smollm2_short(smollm2, tmp_path_factory):
    """The converted SmolLM2 checkpoint cut to its first SHORT_LAYERS layers (config and weights),
    written once per session beside it."""
    from filelock import FileLock
    from safetensors.torch import save_file

    cfg, at, _ = smollm2
    full, short = at.model("smollm2-135m"), shared_dir(tmp_path_factory, "smollm2-short")
    with FileLock(f"{short}.lock"):
        if not (short / "model.safetensors").is_file():
            tmp = short.with_name(short.name + ".partial")
            shutil.rmtree(tmp, ignore_errors=True)
            shutil.copytree(full, tmp, ignore=shutil.ignore_patterns("model.safetensors"))
            config = json.loads((full / "config.json").read_text())
            (tmp / "config.json").write_text(json.dumps({**config, "num_hidden_layers": SHORT_LAYERS}, indent=2))
            kept = {
                name: t
                for name, t in load_file(full / "model.safetensors").items()
                if not name.startswith("model.layers.") or int(name.split(".")[2]) < SHORT_LAYERS
            }
            save_file(kept, tmp / "model.safetensors", metadata={"format": "pt"})
            tmp.rename(short)
    return cfg, at, short


def tensors_on_other_devices(module, args) -> list[str]:
    device = next(iter(module.parameters(recurse=False)), None)
    if device is None:
        return []
    return [str(a.device) for a in args if isinstance(a, torch.Tensor) and a.device != device.device]


def test_every_input_is_on_the_models_device(study, tmp_path):
    """A pre-hook on every module fails on any input not on that module's device, through an RL
    step, an SFT step and an evaluation."""
    cfg, at = study
    cfg = cfg.model_copy(
        update={"rl": cfg.rl.model_copy(update={"steps": 1}), "sft": cfg.sft.model_copy(update={"steps": 1})}
    )
    seen: list[str] = []

    def hook(module, args):
        stray = tensors_on_other_devices(module, args)
        assert not stray, (type(module).__name__, stray)
        seen.append(type(module).__name__)

    handle = torch.nn.modules.module.register_module_forward_pre_hook(hook)
    try:
        for path in ("rl/qwen3-tiny/lora-r1/lr0.01/seed0", "sft/llama-tiny/fullft/lr0.001/seed0"):
            run = RunId.parse(path)
            out = tmp_path / path
            result = TRAINERS[run.regime](cfg, run, at.model(run.model), at.data(run.regime), out)
            assert result["status"] == "completed"
            splits = {s: evaluate.read_split(at.data(run.regime), s)[:4] for s in ("val", "test")}
            scorer = evaluate.Scorer(cfg, at.model(run.model), run.method)
            result = evaluate.evaluate_run(cfg, run, at.model(run.model), splits, None, out, scorer)
            assert 0 <= result["test"]["pass_at_1"] <= 1
    finally:
        handle.remove()
    assert {"Embedding", "Linear"} <= set(seen)


def changed(before: dict, after: dict, keep=lambda name: True) -> int:
    return sum(int((after[k].float() != before[k].float()).sum()) for k in before if keep(k))


def test_bf16_fullft_keeps_the_small_updates_fp32_keeps(smollm2_short, tmp_path):
    """One FullFT step at lr 1e-6 in bf16 changes (nearly) as many saved weights as in fp32, norm weights
    included: fp32 master weights and Adam state. Adam on bf16 weights changed ~2% of them, no norms."""
    cfg, at, model_dir = smollm2_short
    base = load_file(model_dir / "model.safetensors")
    run = RunId.parse("rl/smollm2-135m/fullft/lr1e-06/seed0")
    counts = {}
    for dtype in ("float32", "bfloat16"):
        study = validate(
            real_config(
                tmp_path / dtype,
                dtype=dtype,
                rl={"steps": 1, "prompts_per_step": 2, "group_size": 2, "reward": "random", "log_every": 1},
            )
        )
        info = TRAINERS["rl"](study, run, model_dir, at.data("rl"), tmp_path / dtype / "run")
        assert info["status"] == "completed"
        saved = load_file(tmp_path / dtype / "run/weights/model.safetensors")
        assert all(saved[k].dtype == torch.float32 for k in saved)  # the masters are what is saved
        counts[dtype] = (changed(base, saved), changed(base, saved, lambda k: "norm" in k))
    total, norms = counts["float32"]
    assert total > 0.5 * sum(v.numel() for v in base.values()) and norms > 0
    assert counts["bfloat16"][0] >= 0.9 * total and counts["bfloat16"][1] >= 0.9 * norms, counts


PROMPTS = ["What is 3 + 4?", "Compute 12 * 3 and give only the number."]
# 2 x 2 sequences of 16 tokens a step, on the short SmolLM2: small, because a CPU without AVX-512 has no
# fast bf16 matmul (a bf16 linear layer ran ~100x slower than fp32 on an AVX2-only CPU, and on the whole
# model these tests took 28 min there, 16 min of CI's 30 on another).
TOKENS = 16


def rl_steps(policy, engine, fresh: Freshness, steps: int, lr: float, sync: bool, G: int = 2) -> list[float]:
    """Policy-gradient steps as the trainer takes them (coin rewards, so every group has signal),
    each checked for freshness before the update (the last step's gap only: no step sees its update);
    `sync=False` never hands the update to the engine, and the update is a seeded step of `lr` on every
    trainable weight instead of a backward (the check that stops it reads versions, not gaps: the
    costly part in bf16 is not what it tests)."""
    trainable = [p for p in policy.parameters() if p.requires_grad]
    optimizer = torch.optim.Adam(trainable, lr=lr)
    gaps = []
    for step in range(steps):
        torch.manual_seed(step)
        s = engine.sample(PROMPTS, G).to(policy.device)
        with autocast(policy.device, "bfloat16"):
            learner_B_C = completion_logprobs(
                policy, s.prompt_ids_B_L, s.prompt_mask_B_L, s.completion_B_C, s.completion_mask_B_C
            )
        mask_B_C = s.completion_mask_B_C.float()
        gaps.append(sampler_gap(learner_B_C, s.sampler_logprobs_B_C, mask_B_C)[0])
        fresh.check(gaps[-1], f"step {step}", engine.version, step)
        if step == steps - 1:  # no step follows to see this update: skip its backward (the costly part in bf16)
            break
        if not sync:  # the policy moves by lr a weight; the engine keeps serving update 0
            with torch.no_grad():
                for p in trainable:
                    p.add_(lr * torch.randn_like(p).sign())
            continue
        advantages_P_G, keep_P = group_advantages((torch.arange(len(PROMPTS) * G) % 2).float().view(-1, G))
        policy_gradient_loss(learner_B_C, s.sampler_logprobs_B_C, mask_B_C, advantages_P_G, keep_P).backward()
        optimizer.step()
        optimizer.zero_grad()
        engine.sync(policy)
    return gaps


def policy_of(model_dir, method: str):
    """FullFT on fp32 masters, or LoRA r1 on the bf16 base with an fp32 adapter (as the trainer holds them)."""
    from rankone.config import LoraConfig

    dtype = "float32" if method == "fullft" else "bfloat16"
    return make_policy(load_base(model_dir, dtype)[0], method, LoraConfig(), "all-linear").train()


# (synced, stale) learning rates: the stale one moves the policy well past the bf16 noise in one step.
# `pytest tests/test_device.py -k holds_in_bf16 -s` prints the gaps each gives.
LRS = {"fullft": (1e-5, 1e-4), "lora-r1": (1e-3, 1e-3)}


def assert_freshness_holds_in_bf16(make, model_dir, method: str):
    """A synced sampler passes 2 bf16 steps (the second after an update) whose gaps sit far above
    fp32's 1e-3 threshold; a sampler never synced fails at step 1, the first after the policy moved,
    on the version it serves (exact) whatever its gap."""
    synced_lr, stale_lr = LRS[method]
    policy, engine = make(policy_of(model_dir, method))
    gaps = rl_steps(policy, engine, Freshness(1e-3, 2.0, 0.1), 2, synced_lr, sync=True)
    assert min(gaps) > 1e-3, gaps  # the bf16 noise floor: the fp32 rule alone would stop at step 0
    policy, engine = make(policy_of(model_dir, method))
    with pytest.raises(
        StaleSamplerError, match="step 1: the engine serves the weights of update 0, the learner has made 1"
    ) as stale:
        rl_steps(policy, engine, Freshness(1e-3, 2.0, 0.1), 2, stale_lr, sync=False)
    print(
        f"\n{method}: synced gaps {[round(g, 4) for g in gaps]} at lr {synced_lr:g}; stale at lr {stale_lr:g}: "
        f"{stale.value}"
    )  # pytest -s shows them (the README's numbers)


def test_freshness_check_holds_in_bf16_with_the_hf_engine(smollm2_short):
    cfg, at, model_dir = smollm2_short
    tokenizer = load_tokenizer(model_dir)

    def make(policy):  # the engine samples a copy frozen at step 0 until a sync hands it the live policy
        return policy, make_engine("hf", copy.deepcopy(policy), tokenizer, 1.0, TOKENS, dtype="bfloat16")

    assert_freshness_holds_in_bf16(make, model_dir, "fullft")


def test_freshness_check_holds_in_bf16_with_vllm(smollm2_short):
    pytest.importorskip("vllm")
    cfg, at, model_dir = smollm2_short
    tokenizer = load_tokenizer(model_dir)
    engines = []

    def make(policy):  # one engine for both runs: re-synced to each fresh policy
        if not engines:
            engines.append(make_engine("vllm", policy, tokenizer, 1.0, TOKENS, model_dir, 1, 0, dtype="bfloat16"))
        engines[0].sync(policy, 0)  # learner version 0: a fresh policy
        return policy, engines[0]

    try:
        assert_freshness_holds_in_bf16(make, model_dir, "lora-r1")  # a LoRA engine: 40 s against FullFT's 66 s
    finally:
        for engine in engines:
            engine.close()


def test_fullft_and_lora_are_equally_on_policy_against_vllm_in_bf16(study):
    """In bf16 FullFT's learner computes its embeddings and norms from bf16 copies of its fp32 masters
    (bf16_compute), as LoRA's bf16 base and vLLM do: with autocast alone its largest step-0 gap to vLLM
    read 0.063 against LoRA's 0.020 here (0.31 against 0.047 on the default study's llama-tiny)."""
    pytest.importorskip("vllm")
    cfg, at = study
    model_dir = at.model("llama-tiny")
    tokenizer = load_tokenizer(model_dir)
    gaps = {}
    for method in ("fullft", "lora-r1"):
        policy = policy_of(model_dir, method)
        learner = Learner.around(policy, tokenizer, 1e-4, dtype="bfloat16")
        engine = make_engine(
            "vllm", learner.policy, tokenizer, 1.0, 8, model_dir, lora_rank(method), 0, dtype="bfloat16"
        )
        try:
            torch.manual_seed(0)
            s = engine.sample(["3+4=", "12+30=", "7+8=", "1+1=", "25+17=", "9+90="], 8)
        finally:
            engine.close()
        with torch.no_grad():
            gaps[method] = sampler_gap(learner.logprobs(s, slice(None)), s.sampler_logprobs_B_C, s.completion_mask_B_C)
    (fullft_mean, fullft_max), (lora_mean, lora_max) = gaps["fullft"], gaps["lora-r1"]
    assert fullft_max < 2 * lora_max and fullft_mean < 2 * lora_mean, gaps


def test_freshness_stops_on_a_stale_version_and_alarms_on_bf16_rounding():
    fp32 = Freshness(1e-3, 2.0, 0.1)
    fp32.check(2e-6, "step 0")
    fp32.check(9e-4, "step 1")  # under max_logprob_gap, though 450x the floor: the fp32 rule as before
    with pytest.raises(StaleSamplerError, match="max_logprob_gap"):
        fp32.check(1.1e-3, "step 2")
    bf16 = Freshness(1e-3, 2.0, 0.1)
    assert not bf16.check(4e-2, "step 0")
    assert not bf16.check(7.9e-2, "step 1", 1, 1)
    assert bf16.check(8.1e-2, "step 2", 2, 2)  # past 2x the floor, from the served weights: an alarm, not a stop
    with pytest.raises(StaleSamplerError, match="step 3: .*max_noise_floor"):
        bf16.check(0.11, "step 3", 3, 3)  # no rounding is that large
    with pytest.raises(
        StaleSamplerError, match="step 3: the engine serves the weights of update 2, the learner has made 3"
    ):
        bf16.check(4e-2, "step 3", 2, 3)  # stale at the floor's own gap: the version decides
    with pytest.raises(StaleSamplerError, match="step 0 .same weights on both sides.*max_noise_floor"):
        Freshness(1e-3, 2.0, 0.1).check(0.5, "step 0")


def test_truncated_importance_sampling_caps_value_and_gradient():
    learner_B_C = torch.tensor([[0.0, -1.0, -2.0]], requires_grad=True)
    sampler_B_C = torch.tensor([[-1.0, -1.0, -0.5]])  # ratios e, 1, e^-1.5
    mask_B_C = torch.ones(1, 3)
    plain = importance_ratio(learner_B_C, sampler_B_C, mask_B_C)
    capped = importance_ratio(learner_B_C, sampler_B_C, mask_B_C, cap=2.0)
    assert torch.allclose(capped, torch.tensor([[2.0, 1.0, torch.e**-1.5]]))
    (grad_capped,) = torch.autograd.grad(capped.sum(), learner_B_C)
    (grad_plain,) = torch.autograd.grad(plain.sum(), learner_B_C)
    # d/dlogp of ratio is the ratio itself; capped, it is min(ratio, cap)
    assert torch.allclose(grad_plain, plain.detach()) and torch.allclose(grad_capped, capped.detach())


def grads(model) -> dict[str, torch.Tensor]:
    out = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    return out


def assert_close_grads(a: dict, b: dict, rel: float = 1e-6) -> None:
    assert a.keys() == b.keys() and a
    for name in a:
        scale = a[name].abs().max().clamp(min=1e-12)
        assert float((a[name] - b[name]).abs().max() / scale) <= rel, name


@pytest.mark.parametrize("method", ["fullft", "lora-r1"])
def test_micro_batches_accumulate_the_whole_steps_gradients(study, tmp_path, method):
    """RL and SFT: gradients summed over micro-batches (one normaliser for the step) equal the
    whole batch's, fp32, to 1e-6 relative."""
    cfg, at = study
    run = RunId.parse(f"sft/qwen3-tiny/{method}/lr0.01/seed0")
    ctx = Learner.start(cfg, run, at.model("qwen3-tiny"))
    with torch.no_grad():  # a trained-looking adapter, so lora_A gets gradients too
        for name, p in ctx.policy.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.1, generator=torch.Generator().manual_seed(0))
    batch = evaluate.read_split(at.data("sft"), "train")[:16]
    whole_loss, _ = accumulate(ctx, batch, None)
    whole = grads(ctx.policy)
    micro_loss, _ = accumulate(ctx, batch, 4)
    assert_close_grads(whole, grads(ctx.policy))
    assert float(micro_loss) == pytest.approx(float(whole_loss), rel=1e-6)

    engine = make_engine("hf", ctx.policy, ctx.tokenizer, 1.0, 5)
    torch.manual_seed(0)
    s = engine.sample(["3+4=", "12+30=", "7+8=", "1+1="], 4)
    rewards_P_G = torch.tensor([[1.0, 0, 0, 0], [1, 1, 1, 1], [0, 1, 1, 0], [0, 0, 0, 1]])
    advantages_P_G, keep_P = group_advantages(rewards_P_G)
    mask_B_C = s.completion_mask_B_C.float()

    def logprobs(rows):
        return completion_logprobs(
            ctx.policy,
            s.prompt_ids_B_L[rows],
            s.prompt_mask_B_L[rows],
            s.completion_B_C[rows],
            s.completion_mask_B_C[rows],
        )

    policy_gradient_loss(logprobs(slice(None)), s.sampler_logprobs_B_C, mask_B_C, advantages_P_G, keep_P).backward()
    whole = grads(ctx.policy)
    # slices of 3 rows cut across groups of 4, through the trainer's own backward
    batch = Batch([Round(s, rewards_P_G.view(-1), rewards_P_G.view(-1), advantages_P_G, keep_P)], 1.0)
    batch.backward(ctx, ImportanceSampledPG(), 3)
    assert_close_grads(whole, grads(ctx.policy))


def test_the_rl_trainer_with_micro_batches_takes_the_same_steps(study, tmp_path):
    """Through the trainer: micro-batches of 4 rows give each step the same loss and gradient norm."""
    cfg, at = study
    run = RunId.parse("rl/llama-tiny/fullft/lr0.001/seed0")
    rows = []
    for micro in (None, 4):
        c = cfg.model_copy(update={"rl": cfg.rl.model_copy(update={"steps": 3, "micro_batch": micro})})
        TRAINERS["rl"](c, run, at.model("llama-tiny"), at.data("rl"), tmp_path / str(micro))
        rows.append([line for line in (tmp_path / str(micro) / "metrics.jsonl").read_text().splitlines()])
    for whole, micro in zip(*rows):
        a, b = json.loads(whole), json.loads(micro)
        assert a["reward"] == b["reward"] and a["tokens"] == b["tokens"]
        assert b["loss"] == pytest.approx(a["loss"], rel=1e-5, abs=1e-7)
        assert b["grad_norm"] == pytest.approx(a["grad_norm"], rel=1e-5)


def test_chunked_logprobs_equal_one_pass(study, monkeypatch):
    cfg, at = study
    model, tokenizer = load_base(at.model("llama-tiny"))
    rows = evaluate.read_split(at.data("sft"), "train")[:12]
    ids, mask = encode_prompts(tokenizer, [r["prompt"] for r in rows])
    completion, cmask = encode_completions(tokenizer, [r["answer"] for r in rows])
    with torch.no_grad():
        logits = model(
            input_ids=torch.cat([ids, completion], 1),
            attention_mask=torch.cat([mask, cmask * 0 + 1], 1),
            position_ids=(torch.cat([mask, cmask * 0 + 1], 1).cumsum(-1) - 1).clamp(min=0),
        ).logits
        one_pass = (
            torch.gather(
                torch.log_softmax(logits[:, ids.shape[1] - 1 : -1].float(), -1), 2, completion.unsqueeze(-1)
            ).squeeze(-1)
            * cmask
        )  # the formula before chunking
        monkeypatch.setattr(sequences, "LOGPROB_CHUNK_TOKENS", 2 * completion.shape[1])  # chunks of 2 rows
        chunked = completion_logprobs(model, ids, mask, completion, cmask)
    assert torch.equal(chunked, one_pass)


def test_gradient_checkpointing_gives_the_same_loss_and_gradients(study, tmp_path):
    cfg, at = study
    run = RunId.parse("sft/qwen3-tiny/fullft/lr0.001/seed0")
    batch = evaluate.read_split(at.data("sft"), "train")[:8]
    out = []
    for on in (False, True):
        ctx = Learner.start(cfg.model_copy(update={"gradient_checkpointing": on}), run, at.model("qwen3-tiny"))
        assert ctx.policy.is_gradient_checkpointing == on
        loss, _ = accumulate(ctx, batch, None)
        out.append((float(loss), grads(ctx.policy)))
    assert out[0][0] == pytest.approx(out[1][0], rel=1e-6)
    assert_close_grads(out[0][1], out[1][1])


# Carried to the box by `make gpu-vendor` (the Makefile's list): pydantic, datasets and what they need.
CARRIED = {"pydantic", "pydantic-core", "annotated-types", "typing-inspection", "typing-extensions", "datasets", "dill"}
CARRIED |= {"multiprocess"}


def box_site(tmp_path):
    """A folder that holds, as links into this environment, only the packages the GPU box has
    (envs/gpu-box.txt) and those gpu-check carries; with `python -S` it is the whole path."""
    import importlib.metadata
    import re

    from packaging.requirements import Requirement

    from .conftest import ROOT

    def canonical(name):
        return re.sub(r"[-_.]+", "-", name).lower()

    lines = (ROOT / "envs" / "gpu-box.txt").read_text().splitlines()
    allowed = {canonical(line.split("==")[0]) for line in lines if "==" in line} | CARRIED
    # and what this environment's versions of them need (the lock's huggingface_hub needs httpx2)
    dists = {canonical(d.metadata["Name"]): d for d in importlib.metadata.distributions()}
    todo = [n for n in allowed if n in dists]
    while todo:
        for spec in dists[todo.pop()].requires or []:
            req = Requirement(spec)
            name = canonical(req.name)
            if (req.marker is None or req.marker.evaluate({"extra": ""})) and name not in allowed:
                allowed.add(name)
                todo += [name] if name in dists else []
    site = tmp_path / "box" / "site-packages"  # so named: dill tells installed modules by the path
    site.mkdir(parents=True)
    for dist in importlib.metadata.distributions():
        if canonical(dist.metadata["Name"]) not in allowed:
            continue
        for top in {f.parts[0] for f in dist.files or [] if f.parts[0] != ".."}:
            source = dist.locate_file(top)
            if not (site / top).exists() and (top.endswith(".dist-info") or not top.endswith(".pth")):
                (site / top).symlink_to(source)
    return site


def test_gpu_check_runs_on_the_cpu_with_only_the_gpu_boxs_packages_and_skips_without_cuda(tmp_path):
    """scripts/gpu-check at toy shapes on the CPU (the GPU run is the same code) with nothing on the
    path but the box's packages (envs/gpu-box.txt) and the carried ones: a module it reaches that
    needs another package (vLLM, Snakemake, datasets, ...) fails here. The rankone modules it
    imports are the ones its docstring lists."""
    import subprocess
    import sys

    from .conftest import ROOT

    script = str(ROOT / "scripts" / "gpu-check")
    args = "--cpu --tiny --steps 2 --prompts 2 --group 4 --tokens 8 --micro-batch 4 --models qwen3-0.6b".split()
    wrapper = (
        "import json, runpy, sys\n"
        f"sys.argv = [{script!r}, *{args!r}]\n"
        "try:\n"
        f"    runpy.run_path({script!r}, run_name='__main__')\n"
        "except SystemExit as stop:\n"
        "    code = stop.code\n"
        "print('MODULES', json.dumps(sorted(m for m in sys.modules if m.startswith('rankone'))))\n"
        "sys.exit(code)\n"
    )
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(box_site(tmp_path)), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-S", "-c", wrapper], capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path
    )
    assert done.returncode == 0, done.stdout + done.stderr
    results = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert [r["method"] for r in results] == ["fullft", "lora-r1"]
    assert all(r["weights_moved_share"] > 0.9 and r["gap_floor"] < 1e-3 for r in results), results
    reached = json.loads(done.stdout.split("MODULES ", 1)[1].splitlines()[0])
    doc = (ROOT / "scripts" / "gpu-check").read_text().split("and no others", 1)[1].split(":", 1)[1]
    listed = [m.strip() for m in doc.split("\n\n", 1)[0].split(",")]
    assert reached == sorted(listed)
    if not torch.cuda.is_available():
        skipped = subprocess.run([sys.executable, script], capture_output=True, text=True, timeout=120)
        assert skipped.returncode == 0 and "no CUDA device here" in skipped.stdout


def test_gpu_first_contact_runs_every_phase_on_the_cpu_with_only_the_gpu_boxs_packages(tmp_path):
    """scripts/gpu-first-contact at toy sizes on the CPU, nothing on the path but the box's packages:
    the matmul peak, the RL and SFT steps beside the planner's memory, and a whole (toy) run through
    rankone's stages, each phase written to the JSON and the Markdown table as it ends."""
    import subprocess
    import sys

    from .conftest import ROOT

    script = str(ROOT / "scripts" / "gpu-first-contact")
    args = "--cpu --tiny --steps 1 --prompts 2 --group 2 --tokens 4 --micro-batch 2 --sft-batch 2"
    args += " --run-steps 2 --pretrain-steps 5 --models llama-3.2-1b"
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(box_site(tmp_path)), "OMP_NUM_THREADS": "1"}
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-S", script, *args.split(), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((out / "first-contact.json").read_text())
    assert report["failures"] == [] and report["peak_tflops"] > 0
    assert [(r["phase"], r["method"]) for r in report["rl"] + report["sft"]] == [
        ("rl", "fullft"),
        ("rl", "lora-r1"),
        ("sft", "fullft"),
        ("sft", "lora-r1"),
    ]
    assert all(r["planned_peak_gib"] > 0 and r["weights_moved_share"] > 0.4 for r in report["rl"])  # LoRA: B, then A
    (run,) = report["run"]
    assert run["status"] == "completed" and run["steps_completed"] == 2
    table = (out / "first-contact.md").read_text()
    assert "## rl" in table and "## sft" in table and "## run" in table
    estimate = subprocess.run([sys.executable, script, "--estimate"], capture_output=True, text=True, timeout=120)
    assert estimate.returncode == 0 and "total: about" in estimate.stdout
