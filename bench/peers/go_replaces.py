"""The replace directives of a Go module's go.mod as ``go mod edit`` arguments, one per line.

    python3 bench/peers/go_replaces.py PATH/TO/go.mod

Go ignores a dependency's replace directives, so a throwaway wrapper module that builds a tool's
command from its module must repeat them (``go mod edit -replace=...``). Only module-path
replacements can be repeated: a local directory replacement cannot be resolved outside the tool's
own repository, so it exits 1 naming it. Used by build-kyverno.sh and build-offline-peers.sh.
"""

from __future__ import annotations

import json
import subprocess
import sys


def replace_args(gomod: str) -> list[str]:
    edit = json.loads(subprocess.run(["go", "mod", "edit", "-json", gomod], capture_output=True, text=True,
                                     check=True).stdout)
    out = []
    for r in edit.get("Replace") or []:
        old, new = r["Old"], r["New"]
        if not new.get("Version"):
            raise SystemExit(f"local replace directive {old['Path']} => {new['Path']} cannot be repeated")
        left = old["Path"] + ("@" + old["Version"] if old.get("Version") else "")
        out.append(f"-replace={left}={new['Path']}@{new['Version']}")
    return out


if __name__ == "__main__":
    for arg in replace_args(sys.argv[1]):
        print(arg)
