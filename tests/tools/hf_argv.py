"""Run huggingface_hub's own `hf` entry point (`huggingface_hub.cli.hf:main`, the console script the image installs)
on one argv, with the download functions the `download` command calls replaced by recorders.

Runs in the tools virtualenv (tests/tools/checkov.in). Reads `{"argv": [...], "env": {...}}` on stdin; prints one
JSON line: the versions that parsed it, the exit code, every recorded call's keyword arguments and the warnings.
"""

import json
import os
import sys
import warnings
from importlib.metadata import version

request = json.load(sys.stdin)
os.environ.update(request["env"])

from huggingface_hub.cli import download, hf  # noqa: E402  (after the environment, as the CLI reads it at import)

calls = []


def recorder(function):
    def record(**kwargs):
        calls.append({"function": function, **{k: v for k, v in kwargs.items()
                                                if v is None or isinstance(v, (str, int, float, bool, list))}})
        return kwargs.get("local_dir") or ""
    return record


download.snapshot_download = recorder("snapshot_download")
download.hf_hub_download = recorder("hf_hub_download")
sys.argv = list(request["argv"])
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    try:
        hf.main()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
print(json.dumps({"versions": {p: version(p) for p in ("huggingface_hub", "typer", "click")}, "exit": code,
                  "calls": calls, "warnings": [str(w.message) for w in caught]}))
