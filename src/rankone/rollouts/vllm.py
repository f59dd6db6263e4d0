"""The vLLM engine: samples with a real `vllm.LLM`, started once per run.

Keeping it the learner, step after step:
- **LoRA**: after every optimizer step the adapter is saved to a fresh folder and
  handed to vLLM as a new `LoRARequest` with a new integer id. Ids are never reused,
  so vLLM's adapter cache cannot serve an old adapter; the base weights are never
  merged, so vLLM runs the same base + (alpha / r) B A as peft.
- **FullFT**: the updated tensors are pushed into the running engine with the
  worker's in-place `reload_weights(weights_iterator=...)` (through
  `LLM.collective_rpc`), then the prefix cache is reset so no KV computed under old
  weights is reused. Not the model's bare `load_weights`: on the CPU backend the
  linear layers are repacked after loading, and `reload_weights` redoes that step.
  Not a restart from a saved checkpoint either: that costs seconds per step.

  The tensors go over one at a time from a generator, each cast to the engine's
  dtype: no clone of the whole `state_dict` (a bf16 run's fp32 masters become bf16
  one tensor at a time).

Under FSDP (several processes, rankone.train.distributed) every process runs an engine of
its own through vLLM's external launcher (data parallel over the torchrun group) and samples
its share of the prompts; a FullFT sync gathers each sharded tensor whole, one at a time.

The engine core runs in this process (`VLLM_ENABLE_V1_MULTIPROCESSING=0`): no
worker to spawn for tiny models, and `collective_rpc` calls the worker directly
(which is also what lets the weights go over as a generator).
Sampling seeds come from torch's global RNG, so a seeded run draws the same samples. Each
prompt gets a seed of its own (vLLM gives a request's n children seed, seed + 1, ...): under
one shared seed two prompts' samples are drawn with the same noise, so they come out correlated
(the same tokens wherever the two distributions agree). A prompt's seed is counted from its
place in the whole step (`first`), so the shares of several engines draw what one engine draws.

Beside the learner on one GPU: vLLM takes `rollout.gpu_memory_utilization` of the
GPU (not its default 0.9; unset, what the learner leaves while it samples:
rankone.device.sampler_share), and runs in sleep mode. On a GPU it captures CUDA graphs and
caches a prompt's KV for its whole group unless the config says otherwise; on the CPU it runs
eagerly without the prefix cache (the CPU studies' bytes). It decodes a whole step's sequences
together (`rollout.max_num_seqs`, unset: the step's, at least 256). Between sampling and the update
the trainer calls `sleep()`: a LoRA run offloads the base weights to host memory and
frees the KV cache (level 1); a FullFT run discards both (level 2), since `sync`
overwrites every weight anyway. `sync` and `sample` wake what they need first. On
the CPU there is no sleep mode (vLLM's is CUDA-only) and the KV cache is sized to the
model (`cache_size`). LoRA adapters still go over from disk: vLLM 0.32's
`LoRARequest` takes a path only.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import torch

from rankone.device import sampler_share
from rankone.models.load import plain_state
from rankone.models.sequences import Samples, completion_mask, decode_completions, encode_prompts

LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)  # vLLM's allowed max_lora_rank values


def cache_size(config, sequences: int = 32, longest: int = 512) -> tuple[int, int]:
    """(max_model_len, KV-cache bytes): the model's context up to `longest` tokens (the engine asks
    for 512 prompt tokens, room for a chat template's system prompt, plus the completion; the tiny
    models' context is 64), and fp32 keys and values for `sequences` such sequences, at least
    64 MiB (fp32 sizes: ample for bf16)."""
    length = min(config.max_position_embeddings, longest)
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    per_token = 2 * config.num_hidden_layers * config.num_key_value_heads * head_dim * 4
    return length, max(64 << 20, per_token * length * sequences)


class VLLMEngine:
    name = "vllm"

    def __init__(
        self,
        model,
        tokenizer,
        temperature: float,
        max_new_tokens: int,
        model_dir: str | Path,
        rank: int | None,
        seed: int,
        dtype: str = "float32",
        options=None,
        processes: int = 1,
    ):
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        from vllm import LLM

        self.tokenizer, self.temperature, self.max_new_tokens = tokenizer, temperature, max_new_tokens
        self.rank, self.dtype = rank, getattr(torch, dtype)
        self.lora_request = None
        self._lora_id, self.version = 0, 0
        self._lora_root = Path(tempfile.mkdtemp(prefix="rankone-lora-"))
        self.cuda, self.asleep = model.device.type == "cuda", False
        lora = {}
        if rank is not None:
            lora = {"enable_lora": True, "max_loras": 1, "max_lora_rank": min(r for r in LORA_RANKS if r >= rank)}
        max_model_len, kv_bytes = cache_size(model.config, longest=512 + max_new_tokens)
        if self.cuda:  # a share of the GPU, the rest left to the learner; asleep during updates
            share = options.gpu_memory_utilization if options else None
            if share is None:  # what the GPU has free now (rankone.train.rl resolves a learner's share)
                share = sampler_share(*torch.cuda.mem_get_info(model.device))
            memory = {"gpu_memory_utilization": share, "enable_sleep_mode": True}
        else:
            memory = {"kv_cache_memory_bytes": kv_bytes}  # sized to the model, not a share of RAM
        if processes > 1:  # one engine in each process of a torchrun group (FSDP), each sampling its own prompts
            memory["distributed_executor_backend"] = "external_launcher"
            memory["data_parallel_size"] = processes
        self.llm = LLM(
            model=str(model_dir),
            tokenizer=str(model_dir),
            dtype=dtype,  # config `dtype` (a bf16 FullFT learner holds fp32 masters)
            seed=seed,
            enforce_eager=chosen(options.enforce_eager if options else None, not self.cuda),
            max_model_len=max_model_len,
            max_num_seqs=(options.max_num_seqs if options else None) or 256,
            enable_prefix_caching=chosen(options.prefix_caching if options else None, self.cuda),
            logprobs_mode="processed_logprobs",
            **memory,
            **lora,
        )
        self.sync(model, 0)

    def sleep(self) -> None:
        """On CUDA, free the engine's GPU memory for the update (see the module docstring)."""
        if self.cuda and not self.asleep:
            self.llm.sleep(level=1 if self.rank is not None else 2)
            self.asleep = True

    def _wake(self, tags: list[str] | None = None) -> None:
        if self.asleep:
            self.llm.wake_up(tags)
            self.asleep = tags is not None  # woken in part: the rest still to come

    def sync(self, model, version: int | None = None) -> None:
        """Hand the learner's current weights to the engine, to serve as learner version `version` (by
        default the next): the version the freshness check compares with the learner's."""
        if self.rank is not None:
            self._lora_id += 1
            path = self._lora_root / f"adapter-{self._lora_id}"
            model.save_pretrained(path)
            from vllm.lora.request import LoRARequest

            self.lora_request = LoRARequest(f"policy-{self._lora_id}", self._lora_id, str(path))
            previous = self._lora_root / f"adapter-{self._lora_id - 2}"
            shutil.rmtree(previous, ignore_errors=True)
        else:
            self._wake(["weights"])
            state = plain_state(model) or model.state_dict()  # a learned temperature's scale in its norm
            weights = ((k, _whole(v).detach().to(self.dtype)) for k, v in state.items())
            self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": weights})
            for _ in weights:  # under FSDP each tensor's gather is collective: every process makes all of them
                pass
            self.llm.reset_prefix_cache()
        self.version = self.version + 1 if version is None else version

    def sample(self, prompts: list[str], n: int, greedy: bool = False, first: int = 0) -> Samples:
        """`first`: the place of prompts[0] in the step's whole batch (under FSDP, this process's share)."""
        from vllm import SamplingParams

        self._wake()
        prompt_ids_B_L, prompt_mask_B_L = encode_prompts(self.tokenizer, prompts)
        seed = int(torch.randint(0, 2**30, ()))
        params = [
            SamplingParams(
                n=n,
                temperature=0.0 if greedy else self.temperature,
                top_k=0,
                top_p=1.0,
                max_tokens=self.max_new_tokens,
                logprobs=0,
                seed=None if greedy else seed + (first + i) * n,
                skip_special_tokens=True,
            )
            for i in range(len(prompts))
        ]
        requests = [
            {"prompt_token_ids": ids[mask.bool()].tolist()} for ids, mask in zip(prompt_ids_B_L, prompt_mask_B_L)
        ]
        outputs = self.llm.generate(requests, params, lora_request=self.lora_request, use_tqdm=False)
        rows, logprobs, reasons = [], [], []
        for request in outputs:
            for out in request.outputs:
                rows.append(list(out.token_ids))
                logprobs.append([lp[token].logprob for token, lp in zip(out.token_ids, out.logprobs)])
                reasons.append("stop" if out.finish_reason == "stop" else "length")
        width = max(len(r) for r in rows)
        completion_B_C = torch.full((len(rows), width), self.tokenizer.pad_token_id, dtype=torch.long)
        logprobs_B_C = torch.zeros((len(rows), width))
        for i, (row, lp) in enumerate(zip(rows, logprobs)):
            completion_B_C[i, : len(row)] = torch.tensor(row, dtype=torch.long)
            logprobs_B_C[i, : len(lp)] = torch.tensor(lp)
        mask_B_C = completion_mask(completion_B_C, self.tokenizer.eos_token_id)
        texts = decode_completions(self.tokenizer, rows)
        return Samples(
            prompt_ids_B_L.repeat_interleave(n, 0),
            prompt_mask_B_L.repeat_interleave(n, 0),
            completion_B_C,
            mask_B_C,
            logprobs_B_C * mask_B_C,
            texts,
            reasons,
        )

    def close(self) -> None:
        shutil.rmtree(self._lora_root, ignore_errors=True)
        del self.llm


def chosen(setting: bool | None, default: bool) -> bool:
    """A rollout switch as set, or unset: `default` (each a GPU's choice on CUDA, the CPU studies' on the CPU)."""
    return default if setting is None else setting


def _whole(tensor: torch.Tensor) -> torch.Tensor:
    """The unsharded tensor: an FSDP shard (DTensor) gathered from every process (collective), else itself."""
    full = getattr(tensor, "full_tensor", None)
    return full() if full else tensor


def make(model, tokenizer, temperature, max_new_tokens, model_dir, rank, seed, dtype, options, processes):
    """The registry's factory (rankone.engines)."""
    return VLLMEngine(model, tokenizer, temperature, max_new_tokens, model_dir, rank, seed, dtype, options, processes)
