"""FullFT across several devices: PyTorch FSDP (`fully_shard`) under torchrun.

A train job given N > 1 devices (its `gpu` resource, RANKONE_GPUS, or `rankone train
--processes N`) is relaunched through torchrun, one process per device (`launch`). Each
process joins the group (`Group.join`: NCCL on CUDA, gloo on the CPU) and shards the FullFT
policy, each decoder layer and then the root, so a process holds 1/N of the fp32 weights,
gradients and Adam state.

How a step is split:
- Rollouts (`GroupEngine`): with the hf engine, process 0's engine, an unsharded replica synced
  after every update, samples the whole batch with the step's seed (the samples one process
  draws) and broadcasts them; with vLLM, each process's engine samples its share of the prompts
  and the shares are gathered. Either way every process holds the whole batch.
- Update: each process takes its contiguous share of the rows (sequences, or SFT examples;
  the batch must divide evenly, so every process makes the same collective calls) and
  normalises by the whole step's count, and FSDP sums the gradients across processes
  (reduce-scatter with SUM: gloo has no AVG/PREMUL_SUM, and the loss is already the
  whole batch's mean). Log-probs and losses are gathered, so every process logs the same
  metrics and takes the same decisions (freshness, divergence).
- Outputs: full (unsharded) state dicts are gathered to every process for checkpoints and
  weights; process 0 alone writes files (metrics, checkpoints, weights, run.json), and the
  checkpoint format is the one-process format, so either can read the other's.

With one process, every method here is the plain single-device operation.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from datetime import timedelta

import torch

from rankone.device import resolve
from rankone.io import InputError, log, seed_everything
from rankone.launcher import launched
from rankone.models.load import plain_state

# How long a collective may wait (NCCL's default is 10 minutes): with the hf engine process 0
# samples a whole step alone while the others wait in its broadcast, which at 8B parameters and
# long completions can take longer than that.
COLLECTIVE_TIMEOUT = timedelta(hours=1)


def launch(processes: int, argv: list[str]) -> int:
    """Run `rankone <argv>` as `processes` processes under torchrun's launcher (the elastic agent the
    `torchrun --standalone` command starts, here called as a library: torchrun's own argument parser
    would take `--run` for its `--run-path`), and wait for them. The caller keeps its claimed GPUs
    (rankone.gpus) while they run; they claim none themselves. Returns the exit status."""
    import uuid

    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    os.environ["RANKONE_GPUS"] = "0"
    os.environ["RANKONE_PROCESSES"] = str(processes)  # what each process checks its group against
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    config = LaunchConfig(
        min_nodes=1,
        max_nodes=1,
        nproc_per_node=processes,
        rdzv_backend="c10d",
        rdzv_endpoint="localhost:0",
        run_id=str(uuid.uuid4()),
        max_restarts=0,
    )
    log.info("launching %d processes: rankone %s", processes, " ".join(argv))
    try:
        elastic_launch(config, sys.executable)("-m", "rankone", *argv)
    except ChildFailedError as err:
        log.error("%s", err.format_msg())
        return 1
    return 0


def check_world(devices: int | None) -> None:
    """In a process torchrun started: the group must be as large as the job's devices (`devices`:
    --processes, the launcher's count or the job's `gpu` resource; None when nothing says), and on
    CUDA each process needs a GPU of its own."""
    world, local = int(os.environ["WORLD_SIZE"]), int(os.environ.get("LOCAL_WORLD_SIZE", os.environ["WORLD_SIZE"]))
    if devices is not None and world != devices:
        raise InputError(
            f"torchrun started {world} processes, but this job has {devices} device(s) (--processes, "
            "or the train rule's gpu resource as RANKONE_GPUS); start one process per device"
        )
    if torch.cuda.is_available() and local > torch.cuda.device_count():
        raise InputError(
            f"torchrun started {local} processes on this node, but it sees {torch.cuda.device_count()} "
            f"GPU(s) (CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')})"
        )


@dataclass
class Group:
    """This process's place in the group of processes training one run."""

    rank: int = 0
    size: int = 1
    device: torch.device = torch.device("cpu")

    @property
    def main(self) -> bool:
        return self.rank == 0

    @classmethod
    def join(cls, device: str, seed: int, threads: int) -> Group:
        """This process, set up to train a run: its RNGs seeded and its thread count fixed (every process
        of a run alike), on config `device` (rankone.device.resolve). One process: that device. Under
        torchrun: join the group (NCCL on CUDA, gloo on the CPU); on CUDA each process takes the GPU of
        its local rank."""
        seed_everything(seed, threads)
        device = resolve(device)
        if not launched() or int(os.environ["WORLD_SIZE"]) == 1:
            return cls(device=device)
        import torch.distributed as dist

        if device.type == "cuda":
            device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
            torch.cuda.set_device(device)
        if not dist.is_initialized():
            dist.init_process_group("nccl" if device.type == "cuda" else "gloo", timeout=COLLECTIVE_TIMEOUT)
        return cls(dist.get_rank(), dist.get_world_size(), device)

    def shard(self, policy: torch.nn.Module, dtype: str = "float32") -> torch.nn.Module:
        """FSDP2 over each decoder layer, then the root (embeddings, final norm, head), with gradients
        summed across processes. A policy loaded on the host (`Learner.start` loads it there) goes to
        this process's device one layer at a time, as each is sharded: no process ever holds the whole
        fp32 model on its GPU. With `dtype` bfloat16 the weights are gathered and computed in bf16
        (every module, as the sampler computes; the fp32 shards stay the masters) and the gradients
        reduced in fp32. One process: the policy unchanged."""
        if self.size == 1:
            return policy
        from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard

        mixed = MixedPrecisionPolicy(
            param_dtype=torch.bfloat16 if dtype == "bfloat16" else None, reduce_dtype=torch.float32
        )
        layers = policy.get_decoder().layers
        for layer in layers:
            fully_shard(layer, mp_policy=mixed)
        fully_shard(policy, mp_policy=mixed)
        for module in policy.modules():
            if isinstance(module, FSDPModule):
                module.set_gradient_divide_factor(1.0)
                module.set_force_sum_reduction_for_comms(True)
        return policy

    def rows(self, n: int, what: str) -> slice:
        """This process's contiguous share of `n` rows; `n` must divide evenly."""
        if n % self.size:
            raise InputError(
                f"{n} {what} do not divide evenly over {self.size} processes; make them a multiple of {self.size}"
            )
        share = n // self.size
        return slice(self.rank * share, (self.rank + 1) * share)

    def gather_rows(self, part_b_C: torch.Tensor) -> torch.Tensor:
        """Every process's equal share of rows, in rank order."""
        if self.size == 1:
            return part_b_C
        import torch.distributed as dist

        parts = [torch.empty_like(part_b_C) for _ in range(self.size)]
        dist.all_gather(parts, part_b_C.contiguous())
        return torch.cat(parts)

    def sum(self, value: torch.Tensor) -> torch.Tensor:
        """The sum over processes of a tensor each holds (the same tensor with one process)."""
        if self.size == 1:
            return value
        import torch.distributed as dist

        value = value.clone()
        dist.all_reduce(value)
        return value

    def broadcast(self, obj):
        """Process 0's `obj` (any picklable value), on every process."""
        if self.size == 1:
            return obj
        import torch.distributed as dist

        box = [obj]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def gather(self, obj) -> list:
        """Every process's `obj`, in rank order, on every process."""
        if self.size == 1:
            return [obj]
        import torch.distributed as dist

        out = [None] * self.size
        dist.all_gather_object(out, obj)
        return out

    def barrier(self) -> None:
        if self.size > 1:
            import torch.distributed as dist

            dist.barrier()

    def scalar(self, value) -> float:
        """A float of a gradient norm (with FSDP a replicated DTensor)."""
        full = getattr(value, "full_tensor", None)
        return float((full() if full else value).item())

    def model_state(self, policy, names: set[str] | None = None) -> dict[str, torch.Tensor]:
        """The unsharded parameters named `names` (all when None): on process 0, in host memory
        (the gather is collective); empty on the others."""
        if self.size == 1:
            state = policy.state_dict()
        else:
            from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

            state = get_model_state_dict(policy, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
        return {k: v.contiguous() for k, v in state.items() if names is None or k in names}

    def optimizer_state(self, policy, optimizer) -> dict:
        """The optimizer's state dict in torch's one-process form (parameters by index, in
        param_groups order), unsharded: on process 0 (collective, as model_state); empty on the others."""
        if self.size == 1:
            return optimizer.state_dict()
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

        full = get_optimizer_state_dict(
            policy, optimizer, options=StateDictOptions(full_state_dict=True, cpu_offload=True)
        )
        if not self.main:
            return {}
        names = [n for group in full["param_groups"] for n in group["params"]]
        index = {n: i for i, n in enumerate(names)}
        return {
            "state": {index[n]: slots for n, slots in full["state"].items()},
            "param_groups": _renumbered(full["param_groups"], list(range(len(names)))),
        }

    def load(self, policy, optimizer, params: dict[str, torch.Tensor], optim: dict) -> None:
        """Apply unsharded trainable parameters and a one-process optimizer state dict (every
        process has read them; each keeps its shard)."""
        if self.size == 1:
            policy.load_state_dict(params, strict=False)
            optimizer.load_state_dict(optim)
            return
        from torch.distributed.checkpoint.state_dict import (
            StateDictOptions,
            set_model_state_dict,
            set_optimizer_state_dict,
        )

        options = StateDictOptions(full_state_dict=True, strict=False)
        names = [n for n, p in policy.named_parameters() if p.requires_grad]
        set_model_state_dict(policy, dict(params), options=options)
        state = {names[int(i)]: slots for i, slots in optim["state"].items()}
        groups = _renumbered(optim["param_groups"], names)
        set_optimizer_state_dict(policy, optimizer, {"state": state, "param_groups": groups}, options=options)

    def save_pretrained(self, policy, folder) -> None:
        """`policy.save_pretrained(folder)`, the weights unsharded; with several processes every one
        calls it (the gather is collective) and process 0 writes."""
        if self.size == 1:
            policy.save_pretrained(folder, state_dict=plain_state(policy))
            return
        state = self.model_state(policy)
        if self.main:
            policy.save_pretrained(folder, state_dict=state)
        self.barrier()


def _renumbered(groups: list[dict], ids: list) -> list[dict]:
    """Optimizer param_groups with each group's parameters given as the next of `ids` (indices for
    torch's one-process form, names for torch.distributed.checkpoint's), in order."""
    out, start = [], 0
    for group in groups:
        out.append({**group, "params": ids[start : start + len(group["params"])]})
        start += len(group["params"])
    return out


class GroupEngine:
    """The rollout engine of a run trained by several processes, behind the engine interface
    (rankone.rollouts): every process gets the whole batch's samples, in prompt-major order.

    - hf: process 0's engine. A forward of the sharded policy is collective (it all-gathers one
      layer at a time), so one process cannot sample through it alone, and all of them sampling the
      same batch through it repeats the work N times. Process 0 instead keeps an unsharded replica,
      loaded with the weights gathered after every update (`sync`), samples the whole batch with the
      step's seed (the draws one process makes, from the same weights), and broadcasts the samples;
      the others wait. It costs process 0 a full fp32 copy of the weights (rankone.plan counts it).
    - vllm: each process's own engine (vLLM's external launcher: one engine per process of the
      torchrun group, data parallel) samples its share of the prompts, with the step's seed, and every
      process gathers the shares in rank order. `sync` hands each engine the full weights, gathered
      one tensor at a time (rankone.rollouts.vllm).
    """

    def __init__(self, group: Group, name: str, policy, make, replica, pad_id: int):
        """`make(model)`: the engine over a module; `replica()`: an unsharded copy of the base policy."""
        self.group, self.name, self.pad_id = group, name, pad_id
        self.version = 0
        self.replica = replica() if name == "hf" and group.main else None
        self.engine = make(self.replica if name == "hf" else policy) if group.main or name != "hf" else None
        if name == "hf":
            self.sync(policy, 0)

    def sync(self, policy, version: int | None = None) -> None:
        version = self.version + 1 if version is None else version
        if self.name != "hf":
            self.engine.sync(policy, version)
        else:
            state = self.group.model_state(policy)  # collective; the weights on process 0
            if self.group.main:
                self.replica.load_state_dict(state)
        self.version = version

    def sample(self, prompts: list[str], n: int, greedy: bool = False):
        from rankone.models.sequences import Samples

        if self.name == "hf":
            return self.group.broadcast(self.engine.sample(prompts, n, greedy).to("cpu") if self.group.main else None)
        share = self.group.rows(len(prompts), "prompts a step (rl.prompts_per_step)")
        mine = self.engine.sample(prompts[share], n, greedy, first=share.start).to("cpu")
        return Samples.cat(self.group.gather(mine), self.pad_id)

    def sleep(self) -> None:
        if self.engine is not None:
            self.engine.sleep()

    def close(self) -> None:
        """Last: closing a vLLM engine started by the external launcher destroys the process group."""
        if self.engine is not None:
            self.engine.close()
