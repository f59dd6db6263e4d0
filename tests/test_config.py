"""Bad config values fail at load, before any training, with a message naming the field."""

import subprocess
import sys

import pandas as pd
import pytest
import yaml

from rankone.checks import load, validate
from rankone.config import ConfigError, RunId, layer
from rankone.tasks import params_of, task_of
from tests.conftest import ROOT, smoke_dict


def shipped(name: str) -> dict:
    """A shipped config file as it is written (`default`, `smoke` or `experiments/<name>`), not layered."""
    return yaml.safe_load((ROOT / "config" / f"{name}.yaml").read_text())


def test_shipped_configs_are_valid():
    default = load(ROOT / "config" / "default.yaml")
    # models x regimes x methods x lrs x seeds, and the two trained sharpening controls in RL alone
    assert len(default.runs()) == 1 * 2 * 3 * 5 * 2 + 1 * 2 * 5 * 2
    assert {r.regime for r in default.runs() if r.method in ("temperature", "majority")} == {"rl"}
    # the RL verdicts' runs (MLPerf asks 10), over at least 3 base models (issue #39)
    assert len(default.confirmation.seeds["rl"]) * default.confirmation.base_models >= 10
    assert default.confirmation.base_models >= 3
    smoke = load(ROOT / "config" / "smoke.yaml")
    assert {r.regime for r in smoke.runs()} == {"rl", "sft"}


@pytest.mark.parametrize(
    "name",
    [
        "layers",
        "capacity",
        "levers",
        "tinylora",
        "rl-capacity",
        "crossover",
        "two-by-two",
        "learning-pilot",
        "learning",
        "sharpening",
    ],
)
def test_experiment_configs_layer_over_the_default(name, tmp_path):
    default = shipped("default")
    strong = shipped("experiments/sharpening")  # the old default
    over = shipped(f"experiments/{name}")
    cfg = validate(layer(default, over))
    beside = name == "tinylora"  # adds runs to the default study's own results
    assert cfg.experiment == ("default" if beside else "crossover-unsized" if name == "crossover" else name)
    if name == "tinylora":
        tiny = [r for r in cfg.runs() if r.method.startswith("tinylora")]
        assert {r.regime for r in tiny} == {"rl", "sft"} and len(tiny) == 3 * 2 * len(cfg.models) * 3 * len(cfg.seeds)
    elif name == "rl-capacity":
        task = cfg.tasks["rl"]
        assert task_of(task).stores_table and params_of(task).alphabet == 2 and cfg.regimes == ["rl"]
    elif name == "levers":
        assert {n: cfg.lever_study(n).rl for n in ("psr", "nsr", "filter")} == {
            "psr": cfg.rl.model_copy(update={"advantage_sign": "positive"}),
            "nsr": cfg.rl.model_copy(update={"advantage_sign": "negative"}),
            "filter": cfg.rl.model_copy(update={"variance_filter": True}),
        }
        assert cfg.levers.seeds == cfg.seeds and {cfg.lever_study(n).regimes[0] for n in cfg.levers.variants} == {"rl"}
        # plain RL: the default study's own FullFT and rank-1 RL sweep runs (the same config, so the same bytes)
        plain = {r.path for r in validate(default).runs() if r.regime == "rl" and r.method in ("fullft", "lora-r1")}
        assert {r.path for r in cfg.runs()} == plain and cfg.confirmation is None
    elif name == "crossover":  # the shared part of every size's study (test_crossover_sizes_...)
        assert "format" in cfg.tasks and cfg.regimes == ["rl", "sft"]
    elif name == "sharpening":  # the old default: strong bases on both models, short RL, no lr extension
        assert cfg.pretrain.steps > default["pretrain"]["steps"] and cfg.rl.steps < default["rl"]["steps"]
        assert len(cfg.models) == 2 and cfg.analysis.lr_extension == 0 and "majority" not in cfg.methods
    elif name == "learning-pilot":  # a weaker base than the sharpening arm's, longer RL, the controls in the grid
        assert cfg.pretrain.steps < strong["pretrain"]["steps"] and cfg.rl.steps > strong["rl"]["steps"]
        assert "temperature" in cfg.regime_methods("rl") and cfg.regimes == ["rl"]
    elif name == "learning":  # per-model weaker bases (fewer steps, or a stop by skill), all three controls
        warm = [cfg.pretrain.of(m) for m in cfg.models]
        assert all(p.steps < strong["pretrain"]["steps"] or p.stop_at_greedy <= 0.3 for p in warm)
        assert len({(p.steps, p.stop_at_greedy) for p in warm}) == len(cfg.models) == 2
        assert {"temperature", "majority", "fullft", "lora-r1"} <= set(cfg.regime_methods("rl"))
        assert cfg.analysis.lr_extension >= 1 and len(cfg.confirmation.seeds["rl"]) >= 6
    elif name == "two-by-two":  # both regimes on the RL task, one architecture
        assert cfg.tasks["sft"] == cfg.tasks["rl"] and cfg.regimes == ["rl", "sft"] and len(cfg.models) == 1
        assert not task_of(cfg.tasks["sft"]).stores_table
    elif name == "capacity":
        assert cfg.regimes == ["rl"] and len(cfg.capacity.n_facts) >= 2
        per_size = len(cfg.models) * len(cfg.capacity.methods) * len(cfg.learning_rates["sft"].lora)
        per_size *= len(cfg.capacity.seeds)
        assert {len(cfg.capacity_study(n).runs()) for n in cfg.capacity.n_facts} == {per_size}
        assert len(cfg.capacity.seeds) >= 3  # the fall-off is the equivalence rule over seeds
    else:
        assert {cfg.scope(m) for m in cfg.methods} == {"all-linear", "attention", "mlp"}


