"""Memory, not correctness: one RL update on SmolLM2-135M with 256-token completions, the whole
step in one forward/backward against `rl.micro_batch` slices (`make benchmark`), through the
trainer's own parts (rankone.train.learner, rankone.train.batch).

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
from rankone.config import LoraConfig
from rankone.models.load import load_base, make_policy
from rankone.models.sequences import Samples
from rankone.train.batch import Batch, Round
from rankone.train.learner import Learner
from rankone.train.pg import ImportanceSampledPG, group_advantages
model_dir, method, micro = sys.argv[1], sys.argv[2], int(sys.argv[3]) or None
torch.manual_seed(0)
torch.set_num_threads(2)
model, tokenizer = load_base(model_dir)
learner = Learner.around(make_policy(model, method, None if method == "fullft" else LoraConfig(), "all-linear"),
                         tokenizer, 1e-6)
P, G, C, L = 2, 4, 256, 32  # 8 sequences of 32 prompt and 256 completion tokens
prompt_B_L = torch.randint(0, model.config.vocab_size, (P, L)).repeat_interleave(G, 0)
mask_B_L, completion_B_C = torch.ones_like(prompt_B_L), torch.randint(0, model.config.vocab_size, (P * G, C))
samples = Samples(prompt_B_L, mask_B_L, completion_B_C, torch.ones_like(completion_B_C), torch.full((P * G, C), -10.0),
                  [""] * (P * G), ["length"] * (P * G))
rewards_P_G = torch.tensor([[1.0, 0, 0, 1], [0, 1, 0, 0]])
batch = Batch([Round(samples, rewards_P_G.view(-1), rewards_P_G.view(-1), *group_advantages(rewards_P_G))], 1.0)
for p in learner.trainable():  # Adam's state allocated before the measured step
    p.grad = torch.zeros_like(p)
learner.update()
def hwm():  # this process's own peak RSS in KiB (ru_maxrss keeps the parent's across fork and exec)
    return int(next(line for line in open("/proc/self/status") if line.startswith("VmHWM")).split()[1])
before = hwm()
t0 = time.perf_counter()
batch.backward(learner, ImportanceSampledPG(), micro)  # the trainer's own step: micro-batches inside
learner.update()
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
