"""A server's YAML ``--config`` file, read when the pod shows it: vLLM's and SGLang's.

Both servers turn the file's top-level keys into command-line options and put them *before* the
command line's own, so a flag on the command line wins over the file and the file over the
defaults:

- vLLM: vllm-project/vllm vllm/utils/argparse_utils.py@00da11e3 ``FlexibleArgumentParser``:
  ``parse_args`` reads the file only when the argv holds the bare token ``--config`` (``--config=F``
  is not read); ``load_config_file`` refuses a name not ending in ``yaml``/``yml``, and makes each key
  ``--key value`` (``True`` -> ``--key``, ``False`` -> ``--no-key`` where that option exists, a list ->
  ``--key a b``, a mapping -> ``--key <json>``); ``_pull_args_from_config`` puts them after
  ``serve`` and its positional model, so a positional model wins over the file's ``model``. Keys take
  ``-`` or ``_`` (the parser accepts both); docs/configuration/serve_args.md@2cda47d8 shows
  ``model:`` and "command line > config file values > defaults".
- SGLang: sgl-project/sglang python/sglang/srt/server_args_config_parser.py@03bd2f16
  ``ConfigArgumentMerger``: the bare ``--config FILE`` (one only), a ``.yaml``/``.yml`` file whose root
  is a mapping, keys made ``--key value`` (booleans ``--key`` when a ``store_true`` option),
  config arguments first.

Where the file comes from is :mod:`webhook.core.launchers.files`: written by the container's own
script (``cat > /config.yaml <<EOF``) or mounted from a ConfigMap of the input. Only scalar and
boolean values become options here: lists and mappings feed none of the settings the engine reads,
and skipping them keeps their items from being taken for positional arguments.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import yaml

from webhook.core.launchers import files
from webhook.core.launchers.spec import Spec

CONFIG_FLAG = "--config"
MAX_KEYS = 256
_KEY_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def merged(args: Sequence[str], b: Spec, *, server: str) -> Sequence[str]:
    """``args`` with the settings of the ``--config`` file they name put before them, as ``server``
    does, when the pod shows that file (``--config FILE`` itself removed, so it is not reported as
    hidden); ``args`` unchanged otherwise (then the spec builder reports the file as unread)."""
    where = [i for i, token in enumerate(args[:4096]) if token == CONFIG_FLAG]
    if len(where) != 1 or where[0] + 1 >= len(args):
        return args
    i = where[0]
    path = args[i + 1]
    if "$" in path or "`" in path:
        return args
    text = files.find(b.ctx.files, path, b.ctx.workdir)
    if text is None:
        return args
    if not path.lower().endswith((".yaml", ".yml")):
        b.note(f"{server} reads a --config file only when its name ends in .yaml or .yml: {path[:96]} is refused")
        return args
    try:
        doc = yaml.load(text, Loader=_LOADER)  # noqa: S506 (a safe loader)
    except Exception as exc:  # noqa: BLE001 (YAMLError, RecursionError on deep nesting: all mean "unreadable")
        b.note(f"the {server} --config file {path[:96]} does not parse as YAML ({type(exc).__name__})")
        return args
    if doc is None:
        doc = {}
    if not isinstance(doc, Mapping):
        b.note(f"the {server} --config file {path[:96]} is not a mapping of options")
        return args
    b.note(f"{server} settings read from its --config file {path[:96]} (the command line wins over it)")
    return [*options(doc), *args[:i], *args[i + 2:]]


def options(doc: Mapping[object, object]) -> list[str]:
    """The file's scalar and boolean keys as ``--key=value`` / ``--key`` options, in file order."""
    out: list[str] = []
    for key, value in list(doc.items())[:MAX_KEYS]:
        if not isinstance(key, str) or not _KEY_RE.fullmatch(key):
            continue
        if isinstance(value, bool):
            if value:
                out.append(f"--{key}")
        elif isinstance(value, (int, float, str)):
            out.append(f"--{key}={value}"[:4096])
    return out
