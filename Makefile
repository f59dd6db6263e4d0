# make study : set up .venv from the lock (if missing) and run the default study
# make test  : set up .venv (if missing) and run the test suite
# make slurm-env: add the SLURM executor plugin (envs/slurm.txt) for workflow/profiles/slurm
# make publish: the static site under reports/ from every study under results/ (see README)
# make image: the CPU image (build/image/rankone-cpu) from Debian and the lock; make study-in-image runs the study in it
# make layers / capacity / truncation / levers / calibration / tinylora / rl-capacity / crossover / crossover-o_proj / trl (trl-2x2: at the 2x2's size) / two-by-two (two-by-two-sft, two-by-two-rl: its halves) / learning-pilot / learning (learning-qwen3: its qwen3-tiny arm) / real : experiments layered over the default study
VENV := .venv
IMAGE := build/image/rankone-cpu
PYTHON ?= python3.11
PIP_ARGS ?=
# How the lock is installed: pip, or uv (INSTALLER=uv: the same pinned packages, fetched and unpacked
# in parallel, several times faster; .ci/run uses it). uv, pinned in envs/uv.txt, is installed beside
# the venv (build/uv), not in it, and is handed pip's package sources (scripts/pip-indexes), since it
# reads no pip configuration; if it fails, pip installs the lock as without it.
INSTALLER ?= pip
UV := build/uv/bin/uv
export PATH := $(abspath $(VENV))/bin:$(PATH)

.PHONY: image image-check study-in-image gpu-vendor gpu-rehearsal slurm-env publish study smoke layers capacity truncation levers calibration tinylora rl-capacity crossover crossover-o_proj crossover-mlp share-mlp trl two-by-two two-by-two-sft two-by-two-rl trl-2x2 learning-pilot learning learning-qwen3 real test benchmark lint env

env: $(VENV)/.installed

$(VENV)/.installed: envs/cpu.lock.txt pyproject.toml
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
ifeq ($(INSTALLER),uv)
	test -x $(UV) || $(VENV)/bin/pip install --quiet --no-deps --target build/uv $(PIP_ARGS) -r envs/uv.txt
	$(UV) pip install --quiet --python $(VENV)/bin/python --no-deps --index-strategy unsafe-best-match \
		$$(scripts/pip-indexes $(VENV)/bin/pip) $(PIP_ARGS) -r envs/cpu.lock.txt \
		|| $(VENV)/bin/pip install --quiet --no-deps --no-compile $(PIP_ARGS) -r envs/cpu.lock.txt
else ifeq ($(INSTALLER),pip)
	$(VENV)/bin/pip install --quiet --no-deps --no-compile $(PIP_ARGS) -r envs/cpu.lock.txt
else
	$(error INSTALLER=$(INSTALLER): use pip or uv)
endif
	# Byte-compile on every core (pip does it on one; without .pyc every job's imports take
	# twice as long). Like pip, skip files that do not compile (vendored Python 2 tests).
	$(VENV)/bin/python -m compileall -q -j 0 $(VENV)/lib > /dev/null || true
	$(VENV)/bin/pip install --quiet --no-deps --no-build-isolation -e .
	touch $@

# Every study below runs under a `rankone jobserver` (docs/running.md, "Warm job starts on a CPU"): its
# stage jobs are forked from one process that imported torch, transformers and peft once, where each
# would import them anew (5-7 s a job on a 2-core machine). `make study WARM=` runs plain `snakemake`.
WARM ?= rankone jobserver --config config/default.yaml $(1) --
SNAKEMAKE = $(call WARM,$(1)) snakemake --cores all$(if $(1), --configfile $(1))

study: env
	$(call SNAKEMAKE)
	rankone summary --config config/default.yaml

smoke: env
	$(call SNAKEMAKE,config/smoke.yaml)
	rankone summary --config config/smoke.yaml

layers: env
	$(call SNAKEMAKE,config/experiments/layers.yaml)

capacity: env
	$(call SNAKEMAKE,config/experiments/capacity.yaml)

truncation: env
	$(call SNAKEMAKE,config/experiments/truncation.yaml)

levers: env
	$(call SNAKEMAKE,config/experiments/levers.yaml)

real: env
	$(call SNAKEMAKE,config/experiments/real-cpu.yaml)

calibration: env
	$(call SNAKEMAKE,config/experiments/calibration.yaml)

tinylora: env
	$(call SNAKEMAKE,config/experiments/tinylora.yaml)

rl-capacity: env
	$(call SNAKEMAKE,config/experiments/rl-capacity.yaml)

