"""Builds flashmma_torch ahead of time (the metadata is in pyproject.toml):

    python3 -m pip install --no-build-isolation examples/pytorch    (needs PyTorch with CUDA, nvcc)

Without installing, `import flashmma_torch` from this folder compiles the extension on first use.
FLASHMMA_TORCH_ARCH_LIST, else TORCH_CUDA_ARCH_LIST, picks the GPU architectures ("8.0+PTX;9.0a" when
neither is set: flashmma_torch/_build.py says why). The version is flashmma's, read from
include/flashmma/version.hpp.
"""

import importlib.util
import os
import sys
from pathlib import Path

import setuptools
from setuptools import setup
from setuptools.errors import CompileError
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

HERE = Path(__file__).resolve().parent
LICENSE = "Apache-2.0"  # SPDX; the repository's LICENSE file


def _load_build_config():
    # Loaded by path: importing the package would try to load the extension being built.
    spec = importlib.util.spec_from_file_location("flashmma_torch_build", HERE / "flashmma_torch" / "_build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


build = _load_build_config()


class BuildExtensionCheckingCompiler(BuildExtension):
    """PyTorch's BuildExtension, after checking that the host compiler links libstdc++ dynamically
    (see flashmma_torch/_build.py: otherwise the extension crashes on its first error message), with
    the architecture list in TORCH_CUDA_ARCH_LIST, where PyTorch reads it to make nvcc's -gencode
    flags."""

    def build_extensions(self):
        try:
            build.check_host_compiler(setuptools_build=True)
        except build.CompilerError as error:
            raise CompileError(str(error)) from error
        arch_list = build.ahead_of_time_arch_list()
        for warning in build.arch_list_warnings(arch_list):
            print(warning, file=sys.stderr)
        os.environ["TORCH_CUDA_ARCH_LIST"] = arch_list
        try:
            super().build_extensions()
        except ValueError as error:
            if "Unknown CUDA arch" not in str(error):
                raise
            raise CompileError(build.unknown_arch_message(error, arch_list)) from error


def license_metadata() -> dict:
    """The license, in the field this setuptools writes. pyproject.toml cannot say it for every
    setuptools from 61.2 on: `license = "Apache-2.0"` (PEP 639) is an error before setuptools 77,
    and the table `license = {text = ...}` is deprecated from 77 on. So pyproject.toml declares the
    license dynamic and it is given here: PEP 639's License-Expression where setuptools supports
    it (77 and later), else the older free-text License field."""
    major = int(setuptools.__version__.split(".")[0])
    if major >= 77:
        return {"license_expression": LICENSE}
    return {"license": LICENSE}


setup(
    version=build.read_version(),
    **license_metadata(),
    packages=["flashmma_torch"],
    ext_modules=[
        CUDAExtension(
            name="flashmma_torch._C",
            sources=build.source_paths(relative_to=HERE),
            include_dirs=[str(build.include_dir()), str(build.CSRC_DIR)],
            # No -gencode or -arch here: PyTorch adds its own from TORCH_CUDA_ARCH_LIST only when
            # these flags name no architecture.
            extra_compile_args={"cxx": build.CXX_FLAGS, "nvcc": build.NVCC_FLAGS},
        )
    ],
    cmdclass={"build_ext": BuildExtensionCheckingCompiler},
)
