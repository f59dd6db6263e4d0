import pytest

from rankone.config import validate
from rankone.models.load import load_base, make_policy, trainable_parameters
from tests.conftest import smoke_dict


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
        assert trainable_parameters(make_policy(model, rank, 32, scope)) == expected


def test_lora_init_matches_original_setup(study):
    cfg, at = study
    model, _ = load_base(at.model(cfg.models[0]))
    policy = make_policy(model, 4, 32, "all-linear")
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
    assert trainable_parameters(make_policy(model, None, 32, "all-linear")) == total


@pytest.mark.parametrize("method, layers", [("lora-r2-attn", 4), ("lora-r2-mlp", 3), ("lora-r2", 7)])
def test_method_suffix_sets_the_adapted_layers(study, method, layers):
    cfg, at = study
    scoped = validate(smoke_dict(methods=["fullft", method], levers=None))
    shapes = scoped.adapted_shapes(method)
    assert len(shapes) == layers
    model, _ = load_base(at.model(cfg.models[0]))
    policy = make_policy(model, 2, 32, scoped.scope(method))
    expected = cfg.architecture.num_hidden_layers * sum(2 * (i + o) for i, o in shapes.values())
    assert trainable_parameters(policy) == expected
