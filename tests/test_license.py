"""The licence the package declares is the one it ships (issue 28, point 1)."""

from __future__ import annotations

import configparser
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_license_file_is_apache_2() -> None:
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert re.search(r"Apache License\s+Version 2\.0, January 2004", text)
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text
    assert "END OF TERMS AND CONDITIONS" in text


def test_setup_cfg_declares_the_same_licence() -> None:
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg", encoding="utf-8")
    assert cfg["metadata"]["license"] == "Apache-2.0"


def test_the_image_carries_the_licence() -> None:
    """The wheel built in the image picks LICENSE up (setuptools' default license_files), so it must
    be in the build context the Dockerfile copies from."""
    assert re.search(r"^COPY [^\n]*\bLICENSE\b", (ROOT / "Dockerfile").read_text(), re.M)
    assert "!LICENSE" in (ROOT / ".dockerignore").read_text().splitlines()
