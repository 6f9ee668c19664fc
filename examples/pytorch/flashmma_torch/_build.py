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

# GPU architectures, in TORCH_CUDA_ARCH_LIST's syntax: torch.utils.cpp_extension turns the list into
# nvcc's -gencode flags, for `pip install` and the just-in-time build alike ("+PTX" adds PTX).
#
# The default, for builds that no variable names a list for: sm_80 machine code (Ampere; it runs on
# every 8.x GPU, Ada included), sm_90a machine code (Hopper's own kernels, which need the
# architecture-specific 'a' features), and compute_80 PTX. GPUs newer than Hopper (Blackwell, 10.x
# and 12.x) have no machine code in it: their driver compiles the PTX when it first loads the
# extension, and they run the portable kernels. PTX of 9.0a could not serve them, since
# architecture-specific code runs on its own architecture only.
DEFAULT_ARCH_LIST = "8.0+PTX;9.0a"

# Read in this order: flashmma's own variable first, so that a list set for other extensions (some
# PyTorch images set TORCH_CUDA_ARCH_LIST) can be overridden for this one alone.
ARCH_LIST_VARIABLES = ("FLASHMMA_TORCH_ARCH_LIST", "TORCH_CUDA_ARCH_LIST")

_ARCH_ENTRY = re.compile(r"^(\d+)\.(\d+)(a?)(\+PTX)?$")


def requested_arch_list() -> tuple[str, str] | None:
    """(list, variable) from the first of ARCH_LIST_VARIABLES that is set; None if none is."""
    for name in ARCH_LIST_VARIABLES:
        value = os.environ.get(name, "").strip()
        if value:
            return value, name
    return None


def ahead_of_time_arch_list() -> str:
    requested = requested_arch_list()
    return requested[0] if requested else DEFAULT_ARCH_LIST


def arch_list_warnings(arch_list: str) -> list[str]:
    """What a list leaves out of flashmma: kernels for architectures before sm_80 are compiled
    out (such a GPU gets an unsupported-device error), and Hopper runs its own kernels only from
    sm_90a code. Named entries ("Ampere") are PyTorch's to expand and are not judged here."""
    warnings = []
    parsed = []  # (entry, (major, minor, "a" or ""))
    for entry in arch_list.replace(" ", ";").split(";"):
        match = _ARCH_ENTRY.match(entry)
        if match:
            parsed.append((entry, (int(match.group(1)), int(match.group(2)), match.group(3))))
    versions = [version for _, version in parsed]
    old = [entry for entry, version in parsed if version[:2] < (8, 0)]
    if old:
        warnings.append(
            f"flashmma_torch: {', '.join(old)} in the architecture list: flashmma runs on 8.0 and "
            "later, so those GPUs get an unsupported-device error"
        )
    if any(version == (9, 0, "") for version in versions) and (9, 0, "a") not in versions:
        warnings.append(
            "flashmma_torch: 9.0 without 9.0a in the architecture list: H100 and H200 will run the "
            "portable kernels, not Hopper's own; add 9.0a"
        )
    return warnings


def unknown_arch_message(error: Exception, arch_list: str) -> str:
    """For PyTorch's ValueError on an entry it does not know (older releases do not know 9.0a)."""
    return (
        f"flashmma_torch: {error}. The architecture list was {arch_list!r}; this PyTorch's "
        "torch.utils.cpp_extension does not accept one of its entries. Upgrade PyTorch, or set "
        "FLASHMMA_TORCH_ARCH_LIST to entries it accepts (without 9.0a, H100 and H200 run the "
        "portable kernels)."
    )


# The just-in-time build: torch.utils.cpp_extension.load's module name, and so the stem of the library
# it writes into the build folder (flashmma_torch.so; flashmma_torch_v1.so and on after the sources
# change, as load() names its rebuilds).
EXTENSION_NAME = "flashmma_torch"


