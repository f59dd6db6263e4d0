"""Memory, not correctness: one RL update on SmolLM2-135M with 256-token completions, the whole
step in one forward/backward against `rl.micro_batch` slices (`make benchmark`).

Each variant runs in a process of its own, so its peak RSS (VmHWM) is its own: the peak during
the update minus the peak before it (model, Adam state and the batch already in memory). Times
come from pytest-benchmark, one round each. Prints one line per variant for the README.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT, smollm2  # noqa: F401 - the SmolLM2 fixture

STEP = r"""
import json, sys, time, torch
from rankone.models.load import load_base, make_policy
from rankone.models.sequences import completion_logprobs
from rankone.train.rl import group_advantages, micro_batches, policy_gradient_loss
model_dir, method, micro = sys.argv[1], sys.argv[2], int(sys.argv[3]) or None
torch.manual_seed(0)
torch.set_num_threads(2)
model, tokenizer = load_base(model_dir)
policy = make_policy(model, method, None if method == "fullft" else __import__("rankone.config").config.LoraConfig(),
                     "all-linear").train()
optimizer = torch.optim.Adam([p for p in policy.parameters() if p.requires_grad], lr=1e-6)
P, G, C, L = 2, 4, 256, 32  # 8 sequences of 32 prompt and 256 completion tokens
prompt_B_L = torch.randint(0, model.config.vocab_size, (P, L)).repeat_interleave(G, 0)
mask_B_L, completion_B_C = torch.ones_like(prompt_B_L), torch.randint(0, model.config.vocab_size, (P * G, C))
mask_B_C = torch.ones_like(completion_B_C)
sampler_B_C = torch.full((P * G, C), -10.0)
advantages_P_G, keep_P = group_advantages(torch.tensor([[1.0, 0, 0, 1], [0, 1, 0, 0]]))
episodes = keep_P.repeat_interleave(G).float().sum()
for p in optimizer.param_groups[0]["params"]:  # Adam's state allocated before the measured step
    p.grad = torch.zeros_like(p)
optimizer.step(); optimizer.zero_grad(set_to_none=True)
def hwm():  # this process's own peak RSS in KiB (ru_maxrss keeps the parent's across fork and exec)
    return int(next(line for line in open("/proc/self/status") if line.startswith("VmHWM")).split()[1])
before = hwm()
t0 = time.perf_counter()
for rows in micro_batches(P * G, micro):
    logprobs = completion_logprobs(policy, prompt_B_L[rows], mask_B_L[rows], completion_B_C[rows], mask_B_C[rows])
    policy_gradient_loss(logprobs, sampler_B_C[rows], mask_B_C[rows].float(), advantages_P_G.reshape(-1, 1)[rows],
                         keep_P.repeat_interleave(G)[rows], episodes).backward()
optimizer.step()
seconds = time.perf_counter() - t0
peak = hwm()
print(json.dumps({"seconds": seconds, "peak_rss_mib": peak / 1024, "step_rss_mib": (peak - before) / 1024}))
"""

RESULTS: dict = {}


@pytest.mark.parametrize("method", ["fullft", "lora-r1"])
@pytest.mark.parametrize("micro_batch", [0, 2], ids=["whole step", "micro_batch 2"])
def test_rl_update_memory(benchmark, smollm2, method, micro_batch):
    cfg, at, _ = smollm2

    def step() -> dict:
        out = subprocess.run(
            [sys.executable, "-c", STEP, str(at.model("smollm2-135m")), method, str(micro_batch)],
            capture_output=True,
            text=True,
            cwd=ROOT,
            check=True,
        )
        return json.loads(out.stdout.strip().splitlines()[-1])

    result = benchmark.pedantic(step, rounds=1, iterations=1)
    benchmark.extra_info.update(result)
    RESULTS[(method, micro_batch)] = result
    print(
        f"\n{method} micro_batch={micro_batch or 'none'}: update {result['seconds']:.2f} s, "
        f"peak RSS {result['peak_rss_mib']:.0f} MiB, of which the update {result['step_rss_mib']:.0f} MiB"
    )