# The 2x2: RL and SFT on the same learning task (the other two cells: the default SFT, the crossover's RL).
two-by-two: env
	$(call SNAKEMAKE,config/experiments/two-by-two.yaml)

two-by-two-sft: env
	$(call SNAKEMAKE,config/experiments/two-by-two.yaml config/experiments/two-by-two-sft.yaml)

two-by-two-rl: env
	$(call SNAKEMAKE,config/experiments/two-by-two.yaml config/experiments/two-by-two-rl.yaml)

# An RL arm that has to learn (a weaker warm-start, longer RL): exploratory, llama-tiny alone.
learning-pilot: env
	$(call SNAKEMAKE,config/experiments/learning-pilot.yaml)

# The RL arm that has to learn, both tiny models, all three sharpening controls, extending grids.
learning: env
	$(call SNAKEMAKE,config/experiments/learning.yaml)

learning-qwen3: env
	$(call SNAKEMAKE,config/experiments/learning.yaml config/experiments/learning-qwen3.yaml)

# The cross-check through TRL: the default's FullFT and rank-1 RL cells trained by TRL's GRPOTrainer,
# then both trainers' verdicts side by side (needs the default study: make study).
trl: env
	$(call SNAKEMAKE,config/experiments/trl.yaml)
	rankone compare results/default results/trl --out results/trl/analysis/beside-rankone.md

# The same cross-check at a size this CPU affords: the 2x2's FullFT and rank-1 RL cells through TRL at the
# lrs rankone chose for them (needs make two-by-two-rl for the comparison; about 2 h of both cores here).
trl-2x2: env
	$(call SNAKEMAKE,config/experiments/two-by-two.yaml config/experiments/two-by-two-rl.yaml config/experiments/trl-2x2.yaml)
	rankone compare results/two-by-two-rl results/trl-2x2 --out results/trl-2x2/analysis/beside-rankone.md

# The RL capacity crossover: one study per table size (config/experiments/crossover/), then the
# crossover over them (results/crossover/crossover.md; `make publish` publishes it as reports/crossover/).
# Resumable: a rerun skips what is done.
# n8192 (rank 1's SFT capacity past 4,096 keys, about 2.3 h more) is left out of the budget:
# make crossover CROSSOVER_SIZES="n256 n512 n1024 n2048 n4096 n8192 n1024x8"
CROSSOVER_SIZES := n256 n512 n1024 n2048 n4096 n1024x8
CROSSOVER_OUT := results/crossover
crossover: env
	for size in $(CROSSOVER_SIZES); do \
		$(call SNAKEMAKE,config/experiments/crossover.yaml config/experiments/crossover/$$size.yaml) || exit 1; \
	done
	rankone crossover $(foreach s,$(CROSSOVER_SIZES),results/crossover-$(s)) --out $(CROSSOVER_OUT)

# The crossover with rank 1 on o_proj alone (512 parameters: a capacity RL can reach) at 256, 512 and 1,024 keys, its own page.
crossover-o_proj:
	$(MAKE) crossover CROSSOVER_SIZES="n32-o_proj n64-o_proj n128-o_proj n256-o_proj n512-o_proj n1024-o_proj" CROSSOVER_OUT=results/crossover-o_proj

# The crossover with rank 1 on the MLP of every block (2,304 parameters: the one partial scope that holds a whole
# table by SFT, config/pilots/x-mid.yaml), 64 to 2,048 keys in both regimes, its own page. FullFT's runs up
# to 1,024 keys (MLP_SIZES) are the o_proj crossover's (the same config): after `make crossover-o_proj`,
# `make share-mlp` copies them instead of training them again; at 2,048 keys (MLP_OWN_SIZES) it trains its own.
MLP_SIZES := n64 n128 n256 n512 n1024
MLP_OWN_SIZES := n2048
crossover-mlp:
	$(MAKE) crossover CROSSOVER_SIZES="$(MLP_SIZES:%=%-mlp) $(MLP_OWN_SIZES:%=%-mlp)" CROSSOVER_OUT=results/crossover-mlp

share-mlp: env
	for size in $(MLP_SIZES); do \
		scripts/share-runs results/crossover-$$size-o_proj results/crossover-$$size-mlp \
			--config config/default.yaml config/experiments/crossover.yaml config/experiments/crossover/$$size-mlp.yaml || exit 1; \
	done

test: env
	pytest

# The CPU image: Debian bookworm (debootstrap) and the lock's wheels, no registry (scripts/build-image;
# as root). For a cluster: apptainer build $(IMAGE).sif $(IMAGE)/ (the config's `container`).
image: env
	scripts/build-image $(IMAGE)

