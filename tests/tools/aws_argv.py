"""Parse AWS CLI command lines with awscli's own driver and argument tables (`awscli.clidriver`, v1: v2 is not on
PyPI; blueprints/catalog/processes.yaml records why v1's tables stand in for the image's 2.31.13), with the commands'
work (`_run_main`: the transfer, the token request) replaced by a recorder.

Runs in the tools virtualenv (tests/tools/checkov.in). Reads a JSON list of argvs (each starting with `aws`) on
stdin; prints one JSON line: per argv its exit code and what the command received (its parsed arguments and the
global ones).
"""

import json
import sys
from importlib.metadata import version

from awscli.clidriver import create_clidriver
from awscli.customizations.eks.get_token import GetTokenCommand
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
results = []
for argv in json.load(sys.stdin):
    received.clear()
    try:
        code = create_clidriver().main(list(argv[1:]))
    except SystemExit as exc:  # argparse refuses the argv (an unknown option, a missing path)
        code = exc.code if isinstance(exc.code, int) else 1
    results.append({"argv": argv, "exit": code, "received": list(received)})
print(json.dumps({"awscli": version("awscli"), "results": results}))
