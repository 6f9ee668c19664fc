"""Finds the compiled extension: the one setup.py built (flashmma_torch._C), or else builds it
from the source tree with torch.utils.cpp_extension.load (once; later imports reuse the build).

Environment:
  FLASHMMA_TORCH_ARCH_LIST   architectures to build for, in TORCH_CUDA_ARCH_LIST's syntax
                             (default: those of the visible GPUs, 9.0 as 9.0a; else 8.0;9.0a)
  FLASHMMA_TORCH_BUILD_DIR   where the just-in-time build goes (default: PyTorch's cache)
  FLASHMMA_TORCH_VERBOSE=1   show the compiler's output
  FLASHMMA_INCLUDE_DIR       flashmma's include/ folder (default: the repository's)
  MAX_JOBS                   parallel compile jobs (PyTorch's variable)
  CC, CXX                    host compilers (PyTorch's variables); must link libstdc++
                             dynamically, as the one PyTorch was built with does (checked)
  FLASHMMA_TORCH_SKIP_COMPILER_CHECK=1   skip that check
"""

import importlib
import importlib.util
import os
from contextlib import contextmanager

from . import _build


def _visible_gpu_arch_list() -> str:
    import torch

    if not torch.cuda.is_available():
        return _build.DEFAULT_ARCH_LIST
    archs = []
    for index in range(torch.cuda.device_count()):
        major, minor = torch.cuda.get_device_capability(index)
        # Hopper's architecture-specific features (sm_90a) are a superset of sm_90.
        arch = "9.0a" if (major, minor) == (9, 0) else f"{major}.{minor}"
        if arch not in archs:
            archs.append(arch)
    return ";".join(archs)


@contextmanager
def _environment(name: str, value: str):
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            del os.environ[name]
        else:
            os.environ[name] = old


def _build_just_in_time():
    from torch.utils.cpp_extension import load

    missing = [path for path in _build.source_paths() if not os.path.exists(path)]
    include = _build.include_dir()
    if missing or not (include / "flashmma" / "flashmma.cuh").exists():
        raise ImportError(
            "flashmma_torch: the compiled extension is not installed and the sources to build it "
            f"are not all there (missing: {missing or [str(include / 'flashmma')]}); build it with "
            "`python3 -m pip install --no-build-isolation examples/pytorch` or set FLASHMMA_INCLUDE_DIR"
        )
    _build.check_host_compiler()
    arch_list = os.environ.get("FLASHMMA_TORCH_ARCH_LIST") or _visible_gpu_arch_list()
    build_dir = os.environ.get("FLASHMMA_TORCH_BUILD_DIR")
    if build_dir:
        os.makedirs(build_dir, exist_ok=True)
    # load() takes its -gencode flags from TORCH_CUDA_ARCH_LIST.
    with _environment("TORCH_CUDA_ARCH_LIST", arch_list):
        return load(
            name="flashmma_torch",
            sources=_build.source_paths(),
            extra_include_paths=[str(include), str(_build.CSRC_DIR)],
            extra_cflags=_build.CXX_FLAGS,
            extra_cuda_cflags=_build.NVCC_FLAGS,
            build_directory=build_dir or None,
            verbose=os.environ.get("FLASHMMA_TORCH_VERBOSE") == "1",
        )


def load_extension():
    """The compiled extension module; importing it registers torch.ops.flashmma.*. Call after
    `import torch`: the extension links against PyTorch's shared libraries."""
    name = f"{__package__}._C"
    if importlib.util.find_spec(name) is None:
        return _build_just_in_time()
    # Built ahead of time by setup.py: a failure to load it is reported, never papered over.
    try:
        return importlib.import_module(name)
    except ImportError as error:
        raise ImportError(
            f"flashmma_torch: the compiled extension {name} is installed but failed to load: {error}. "
            "If PyTorch changed since it was built, rebuild it with "
            "`python3 -m pip install --no-build-isolation examples/pytorch`."
        ) from error
