"""Parse `vllm serve` argvs with vLLM's own parser, from the source of the pinned release.

`vllm` (vllm/entrypoints/cli/main.py:73-91) builds a FlexibleArgumentParser with a `serve` subcommand
(vllm/entrypoints/cli/serve.py:153 `ServeSubcommand.subparser_init`: `make_arg_parser` of
vllm/entrypoints/openai/cli_args.py:340, i.e. FrontendArgs and `AsyncEngineArgs.add_cli_args` of
vllm/engine/arg_utils.py:2667 and :785, whose options `get_kwargs` (:400) derives from the config dataclasses of
vllm/config/), parses (FlexibleArgumentParser.parse_args, vllm/utils/argparse_utils.py:243: the model must come first
after `serve`), then runs the subcommand's `validate` (serve.py:150). This script does the same with those modules
imported for real from the vLLM source given as argv[1] (the v0.24.0 sdist's extracted folder), and so is every vLLM
module they import, except the stand-ins below (standins.py) for what needs torch, a GPU or the running server,
none of which the parser calls.

Reads a JSON list of argvs (each after `vllm`, so starting with `serve`) on stdin; prints one JSON line: vLLM's
version, `standin_options` (the parser's options whose default, type, choices or const come from a stand-in) and, for
each argv, its exit code (argparse's 2; 1 for an exception, as `vllm` exits on one), the parsed options and the error.
"""

import contextlib
import dataclasses
import enum
import io
import json
import sys
from pathlib import Path

from standins import install, standin_options

SOURCE = Path(sys.argv[1])
#: vLLM modules (with everything below them) that are stand-ins: torch's patches at import (env_override), platform
#: detection (platforms: no GPU here; the CUDA platform's `pre_register_and_update`, the one call the parser makes,
#: is the base class's no-op, platforms/interface.py:531), torch helpers (utils.torch_utils; ir, whose op registry
#: checks torch schemas at import, reached from ParallelConfig's validator when `get_kwargs` builds the default
#: configs), Hugging Face config loading (transformers_utils), and what serve.py imports to run the server, not to
#: parse (api_server, dp_supervisor, usage_lib).
STANDIN_MODULES = ("vllm.env_override", "vllm.platforms", "vllm.utils.torch_utils", "vllm.ir",
                   "vllm.transformers_utils", "vllm.entrypoints.openai.api_server",
                   "vllm.entrypoints.openai.dp_supervisor", "vllm.usage.usage_lib")
#: Third-party packages vLLM 0.24.0 requires that the tools virtualenv lacks and that the modules imported for real
#: import unconditionally: stand-ins (the sdist's requirements/cuda.txt:7 torch; common.txt:3 psutil, :10
#: transformers, :14 fastapi[standard] (uvloop through uvicorn[standard] [inferred]), :15 starlette, :17 openai, :19
#: prometheus_client, :20 pillow, :32 partial-json-parser, :34 pyzmq, :35 msgspec, :44 cloudpickle, :48 pybase64,
#: :49 cbor2, :52 openai-harmony). Any other missing import fails, as it would in the image, or takes vLLM's own
#: branch for an optional package that is absent. The real ones are the tools virtualenv's (pydantic 2.14.4:
#: common.txt:18 >=2.12.0).
STANDIN_PACKAGES = ("torch", "transformers", "PIL", "cbor2", "cloudpickle", "fastapi", "msgspec", "openai",
                    "openai_harmony", "partial_json_parser", "prometheus_client", "psutil", "pybase64", "starlette",
                    "uvloop", "zmq")

install(SOURCE, "vllm", packages=STANDIN_PACKAGES,
        real=lambda name: not any(name == m or name.startswith(m + ".") for m in STANDIN_MODULES))
from vllm.entrypoints.cli.serve import ServeSubcommand  # noqa: E402
from vllm.utils.argparse_utils import FlexibleArgumentParser  # noqa: E402
from vllm.version import __version__  # noqa: E402


def jsonable(value):
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=str)
    return repr(value)


def vllm_parser() -> tuple[FlexibleArgumentParser, ServeSubcommand, FlexibleArgumentParser]:
    """(the `vllm` parser, the serve subcommand, its parser), as vllm/entrypoints/cli/main.py builds them."""
    parser = FlexibleArgumentParser(prog="vllm", description="vLLM CLI")
    subparsers = parser.add_subparsers(required=False, dest="subparser")
    serve = ServeSubcommand()
    return parser, serve, serve.subparser_init(subparsers)


results = []
for argv in json.load(sys.stdin):
    parser, serve, _ = vllm_parser()
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            args = parser.parse_args(argv)
            if args.subparser == serve.name:
                serve.validate(args)
        results.append({"exit": 0, "args": json.loads(json.dumps(vars(args), default=jsonable)), "error": ""})
    except SystemExit as exc:
        results.append({"exit": exc.code if isinstance(exc.code, int) else 1, "args": {}, "error": err.getvalue()})
    except Exception as exc:  # noqa: BLE001 - `vllm` exits 1 with the traceback
        results.append({"exit": 1, "args": {}, "error": f"{type(exc).__name__}: {exc}"})
print(json.dumps({"vllm": __version__, "standin_options": standin_options(vllm_parser()[2]), "results": results}))
