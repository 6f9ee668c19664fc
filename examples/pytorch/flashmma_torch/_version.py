"""flashmma_torch.__version__: flashmma's version, whose one source is include/flashmma/version.hpp.

In a source checkout the header is read directly (so the version is right before any install);
an installed package reports the version setup.py read from that header at build time."""

from importlib import metadata

from . import _build


def _is_source_checkout() -> bool:
    return (_build.EXAMPLE_DIR / "setup.py").is_file() and _build.version_header().is_file()


def package_version() -> str:
    if _is_source_checkout():
        return _build.read_version()
    try:
        return metadata.version("flashmma_torch")
    except metadata.PackageNotFoundError:
        return "0+unknown"
