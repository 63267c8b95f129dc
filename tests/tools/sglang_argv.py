"""Parse SGLang server command lines with SGLang's own parser: the `argparse` parser `prepare_server_args` builds
(`ArgumentParser(prog="sglang serve")` + `ServerArgs.add_cli_args`, python/sglang/srt/server_args.py:7209-7221 at
0.5.14), without `ServerArgs.from_cli_args`, whose `__post_init__` reads the GPU and the model's config.

Runs in a virtualenv of its own: SGLang's server_args module imports torch, triton and torchvision at module level
(python/sglang/srt/utils/common.py:83-92 through sglang/__init__.py:29), so it needs the image's Python stack, not the
tools virtualenv (tests/tools/sglang.in says what to install; blueprints/catalog/engines.yaml, sglang `argv_parser`).

Reads a JSON list on stdin, each entry the container's argv: `python3 -m sglang.launch_server ...` or `sglang serve
...` (the command is stripped, the rest is what `prepare_server_args` receives). Prints one JSON line: the sglang
version and, per argv, its exit code (0 parsed, 2 refused by argparse), argparse's message when refused, and the
parsed namespace (every option, defaults included; values that are not JSON are given as their repr).
"""

import argparse
import contextlib
import io
import json
import sys
from importlib.metadata import version

from sglang.srt.server_args import ServerArgs

COMMANDS = (["python3", "-m", "sglang.launch_server"], ["python", "-m", "sglang.launch_server"], ["sglang", "serve"])


def server_argv(argv: list[str]) -> list[str] | None:
    """The arguments after the launcher command, or None when `argv` does not start with one."""
    return next((argv[len(c):] for c in COMMANDS if argv[:len(c)] == c), None)


def parse(argv: list[str]) -> dict:
    rest = server_argv(argv)
    if rest is None:
        return {"argv": argv, "exit": 2, "error": f"not an SGLang server command: {argv[:3]}", "args": None}
    parser = argparse.ArgumentParser(prog="sglang serve")
    ServerArgs.add_cli_args(parser)
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr):
            namespace = parser.parse_args(rest)
    except SystemExit as exc:  # argparse refuses the argv (an unknown option, a bad choice, a missing value)
        lines = stderr.getvalue().strip().splitlines()  # the usage, then "sglang serve: error: ..."
        return {"argv": argv, "exit": exc.code if isinstance(exc.code, int) else 2,
                "error": lines[-1] if lines else "", "args": None}
    plain = (str, int, float, bool, list, dict, type(None))
    return {"argv": argv, "exit": 0, "error": None,
            "args": {k: v if isinstance(v, plain) else repr(v) for k, v in vars(namespace).items()}}


results = [parse(list(argv)) for argv in json.load(sys.stdin)]
print(json.dumps({"sglang": version("sglang"), "results": results}, default=repr))
