"""Shared fixtures of the benchmarks: optional peers, configured once.

The ``bench_*.py`` files are collected when ``benchmarks/`` is passed to
pytest as a directory (the project's ``python_files`` pattern is ``test_*``).
"""
from __future__ import annotations

import pytest


def pytest_collect_file(file_path, parent):
    if (file_path.suffix == ".py" and file_path.name.startswith("bench_")
            and not parent.session.isinitpath(file_path)):
        return pytest.Module.from_parent(parent, path=file_path)
    return None


@pytest.fixture(scope="session")
def jax_x64():
    """JAX with 64-bit floats (the other libraries compute in float64)."""
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    return jax


@pytest.fixture(scope="session")
def torch_1thread():
    """torch restricted to one intra-op thread."""
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    return torch
