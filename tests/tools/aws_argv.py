"""Parse AWS CLI command lines with awscli's own driver and argument tables (`awscli.clidriver`, v1: v2 is not on
PyPI; blueprints/catalog/processes.yaml records why v1's tables stand in for the image's 2.31.13), with the commands'
work (`_run_main`: the transfer, the token request) replaced by a recorder.

Runs in the tools virtualenv (tests/tools/checkov.in). Reads a JSON list on stdin, each entry an argv (starting with
`aws`) or `{"argv": [...], "keys": [...]}`; prints one JSON line: per argv its exit code and what the command
received (its parsed arguments and the global ones), and for `keys` (paths under the source prefix) those that the
command's include/exclude filters pass (awscli's own `create_filter`, which `s3 sync`/`cp` apply).
"""

import json
import sys
from importlib.metadata import version
from types import SimpleNamespace

from awscli.clidriver import create_clidriver
from awscli.customizations.eks.get_token import GetTokenCommand
from awscli.customizations.s3.filters import create_filter
from awscli.customizations.s3.subcommands import S3TransferCommand

received = []


def record(command, parsed_args, parsed_globals):
    plain = (str, int, float, bool, list, type(None))
    received.append({"command": command.NAME,
                     "args": {k: v for k, v in vars(parsed_args).items() if isinstance(v, plain)},
                     "globals": {k: v for k, v in vars(parsed_globals).items() if isinstance(v, plain)}})
    return 0


S3TransferCommand._run_main = record
GetTokenCommand._run_main = record


def kept(args: dict, keys: list[str]) -> list[str]:
    """`keys` (relative to the source prefix) that the parsed filters pass, as sync/cp filter an S3 listing."""
    src, dest = args["paths"]
    params = {"filters": args.get("filters") or [], "src": src, "dest": dest, "dir_op": True}
    root = src.removeprefix("s3://").rstrip("/") + "/"
    infos = [SimpleNamespace(src=root + key, src_type="s3", dest=f"{dest}/{key}", dest_type="local") for key in keys]
    return [info.src[len(root):] for info in create_filter(params).call(infos)]


results = []
for entry in json.load(sys.stdin):
    argv, keys = (entry["argv"], entry["keys"]) if isinstance(entry, dict) else (entry, None)
    received.clear()
    try:
        code = create_clidriver().main(list(argv[1:]))
    except SystemExit as exc:  # argparse refuses the argv (an unknown option, a missing path)
        code = exc.code if isinstance(exc.code, int) else 1
    result = {"argv": argv, "exit": code, "received": list(received)}
    if keys is not None and received:
        result["kept"] = kept(received[0]["args"], keys)
    results.append(result)
print(json.dumps({"awscli": version("awscli"), "results": results}))
