"""requirements/*.lock: the image installs only pinned, hashed packages (issue 25, point 8).

``requirements/image.lock`` is setup.cfg's install_requires plus the server extra, resolved by
``make lock`` (uv, ``--generate-hashes``) for the image's Python; ``requirements/build.lock`` is
pyproject.toml's build requirements. The Dockerfile installs both with ``--require-hashes --no-deps``,
so what the lock does not name never gets in, and a lock that has drifted from setup.cfg would ship
other versions than the package asks for. Checked offline, on the files as committed:

- every entry is ``name==version`` with at least one ``--hash=sha256:``, and nothing else is in the
  file (no index options, URLs, editables or unpinned names);
- the lock's direct requirements (``# via gpu-admission (setup.cfg)``) are exactly the names of
  install_requires + server, each pinned inside setup.cfg's specifier; every other entry is needed by
  a locked package (its ``# via``); gevent only if setup.cfg asks for it;
- the build lock pins every build requirement of pyproject.toml inside its specifier;
- the Dockerfile installs the locks with ``--require-hashes --no-deps`` and the project with ``--no-deps``.

The checks are functions returning their findings, and each is shown to catch a broken lock.
"""

from __future__ import annotations

import configparser
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
IMAGE_LOCK = ROOT / "requirements" / "image.lock"
BUILD_LOCK = ROOT / "requirements" / "build.lock"
SELF = "gpu-admission (setup.cfg)"
"""How the lock's ``# via`` names setup.cfg itself."""
ENTRY = re.compile(r"(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[A-Za-z0-9.+!_-]+)"
                   r"(?P<hashes>(?:\s+--hash=\S+)*)")
HASH = re.compile(r"--hash=sha256:[0-9a-f]{64}")


@dataclass
class Pin:
    version: str
    hashes: list[str]
    via: list[str] = field(default_factory=list)


def parse_lock(text: str) -> tuple[dict[str, Pin], list[str]]:
    """({canonical name: Pin}, problems): what the lock pins, and every line that is not a hashed pin."""
    pins: dict[str, Pin] = {}
    problems: list[str] = []
    current = None
    logical = ""
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if logical or (stripped and not stripped.startswith("#")):
            logical += " " + stripped.removesuffix("\\").strip()
            if stripped.endswith("\\"):
                continue
            m = ENTRY.fullmatch(logical.strip())
            if not m:
                problems.append(f"line {number}: not a hashed name==version pin: {logical.strip()[:100]!r}")
                current = None
            else:
                hashes = m.group("hashes").split()
                bad = [h for h in hashes if not HASH.fullmatch(h)]
                name = canonicalize_name(m.group("name"))
                if name in pins:
                    problems.append(f"{name}: pinned twice")
                if not hashes:
                    problems.append(f"{name}=={m.group('version')}: no --hash")
                if bad:
                    problems.append(f"{name}: not a sha256 hash: {bad}")
                current = name
                pins[name] = Pin(m.group("version"), hashes)
            logical = ""
        elif current and line.startswith((" ", "\t")) and stripped.startswith("#"):
            who = re.sub(r"^#\s*(via\b)?\s*", "", stripped)
            if who:
                pins[current].via.append(who if who == SELF else str(canonicalize_name(who)))
        elif not line.startswith((" ", "\t")):
            current = None  # a header or a comment of its own
    return pins, problems


def runtime_requirements(setup_cfg: str) -> list[Requirement]:
    """install_requires + extras_require.server of setup.cfg: what the image installs."""
    cfg = configparser.ConfigParser()
    cfg.read_string(setup_cfg)
    lines = cfg["options"]["install_requires"].splitlines() + cfg["options.extras_require"]["server"].splitlines()
    return [Requirement(line.split("#", 1)[0].strip()) for line in lines if line.split("#", 1)[0].strip()]


def image_lock_problems(lock: str, setup_cfg: str) -> list[str]:
    pins, problems = parse_lock(lock)
    wanted = {canonicalize_name(r.name): r for r in runtime_requirements(setup_cfg)}
    direct = {name for name, pin in pins.items() if SELF in pin.via}
    for name in sorted(set(wanted) - direct):
        problems.append(f"{name}: in setup.cfg, not a direct requirement of the lock (run make lock)")
    for name in sorted(direct - set(wanted)):
        problems.append(f"{name}: a direct requirement of the lock, not in setup.cfg (run make lock)")
    for name, requirement in sorted(wanted.items()):
        if name in pins and not requirement.specifier.contains(pins[name].version, prereleases=True):
            problems.append(f"{name}=={pins[name].version}: outside setup.cfg's {requirement}")
    for name, pin in sorted(pins.items()):
        if not pin.via:
            problems.append(f"{name}: nothing in the lock says what needs it (no # via)")
        for who in pin.via:
            if who != SELF and who not in pins:
                problems.append(f"{name}: needed by {who}, which the lock does not pin")
    if ("gevent" in pins) != ("gevent" in wanted):
        problems.append("gevent: locked only if setup.cfg lists it")
    return problems


def build_lock_problems(lock: str, pyproject: str) -> list[str]:
    pins, problems = parse_lock(lock)
    for line in tomllib.loads(pyproject)["build-system"]["requires"]:
        requirement = Requirement(line)
        pin = pins.get(canonicalize_name(requirement.name))
        if pin is None:
            problems.append(f"{requirement.name}: a build requirement of pyproject.toml the build lock lacks")
        elif not requirement.specifier.contains(pin.version, prereleases=True):
            problems.append(f"{requirement.name}=={pin.version}: outside pyproject.toml's {requirement}")
    return problems


