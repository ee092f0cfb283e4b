"""Where the scorers run: CUDA when present, else CPU."""

from __future__ import annotations

import torch

from engine._errors import ConfigError

#: Computed once at import: whether this process can use a CUDA device.
WITH_CUDA: bool = torch.cuda.is_available()


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """Turn ``"auto"``, ``"cpu"``, ``"cuda"``, ``"cuda:1"`` or a :class:`torch.device` into a device.

    ``"auto"`` picks ``cuda`` when :data:`WITH_CUDA`, else ``cpu``. Asking for CUDA on a machine
    without it is a :class:`~engine.ConfigError` (rather than a late failure at the first tensor).
    """
    if isinstance(device, torch.device):
        dev = device
    elif isinstance(device, str):
        name = device.strip().lower()
        if name == "auto":
            return torch.device("cuda" if WITH_CUDA else "cpu")
        try:
            dev = torch.device(name)
        except RuntimeError as e:
            raise ConfigError(f"unknown device {device!r} (use 'auto', 'cpu', 'cuda' or 'cuda:N')") from e
    else:
        raise ConfigError(f"device must be a str or torch.device, not {type(device).__name__}")
    if dev.type == "cuda":
        if not WITH_CUDA:
            raise ConfigError(f"device {str(dev)!r} requested but CUDA is not available here")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ConfigError(f"device {str(dev)!r} requested but only {torch.cuda.device_count()} CUDA device(s) "
                              "exist")
    return dev