# The same inputs, the same packages: a second image built beside the first, its Debian package
# list and pip freeze compared with the first's (then removed).
image-check:
	test -f $(IMAGE)/opt/rankone/pip-freeze.txt || { echo "no image at $(IMAGE): make image first" >&2; exit 2; }
	scripts/build-image build/image/rebuild
	diff $(IMAGE)/opt/rankone/debian-packages.txt build/image/rebuild/opt/rankone/debian-packages.txt
	diff $(IMAGE)/opt/rankone/pip-freeze.txt build/image/rebuild/opt/rankone/pip-freeze.txt
	rm -rf build/image/rebuild
	echo "a second build from the same inputs has the same Debian packages and Python packages"

# The workflow inside the image (charliecloud's ch-run), the repository bound in, results written to it.
# SNAKEMAKE_ARGS="--configfile config/smoke.yaml" for another study.
study-in-image:
	test -x $(IMAGE)/opt/rankone/bin/python || { echo "no image at $(IMAGE): make image first" >&2; exit 2; }
	USER=$${USER:-$$(id -un)} ch-run -b $(CURDIR):/work -c /work $(IMAGE) -- \
		env PYTHONPATH=src PATH=/opt/rankone/bin:/usr/bin:/bin XDG_CACHE_HOME=/work/.snakemake/cache \
		snakemake --cores all $(SNAKEMAKE_ARGS)

# Only where SLURM is used: see envs/slurm.txt for why it is not in the lock.
slurm-env: env
	$(VENV)/bin/pip install --quiet --no-deps $(PIP_ARGS) -r envs/slurm.txt

publish: env
	rankone publish
	rankone findings

benchmark: env
	pytest -n 0 benchmarks --benchmark-only --benchmark-enable  # pytest-benchmark does not time under xdist

lint: env
	ruff check .
	ruff format --check .
	lint-imports
	snakemake --lint
	snakefmt --check .

# For scripts/gpu-check and gpu-first-contact on a bare CUDA machine (Python 3.12, no pydantic, no
# datasets): the locked pydantic and datasets and what they need beyond the box's, unpacked for CPython 3.12 on x86_64 into .gpu-vendor/ (about 7 MB), which
# gpu-check puts on its path. Carry that folder with the repository.
gpu-vendor: env
	$(VENV)/bin/pip install --quiet --no-deps --target .gpu-vendor --python-version 3.12 --only-binary=:all: \
		--platform manylinux_2_17_x86_64 $(PIP_ARGS) \
		$$(grep -iE '^(pydantic|pydantic_core|annotated-types|typing-inspection|typing_extensions|datasets|dill|multiprocess)==' envs/cpu.lock.txt)

# A rehearsal of the GPU box on the CPU: its Python (3.12) and exactly its packages (envs/gpu-box.txt,
# no-deps: nothing else of the lock; about 4.7 GB, as PyPI's torch 2.11.0 brings CUDA's libraries),
# the wheels that would be carried (gpu-vendor) and their size with the code against the 64 MiB a
# call may carry, then scripts/gpu-check --cpu --tiny and gpu-first-contact's every phase at toy
# sizes in it, on one thread.
# python3.12 on the PATH, else pyenv's newest 3.12 (installed, not made global).
PYTHON312 ?= $(or $(shell command -v python3.12 >/dev/null 2>&1 && python3.12 -V >/dev/null 2>&1 && echo python3.12),$(lastword $(wildcard $(shell pyenv root 2>/dev/null)/versions/3.12*/bin/python3.12)),python3.12)
GPU_BOX := .venv-gpu-box
gpu-rehearsal: gpu-vendor
	test -x $(GPU_BOX)/bin/python || $(PYTHON312) -m venv $(GPU_BOX)
	PIP_CONSTRAINT= $(GPU_BOX)/bin/pip install --quiet --no-deps --no-compile $(PIP_ARGS) -r envs/gpu-box.txt
	$(GPU_BOX)/bin/python -c "import sys; assert sys.version_info[:2] == (3, 12), sys.version"
	! $(GPU_BOX)/bin/python -c "import pydantic" 2>/dev/null  # the box has none: gpu-check must use the carried one
	$(GPU_BOX)/bin/python scripts/travel-size .gpu-vendor
	OMP_NUM_THREADS=1 $(GPU_BOX)/bin/python scripts/gpu-check --cpu --tiny
	OMP_NUM_THREADS=1 $(GPU_BOX)/bin/python scripts/gpu-first-contact --cpu --tiny --out build/first-contact \
		--steps 2 --tokens 16 --sft-batch 8 --run-steps 20 --pretrain-steps 20
