"""FullFT across several devices: PyTorch FSDP (`fully_shard`) under torchrun.

A train job given N > 1 devices (its `gpu` resource, RANKONE_GPUS, or `rankone train
--processes N`) is relaunched through torchrun, one process per device (`launch`). Each
process joins the group (`Group.join`: NCCL on CUDA, gloo on the CPU) and shards the FullFT
policy, each decoder layer and then the root, so a process holds 1/N of the fp32 weights,
gradients and Adam state.

How a step is split:
- Rollouts: every process samples the *whole* batch with the same seed through the sharded
  module (the hf engine; each forward all-gathers one layer at a time), so all hold the same
  samples with no broadcast, and the samples are those one process draws. Sampling is
  replicated, not divided: the update is what FSDP shares. (vLLM under several processes
  is not built.)
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

import torch

from rankone.io import InputError, log


def launched() -> bool:
    """Whether this process was started by torchrun (one of a group)."""
    return "TORCHELASTIC_RUN_ID" in os.environ or ("LOCAL_RANK" in os.environ and "WORLD_SIZE" in os.environ)


def launch(processes: int, argv: list[str]) -> int:
    """Run `rankone <argv>` as `processes` processes under torchrun's launcher (the elastic agent the
    `torchrun --standalone` command starts, here called as a library: torchrun's own argument parser
    would take `--run` for its `--run-path`), and wait for them. The caller keeps its claimed GPUs
    (rankone.gpus) while they run; they claim none themselves. Returns the exit status."""
    import uuid

    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    os.environ["RANKONE_GPUS"] = "0"
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    config = LaunchConfig(min_nodes=1, max_nodes=1, nproc_per_node=processes, rdzv_backend="c10d",
                          rdzv_endpoint="localhost:0", run_id=str(uuid.uuid4()), max_restarts=0)
    log.info("launching %d processes: rankone %s", processes, " ".join(argv))
    try:
        elastic_launch(config, sys.executable)("-m", "rankone", *argv)
    except ChildFailedError as err:
        log.error("%s", err.format_msg())
        return 1
    return 0


def follow_launcher() -> None:
    """In a process torchrun started: die with the launcher. torchrun starts each process in a session
    of its own, so a job killed as Snakemake and SLURM kill one (its process group) would leave them
    training, and writing, on their own; PR_SET_PDEATHSIG has the kernel SIGKILL this one when its
    parent (the launcher) dies, however it dies."""
    import ctypes
    import signal

    if ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL) != 0:  # 1 = PR_SET_PDEATHSIG (Linux)
        log.warning("could not tie this process to its launcher (prctl: errno %d)", ctypes.get_errno())
    if os.getppid() == 1:  # the launcher died before the tie was made
        os._exit(1)


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
    def join(cls, device: torch.device) -> Group:
        """One process: the device as given. Under torchrun: join the group (NCCL on CUDA, gloo on the
        CPU); on CUDA each process takes the GPU of its local rank."""
        if not launched() or int(os.environ["WORLD_SIZE"]) == 1:
            return cls(device=device)
        import torch.distributed as dist

        if device.type == "cuda":
            device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
            torch.cuda.set_device(device)
        if not dist.is_initialized():
            dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
        return cls(dist.get_rank(), dist.get_world_size(), device)

    def shard(self, policy: torch.nn.Module) -> torch.nn.Module:
        """FSDP2 over each decoder layer, then the root (embeddings, final norm, head), with gradients
        summed across processes. One process: the policy unchanged."""
        if self.size == 1:
            return policy
        from torch.distributed.fsdp import FSDPModule, fully_shard

        layers = policy.get_decoder().layers
        for layer in layers:
            fully_shard(layer)
        fully_shard(policy)
        for module in policy.modules():
            if isinstance(module, FSDPModule):
                module.set_gradient_divide_factor(1.0)
                module.set_force_sum_reduction_for_comms(True)
        return policy

    def rows(self, n: int, what: str) -> slice:
        """This process's contiguous share of `n` rows; `n` must divide evenly."""
        if n % self.size:
            raise InputError(f"{n} {what} do not divide evenly over {self.size} processes; "
                             f"make them a multiple of {self.size}")
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

        full = get_optimizer_state_dict(policy, optimizer,
                                        options=StateDictOptions(full_state_dict=True, cpu_offload=True))
        if not self.main:
            return {}
        names = [n for group in full["param_groups"] for n in group["params"]]
        index = {n: i for i, n in enumerate(names)}
        return {"state": {index[n]: slots for n, slots in full["state"].items()},
                "param_groups": _renumbered(full["param_groups"], list(range(len(names))))}

    def load(self, policy, optimizer, params: dict[str, torch.Tensor], optim: dict) -> None:
        """Apply unsharded trainable parameters and a one-process optimizer state dict (every
        process has read them; each keeps its shard)."""
        if self.size == 1:
            policy.load_state_dict(params, strict=False)
            optimizer.load_state_dict(optim)
            return
        from torch.distributed.checkpoint.state_dict import (
            StateDictOptions, set_model_state_dict, set_optimizer_state_dict)

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
            policy.save_pretrained(folder)
            return
        state = self.model_state(policy)
        if self.main:
            policy.save_pretrained(folder, state_dict=state)
        self.barrier()

    def close(self) -> None:
        if self.size > 1:
            import torch.distributed as dist

            dist.destroy_process_group()


def _renumbered(groups: list[dict], ids: list) -> list[dict]:
    """Optimizer param_groups with each group's parameters given as the next of `ids` (indices for
    torch's one-process form, names for torch.distributed.checkpoint's), in order."""
    out, start = [], 0
    for group in groups:
        out.append({**group, "params": ids[start : start + len(group["params"])]})
        start += len(group["params"])
    return out
