"""Which process this is, for the front ends to hand the Rust core: the PyTorch
DataLoader worker process and the `torch.distributed` process group it runs in.
torch is never imported here: a process that uses either has it loaded."""

import sys


def worker():
    """(worker_count, worker_index, base_seed) of the PyTorch DataLoader worker process
    this runs in (base_seed: the seed the DataLoader drew for this iteration and gave
    every worker, `seed - id` of torch's WorkerInfo), (1, 0, None) outside one."""
    torch = sys.modules.get("torch")
    if torch is None:
        return 1, 0, None
    info = torch.utils.data.get_worker_info()
    if info is None:
        return 1, 0, None
    return info.num_workers, info.id, (info.seed - info.id) % (1 << 64)


def process_group():
    """(world_size, rank) of the initialised `torch.distributed` process group this
    process is in, None outside one."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    dist = torch.distributed
    if not (dist.is_available() and dist.is_initialized()):
        return None
    return dist.get_world_size(), dist.get_rank()