@pytest.mark.parametrize(
    ("part", "whole"),
    [("two-by-two-sft", "two-by-two"), ("two-by-two-rl", "two-by-two"), ("learning-qwen3", "learning")],
)
def test_an_experiment_run_in_part_keeps_the_whole_s_recipe(part, whole):
    """A part of an experiment run on its own (`two-by-two-sft`, `two-by-two-rl`: the 2x2's halves; `learning-qwen3`:
    learning's qwen3-tiny arm) is its own experiment with the whole one's runs for what it keeps:
    the same base models, tasks, grids and seeds."""
    default, over, parted = shipped("default"), shipped(f"experiments/{whole}"), shipped(f"experiments/{part}")
    full, cfg = validate(layer(default, over)), validate(layer(layer(default, over), parted))
    assert cfg.experiment == part and cfg.tasks == full.tasks and cfg.confirmation == full.confirmation
    assert all(cfg.pretrain.of(m) == full.pretrain.of(m) for m in cfg.models)
    kept = {(r.regime, r.model, r.method, r.lr, r.seed) for r in cfg.runs()}
    assert kept and kept < {(r.regime, r.model, r.method, r.lr, r.seed) for r in full.runs()}
    if part == "two-by-two-sft":
        assert cfg.regimes == ["sft"] and not task_of(cfg.tasks["sft"]).stores_table
    elif part == "two-by-two-rl":
        assert cfg.regimes == ["rl"] and {"fullft", "lora-r1", "lora-r16"} <= set(cfg.methods)
    else:
        assert cfg.models == ["qwen3-tiny"] and cfg.regimes == ["rl"]


def test_the_trl_cross_check_retrains_the_2x2_s_rl_cells_at_the_lrs_rankone_chose():
    """`trl-2x2` trains a subset of `two-by-two-rl`'s runs (same base models, task, steps, seeds) through TRL,
    each method at the lr rankone's published sweep chose for it, with nothing left to extend."""
    whole = layer(layer(shipped("default"), shipped("experiments/two-by-two")), shipped("experiments/two-by-two-rl"))
    rankone_cfg, cfg = validate(whole), validate(layer(whole, shipped("experiments/trl-2x2")))
    assert cfg.rl.trainer == "trl" and rankone_cfg.rl.trainer != "trl" and cfg.analysis.lr_extension == 0
    assert cfg.tasks == rankone_cfg.tasks and cfg.rl.steps == rankone_cfg.rl.steps
    assert all(cfg.pretrain.of(m) == rankone_cfg.pretrain.of(m) for m in cfg.models)
    assert set(cfg.confirmation.seeds["rl"]) <= set(rankone_cfg.confirmation.seeds["rl"])
    assert cfg.confirmation.base_models == rankone_cfg.confirmation.base_models

    def key(r):
        return (r.regime, r.model, r.method, r.lr, r.seed)

    assert {key(r) for r in cfg.runs()} <= {key(r) for r in rankone_cfg.runs()}
    chosen = pd.read_csv(ROOT / "reports" / "two-by-two-rl" / "data" / "best_lr.csv")
    chosen = {r.method: r.lr for r in chosen.itertuples() if r.method in cfg.methods}
    assert chosen.keys() == set(cfg.methods) and {r.method: r.lr for r in cfg.runs()} == chosen


