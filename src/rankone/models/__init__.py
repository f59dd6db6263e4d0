"""Base models, looked up by name.

A preset builds a real transformers model from its config class (LlamaConfig,
Qwen3Config). Real checkpoints are one more entry of the same registry
(`HubPreset`), loaded with `from_pretrained` at a pinned revision.
"""

from __future__ import annotations

from dataclasses import dataclass

from rankone.models.tokenizer import build_tokenizer


@dataclass(frozen=True)
class TinyPreset:
    """A model built from config with a real transformers class, warm-started by `models.build`."""

    config_class: str  # attribute of transformers

    def make_config(self, arch, vocab_size: int, bos: int, eos: int, pad: int):
        import transformers

        cls = getattr(transformers, self.config_class)
        return cls(
            vocab_size=vocab_size,
            hidden_size=arch.hidden_size,
            intermediate_size=arch.intermediate_size,
            num_hidden_layers=arch.num_hidden_layers,
            num_attention_heads=arch.num_attention_heads,
            num_key_value_heads=arch.num_key_value_heads,
            head_dim=arch.head_dim,
            max_position_embeddings=64,
            tie_word_embeddings=False,
            bos_token_id=bos,
            eos_token_id=eos,
            pad_token_id=pad,
        )


@dataclass(frozen=True)
class HubPreset:
    """A published checkpoint (needs the internet once; then cached by huggingface_hub)."""

    repo_id: str
    revision: str


@dataclass(frozen=True)
class LocalPreset:
    """A transformers checkpoint already on disk (config `local_models`)."""

    path: str


def preset(name: str, local_models: dict[str, str]) -> TinyPreset | HubPreset | LocalPreset:
    return LocalPreset(local_models[name]) if name in local_models else PRESETS[name]


PRESETS: dict[str, TinyPreset | HubPreset] = {
    "llama-tiny": TinyPreset("LlamaConfig"),
    "qwen3-tiny": TinyPreset("Qwen3Config"),
    "qwen3-0.6b": HubPreset("Qwen/Qwen3-0.6B-Base", "main"),
    "llama-3.2-1b": HubPreset("meta-llama/Llama-3.2-1B", "main"),
}

__all__ = ["PRESETS", "TinyPreset", "HubPreset", "LocalPreset", "preset", "build_tokenizer"]
