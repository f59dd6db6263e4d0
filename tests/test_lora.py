import pytest
import torch

from rankone.config import LoraConfig, validate
from rankone.models.load import load_base, make_policy, trainable_parameters
from tests.conftest import smoke_dict

LORA = LoraConfig(alpha=32)


@pytest.mark.parametrize("rank", [1, 2, 4])
@pytest.mark.parametrize("scope", ["all-linear", "attention", "mlp"])
def test_trainable_parameters_are_r_times_din_plus_dout(study, rank, scope):
    cfg, at = study
    scoped = validate(smoke_dict(lora={"alpha": 32, "target_modules": scope}))
    expected = cfg.architecture.num_hidden_layers * sum(
        rank * (d_in + d_out) for d_in, d_out in scoped.adapted_shapes().values()
    )
    for model_name in cfg.models:
        model, _ = load_base(at.model(model_name))
        assert trainable_parameters(make_policy(model, f"lora-r{rank}", LORA, scope)) == expected


def test_lora_init_matches_original_setup(study):
    cfg, at = study
    model, _ = load_base(at.model(cfg.models[0]))
    policy = make_policy(model, "lora-r4", LORA, "all-linear")
    for name, p in policy.named_parameters():
        if "lora_B" in name:
            assert p.abs().sum() == 0  # B = 0: the adapter starts as a no-op
        if "lora_A" in name:
            d_in = p.shape[1]
            assert p.abs().max() <= d_in**-0.5 + 1e-6  # uniform, bound 1/sqrt(d_in)
    from peft.tuners.lora import LoraLayer

    scalings = {m.scaling["default"] for m in policy.modules() if isinstance(m, LoraLayer)}
    assert scalings == {32 / 4}


def test_fullft_trains_everything(study):
    cfg, at = study
    model, _ = load_base(at.model(cfg.models[0]))
    total = sum(p.numel() for p in model.parameters())
    assert trainable_parameters(make_policy(model, "fullft", LORA, "all-linear")) == total


@pytest.mark.parametrize(
    "method, layers",
    [("lora-r2-attn", 4), ("lora-r2-mlp", 3), ("lora-r2", 7), ("lora-r2-o_proj", 1), ("lora-r2-down_proj", 1)],
)
def test_method_suffix_sets_the_adapted_layers(study, method, layers):
    cfg, at = study
    scoped = validate(smoke_dict(methods=["fullft", method], levers=None))
    shapes = scoped.adapted_shapes(method)
    assert len(shapes) == layers
    model, _ = load_base(at.model(cfg.models[0]))
    policy = make_policy(model, method, LORA, scoped.scope(method))
    expected = cfg.architecture.num_hidden_layers * sum(2 * (i + o) for i, o in shapes.values())
    assert trainable_parameters(policy) == expected
    adapted = {n.split(".lora_")[0].rsplit(".", 1)[1] for n, p in policy.named_parameters() if p.requires_grad}
    assert adapted == set(shapes), f"{method} adapts {sorted(adapted)}"


@pytest.mark.parametrize("u, tying", [(1, 1.0), (16, 1.0), (4, 0.0)])
def test_tinylora_trains_u_parameters_per_group_of_tied_layers(study, u, tying):
    cfg, at = study
    model, _ = load_base(at.model("qwen3-tiny"))
    lora = LoraConfig(alpha=32, tinylora_weight_tying=tying)
    groups = 1 if tying == 1.0 else cfg.architecture.num_hidden_layers * 7  # untied: one v per adapted layer
    assert trainable_parameters(make_policy(model, f"tinylora-u{u}", lora, "all-linear")) == u * groups