def test_the_image_lock_is_setup_cfg_with_hashes() -> None:
    problems = image_lock_problems(IMAGE_LOCK.read_text(), (ROOT / "setup.cfg").read_text())
    assert problems == [], "\n".join(problems)
    pins, _ = parse_lock(IMAGE_LOCK.read_text())
    assert {"flask", "gunicorn", "kubernetes", "cryptography", "pyyaml", "jsonschema"} <= set(pins)
    assert not {"pytest", "hypothesis", "pre-commit", "cyclonedx-bom"} & set(pins)  # test tools stay out


def test_the_build_lock_is_pyproject_build_requires_with_hashes() -> None:
    problems = build_lock_problems(BUILD_LOCK.read_text(), (ROOT / "pyproject.toml").read_text())
    assert problems == [], "\n".join(problems)


def _all_hashes_of(text: str, name: str) -> str:
    """The lock with every --hash line of name's entry removed."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{name}=="))
    end = start + 1
    while end < len(lines) and lines[end].strip().startswith("--hash"):
        end += 1
    return "\n".join([*lines[:start], lines[start].removesuffix(" \\"), *lines[end:]]) + "\n"


LOCK_TEXT = IMAGE_LOCK.read_text()
SETUP_CFG = (ROOT / "setup.cfg").read_text()


@pytest.mark.parametrize(("lock", "setup_cfg", "finding"), [
    pytest.param(_all_hashes_of(LOCK_TEXT, "flask"), SETUP_CFG, "flask==", id="a-pin-without-hashes"),
    pytest.param(LOCK_TEXT.replace("--hash=sha256:", "--hash=md5:", 1), SETUP_CFG, "not a sha256 hash",
                 id="a-hash-of-another-kind"),
    pytest.param(LOCK_TEXT + "requests\n", SETUP_CFG, "not a hashed name==version pin", id="an-unpinned-name"),
    pytest.param(LOCK_TEXT + "--index-url https://example.invalid/simple\n", SETUP_CFG,
                 "not a hashed name==version pin", id="an-index-option"),
    pytest.param(LOCK_TEXT, SETUP_CFG.replace("    prometheus-client>=0.20\n",
                                              "    prometheus-client>=0.20\n    gevent>=24.2\n"),
                 "gevent: in setup.cfg, not a direct requirement", id="setup-cfg-gained-a-requirement"),
    pytest.param(LOCK_TEXT, SETUP_CFG.replace("    prometheus-client>=0.20\n", ""),
                 "prometheus-client: a direct requirement of the lock, not in setup.cfg",
                 id="setup-cfg-lost-a-requirement"),
    pytest.param(LOCK_TEXT, SETUP_CFG.replace("gunicorn>=27.0,<28", "gunicorn>=28.0"),
                 "outside setup.cfg's gunicorn>=28.0", id="setup-cfg-moved-a-floor"),
    pytest.param(re.sub(r"(?m)^(\s+# via) flask$", r"\1 nothing-locked", LOCK_TEXT, count=1), SETUP_CFG,
                 "which the lock does not pin", id="an-orphan-pin"),
])
def test_the_lock_checks_catch_a_broken_lock(lock: str, setup_cfg: str, finding: str) -> None:
    problems = image_lock_problems(lock, setup_cfg)
    assert any(finding in p for p in problems), problems


def test_the_dockerfile_installs_the_locks_with_hashes_and_no_deps() -> None:
    text = (ROOT / "Dockerfile").read_text()
    commands = re.sub(r"\\\n\s*", " ", text)
    pips = re.findall(r"pip (?:install|wheel) [^&\n]*", commands)
    assert pips, "no pip install in the Dockerfile"
    for pip in pips:
        assert "--no-deps" in pip, pip  # nothing gets in that a lock does not name
        if " -r " in pip:
            assert "--require-hashes" in pip, pip
    final = commands.rsplit("\nFROM ", 1)[1]
    assert re.search(r"pip install [^&\n]*--require-hashes --no-deps -r /wheels/image\.lock", final)
    assert re.search(r'pip install [^&\n]*--no-index [^&\n]*--no-deps "gpu-admission==\$\{VERSION\}"', final)
    build = commands.split("\nFROM ", 2)[1]
    assert re.search(r"pip wheel [^&\n]*--require-hashes [^&\n]*-r requirements/image\.lock", build)
    assert re.search(r"pip install [^&\n]*--require-hashes [^&\n]*-r requirements/build\.lock", build)
    assert re.search(r"pip wheel [^&\n]*--no-build-isolation", build)
    assert "pip check" in final
    # one base, by digest, in both FROM lines and the OCI label (docs/development.md: bump all three)
    digests = set(re.findall(r"^FROM python:3\.11-slim-bookworm@(sha256:[0-9a-f]{64})", text, re.M))
    label = re.search(r'org\.opencontainers\.image\.base\.digest="(sha256:[0-9a-f]{64})"', text)
    assert len(re.findall(r"^FROM ", text, re.M)) == 2 and len(digests) == 1 and label
    assert digests == {label.group(1)}


def test_make_lock_writes_both_locks() -> None:
    makefile = (ROOT / "Makefile").read_text()
    recipe = makefile.split("\nlock:", 1)[1].split("\n\n", 1)[0]
    assert "--output-file requirements/image.lock" in recipe and "--output-file requirements/build.lock" in recipe
    assert "--generate-hashes" in makefile and "--extra server" in recipe
    for lock in (IMAGE_LOCK, BUILD_LOCK):
        assert "#    make lock" in lock.read_text().split("\n", 3)[1], lock