BAD = [
    ({"seeds": "zero"}, "seeds"),
    ({"models": ["gpt-tiny"]}, "unknown model 'gpt-tiny'"),
    ({"models": ["llama-tiny@0"]}, "model 'llama-tiny@0': a replica is '<model>@<k>' with k >= 1"),
    ({"models": ["gpt-tiny@1"]}, "unknown model 'gpt-tiny'"),
    ({"models": ["smollm2-135m@1"]}, "only a warm-started tiny preset has replicas"),
    ({"tasks": {"rl": {"name": "chess"}, "sft": {"name": "facts"}}}, "unknown task 'chess'"),
    ({"rollout": {"engine": "sglang"}}, "rollout.engine"),
    (
        {"rl": {"baseline": "median"}},
        "rl.baseline: unknown baseline 'median'; known: group .*; batch .*; fixed .*; running",
    ),
    ({"rl": {"loss": "kl"}}, "rl.loss: unknown loss 'kl'; known: pg .*; grpo .*; dapo .*; ppo"),
    (
        {"levers": {"variants": {"ppo": {"loss": "ppo2"}}, "methods": ["lora-r1"], "seeds": [0]}},
        "levers.variants.ppo.loss: unknown loss 'ppo2'",
    ),
    ({"methods": ["fullft", "lora-r128"], "levers": None}, "rank 128 is larger than the narrowest adapted layer"),
    ({"methods": ["qlora"]}, "unknown method 'qlora'"),
    ({"methods": ["lora-r1-embed"]}, "unknown method 'lora-r1-embed'"),
    (
        {"methods": ["lora-r48-attn"], "levers": None, "truncation": None},
        "rank 48 is larger than the narrowest adapted layer .width 32",
    ),
    (
        {"learning_rates": {"rl": {"fullft": [], "lora": [0.01]}, "sft": {"fullft": [1e-3], "lora": [1e-2]}}},
        "learning_rates.rl.fullft",
    ),
    (
        {"learning_rates": {"rl": {"fullft": [-1e-3], "lora": [0.01]}, "sft": {"fullft": [1e-3], "lora": [1e-2]}}},
        "learning rates must be > 0",
    ),
    ({"rl": {"group_size": 1}}, "rl.group_size"),
    ({"seeds": [0, 0]}, "duplicate seeds"),
    ({"methods": ["fullft", "fullft"]}, "duplicate methods"),
    ({"pretrain": {"corruption": 1.5}}, "pretrain.corruption"),
    ({"pretrain": {"models": {"qwen3-tiny": {"corruption": 1.5}}}}, "pretrain.models.qwen3-tiny.corruption"),
    ({"pretrain": {"models": {"qwen3-tiny@1": {"steps": 9}}}}, "'qwen3-tiny@1' is a replica"),
    ({"confirmation": {"seeds": {"rl": [2, 3]}, "base_models": 0}}, "confirmation.base_models"),
    (
        {"models": ["llama-tiny", "smollm2-135m"], "confirmation": {"seeds": {"rl": [2, 3]}, "base_models": 2}},
        "confirmation.base_models: 'smollm2-135m' is not warm-started here",
    ),
    (
        {"models": ["llama-tiny", "llama-tiny@1"], "confirmation": {"seeds": {"rl": [2, 3]}, "base_models": 2}},
        "confirmation.base_models: model 'llama-tiny@1' is a replica already",
    ),
    ({"experiment": "has space"}, "experiment"),
    ({"sft": {"steps": 0}}, "sft.steps"),
    (
        {
            "tasks": {
                "rl": {"name": "arithmetic", "params": {"max_operand": 3, "n_val": 10, "n_test": 10}},
                "sft": {"name": "facts"},
            }
        },
        "params of task 'arithmetic'",
    ),
    ({"architecture": {"hidden_size": 30, "num_attention_heads": 4}}, "divisible"),
    ({"lora": {"alpha": 32, "target_modules": "everything"}}, "lora.target_modules"),
    ({"unknown_field": 1}, "unknown_field"),
    ({"confirmation": {"seeds": {"rl": [1, 7]}}}, r"confirmation.seeds.rl \[1\] are also in seeds"),
    ({"confirmation": {"seeds": {"rl": [7]}}}, "confirmation.seeds.rl: at least 2 seeds"),
    ({"evaluate": {"at": [0.9, 0.8]}}, "evaluate.at"),
    ({"evaluate": {"at": [0.0, 1.0]}}, "evaluate.at"),
    ({"analysis": {"score": "best"}}, "analysis.score"),
    ({"cpu_kernels": "avx512"}, "cpu_kernels"),
    (
        {"models": ["llama-tiny", "mine"], "local_models": {"mine": "/nonexistent/checkpoint"}},
        "local_models: mine: no transformers checkpoint at '/nonexistent/checkpoint'",
    ),
    ({"results_dir": "/proc/rankone-results"}, "results_dir: cannot write under"),
    ({"capacity": {"n_facts": [64, 32]}}, "capacity.n_facts: .*distinct and increasing"),
    ({"capacity": {"n_facts": [32], "methods": ["lora-r64"], "probes": 8}}, "rank 64 is larger than the narrowest"),
    ({"capacity": {"n_facts": [8, 64], "methods": ["fullft"], "probes": 8}}, "sizes .8. are below 2 x capacity.probes"),
    ({"capacity": {"n_facts": [32], "methods": ["fullft", "qlora"]}}, "unknown method 'qlora'"),
    (
        {
            "capacity": {"n_facts": [32], "methods": ["fullft"], "probes": 8},
            "tasks": {
                "rl": {"name": "arithmetic", "params": {"max_operand": 9, "n_val": 16, "n_test": 16}},
                "sft": {"name": "arithmetic", "params": {"max_operand": 9, "n_val": 16, "n_test": 16}},
            },
        },
        "needs tasks.sft to be the facts task",
    ),
    ({"levers": {"variants": {"PSR": {"advantage_sign": "positive"}}}}, "lever name 'PSR'"),
    ({"levers": {"variants": {"psr": {"advantage": "positive"}}}}, r"lever 'psr': \['advantage'\] are not rl fields"),
    ({"levers": {"variants": {"psr": {}}}}, "lever 'psr': give the rl fields it changes"),
    ({"levers": {"variants": {"psr": {"advantage_sign": "sideways"}}}}, "levers.variants.psr: advantage_sign"),
    ({"levers": {"variants": {"plain": {"advantage_sign": "both"}}}}, "levers.variants.plain: changes nothing"),
    (
        {"levers": {"variants": {"nsr": {"advantage_sign": "negative"}}, "methods": ["lora-r4"]}},
        r"levers.methods: \['lora-r4'\] are not among the study's methods",
    ),
    (
        {
            "tasks": {
                "rl": {"name": "arithmetic", "params": {"max_operand": 9, "n_val": 16, "n_test": 16}},
                "sft": {"name": "facts", "params": {"n_facts": 64, "n_val": 16, "n_test": 16}},
            },
            "rl": {"calibration_alpha": 0.2},
            "levers": None,
        },
        "rl.calibration_alpha needs a task that states a confidence",
    ),
    (
        {
            "tasks": {
                "rl": {"name": "arithmetic", "params": {"max_operand": 9, "n_val": 16, "n_test": 16}},
                "sft": {"name": "facts", "params": {"n_facts": 64, "n_val": 16, "n_test": 16}},
            },
            "levers": {"variants": {"cal": {"calibration_alpha": 0.2}}},
        },
        "levers.variants.cal: calibration_alpha needs a task that states a confidence",
    ),
    (
        {
            "tasks": {
                "rl": {
                    "name": "arithmetic",
                    "params": {"max_operand": 9, "n_val": 16, "n_test": 16},
                    "confidence": True,
                },
                "sft": {"name": "facts", "params": {"n_facts": 64, "n_val": 16, "n_test": 16}, "confidence": True},
            }
        },
        "task 'facts': confidence is not supported on a table task",
    ),
    (
        {"levers": {"variants": {"nsr": {"advantage_sign": "negative"}}, "seeds": [7]}},
        r"levers.seeds: \[7\] are not among the study's seeds",
    ),
    ({"device": "cuda"}, "device: device 'cuda', but torch sees no CUDA device"),  # CI has no GPU
    ({"device": "tpu"}, "device"),
    ({"rl": {"micro_batch": 3}}, "rl: micro_batch 3 must divide the step's 64 sequences"),  # 8 prompts x 8
    ({"rl": {"micro_batch": 128}}, "rl: micro_batch 128 must divide the step's 64 sequences"),
    ({"sft": {"micro_batch": 5}}, "sft: micro_batch 5 must divide the step's 64 sequences .batch_size"),
    ({"rl": {"truncated_is": 0}}, "rl.truncated_is"),
    ({"rl": {"explore": 1.0}}, "rl.explore"),
    ({"rl": {"explore": 0.25}}, "rl.explore: task 'arithmetic' cannot list its answers .Task.answer_space.: no floor"),
    (
        {"levers": {"variants": {"floor": {"explore": 0.25}}, "seeds": [0]}},
        "levers.variants.floor.explore: task 'arithmetic' cannot list its answers",
    ),
    ({"rollout": {"gpu_memory_utilization": 1.5}}, "rollout.gpu_memory_utilization"),
    (
        {
            "rollout": {"engine": "vllm"},
            "methods": ["fullft", "lora-r1"],
            "architecture": {
                "hidden_size": 64,
                "num_attention_heads": 4,
                "num_key_value_heads": 1,
                "intermediate_size": 64,
            },
        },
        "needs a head size",
    ),
]


