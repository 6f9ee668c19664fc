"""How flashmma_torch's extension is compiled: one list of sources and flags, and the version,
read by setup.py (ahead of time) and by the just-in-time loader
(_extension.py). Imports nothing but the standard library, so that setup.py can load it before the
package exists."""

from __future__ import annotations

import os
import re
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
EXAMPLE_DIR = PACKAGE_DIR.parent  # examples/pytorch
CSRC_DIR = EXAMPLE_DIR / "csrc"

# The binding, then flashmma's default kernels split over four units that compile in parallel.
SOURCES = [
    "flashmma_torch.cpp",
    "forward_fp16_lower.cu",
    "forward_fp16_upper.cu",
    "forward_bf16_lower.cu",
    "forward_bf16_upper.cu",
]

# No -std for the host compiler: the binding includes PyTorch's headers, and PyTorch picks the
# standard they need (C++17 or later). The .cu units include no PyTorch header: C++17 suits them.
CXX_FLAGS = ["-O3"]

NVCC_FLAGS = [
    "-O3",
    "-std=c++17",
    "--expt-relaxed-constexpr",
    # PyTorch's build adds -D__CUDA_NO_HALF_OPERATORS__ and friends; flashmma's headers are
    # written against the plain CUDA headers, so undo them.
    "-U__CUDA_NO_HALF_OPERATORS__",
    "-U__CUDA_NO_HALF_CONVERSIONS__",
    "-U__CUDA_NO_HALF2_OPERATORS__",
    "-U__CUDA_NO_BFLOAT16_CONVERSIONS__",
]

# Ahead-of-time builds target Ampere (sm_80, runs on every later GPU) and Hopper (sm_90a).
# Override with FLASHMMA_TORCH_ARCH_LIST, in TORCH_CUDA_ARCH_LIST's syntax ("8.0;9.0a").
DEFAULT_ARCH_LIST = "8.0;9.0a"


def include_dir() -> Path:
    """flashmma's include/ folder: FLASHMMA_INCLUDE_DIR, else the repository's."""
    return Path(os.environ.get("FLASHMMA_INCLUDE_DIR", EXAMPLE_DIR.parent.parent / "include"))


def source_paths(relative_to: Path | None = None) -> list[str]:
    paths = [CSRC_DIR / name for name in SOURCES]
    if relative_to is not None:
        return [os.path.relpath(path, relative_to) for path in paths]
    return [str(path) for path in paths]


def gencode_flags(arch_list: str) -> list[str]:
    """'8.0;9.0a' -> ['-gencode=arch=compute_80,code=sm_80', ...]."""
    flags = []
    for arch in arch_list.replace(" ", ";").split(";"):
        if not arch:
            continue
        number = arch.replace(".", "").replace("+PTX", "")
        flags.append(f"-gencode=arch=compute_{number},code=sm_{number}")
        if arch.endswith("+PTX"):
            flags.append(f"-gencode=arch=compute_{number},code=compute_{number}")
    return flags


def ahead_of_time_arch_list() -> str:
    return os.environ.get("FLASHMMA_TORCH_ARCH_LIST", DEFAULT_ARCH_LIST)


def version_header() -> Path:
    """include/flashmma/version.hpp, the one source of flashmma's version."""
    return include_dir() / "flashmma" / "version.hpp"


def read_version(header: Path | None = None) -> str:
    """'MAJOR.MINOR.PATCH' from the FLASHMMA_VERSION_* macros of version.hpp."""
    text = Path(header or version_header()).read_text()
    parts = []
    for name in ("MAJOR", "MINOR", "PATCH"):
        match = re.search(rf"^\s*#\s*define\s+FLASHMMA_VERSION_{name}\s+(\d+)\b", text, re.MULTILINE)
        if match is None:
            raise RuntimeError(f"flashmma_torch: no FLASHMMA_VERSION_{name} in {header or version_header()}")
        parts.append(match.group(1))
    return ".".join(parts)
