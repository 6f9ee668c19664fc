"""How flashmma_torch's extension is compiled: one list of sources and flags, the version, and the
check of the host compiler, read by setup.py (ahead of time) and by the just-in-time loader
(_extension.py). Imports nothing but the standard library, so that setup.py can load it before the
package exists."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
EXAMPLE_DIR = PACKAGE_DIR.parent  # examples/pytorch
CSRC_DIR = EXAMPLE_DIR / "csrc"

# The binding, then flashmma's default kernels split over four units that compile in parallel,
# and the backward pass's.
SOURCES = [
    "flashmma_torch.cpp",
    "forward_fp16_lower.cu",
    "forward_fp16_upper.cu",
    "forward_bf16_lower.cu",
    "forward_bf16_upper.cu",
    "backward.cu",
    "backward_fp16.cu",
    "backward_bf16.cu",
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


# --- the host compiler ------------------------------------------------------------------------
#
# A C++ compiler that links libstdc++ statically into shared objects (some toolchains do so by
# default, e.g. through a specs file) gives the extension its own copy of libstdc++'s iostream and
# locale code. The process already has libstdc++.so loaded by PyTorch, and the two copies clash:
# the first error message that formats a number (TORCH_CHECK with an integer) segfaults. The check
# below builds a tiny shared object that formats a number with the compiler that will link the
# extension and refuses to go on when that object does not load libstdc++.so dynamically.

SKIP_COMPILER_CHECK_VARIABLE = "FLASHMMA_TORCH_SKIP_COMPILER_CHECK"

_PROBE_SOURCE = """\
#include <sstream>
#include <string>
extern "C" int flashmma_torch_probe(int value) {
  std::ostringstream stream;
  stream << "value " << value;
  return static_cast<int>(stream.str().size());
}
"""


class CompilerError(RuntimeError):
    """The host compiler would build an extension that crashes; the message says what to do."""


def linking_compiler(setuptools_build: bool = False) -> str:
    """The command that links the extension's shared object.

    torch.utils.cpp_extension.load links with $CXX, else `c++`; setuptools links C++ extensions
    with $CXX, else the compiler Python was configured with (sysconfig's CXX)."""
    cxx = os.environ.get("CXX")
    if cxx:
        return cxx
    if setuptools_build:
        return sysconfig.get_config_var("CXX") or "c++"
    return "c++"


def _needed_libraries(path: Path) -> list[str] | None:
    """DT_NEEDED entries of a 64-bit little-endian ELF shared object; None if it is not one."""
    data = path.read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return None

    def word(offset: int, size: int) -> int:
        return int.from_bytes(data[offset : offset + size], "little")

    section_offset, section_size, section_count = word(0x28, 8), word(0x3A, 2), word(0x3C, 2)
    sections = []
    for index in range(section_count):
        base = section_offset + index * section_size
        # (type, file offset, size, link)
        sections.append((word(base + 4, 4), word(base + 0x18, 8), word(base + 0x20, 8), word(base + 0x28, 4)))
    names = []
    for kind, offset, size, link in sections:
        if kind != 6:  # SHT_DYNAMIC
            continue
        strings_offset = sections[link][1]
        for entry in range(offset, offset + size, 16):
            tag, value = word(entry, 8), word(entry + 8, 8)
            if tag == 0:  # DT_NULL
                break
            if tag == 1:  # DT_NEEDED
                start = strings_offset + value
                names.append(data[start : data.index(b"\0", start)].decode())
    return names


def _torch_compiler_hint() -> str:
    """'GCC 13.3' or the like: what PyTorch reports it was built with, if it says."""
    try:
        import torch

        match = re.search(r"\b(GCC|clang) \d+(\.\d+)*", torch.__config__.show())
        return match.group(0) if match else ""
    except Exception:  # only a hint for a message
        return ""


def _system_compilers() -> tuple[str, str] | None:
    for cc, cxx in (("/usr/bin/gcc", "/usr/bin/g++"), ("/usr/bin/clang", "/usr/bin/clang++")):
        if os.access(cc, os.X_OK) and os.access(cxx, os.X_OK):
            return cc, cxx
    return None


def probe_compiler(compiler: str) -> tuple[bool | None, str]:
    """Builds the probe with `compiler` (a command, maybe with arguments). Returns (True, detail)
    when it links libstdc++.so dynamically, (False, detail) when it does not, and (None, detail)
    when the probe could not be built or read (then the build itself will say more)."""
    command = shlex.split(compiler)
    if not command or shutil.which(command[0]) is None:
        return None, f"{compiler!r} was not found"
    with tempfile.TemporaryDirectory(prefix="flashmma_torch_probe_") as folder:
        source = Path(folder) / "probe.cpp"
        library = Path(folder) / "probe.so"
        source.write_text(_PROBE_SOURCE)
        try:
            result = subprocess.run(
                command + ["-shared", "-fPIC", "-O1", str(source), "-o", str(library)],
                capture_output=True,
                text=True,
                timeout=120,
            )
        except (OSError, subprocess.SubprocessError) as error:
            return None, f"running {compiler!r} failed: {error}"
        if result.returncode != 0 or not library.exists():
            return None, f"{compiler!r} could not build a test library: {result.stderr.strip()[:500]}"
        needed = _needed_libraries(library)
    if needed is None:
        return None, "the test library is not a 64-bit ELF file"
    dynamic = any(name.startswith("libstdc++.so") for name in needed)
    return dynamic, f"its test library needs {', '.join(needed) or 'no shared library'}"


_checked: set[str] = set()


def check_host_compiler(setuptools_build: bool = False) -> None:
    """Raises CompilerError, naming the compiler and the fix, when the compiler that will link the
    extension links libstdc++ statically. Linux only; FLASHMMA_TORCH_SKIP_COMPILER_CHECK=1 skips
    it. Each compiler is probed once per process."""
    if not sys.platform.startswith("linux") or os.environ.get(SKIP_COMPILER_CHECK_VARIABLE) == "1":
        return
    compiler = linking_compiler(setuptools_build)
    if compiler in _checked:
        return
    dynamic, detail = probe_compiler(compiler)
    if dynamic is None:
        print(f"flashmma_torch: could not check the host compiler ({detail}); going on", file=sys.stderr)
        return
    if dynamic:
        _checked.add(compiler)
        return
    source = "from CXX" if os.environ.get("CXX") else "the default"
    built_with = _torch_compiler_hint()
    system = _system_compilers()
    suggestion = (
        f"e.g. CC={system[0]} CXX={system[1]}" if system else "CC=<its gcc> CXX=<its g++>"
    )
    raise CompilerError(
        f"flashmma_torch: the C++ compiler {compiler!r} ({source}) links libstdc++ statically into "
        f"shared objects ({detail}, not libstdc++.so). An extension built that way carries its own "
        "copy of libstdc++ and crashes (segmentation fault) when it formats an error message. "
        "Set CC and CXX to the compiler PyTorch was built with"
        f"{' (' + built_with + ')' if built_with else ''}, {suggestion}, and build again. "
        f"({SKIP_COMPILER_CHECK_VARIABLE}=1 skips this check.)"
    )
