"""Parse SGLang server command lines with SGLang's own parser, from the source of the pinned release: the `argparse`
parser `prepare_server_args` builds (`ArgumentParser(prog="sglang serve")` + `ServerArgs.add_cli_args`,
python/sglang/srt/server_args.py:7209-7221 at 0.5.14; `python -m sglang.launch_server` and `sglang serve` both call
it, launch_server.py:67, cli/serve.py:124-126), without `ServerArgs.from_cli_args`, whose `__post_init__` reads the GPU
and the model's config.

server_args.py and every SGLang module it imports (sglang/__init__.py first, as in the image) are imported for real
from the SGLang source given as argv[1] (the folder holding `sglang/`, tools/engine_source/fetch.py), except the
stand-ins below (standins.py) for what needs torch at import and that the parser does not call. Most options are
derived from ServerArgs' annotated fields (srt/arg_groups/arg_utils.py `add_cli_args_from_dataclass`); the
reasoning and tool-call parser choices come from the real detector tables (srt/parser/reasoning_parser.py,
srt/function_call/function_call_parser.py).

Reads a JSON list on stdin, each entry the container's argv: `python3 -m sglang.launch_server ...` or `sglang serve
...` (the command is stripped, the rest is what `prepare_server_args` receives). Prints one JSON line: SGLang's
version, `standin_options` (the parser's options whose default, type, choices or const come from a stand-in) and, per
argv, its exit code (0 parsed, 2 refused by argparse), argparse's message when refused, and the parsed namespace
(every option, defaults included; values that are not JSON are given as their repr).
"""

import argparse
import contextlib
import io
import json
import sys
from pathlib import Path

from standins import install, standin_options

SOURCE = Path(sys.argv[1])
#: SGLang modules (with everything below them) that are stand-ins; server_args.py imports one name from each, used
#: only after parsing (`__post_init__` and its checks), never by `add_cli_args`: srt.configs (`__init__` defines every
#: model's transformers config class, which huggingface_hub's `@strict` refuses over a stand-in PretrainedConfig;
#: server_args.py:43, used :3500), srt.distributed (parallel_state.py:76 `int(torch.distributed.ReduceOp.SUM)` at
#: import; server_args.py:45-47, used :5833) and srt.layers (attention/fla/utils.py:265 `getattr(torch, device)` at
#: import; server_args.py:50 FLA_CHUNK_SIZE, used :6623).
STANDIN_MODULES = ("sglang.srt.configs", "sglang.srt.distributed", "sglang.srt.layers")
#: Third-party packages the modules imported for real import unconditionally and the tools virtualenv lacks:
#: stand-ins. sglang 0.5.14's METADATA Requires-Dist :271 torch==2.11.0 (with triton, a dependency of torch's Linux
#: build [inferred], imported at srt/utils/common.py:85), :276 torchvision, :278 transformers==5.8.1, :252 psutil, :254
#: pybase64, :250 pillow (PIL), :233 IPython, :257 pyzmq (zmq), :244 openai==2.6.1, :249 partial_json_parser, :227
#: fastapi (its starlette, srt/utils/common.py:88), and transformers' safetensors (srt/connector/serde/safe_serde.py:6).
#: Any other missing import fails, or takes SGLang's own branch for an optional package that is absent. The real ones
#: are the tools virtualenv's (pydantic 2.14.4, huggingface_hub 1.21.0, numpy 2.4.6, requests). The platform checks
#: (`is_cuda()`, `is_hip()`) see stand-ins; no option depends on them: the parser built here has the same 421 actions
#: (option strings, dest, default, type, choices, nargs, const) as an installed sglang 0.5.14 over torch 2.11.0 (CPU)
#: and transformers 5.8.1, and parses every argv of tests/test_engine_parsers.py to the same exit, error and namespace
#: [compared once, 2026-12-07; not re-run by the suite].
STANDIN_PACKAGES = ("torch", "triton", "torchvision", "transformers", "psutil", "pybase64", "PIL", "IPython", "zmq",
                    "openai", "partial_json_parser", "starlette", "safetensors")
#: Values module-level code needs from a stand-in: the torch release sglang 0.5.14 pins (METADATA :271), which
#: srt/utils/common.py:104 parses at import.
STANDIN_ATTRIBUTES = {"torch": {"__version__": "2.11.0"}}

install(SOURCE, "sglang", packages=STANDIN_PACKAGES, attributes=STANDIN_ATTRIBUTES,
        real=lambda name: not any(name == m or name.startswith(m + ".") for m in STANDIN_MODULES))
from sglang.srt.server_args import ServerArgs  # noqa: E402
from sglang.version import __version__  # noqa: E402

COMMANDS = (["python3", "-m", "sglang.launch_server"], ["python", "-m", "sglang.launch_server"], ["sglang", "serve"])


def server_argv(argv: list[str]) -> list[str] | None:
    """The arguments after the launcher command, or None when `argv` does not start with one."""
    return next((argv[len(c):] for c in COMMANDS if argv[:len(c)] == c), None)


def server_parser() -> argparse.ArgumentParser:
    """The parser `prepare_server_args` builds (server_args.py:7209-7210)."""
    parser = argparse.ArgumentParser(prog="sglang serve")
    ServerArgs.add_cli_args(parser)
    return parser


def parse(argv: list[str]) -> dict:
    rest = server_argv(argv)
    if rest is None:
        return {"argv": argv, "exit": 2, "error": f"not an SGLang server command: {argv[:3]}", "args": None}
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr):
            namespace = server_parser().parse_args(rest)
    except SystemExit as exc:  # argparse refuses the argv (an unknown option, a bad choice, a missing value)
        lines = stderr.getvalue().strip().splitlines()  # the usage, then "sglang serve: error: ..."
        return {"argv": argv, "exit": exc.code if isinstance(exc.code, int) else 2,
                "error": lines[-1] if lines else "", "args": None}
    plain = (str, int, float, bool, list, dict, type(None))
    return {"argv": argv, "exit": 0, "error": None,
            "args": {k: v if isinstance(v, plain) else repr(v) for k, v in vars(namespace).items()}}


results = [parse(list(argv)) for argv in json.load(sys.stdin)]
print(json.dumps({"sglang": __version__, "standin_options": standin_options(server_parser()), "results": results},
                 default=repr))
