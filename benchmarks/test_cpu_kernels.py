"""Cost, not correctness: one cell of the smoke study's RL runs (`rankone train`, every seed)
with the CPU kernels pinned to AVX2 (cpu_kernels: avx2, the default) against the libraries'
own choice for this CPU (native: AVX-512 where it has it). `make benchmark`; the ratio of
the two, measured in one run, is what the pins cost per training job.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT, fresh_study, study  # noqa: F401 - the smoke study's fixtures

CELL = "rl/llama-tiny/lora-r1/lr0.01"
SECONDS: dict = {}


@pytest.mark.parametrize("kernels", ["avx2", "native"])
def test_train_job_time_per_cpu_kernel_set(benchmark, fresh_study, kernels):  # noqa: F811
    where, _ = fresh_study
    config = where / f"{kernels}.yaml"
    config.write_text((where / "study.yaml").read_text().replace("cpu_kernels: native", f"cpu_kernels: {kernels}"))
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}

    def train() -> None:
        subprocess.run(
            [sys.executable, "-m", "rankone", "train", "--config", str(config), "--run", CELL],
            cwd=where,
            env=env,
            check=True,
            capture_output=True,
        )

    benchmark.pedantic(train, rounds=3, iterations=1)
    SECONDS[kernels] = benchmark.stats.stats.median
    if len(SECONDS) == 2:
        print(
            f"\n{CELL}: pinned AVX2 {SECONDS['avx2']:.2f} s, native {SECONDS['native']:.2f} s "
            f"(pinned / native {SECONDS['avx2'] / SECONDS['native']:.2f})"
        )