@pytest.mark.parametrize("override, message", BAD, ids=[m for _, m in BAD])
def test_bad_config_names_the_field(override, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace("'", ".")):
        validate(smoke_dict(**override))


def test_cli_rejects_bad_config_before_work(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(smoke_dict(rl={"group_size": 1})))
    out = subprocess.run(
        [sys.executable, "-m", "rankone.cli", "check", "--config", str(bad)], capture_output=True, text=True
    )
    assert out.returncode == 2
    assert "rl.group_size" in out.stderr
    missing = subprocess.run(
        [sys.executable, "-m", "rankone.cli", "check", "--config", str(tmp_path / "nope.yaml")],
        capture_output=True,
        text=True,
    )
    assert missing.returncode == 2 and "does not exist" in missing.stderr


def test_capacity_sub_study_is_the_sft_regime_on_a_table_of_that_size():
    cfg = validate(smoke_dict())
    n = cfg.capacity.n_facts[0]
    sub = cfg.capacity_study(n)
    assert sub.regimes == ["sft"] and sub.capacity is None
    assert sub.tasks["sft"].params == {"n_facts": n, "digits": 2, "n_val": 8, "n_test": 8}
    assert (sub.methods, sub.seeds) == (cfg.capacity.methods, cfg.capacity.seeds)
    assert sub.architecture == cfg.architecture and sub.sft == cfg.sft
    assert len(sub.runs()) == len(cfg.models) * len(cfg.capacity.methods) * len(cfg.capacity.seeds)
    with pytest.raises(ConfigError, match="table size 48 is not in capacity.n_facts"):
        cfg.capacity_study(48)


