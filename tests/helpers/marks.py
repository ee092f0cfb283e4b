"""What a test needs of the machine, as marks: the suite runs everywhere and skips only what this machine cannot do,
saying why (PyG's ``onlyCUDA`` / ``withPackage``).

    @onlyCUDA
    def test_models_on_cuda_match_cpu(): ...

    @withPackage("langchain_core")
    def test_langchain_model(): ...
"""

from __future__ import annotations

import importlib.util

import pytest

from engine.scoring.device import WITH_CUDA

#: how to install an optional package the tests use, by its import name
INSTALL = {
    "langchain_core": "pip install 'isorag[langchain]'",
    "milvus_lite": "pip install milvus-lite",
}

onlyCUDA = pytest.mark.skipif(not WITH_CUDA, reason="needs a CUDA device (torch.cuda.is_available() is False)")
withoutCUDA = pytest.mark.skipif(WITH_CUDA, reason="needs a machine without CUDA (this one has a CUDA device)")


def has_package(name: str) -> bool:
    """Whether ``name`` (a top-level import name) can be imported here, without importing it."""
    return importlib.util.find_spec(name) is not None


def withPackage(*names: str) -> pytest.MarkDecorator:
    """Skip unless every package in ``names`` can be imported; the reason names the missing ones and how to get them."""
    missing = [n for n in names if not has_package(n)]
    hint = "; ".join(INSTALL.get(n, f"pip install {n}") for n in missing)
    return pytest.mark.skipif(bool(missing), reason=f"needs {', '.join(missing)} ({hint})")


__all__ = ["INSTALL", "WITH_CUDA", "has_package", "onlyCUDA", "withPackage", "withoutCUDA"]
