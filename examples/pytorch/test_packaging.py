"""Checks of flashmma_torch's build configuration that need neither a GPU nor PyTorch: the
architecture list, the host-compiler check, the compile notice and the package metadata.

    python3 -m pytest -q test_packaging.py

flashmma_torch/_build.py is loaded by path, as setup.py loads it: importing the package would load
(or build) the extension."""

import importlib.util
import os
import shutil
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def _load_build_module():
    spec = importlib.util.spec_from_file_location("flashmma_torch_build", HERE / "flashmma_torch" / "_build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


build = _load_build_module()


# --- The architecture list ----------------------------------------------------------------------


def test_default_arch_list_runs_on_later_gpus():
    entries = build.DEFAULT_ARCH_LIST.split(";")
    # PTX of a portable architecture, which the driver compiles for any later GPU.
    assert "8.0+PTX" in entries
    # Hopper's own kernels need the architecture-specific target.
    assert "9.0a" in entries
    assert build.arch_list_warnings(build.DEFAULT_ARCH_LIST) == []


def test_arch_list_variables(monkeypatch):
    for name in build.ARCH_LIST_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    assert build.requested_arch_list() is None
    assert build.ahead_of_time_arch_list() == build.DEFAULT_ARCH_LIST
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0a")
    assert build.requested_arch_list() == ("9.0a", "TORCH_CUDA_ARCH_LIST")
    # flashmma's own variable wins over the one other extensions read.
    monkeypatch.setenv("FLASHMMA_TORCH_ARCH_LIST", "8.0;9.0a")
    assert build.ahead_of_time_arch_list() == "8.0;9.0a"
    monkeypatch.setenv("FLASHMMA_TORCH_ARCH_LIST", "  ")
    assert build.ahead_of_time_arch_list() == "9.0a"


def test_arch_list_warnings():
    # A list some PyTorch images set for every extension.
    warnings = build.arch_list_warnings("5.2 6.0 7.5 8.0 8.6 9.0+PTX")
    assert len(warnings) == 2
    assert "5.2, 6.0, 7.5" in warnings[0] and "8.0 and later" in warnings[0]
    assert "9.0 without 9.0a" in warnings[1]
    assert build.arch_list_warnings("8.0;9.0;9.0a") == []
    assert build.arch_list_warnings("9.0a") == []
    assert build.arch_list_warnings("Ampere;Hopper") == []  # PyTorch's names, not judged


def test_nvcc_flags_leave_the_architectures_to_pytorch():
    # torch.utils.cpp_extension adds the TORCH_CUDA_ARCH_LIST flags only when no flag mentions "arch".
    assert not [flag for flag in build.NVCC_FLAGS if "arch" in flag]
    assert not hasattr(build, "gencode_flags")


def test_unknown_arch_message():
    message = build.unknown_arch_message(ValueError("Unknown CUDA arch (9.0a) or GPU not supported"), "8.0;9.0a")
    assert "Unknown CUDA arch (9.0a)" in message and "'8.0;9.0a'" in message
    assert "FLASHMMA_TORCH_ARCH_LIST" in message


# --- The host compiler --------------------------------------------------------------------------

READELF_DYNAMIC = """
Dynamic section at offset 0x2dd8 contains 27 entries:
  Tag        Type                         Name/Value
 0x0000000000000001 (NEEDED)             Shared library: [libstdc++.so.6]
 0x0000000000000001 (NEEDED)             Shared library: [libgcc_s.so.1]
 0x0000000000000001 (NEEDED)             Shared library: [libc.so.6]
 0x000000000000000e (SONAME)             Library soname: [probe.so]
 0x000000000000000c (INIT)               0x1000
"""


def test_parse_needed_libraries():
    assert build.parse_needed_libraries(READELF_DYNAMIC) == ["libstdc++.so.6", "libgcc_s.so.1", "libc.so.6"]
    assert build.parse_needed_libraries("There is no dynamic section in this file.\n") == []


def test_readelf_beside_a_prefixed_compiler(tmp_path, monkeypatch):
    for name in ("x86_64-conda-linux-gnu-c++", "x86_64-conda-linux-gnu-readelf"):
        tool = tmp_path / name
        tool.write_text("#!/bin/sh\n")
        tool.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert build.readelf_command("x86_64-conda-linux-gnu-c++ -O2") == str(tmp_path / "x86_64-conda-linux-gnu-readelf")
    assert build.readelf_command("c++") is None  # nothing else on this PATH


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the check runs on Linux only")
@pytest.mark.skipif(shutil.which("g++") is None or shutil.which("readelf") is None, reason="needs g++ and readelf")
def test_compiler_check(monkeypatch):
    monkeypatch.delenv(build.SKIP_COMPILER_CHECK_VARIABLE, raising=False)
    monkeypatch.delenv("CXX", raising=False)
    build._checked.clear()
    # The system compiler links libstdc++ dynamically, as the one PyTorch is built with does.
    dynamic, detail = build.probe_compiler("g++")
    assert dynamic is True, detail
    assert "libstdc++.so" in detail
    # One that links it statically is refused, by name, with the fix.
    static = f"{shutil.which('g++')} -static-libstdc++"
    if build.probe_compiler(static)[0] is not False:
        pytest.skip("g++ cannot link libstdc++ statically here")
    monkeypatch.setenv("CXX", static)
    with pytest.raises(build.CompilerError, match=r"links libstdc\+\+ statically.*Set CC and CXX"):
        build.check_host_compiler()
    monkeypatch.setenv(build.SKIP_COMPILER_CHECK_VARIABLE, "1")
    build.check_host_compiler()


def test_compiler_check_without_readelf(monkeypatch, tmp_path):
    if shutil.which("g++") is None:
        pytest.skip("needs g++")
    gxx = shutil.which("g++")
    monkeypatch.setattr(build, "readelf_command", lambda compiler: None)
    dynamic, detail = build.probe_compiler(gxx)
    assert dynamic is None and "readelf" in detail  # not checked, and said so; the build goes on


# --- The first import's notice ------------------------------------------------------------------


def test_compile_notice_is_one_line():
    notice = build.compile_notice("9.0a", "/cache/torch_extensions/py311_cu128/flashmma_torch")
    assert "\n" not in notice
    assert notice.startswith("flashmma_torch: compiling")
    assert "several minutes" in notice and "docs/perf.md, Build cost" in notice
    assert "/cache/torch_extensions/py311_cu128/flashmma_torch" in notice and "9.0a" in notice
    # The heading it names is there.
    perf = HERE.parent.parent / "docs" / "perf.md"
    if perf.is_file():
        assert "\n## Build cost\n" in perf.read_text()


def test_build_is_current(tmp_path):
    assert not build.build_is_current(tmp_path)  # nothing built
    library = tmp_path / f"{build.EXTENSION_NAME}.so"
    library.write_bytes(b"")
    newest = max(path.stat().st_mtime for path in build.build_inputs())
    os.utime(library, (newest + 10, newest + 10))
    assert build.build_is_current(tmp_path)
    os.utime(library, (newest - 10, newest - 10))  # a source changed after the build
    assert not build.build_is_current(tmp_path)
    # load() names its rebuilds after a source change flashmma_torch_v1, _v2, ...
    rebuilt = tmp_path / f"{build.EXTENSION_NAME}_v1.so"
    rebuilt.write_bytes(b"")
    os.utime(rebuilt, (time.time() + 10, time.time() + 10))
    assert build.build_is_current(tmp_path)


def test_build_inputs_cover_sources_and_headers():
    inputs = {str(path) for path in build.build_inputs()}
    assert set(build.source_paths()) <= inputs
    if (build.include_dir() / "flashmma" / "flashmma.cuh").is_file():
        assert str(build.include_dir() / "flashmma" / "flashmma.cuh") in inputs


# --- The package metadata -----------------------------------------------------------------------


def test_pyproject_leaves_the_license_to_setup_py():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11 and later
    project = tomllib.loads((HERE / "pyproject.toml").read_text())
    # A PEP 639 string fails on setuptools < 77 and a table is deprecated from 77 on: setup.py
    # gives the license in the field the installed setuptools writes.
    assert "license" not in project["project"]
    assert set(project["project"]["dynamic"]) == {"version", "license"}
    assert 'license_expression' in (HERE / "setup.py").read_text()


def test_version_is_flashmma_s():
    version = build.read_version()
    assert version.count(".") == 2 and all(part.isdigit() for part in version.split("."))