def test_lever_sub_study_is_the_rl_regime_with_its_fields_changed():
    cfg = validate(smoke_dict())
    sub = cfg.lever_study("nsr-filter-format")
    assert sub.regimes == ["rl"] and sub.levers is None and sub.capacity is None
    assert (sub.rl.advantage_sign, sub.rl.variance_filter, sub.rl.reward, sub.rl.baseline) == (
        "negative",
        True,
        "format",
        "fixed",
    )
    plain = {"advantage_sign": "both", "variance_filter": False, "reward": "task", "baseline": "group"}
    assert sub.rl.model_copy(update=plain) == cfg.rl
    assert (sub.methods, sub.seeds) == (cfg.levers.methods, cfg.levers.seeds)
    assert sub.rl.episode_budget == cfg.rl.steps * cfg.rl.prompts_per_step * cfg.rl.group_size
    with pytest.raises(ConfigError, match="lever 'kl' is not in levers.variants"):
        cfg.lever_study("kl")


def test_run_ids_round_trip():
    for run in validate(smoke_dict()).runs():
        assert RunId.parse(run.path) == run


def test_a_cell_names_every_seed_of_a_run():
    cfg = validate(smoke_dict())
    cell = cfg.select("rl/qwen3-tiny/lora-r1/lr0.01")
    assert [r.seed for r in cell] == cfg.seeds and {r.cell for r in cell} == {"rl/qwen3-tiny/lora-r1/lr0.01"}
    assert cfg.select("rl/qwen3-tiny/lora-r1/lr0.01/seed1") == [RunId.parse("rl/qwen3-tiny/lora-r1/lr0.01/seed1")]
    with pytest.raises(ConfigError, match="not in the study's grid"):
        cfg.select("rl/qwen3-tiny/lora-r1/lr0.5")
    with pytest.raises(ConfigError, match="not of the form"):
        cfg.select("rl/qwen3-tiny")