def test_tinylora_update_lives_in_the_top_r_singular_directions_of_the_base_weight(study):
    import torch

    cfg, at = study
    model, _ = load_base(at.model("llama-tiny"))
    base = {n: w.clone() for n, w in model.state_dict().items()}
    policy = make_policy(model, "tinylora-u8", LoraConfig(alpha=32, tinylora_r=2), "all-linear")
    with torch.no_grad():
        for p in policy.parameters():
            if p.requires_grad:
                p.copy_(torch.linspace(-1, 1, p.numel()))
    merged = policy.merge_and_unload().state_dict()
    name = "model.layers.0.mlp.down_proj.weight"
    delta, w = merged[name] - base[name], base[name]
    assert delta.abs().max() > 1e-3  # a non-zero update...
    assert int(torch.linalg.matrix_rank(delta, atol=1e-5)) == 2  # ...of rank r
    u, _, vh = torch.linalg.svd(w)
    outside = delta - u[:, :2] @ (u[:, :2].T @ delta)  # left part outside the top-2 directions of W
    assert outside.abs().max() < 1e-5 and (delta - (delta @ vh[:2].T) @ vh[:2]).abs().max() < 1e-5
    unchanged = [n for n in base if "layers" in n and "norm" in n]
    assert all(torch.equal(merged[n], base[n]) for n in unchanged)


def test_tinylora_needs_its_own_grid_and_the_hf_engine():
    from rankone.config import ConfigError, method_label, method_position

    no_grid = {g: {"fullft": [1e-3], "lora": [1e-2]} for g in ("rl", "sft")}
    with pytest.raises(ConfigError, match=r"tinylora-u4'\] need learning_rates.<regime>.tinylora"):
        validate(smoke_dict(methods=["fullft", "tinylora-u4"], levers=None, learning_rates=no_grid))
    grids = {g: {"fullft": [1e-3], "lora": [1e-2], "tinylora": [1e-2]} for g in ("rl", "sft")}
    cfg = validate(smoke_dict(methods=["fullft", "tinylora-u4"], levers=None, learning_rates=grids))
    assert [r.lr for r in cfg.runs() if r.method == "tinylora-u4"][0] == 1e-2
    assert [m for m in sorted(["fullft", "lora-r1", "tinylora-u64", "tinylora-u1"], key=method_position)] == [
        "tinylora-u1",
        "tinylora-u64",
        "lora-r1",
        "fullft",
    ]
    assert method_label("tinylora-u13") == "TinyLoRA u=13" and method_label("lora-r4-mlp") == "rank 4 mlp-only"
    with pytest.raises(ConfigError, match="cannot serve TinyLoRA"):
        validate(
            smoke_dict(methods=["fullft", "tinylora-u4"], levers=None, learning_rates=grids, rollout={"engine": "vllm"})
        )


@pytest.mark.parametrize("model_name", ["llama-tiny", "qwen3-tiny"])
def test_learned_temperature_is_one_scalar_on_the_logits_and_saves_as_the_base_architecture(
    study, tmp_path, model_name
):
    import math

    import torch

    from rankone.models.load import load_policy, plain_state

    cfg, at = study
    model_dir = at.model(model_name)
    base, tokenizer = load_base(model_dir)
    policy = make_policy(load_base(model_dir)[0], "temperature", LORA, "all-linear")
    assert trainable_parameters(policy) == 1
    ids = tokenizer(["3+4="], return_tensors="pt").input_ids
    with torch.no_grad():
        logits = base(ids).logits
        assert torch.equal(policy(ids).logits, logits)  # exp(0) = 1: the base model exactly
        next(p for p in policy.parameters() if p.requires_grad).fill_(math.log(2.0))
        assert torch.allclose(policy(ids).logits, 2 * logits, rtol=1e-5, atol=1e-5)
    policy.save_pretrained(tmp_path / "weights", state_dict=plain_state(policy))
    loaded, _ = load_policy(model_dir, tmp_path / "weights", "temperature")
    assert not any("parametrizations" in k for k in loaded.state_dict())
    with torch.no_grad():
        assert torch.allclose(loaded(ids).logits, 2 * logits, rtol=1e-5, atol=1e-5)
    assert plain_state(base) is None  # nothing parametrized: save_pretrained's own state dict


