"""The image's SBOM (CycloneDX 1.6 JSON), written by tests/image/build-image.sh (`make image`).

The Python packages come from ``cyclonedx-py requirements requirements/image.lock`` (cyclonedx-bom,
a test extra): every pin of the lock the image installs, with its purl and the lock's sha256 hashes.
This adds what that tool cannot know: the image itself as the SBOM's subject (metadata.component), the
project's own package (built from this checkout, not fetched), the base image by the digest the
Dockerfile names, and the dependency graph the lock's ``# via`` annotations give. The result is
validated against the CycloneDX 1.6 schema before it is written. tests/image/test_image.py checks it
against what the built image really holds.

    python tests/image/sbom.py --image gpu-admission:test --built-on localhost/python:3.11-slim-bookworm \
        --output build/sbom.cdx.json
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "requirements" / "image.lock"
FROM = re.compile(r"^FROM (?P<name>[^:@\s]+):(?P<tag>[^@\s]+)@(?P<digest>sha256:[0-9a-f]{64})", re.M)
PIN = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>\S+)")
SELF = "gpu-admission (setup.cfg)"
"""How uv's ``# via`` names a requirement of setup.cfg itself."""


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def lock_graph(text: str) -> dict[str, list[str]]:
    """{locked package: the packages (or SELF) its ``# via`` lines name}."""
    graph: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if m := PIN.match(line):
            current = canonical(m.group("name"))
            graph[current] = []
        elif current and (m := re.match(r"^\s+#\s+(?:via\s+)?(?P<who>\S.*)$", line)) and m.group("who") != "via":
            who = m.group("who").strip()
            graph[current].append(who if who == SELF else canonical(who))
    return graph


def version() -> str:
    sys.path.insert(0, str(ROOT))
    import webhook

    return webhook.__version__


def base_image() -> dict:
    """The Dockerfile's base, as a CycloneDX container component named by its digest."""
    froms = {m.groupdict()["digest"]: m.groupdict() for m in FROM.finditer((ROOT / "Dockerfile").read_text())}
    if len(froms) != 1:
        raise SystemExit(f"sbom: expected one digest-pinned base image in the Dockerfile, found {sorted(froms)}")
    (base,) = froms.values()
    name, tag, digest = base["name"], base["tag"], base["digest"]
    repo = name if "/" in name else f"library/{name}"
    purl = f"pkg:oci/{name.rsplit('/', 1)[-1]}@{digest.replace(':', '%3A')}?repository_url=docker.io/{repo}&tag={tag}"
    return {"type": "container", "bom-ref": purl, "name": name, "version": tag, "purl": purl,
            "hashes": [{"alg": "SHA-256", "content": digest.split(":", 1)[1]}],
            "description": "the base image of both Dockerfile stages, by digest"}


def build(image: str, built_on: str) -> dict:
    done = subprocess.run([sys.executable, "-m", "cyclonedx_py", "requirements", str(LOCK), "--of", "JSON",
                           "--sv", "1.6", "-o", "-"], capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"sbom: cyclonedx-py failed ({done.returncode}; pip install -e '.[test]' installs it):\n"
                         f"{done.stderr[-2000:]}")
    bom = json.loads(done.stdout)
    # bom-refs by purl ("requirements-L123" says only where the pin was in the lock)
    by_name = {}
    for component in bom["components"]:
        component["bom-ref"] = component["purl"]
        by_name[canonical(component["name"])] = component
    graph = lock_graph(LOCK.read_text())
    if set(graph) != set(by_name):
        raise SystemExit(f"sbom: the lock's pins and cyclonedx-py's components differ: {set(graph) ^ set(by_name)}")

    ours = version()
    project = {"type": "application", "bom-ref": f"pkg:pypi/gpu-admission@{ours}", "name": "gpu-admission",
               "version": ours, "purl": f"pkg:pypi/gpu-admission@{ours}",
               "licenses": [{"license": {"id": "Apache-2.0"}}],
               "description": "the admission webhook server, built from this repository's source (not fetched)"}
    base = base_image()
    subject = {"type": "container", "bom-ref": f"image:{image}", "name": image.rsplit(":", 1)[0],
               "version": image.rsplit(":", 1)[1] if ":" in image else "latest",
               "properties": [{"name": "gpu-admission:lock", "value": "requirements/image.lock"},
                              {"name": "gpu-admission:built-on", "value": built_on}]}
    bom["metadata"]["component"] = subject
    bom["components"] = [base, project, *bom["components"]]

    depends: dict[str, list[str]] = {subject["bom-ref"]: [base["bom-ref"], project["bom-ref"]],
                                     base["bom-ref"]: [], project["bom-ref"]: []}
    for name in graph:
        depends[by_name[name]["bom-ref"]] = []
    for name, whos in graph.items():
        for who in whos:
            parent = project["bom-ref"] if who == SELF else by_name[who]["bom-ref"]
            depends[parent].append(by_name[name]["bom-ref"])
    bom["dependencies"] = [{"ref": ref, "dependsOn": sorted(set(on))} for ref, on in depends.items()]
    return bom


def validate(bom: dict) -> None:
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    error = JsonStrictValidator(SchemaVersion.V1_6).validate_str(json.dumps(bom))
    if error is not None:
        raise SystemExit(f"sbom: not valid CycloneDX 1.6: {error}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--image", required=True, help="the image's name, e.g. gpu-admission:test")
    parser.add_argument("--built-on", required=True, help="the base image the build really used")
    parser.add_argument("--output", type=Path, required=True)
    args = parser.parse_args(argv)
    bom = build(args.image, args.built_on)
    validate(bom)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(bom, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