def test_schema_file_is_generated_from_the_model():
    from rankone.config import json_schema

    assert yaml.safe_load((ROOT / "workflow/schemas/config.schema.yaml").read_text()) == json_schema()


def test_local_model_path_is_accepted_when_it_exists(study):
    cfg, at = study
    local = validate(smoke_dict(models=["mine"], local_models={"mine": str(at.model("qwen3-tiny"))}))
    assert {r.model for r in local.runs()} == {"mine"}


def test_scope_changes_the_width_limit():
    cfg = validate(smoke_dict(methods=["lora-r48-mlp"], truncation=None, levers=None))
    assert cfg.scope("lora-r48-mlp") == "mlp"  # MLP is 64 wide


def test_truncation_needs_fullft_rl_runs():
    with pytest.raises(ConfigError, match="truncation: needs FullFT RL runs"):
        validate(smoke_dict(methods=["lora-r1"], levers=None))
    with pytest.raises(ConfigError, match="ranks must be positive, distinct and increasing"):
        validate(smoke_dict(truncation={"ranks": [4, 2]}))


def test_the_confirmation_study_reruns_each_chosen_lr_on_fresh_seeds_only():
    data = shipped("smoke")
    data["confirmation"] = {"seeds": {"rl": [10, 11, 12]}}
    cfg = validate(data)
    chosen = {(r.regime, r.model, r.method): r.lr * (2 if r.method == "fullft" else 1) for r in cfg.runs()}
    confirm = cfg.confirm_study(chosen, "rl")
    runs = confirm.runs()
    assert {r.regime for r in runs} == {"rl"} and cfg.confirmed_regimes() == ["rl"]
    assert {r.seed for r in runs} == {10, 11, 12} and not {r.seed for r in runs} & set(cfg.seeds)
    assert all(r.lr == chosen[(r.regime, r.model, r.method)] for r in runs)
    assert len(runs) == len(cfg.models) * len(cfg.methods) * 3
    with pytest.raises(ConfigError, match="no confirmation.seeds"):
        cfg.confirm_study(chosen, "sft")
    with pytest.raises(ConfigError, match="run the select stage first"):
        cfg.confirm_study({}, "rl")