def build_inputs() -> list[Path]:
    """The files whose change makes the just-in-time build compile again: the sources, the headers
    beside them, flashmma's headers, and the flags here."""
    inputs = [Path(__file__).resolve()]
    inputs += [path for path in CSRC_DIR.iterdir() if path.is_file()]
    flashmma_headers = include_dir() / "flashmma"
    if flashmma_headers.is_dir():
        inputs += [path for path in flashmma_headers.rglob("*") if path.is_file()]
    return inputs


def build_is_current(build_dir: str | Path) -> bool:
    """Whether `build_dir` holds a library built after every input last changed, so that load()
    only loads it. Ninja decides for itself; this only says whether to announce a compile."""
    libraries = list(Path(build_dir).glob(f"{EXTENSION_NAME}*.so"))
    if not libraries:
        return False
    built = max(path.stat().st_mtime for path in libraries)
    return all(path.stat().st_mtime <= built for path in build_inputs())


def compile_notice(arch_list: str, build_dir: str | Path) -> str:
    """The one line the first import prints before it compiles. No duration is measured for this
    build, hence "several minutes"; docs/perf.md times the library's own builds."""
    return (
        f"flashmma_torch: compiling the CUDA extension for {arch_list} (first import from a source "
        "checkout; usually several minutes, see docs/perf.md, Build cost); cached in "
        f"{build_dir} for later imports"
    )


def include_dir() -> Path:
    """flashmma's include/ folder: FLASHMMA_INCLUDE_DIR, else the repository's."""
    return Path(os.environ.get("FLASHMMA_INCLUDE_DIR", EXAMPLE_DIR.parent.parent / "include"))


def source_paths(relative_to: Path | None = None) -> list[str]:
    paths = [CSRC_DIR / name for name in SOURCES]
    if relative_to is not None:
        return [os.path.relpath(path, relative_to) for path in paths]
    return [str(path) for path in paths]


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
# extension, lists the libraries it needs with readelf (binutils, beside any GCC toolchain's linker),
# and refuses to go on when libstdc++.so is not among them. Reading the file, not loading it: in this
# process PyTorch has loaded libstdc++.so already, so a loaded probe would show it either way.

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


def readelf_command(compiler: str) -> str | None:
    """readelf, from binutils (which every GCC toolchain links with) or LLVM: the one beside a
    prefixed compiler first (x86_64-conda-linux-gnu-c++ sits beside x86_64-conda-linux-gnu-readelf,
    and the plain name may not be on PATH in such an environment), else the one on PATH."""
    command = shlex.split(compiler)
    candidates = []
    if command:
        match = re.match(r"^(.*-)(?:c\+\+|g\+\+|gcc|cc|clang\+\+|clang)(?:-[\d.]+)?$", os.path.basename(command[0]))
        if match:
            prefixed = match.group(1) + "readelf"
            folder = os.path.dirname(shutil.which(command[0]) or command[0])
            candidates += [os.path.join(folder, prefixed) if folder else prefixed, prefixed]
    candidates += ["readelf", "llvm-readelf"]
    for candidate in candidates:
        found = shutil.which(candidate)
        if found:
            return found
    return None


def parse_needed_libraries(readelf_dynamic: str) -> list[str]:
    """The DT_NEEDED names in `readelf -d` output: lines like
    ` 0x0000000000000001 (NEEDED)             Shared library: [libstdc++.so.6]`."""
    return re.findall(r"\(NEEDED\)[^\[\n]*\[([^\]\n]+)\]", readelf_dynamic)


def _needed_libraries(library: Path, readelf: str) -> list[str] | None:
    """The shared libraries `library` needs, from its dynamic section; None if readelf failed."""
    try:
        result = subprocess.run(
            [readelf, "-d", str(library)],
            capture_output=True,
            text=True,
            timeout=60,
            # readelf translates its labels; "(NEEDED)" and "Shared library" are the C locale's.
            env={**os.environ, "LC_ALL": "C"},
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if result.returncode != 0:
        return None
    return parse_needed_libraries(result.stdout)


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
        readelf = readelf_command(compiler)
        if readelf is None:
            return None, "readelf (binutils) was not found to read the test library"
        needed = _needed_libraries(library, readelf)
    if needed is None:
        return None, f"{readelf} could not read the test library's dynamic section"
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
