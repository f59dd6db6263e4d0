"""Loading saved models and wrapping them for training."""

from __future__ import annotations

import functools

from pathlib import Path

import torch


def load_tokenizer(model_dir: str | Path):
    """The tokenizer saved beside the base model, left-padding prompts for generation."""
    from transformers import AutoTokenizer

    model_dir = Path(model_dir)
    if not (model_dir / "config.json").is_file():
        raise FileNotFoundError(f"no model at {str(model_dir)!r} (missing config.json); run the models stage first")
    tokenizer = with_pad_token(AutoTokenizer.from_pretrained(model_dir))
    tokenizer.padding_side = "left"
    return tokenizer


def with_pad_token(tokenizer):
    """`tokenizer`, padding with <eos> where it has no pad token (Llama-3.x base tokenizers): prompts are
    padded in a batch and finished rows get the pad id, always masked out, so <eos> serves (the
    convention of TRL and vLLM's examples)."""
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_base(model_dir: str | Path, dtype: str = "float32", device: str | torch.device = "cpu"):
    """The base model and tokenizer saved by the models stage (or any HF checkpoint folder), in `dtype`
    on `device`."""
    from transformers import AutoModelForCausalLM

    tokenizer = load_tokenizer(model_dir)
    return AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype).to(device), tokenizer


def target_modules(scope: str) -> list[str] | str:
    from rankone.config import SCOPE_LAYERS

    return list(SCOPE_LAYERS[scope]) if scope in SCOPE_LAYERS else "all-linear"


class LogitScale(torch.nn.Module):
    """A parametrization that multiplies a tensor by exp(log_scale), one trained scalar (0 at start:
    the base model exactly)."""

    def __init__(self):
        super().__init__()
        self.log_scale = torch.nn.Parameter(torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.log_scale.exp().to(x.dtype)


def learned_temperature(model):
    """The base model, frozen, with one trained scalar s that scales its logits by exp(s) (sampling it
    at temperature T is sampling the base at T * exp(-s)). The scale sits on the final norm's weight
    (and bias), whose output feeds the output layer alone; the output layer itself may be tied to the
    input embeddings."""
    from torch.nn.utils import parametrize

    for p in model.parameters():
        p.requires_grad_(False)
    norm = getattr(model.get_decoder(), "norm", None)
    if norm is None or getattr(norm, "weight", None) is None:
        raise ValueError(f"method temperature: {type(model).__name__} has no final norm with a weight to scale")
    scale = LogitScale()
    for name in ("weight", "bias"):
        if getattr(norm, name, None) is not None:
            parametrize.register_parametrization(norm, name, scale)
    return model


def bf16_compute(model):
    """Every fp32 weight outside a linear layer (embeddings, norms) computed as its bf16 copy, made at
    each call (forward hooks, registered once; the cast is differentiable, so gradients reach the fp32
    masters in fp32); autocast already computes the linear layers in bf16. Under autocast alone fp32
    masters keep the embeddings, the residual stream and the norms in fp32, while a bf16 base (LoRA's)
    and the samplers (vLLM, a bf16 checkpoint) compute them in bf16: FullFT would be further off-policy
    than LoRA. For FullFT on one process (FSDP's mixed-precision policy casts every weight itself)."""
    for module in model.modules():
        if isinstance(module, torch.nn.Linear) or getattr(module, "_rankone_bf16", False):
            continue
        names = [n for n, p in module.named_parameters(recurse=False) if p.dtype == torch.float32]
        if names:
            module.register_forward_pre_hook(functools.partial(_bf16_in, names))
            module.register_forward_hook(_masters_back, always_call=True)
            module._rankone_bf16 = True
    return model


def _bf16_in(names: list[str], module, args) -> None:
    module._rankone_masters = {n: module._parameters[n] for n in names}
    for n in names:
        module._parameters[n] = module._rankone_masters[n].to(torch.bfloat16)


def _masters_back(module, args, output) -> None:
    module._parameters.update(module.__dict__.pop("_rankone_masters", {}))


def plain_state(model) -> dict[str, torch.Tensor] | None:
    """`model.state_dict()` with every parametrized tensor saved as its value (a learned temperature's
    scaled norm) under its plain name, so that the checkpoint loads as the base architecture; None
    (save_pretrained's own state dict) for a model with no parametrization."""
    from torch.nn.utils import parametrize

    if not any(parametrize.is_parametrized(m) for m in model.modules()):
        return None
    state = model.state_dict()
    for prefix, module in model.named_modules():
        at = f"{prefix}." if prefix else ""
        for name in getattr(module, "parametrizations", {}):
            for stale in [k for k in state if k.startswith(f"{at}parametrizations.{name}.")]:
                del state[stale]
            state[f"{at}{name}"] = getattr(module, name).detach()
    return state


def make_policy(model, method: str, lora, scope: str):
    """FullFT: every parameter trains. LoRA and TinyLoRA: a peft adapter, base frozen. Temperature:
    one scalar on the frozen base (learned_temperature).

    LoRA: peft's default init is the one the original runs used: A ~ kaiming-uniform
    (bound 1/sqrt(d_in)), B = 0, scale alpha / r. TinyLoRA (arXiv 2602.04118): the update
    of each weight lives in its frozen top-`lora.tinylora_r` SVD directions, mixed by
    R = sum_i v_i P_i (fixed random P_i, v = 0 at start); layers share v as
    `lora.tinylora_weight_tying` says.
    """
    from rankone.config import lora_rank, method_kind, tinylora_size

    kind = method_kind(method)
    if kind == "fullft":
        for p in model.parameters():
            p.requires_grad_(True)
        return model
    if kind == "temperature":
        return learned_temperature(model)
    from peft import LoraConfig, get_peft_model

    if kind == "tinylora":
        from peft import TinyLoraConfig  # only here: a peft older than TinyLoRA still runs LoRA

        config = TinyLoraConfig(
            r=lora.tinylora_r,
            u=tinylora_size(method),
            weight_tying=lora.tinylora_weight_tying,
            target_modules=target_modules(scope),
        )
    else:
        config = LoraConfig(
            r=lora_rank(method),
            lora_alpha=lora.alpha,
            lora_dropout=0.0,
            target_modules=target_modules(scope),
            bias="none",
        )
    return get_peft_model(model, config)


def load_policy(
    model_dir: str | Path,
    weights_dir: str | Path | None,
    method: str,
    dtype: str = "float32",
    device: str | torch.device = "cpu",
):
    """A trained policy for evaluation, on `device`: base + adapter (LoRA, TinyLoRA) or the full weights
    (FullFT, and the learned temperature, saved with its scale in the norm)."""
    from transformers import AutoModelForCausalLM

    from rankone.config import method_kind

    if weights_dir is not None and method_kind(method) in ("fullft", "temperature"):  # the whole model: no base
        model = AutoModelForCausalLM.from_pretrained(weights_dir, dtype=dtype).to(device)
        tokenizer = load_tokenizer(model_dir)
    else:
        model, tokenizer = load_base(model_dir, dtype, device)
        if weights_dir is not None:
            from peft import PeftModel

            model = PeftModel.from_pretrained(model, weights_dir).to(device)
    model.eval()
    return model, tokenizer


def trainable_parameters(model) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
