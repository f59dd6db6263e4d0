"""A character-level tokenizer for the synthetic tasks, as a real fast tokenizer.

Saved with `save_pretrained`, it loads with `AutoTokenizer` (and in vLLM). Every
prompt starts with <bos>; completions end with <eos>.
"""

from __future__ import annotations

import string

ALPHABET = string.digits + "+-=:" + string.ascii_lowercase + " "
SPECIALS = ("<pad>", "<bos>", "<eos>")


def build_tokenizer():
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate([*SPECIALS, *ALPHABET])}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<pad>"))
    core.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    core.decoder = decoders.Fuse()
    core.post_processor = processors.TemplateProcessing(single="<bos> $A", special_tokens=[("<bos>", vocab["<bos>"])])
    return PreTrainedTokenizerFast(
        tokenizer_object=core, bos_token="<bos>", eos_token="<eos>", pad_token="<pad>", padding_side="left"
    )
