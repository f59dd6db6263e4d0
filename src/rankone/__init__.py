"""rankone: LoRA rank vs full fine-tuning under RL and SFT, as a reproducible workflow."""

__version__ = "0.1.0"
