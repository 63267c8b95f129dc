"""Parse `vllm bench serve` argvs with vLLM's own parser, from the source of the pinned release.

vLLM's `vllm bench serve` builds its parser with `vllm.benchmarks.serve.add_cli_args` (which adds
`vllm.benchmarks.datasets.add_dataset_parser`) on a `vllm.utils.argparse_utils.FlexibleArgumentParser`
(vllm/entrypoints/cli/benchmark/serve.py). Those modules are imported from the vLLM source given as argv[1] (the
v0.24.0 sdist's extracted folder); everything else they import (torch-backed vLLM modules, and third-party packages
this Python lacks) is a stand-in that is never called while parsing (standins.py). The parser, its options,
choices, types and defaults are vLLM's.

Reads a JSON list of argvs (each without `vllm bench serve`) on stdin; prints one JSON line: for each argv, its exit
code, the parsed options (the JSON-safe ones) and argparse's error.
"""

import contextlib
import io
import json
import sys
from pathlib import Path

from standins import install

SOURCE = Path(sys.argv[1])
#: vLLM modules imported for real, from SOURCE.
REAL = ("vllm.benchmarks", "vllm.benchmarks.serve", "vllm.benchmarks.datasets", "vllm.benchmarks.datasets.datasets",
        "vllm.benchmarks.datasets.utils", "vllm.benchmarks.lib", "vllm.benchmarks.lib.endpoint_request_func",
        "vllm.utils.argparse_utils")

install(SOURCE, "vllm", real=lambda name: name in REAL or name.startswith("vllm.benchmarks."))
from vllm.benchmarks.serve import add_cli_args  # noqa: E402
from vllm.utils.argparse_utils import FlexibleArgumentParser  # noqa: E402

results = []
for argv in json.load(sys.stdin):
    parser = FlexibleArgumentParser(prog="vllm bench serve")
    add_cli_args(parser)
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            args = parser.parse_args(argv)
        parsed = {k: v for k, v in vars(args).items() if isinstance(v, (str, int, float, bool, list, type(None)))}
        results.append({"exit": 0, "args": parsed, "error": ""})
    except SystemExit as exc:
        results.append({"exit": exc.code if isinstance(exc.code, int) else 1, "args": {}, "error": err.getvalue()})
print(json.dumps({"results": results}))