def test_learned_temperature_trains_by_rl_and_changes_only_the_final_norm_by_one_factor(study, tmp_path):
    from safetensors.torch import load_file

    from rankone.config import RunId
    from rankone.train import TRAINERS

    cfg, at = study
    run = RunId.parse("rl/llama-tiny/temperature/lr0.1/seed0")
    info = TRAINERS["rl"](cfg, run, at.model(run.model), at.data("rl"), tmp_path / "run")
    assert info["status"] == "completed" and info["trainable_parameters"] == 1
    trained = load_file(tmp_path / "run/weights/model.safetensors")
    base = load_file(at.model(run.model) / "model.safetensors")
    assert set(trained) == set(base)
    moved = [k for k in base if not torch.equal(trained[k], base[k])]
    assert moved == ["model.norm.weight"]
    factor = trained["model.norm.weight"] / base["model.norm.weight"]
    assert torch.allclose(factor, factor[0].expand_as(factor), rtol=1e-5) and abs(float(factor[0]) - 1) > 1e-4


def test_learned_temperature_needs_its_own_grid():
    from rankone.config import ConfigError, method_kind, method_label, method_position

    no_grid = {g: {"fullft": [1e-3], "lora": [1e-2]} for g in ("rl", "sft")}
    with pytest.raises(ConfigError, match=r"method temperature needs learning_rates.<regime>.temperature"):
        validate(smoke_dict(methods=["fullft", "temperature"], levers=None, learning_rates=no_grid))
    grids = {g: {"fullft": [1e-3], "lora": [1e-2], "temperature": [0.1]} for g in ("rl", "sft")}
    cfg = validate(smoke_dict(methods=["fullft", "temperature"], levers=None, learning_rates=grids))
    assert [r.lr for r in cfg.runs() if r.method == "temperature"][0] == 0.1
    rl_only = {"rl": grids["rl"], "sft": {"fullft": [1e-3], "lora": [1e-2]}}
    cfg = validate(smoke_dict(methods=["fullft", "temperature"], levers=None, learning_rates=rl_only))
    assert {r.regime for r in cfg.runs() if r.method == "temperature"} == {"rl"}  # runs where its grid is
    assert cfg.regime_methods("sft") == ["fullft"] and cfg.regime_methods("rl") == ["fullft", "temperature"]
    assert method_kind("temperature") == "temperature" and method_label("temperature") == "learned temperature"
    assert sorted(["fullft", "tinylora-u1", "temperature"], key=method_position)[0] == "temperature"


def test_a_replica_is_another_warm_start_of_the_same_preset(study, tmp_path):
    """llama-tiny@1: the same architecture and tokenizer, warm-started with pretrain seed seed + 1,
    so other weights; llama-tiny itself is replica 0 (seed + 0: its bytes did not change)."""
    import json

    from safetensors.torch import load_file

    from rankone.config import architecture_of, replica_of
    from rankone.models.build import build, pretrain_seed

    cfg, at = study
    assert (architecture_of("llama-tiny@1"), replica_of("llama-tiny@1"), replica_of("llama-tiny")) == (
        "llama-tiny",
        1,
        0,
    )
    assert pretrain_seed(cfg, "llama-tiny") == cfg.seed and pretrain_seed(cfg, "llama-tiny@2") == cfg.seed + 2
    build(cfg, "llama-tiny@1", at.data_root, tmp_path / "replica")
    own, other = at.model("llama-tiny"), tmp_path / "replica"
    assert json.loads((own / "config.json").read_text()) == json.loads((other / "config.json").read_text())
    a, b = load_file(own / "model.safetensors"), load_file(other / "model.safetensors")
    assert set(a) == set(b) and not any(torch.equal(a[k], b[k]) for k in a if k.endswith("proj.weight"))