def test_confirmation_runs_spread_over_base_models_each_at_its_models_chosen_lr():
    """confirmation.base_models: 3 runs every confirmation seed on the model and on its replicas @1
    and @2, each at the lr the sweep chose on the model's own base; the sweep itself stays on it."""
    data = smoke_dict()
    data["confirmation"] = {"seeds": {"rl": [10, 11]}, "base_models": 3}
    cfg = validate(data)
    assert cfg.replicas_of("qwen3-tiny") == ["qwen3-tiny", "qwen3-tiny@1", "qwen3-tiny@2"]
    assert {r.model for r in cfg.runs()} == {"llama-tiny", "qwen3-tiny"}
    chosen = {(r.regime, r.model, r.method): r.lr * (3 if r.model == "qwen3-tiny" else 1) for r in cfg.runs()}
    runs = cfg.confirm_study(chosen, "rl").runs()
    assert {r.model for r in runs} == set(cfg.confirm_models()) and len(cfg.confirm_models()) == 6
    assert all(r.lr == chosen[(r.regime, r.model.split("@")[0], r.method)] for r in runs)
    assert len(runs) == 6 * len(cfg.regime_methods("rl")) * 2


def test_a_rollout_engine_is_a_registered_name_whose_factory_imports():
    """The registry (rankone.engines) is what the checks and make_engine read: an unknown name is refused
    at load, naming the field and the known engines, and each registered factory resolves."""
    from rankone.engines import ENGINES

    with pytest.raises(ConfigError, match=r"rollout.engine: unknown rollout engine 'sglang'; known: hf \(.*\), vllm"):
        validate(smoke_dict(rollout={"engine": "sglang"}))
    for engine in ENGINES.values():
        assert callable(engine.load())


