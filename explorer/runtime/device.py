"""Where and with how many threads a computation runs: the device a setting names ("auto" decided in
one place), a device checked before a command starts, and a thread that computes with torch's
thread count. torch is imported inside each function, so importing this needs no torch."""
from __future__ import annotations


def match_threads() -> None:
    """Make the calling thread compute with torch's thread count.

    torch.set_num_threads sets OpenMP's count only for the thread that calls it: a thread started
    later (a Streamlit session, a worker) begins at the machine's default, and its products are
    then split differently, so its numbers differ in the last bits from another thread's and it can
    oversubscribe busy cores. Decoding sessions call this first (a few microseconds)."""
    import torch   # here, not at the top: reading a config or parsing arguments needs no torch
    torch.set_num_threads(torch.get_num_threads())


def training_kernels(device) -> None:
    """Choose the kernels a training process runs on `device` (a torch.device). On CUDA, PyTorch may
    give bf16 attention to cuDNN's fused kernels, which plan anew for every batch shape it has not
    seen, and a trainer's batches come in many shapes: on an H200 that made bf16 training of the base
    model 3.6x slower than with the flash / memory-efficient kernels (184k against 671k tokens/s,
    `python -m benchmarks gpu --only training` with and without `--cudnn-attention`). Turned off for
    the process; other devices are left as they are."""
    import torch   # here, not at the top: reading a config or parsing arguments needs no torch

    if device.type == "cuda":
        torch.backends.cuda.enable_cudnn_sdp(False)


def training_optimizer(parameters, lr: float = 0.0, fused: bool = False):
    """The paper's Adam (beta1 0.9, beta2 0.98, eps 1e-9; Vaswani et al. 2017, 5.3), for the trainer and
    the training benchmarks alike. `fused`: Adam's one-kernel update (`python -m benchmarks gpu --fused-adam`
    measures it; not the trainer's until measured to help)."""
    import torch   # here, not at the top: reading a config or parsing arguments needs no torch

    return torch.optim.Adam(parameters, lr=lr, betas=(0.9, 0.98), eps=1e-9, fused=fused or None)


def resolve_device(name: str = "auto"):
    """The torch.device that a device setting names: "auto" is CUDA when this machine has it, else the
    CPU; anything else ("cpu", "cuda:1") as torch reads it. The one place "auto" is decided, for the
    trainer, checkpoint loading, the evaluate command and the app. torch is imported here, not at the
    top, so reading a config never needs it."""
    import torch   # here, not at the top: reading a config or parsing arguments needs no torch

    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


DEVICE_NAMES = "cpu, cuda, cuda:N, mps or auto"


def check_device(name: str) -> str:
    """`name` unchanged when this machine can run on it, else ValueError saying why, in one line.

    For command lines, checked while their arguments are parsed: resolve_device takes any name torch
    parses without asking whether the device is there, so "nonsense" or "cuda" without CUDA would
    end in a traceback from deep inside loading, after the command's other work had begun."""
    import torch   # here, not at the top: reading a config or parsing arguments needs no torch

    if name == "auto":
        return name
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError, ValueError):
        raise ValueError(f"unknown device {name!r}: use {DEVICE_NAMES}") from None
    if device.type == "cpu":
        return name
    if device.type == "cuda":
        if not torch.cuda.is_available():
            why = "this PyTorch is built without CUDA" if torch.version.cuda is None else "no CUDA GPU is visible"
            raise ValueError(f"device {name!r}: {why} on this machine; use cpu or auto")
        count = torch.cuda.device_count()
        if device.index is not None and device.index >= count:
            raise ValueError(f"device {name!r}: this machine has {count} CUDA device(s), cuda:0 to cuda:{count - 1}")
        return name
    if device.type == "mps":
        if not torch.backends.mps.is_available():
            raise ValueError(f"device {name!r}: MPS (Apple GPU) is not available on this machine; use cpu or auto")
        return name
    raise ValueError(f"device {name!r}: not one this program runs on; use {DEVICE_NAMES}")
