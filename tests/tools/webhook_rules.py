"""Write the operators' webhook rules into manifests/ and the chart from the operator table.

The ``rules`` of the ``validate-operators`` and ``audit-operators`` entries (both validating webhook
configurations: kustomize base and Helm chart) list every kind of
:data:`webhook.core.operators.REGISTRY` sent through the operators' entry. They are generated, not
written by hand, so a kind the engine reads is never a kind kube-apiserver does not send:

    make webhook-rules          # rewrite the four blocks in place
    python tests/tools/webhook_rules.py --check   # exit 1 when a block is stale

``tests/test_webhook_rules.py`` fails while any block differs from what the table generates.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from webhook.core import operators  # noqa: E402  (after the path: run as a script from any directory)
from webhook.core.operators import Registry  # noqa: E402

FILES = (ROOT / "manifests/base/validatingwebhookconfiguration.yaml",
         ROOT / "charts/gpu-admission/templates/validatingwebhookconfiguration.yaml")
ENTRIES = ("validate-operators.gpu-admission.io", "audit-operators.gpu-admission.io")
MARK = "    # generated from webhook/core/operators by `make webhook-rules`: edit the descriptors, not this list"
INDENT = "      "


class Stale(Exception):
    """A file whose layout the generator cannot find its place in."""


def rules_block(registry: Registry) -> list[str]:
    """The ``rules:`` lines of an operators entry, as the shipped files write them."""
    lines = [MARK, "    rules:"]
    for rule in registry.webhook_rules():
        lines += [f'{INDENT}- apiGroups: ["{rule["apiGroups"][0]}"]',
                  f'{INDENT}  apiVersions: ["{rule["apiVersions"][0]}"]',
                  f'{INDENT}  resources: [{", ".join(rule["resources"])}]',
                  f'{INDENT}  operations: [{", ".join(rule["operations"])}]',
                  f'{INDENT}  scope: {rule["scope"]}']
    return lines


def render(text: str, registry: Registry) -> str:
    """``text`` with the rules of each operators entry replaced by the generated block."""
    lines = text.split("\n")
    for entry in ENTRIES:
        start = next((i for i, line in enumerate(lines) if line.strip() == f"- name: {entry}"), None)
        if start is None:
            raise Stale(f"no entry {entry}")
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("  - name: ")), len(lines))
        rules = next((i for i in range(start, end) if lines[i] == "    rules:"), None)
        if rules is None:
            raise Stale(f"entry {entry} has no '    rules:' line")
        first = rules - 1 if lines[rules - 1] == MARK else rules
        last = next((i for i in range(rules + 1, end) if not lines[i].startswith(INDENT)), end)
        lines[first:last] = rules_block(registry)
    return "\n".join(lines)


def stale(registry: Registry) -> list[Path]:
    """The files whose operators rules differ from what ``registry`` generates."""
    return [path for path in FILES if render(path.read_text(encoding="utf-8"), registry)
            != path.read_text(encoding="utf-8")]


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 when a file is stale")
    args = parser.parse_args(argv)
    registry = operators.REGISTRY
    old = stale(registry)
    if args.check:
        for path in old:
            print(f"{_shown(path)}: operators rules are stale: run make webhook-rules", file=sys.stderr)
        return 1 if old else 0
    for path in old:
        path.write_text(render(path.read_text(encoding="utf-8"), registry), encoding="utf-8")
        print(f"rewrote the operators rules of {_shown(path)}")
    if not old:
        print("the operators rules are current")
    return 0


if __name__ == "__main__":
    sys.exit(main())