def test_loading_a_config_imports_nothing_else_of_rankone_and_writes_no_file(tmp_path):
    """The schema (rankone.config) stands alone; its checks (rankone.checks) look at the folders without writing."""
    from rankone import checks

    cfg = tmp_path / "study.yaml"
    cfg.write_text(yaml.safe_dump(smoke_dict(results_dir=str(tmp_path / "out"), reports_dir=str(tmp_path / "rep"))))
    before = sorted(tmp_path.rglob("*"))
    code = "import sys; from rankone.config import load; load(sys.argv[1]); print(sorted(m for m in sys.modules if "
    code += "m.startswith('rankone')))"
    out = subprocess.run([sys.executable, "-c", code, str(cfg)], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['rankone', 'rankone.config']"
    checks.load(cfg)
    assert sorted(tmp_path.rglob("*")) == before


@pytest.mark.parametrize("path", sorted((ROOT / "config" / "pilots").glob("*.yaml")), ids=lambda p: p.stem)
def test_pilot_configs_layer_over_the_default_as_their_own_experiments(path):
    """Each pilot is its own experiment, no confirmation; one regime alone (x-mid: SFT alone, a
    capacity scan) or both on one table (x-dw: RL beside SFT on the same 1-bit table)."""
    default = yaml.safe_load((ROOT / "config" / "default.yaml").read_text())
    cfg = validate(layer(default, yaml.safe_load(path.read_text())))
    assert cfg.experiment.startswith("pilot-") and cfg.confirmation is None
    assert len(cfg.regimes) == 1 or params_of(cfg.tasks["rl"]) == params_of(cfg.tasks["sft"])


def test_pretrain_overrides_apply_per_model_and_to_its_replicas():
    """pretrain.models: one model's warm-start differs, a replica takes its model's, the rest keep the section's."""
    data = yaml.safe_load((ROOT / "config/default.yaml").read_text())
    data["pretrain"]["models"] = {"qwen3-tiny": {"steps": 1500, "corruption": 0.25}, "not-listed": {"steps": 7}}
    cfg = validate(data)
    qwen, replica, llama = (cfg.pretrain.of(m) for m in ("qwen3-tiny", "qwen3-tiny@2", "llama-tiny"))
    assert (qwen.steps, qwen.corruption, qwen.lr) == (1500, 0.25, cfg.pretrain.lr)
    assert replica == qwen and (llama.steps, llama.corruption) == (cfg.pretrain.steps, cfg.pretrain.corruption)


def test_an_extension_round_runs_only_its_lrs_on_the_sweeps_seeds():
    cfg = validate(smoke_dict())
    rounds = cfg.extension_study({("rl", "qwen3-tiny", "lora-r1"): 0.0333})
    assert [r.path for r in rounds.runs()] == [f"rl/qwen3-tiny/lora-r1/lr0.0333/seed{s}" for s in cfg.seeds]
    assert rounds.select("rl/qwen3-tiny/lora-r1/lr0.0333") == rounds.runs()
    assert cfg.extension_study({}).runs() == []  # no edge: a round without runs, not the grid
    with pytest.raises(ConfigError, match="extension of rl/mystery/lora-r1: not a method of the sweep"):
        cfg.extension_study({("rl", "mystery", "lora-r1"): 0.1})


def test_each_regimes_confirmation_study_holds_only_the_methods_that_run_in_it():
    """The default study confirms SFT too: its confirmation study leaves out the RL-only controls (the
    learned temperature, the majority-vote reward), which have no SFT grid, and RL's keeps them."""
    cfg = load(ROOT / "config" / "default.yaml")
    chosen = {(r.regime, r.model, r.method): r.lr for r in cfg.runs()}
    sft, rl = cfg.confirm_study(chosen, "sft"), cfg.confirm_study(chosen, "rl")
    assert sft.methods == ["fullft", "lora-r1", "lora-r16"] and {"temperature", "majority"} <= set(rl.methods)
    assert {r.seed for r in sft.runs()} == set(cfg.confirmation.seeds["sft"])


def test_a_local_instruct_model_keeps_its_chat_template_only_when_the_config_says_chat(study, tmp_path):
    import shutil

    from rankone.models.build import build
    from rankone.models.load import load_tokenizer

    cfg, at = study
    instruct = tmp_path / "instruct"  # the tiny base, saved as an instruct model: with a chat template
    shutil.copytree(at.model("llama-tiny"), instruct)
    tokenizer = load_tokenizer(instruct)
    tokenizer.chat_template = "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}{% endfor %}"
    tokenizer.save_pretrained(instruct)
    for name, local, kept in (("plain", str(instruct), False), ("chat", {"path": str(instruct), "chat": True}, True)):
        mine = validate({**cfg.model_dump(), "models": [name], "local_models": {name: local}})
        build(mine, name, at.data_root, tmp_path / name)
        assert bool(load_tokenizer(tmp_path / name).chat_template) == kept, name


def test_crossover_sizes_are_studies_of_one_table_with_the_issue_grid():
    """Each crossover size (config/experiments/crossover/n*.yaml over crossover.yaml over the default):
    its own experiment, one 1-bit table in every regime (8 bits a key for the mechanism's arm), at
    least 5 lrs 2x apart per family with edge extension, 3 selection and 3 confirmation seeds, and
    training per key the same at every size (RL 256 episodes a key, SFT 50 passes)."""
    default = yaml.safe_load((ROOT / "config" / "default.yaml").read_text())
    shared = yaml.safe_load((ROOT / "config" / "experiments" / "crossover.yaml").read_text())
    sizes = sorted((ROOT / "config" / "experiments" / "crossover").glob("n*.yaml"))
    names = set()
    for path in sizes:
        cfg = validate(layer(layer(default, shared), yaml.safe_load(path.read_text())))
        names.add(cfg.experiment)
        assert cfg.experiment == f"crossover-{path.stem}"
        tables = {(cfg.tasks[g].name, params_of(cfg.tasks[g])) for g in cfg.regimes}
        assert len(tables) == 1 and all(task_of(cfg.tasks[g]).stores_table for g in cfg.regimes)
        params = params_of(cfg.tasks[cfg.regimes[0]])
        assert params.alphabet == 2 and params.digits == (8 if path.stem.endswith("x8") else 1)
        assert cfg.rollout.max_new_tokens >= params.digits + 1  # the whole value and <eos> (recall reads them)
        for regime in cfg.regimes:
            for grid in (cfg.learning_rates[regime].fullft, cfg.learning_rates[regime].lora):
                assert len(grid) >= 5 and all(b / a == pytest.approx(2) for a, b in zip(grid, grid[1:]))
            assert len(cfg.confirmation.seeds[regime]) >= 3
        assert len(cfg.seeds) >= 3 and cfg.analysis.lr_extension >= 1
        if "rl" in cfg.regimes:
            assert cfg.rl.steps * cfg.rl.prompts_per_step * cfg.rl.group_size == 256 * params.n_facts
        assert cfg.sft.steps * cfg.sft.batch_size == 50 * params.n_facts
    assert len(names) == len(sizes) >= 5
