"""The data files shipped inside the package (``webhook/core/data/*.yaml``), read as plain files.

Not through :mod:`importlib.resources`: importing it pulls in ``tempfile``, ``shutil``, ``zipfile``
and ``random`` (about 12 ms, a tenth of every ``gpu-admission check`` start), all of it for
zip-imported packages, which this one never is (``setup.cfg`` installs ``data/*.yaml`` as files
beside the modules, in a wheel, an editable install and the container image alike).
"""

from __future__ import annotations

from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"


def text(name: str) -> str:
    """The bundled file ``data/<name>`` as text (UTF-8)."""
    return (DATA / name).read_text(encoding="utf-8")