def test_a_warm_start_with_stop_at_greedy_stops_at_the_first_check_that_reaches_it(study, tmp_path):
    """pretrain.stop_at_greedy: the warm-start checks its greedy accuracy on RL train prompts every
    check_every steps and stops at the first check that reaches the target (steps the cap). A check
    draws no random numbers, so a warm-start stopped earlier saw the same checks up to its stop."""
    from rankone.models.build import build

    cfg, at = study

    def warm_start(target: float, name: str) -> dict:
        pretrain = {**smoke_dict()["pretrain"], "stop_at_greedy": target, "check_every": 25}
        stopping = validate(smoke_dict(results_dir=str(tmp_path / "results"), pretrain=pretrain))
        return build(stopping, "llama-tiny", at.data_root, tmp_path / name)

    first = warm_start(1.0, "first")
    greedy = [c["greedy"] for c in first["pretrain_checks"]]
    assert [c["step"] for c in first["pretrain_checks"]] == list(range(25, first["pretrain_steps"] + 1, 25))
    assert all(g < 1.0 for g in greedy[:-1]) and first["pretrain_reached"] == (greedy[-1] == 1.0)
    assert first["pretrain_steps"] == (25 * len(greedy) if first["pretrain_reached"] else cfg.pretrain.steps)
    target = max(greedy)  # the smoke base's best check (0.06 here): a stop no later than the cap
    assert target > 0, "the smoke warm-start answers some train prompts greedily"
    stop = next(i for i, g in enumerate(greedy) if g >= target)
    second = warm_start(target, "second")
    assert second["pretrain_checks"] == first["pretrain_checks"][: stop + 1] and second["pretrain_reached"]
    assert second["pretrain_steps"] == 25 * (stop + 1)


def test_the_majority_control_is_fullft_rl_rewarded_for_agreeing_with_its_group(study, tmp_path):
    """method majority: FullFT's weights and lr grid, RL only, trained on agreement with the group's majority
    answer (train_reward), while the logged reward stays the task's checker."""
    from rankone.config import RunId, method_kind, method_label, method_position
    from rankone.io import read_json, read_jsonl
    from rankone.train import TRAINERS

    cfg, at = study
    run = RunId.parse("rl/llama-tiny/majority/lr0.001/seed0")
    info = TRAINERS["rl"](cfg, run, at.model(run.model), at.data("rl"), tmp_path / "run")
    base = read_json(at.model(run.model) / "rankone.json")
    assert info["status"] == "completed" and info["trainable_parameters"] == base["parameters"]  # every weight
    steps = read_jsonl(tmp_path / "run/metrics.jsonl")
    # a group of G always has a majority of at least 1/G of its parseable samples: agreement is not the checker
    assert any(s["train_reward"] != s["reward"] for s in steps)
    assert all(s["train_reward"] >= 1 / cfg.rl.group_size * (1 - s["unparseable_share"]) - 1e-9 for s in steps)
    with_control = validate(smoke_dict(methods=["fullft", "majority"], levers=None))
    assert with_control.regime_methods("rl") == ["fullft", "majority"] and with_control.regime_methods("sft") == [
        "fullft"
    ]
    assert with_control.lr_grid("rl", "majority") == with_control.lr_grid("rl", "fullft")
    assert method_kind("majority") == "fullft" and method_label("majority") == "majority-vote reward"
    assert sorted(["fullft", "temperature", "majority", "lora-r1"], key=method_position) == [
        "majority",
        "temperature",
        "lora-r1",
        "fullft",
    ]


def test_a_saved_adapter_config_lists_its_sets_sorted_whatever_the_hash_seed(study, tmp_path):
    import json

    from peft import PeftConfig

    from rankone.train.folder import steady_adapter_config

    cfg, at = study
    model, _ = load_base(at.model(cfg.models[0]))
    policy = make_policy(model, "lora-r1", LORA, "all-linear")
    policy.save_pretrained(tmp_path)
    path = tmp_path / "adapter_config.json"
    saved = json.loads(path.read_text())
    modules = saved["target_modules"]
    assert len(modules) > 2
    saved["target_modules"] = sorted(modules, reverse=True)  # as peft may write it under another PYTHONHASHSEED
    path.write_text(json.dumps(saved))
    steady_adapter_config(policy, tmp_path)
    again = json.loads(path.read_text())
    assert again["target_modules"] == sorted(modules)
    assert {k: v for k, v in again.items() if k != "target_modules"} == {
        k: v for k, v in saved.items() if k != "target_modules"
    }
    assert set(PeftConfig.from_pretrained(tmp_path).target_modules) == set(modules)
