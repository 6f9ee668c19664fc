"""Finds the compiled extension: the one setup.py built (flashmma_torch._C), or else builds it
from the source tree with torch.utils.cpp_extension.load (once; later imports reuse the build).

Environment:
  FLASHMMA_TORCH_ARCH_LIST   architectures to build for, in TORCH_CUDA_ARCH_LIST's syntax
                             (default: the visible GPUs', 9.0 as 9.0a; without a GPU, those of
                             `pip install`: TORCH_CUDA_ARCH_LIST, else _build.DEFAULT_ARCH_LIST)
  FLASHMMA_TORCH_BUILD_DIR   where the just-in-time build goes (default: PyTorch's cache,
                             TORCH_EXTENSIONS_DIR or ~/.cache/torch_extensions)
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
import sys
from contextlib import contextmanager

from . import _build


def _visible_gpu_arch_list() -> str:
    import torch

    if not torch.cuda.is_available():
        return _build.ahead_of_time_arch_list()
    archs = []
    for index in range(torch.cuda.device_count()):
        major, minor = torch.cuda.get_device_capability(index)
        # Hopper's architecture-specific features (sm_90a) are a superset of sm_90.
        arch = "9.0a" if (major, minor) == (9, 0) else f"{major}.{minor}"
        if arch not in archs:
            archs.append(arch)
    return ";".join(archs)


def _arch_list() -> str:
    """This build runs on this machine, so its GPUs come before TORCH_CUDA_ARCH_LIST: a list that an
    image sets for every extension (often without 9.0a) would build more and run Hopper's own
    kernels less."""
    return os.environ.get("FLASHMMA_TORCH_ARCH_LIST", "").strip() or _visible_gpu_arch_list()


def _build_directory() -> str:
    """FLASHMMA_TORCH_BUILD_DIR, else the folder load() would pick itself, asked for here so that the
    compile notice can name it and see whether a build is already there."""
    chosen = os.environ.get("FLASHMMA_TORCH_BUILD_DIR")
    if chosen:
        os.makedirs(chosen, exist_ok=True)
        return chosen
    from torch.utils import cpp_extension

    try:
        # PyTorch's own rule (TORCH_EXTENSIONS_DIR, else its cache, per Python and CUDA version);
        # private, hence the fallback.
        return cpp_extension._get_build_directory(_build.EXTENSION_NAME, False)
    except (AttributeError, TypeError):
        folder = os.path.join(cpp_extension.get_default_build_root(), _build.EXTENSION_NAME)
        os.makedirs(folder, exist_ok=True)
        return folder


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
    arch_list = _arch_list()
    for warning in _build.arch_list_warnings(arch_list):
        print(warning, file=sys.stderr)
    build_dir = _build_directory()
    if not _build.build_is_current(build_dir):
        print(_build.compile_notice(arch_list, build_dir), file=sys.stderr, flush=True)
    # load() takes its -gencode flags from TORCH_CUDA_ARCH_LIST.
    with _environment("TORCH_CUDA_ARCH_LIST", arch_list):
        try:
            return load(
                name=_build.EXTENSION_NAME,
                sources=_build.source_paths(),
                extra_include_paths=[str(include), str(_build.CSRC_DIR)],
                extra_cflags=_build.CXX_FLAGS,
                extra_cuda_cflags=_build.NVCC_FLAGS,
                build_directory=build_dir,
                verbose=os.environ.get("FLASHMMA_TORCH_VERBOSE") == "1",
            )
        except ValueError as error:
            if "Unknown CUDA arch" not in str(error):
                raise
            raise ImportError(_build.unknown_arch_message(error, arch_list)) from error


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
