"""Loading saved models and wrapping them for training."""

from __future__ import annotations

from pathlib import Path

import torch


def load_tokenizer(model_dir: str | Path):
    """The tokenizer saved beside the base model, left-padding prompts for generation."""
    from transformers import AutoTokenizer

    model_dir = Path(model_dir)
    if not (model_dir / "config.json").is_file():
        raise FileNotFoundError(f"no model at {str(model_dir)!r} (missing config.json); run the models stage first")
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.padding_side = "left"
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


def make_policy(model, method: str, lora, scope: str):
    """FullFT: every parameter trains. LoRA and TinyLoRA: a peft adapter, base frozen.

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
    from peft import LoraConfig, TinyLoraConfig, get_peft_model

    if kind == "tinylora":
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
    """A trained policy for evaluation, on `device`: base + adapter (LoRA, TinyLoRA) or the full weights (FullFT)."""
    from transformers import AutoModelForCausalLM

    if weights_dir is not None and method == "fullft":  # FullFT saved the whole model: no base needed
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
