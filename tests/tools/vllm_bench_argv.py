"""Parse `vllm bench serve` argvs with vLLM's own parser, from the source of the pinned release.

vLLM's `vllm bench serve` builds its parser with `vllm.benchmarks.serve.add_cli_args` (which adds
`vllm.benchmarks.datasets.add_dataset_parser`) on a `vllm.utils.argparse_utils.FlexibleArgumentParser`
(vllm/entrypoints/cli/benchmark/serve.py). Those modules are imported from the vLLM source given as argv[1] (the
v0.24.0 sdist's extracted folder); everything else they import (torch-backed vLLM modules, and third-party packages
this Python lacks) is a stand-in that is never called while parsing. The parser, its options, choices, types and
defaults are vLLM's.

Reads a JSON list of argvs (each without `vllm bench serve`) on stdin; prints one JSON line: for each argv, its exit
code, the parsed options (the JSON-safe ones) and argparse's error.
"""

import contextlib
import importlib.abc
import importlib.machinery
import importlib.util
import io
import json
import sys
import types
from pathlib import Path

SOURCE = Path(sys.argv[1])
#: vLLM modules imported for real, from SOURCE.
REAL = ("vllm.benchmarks", "vllm.benchmarks.serve", "vllm.benchmarks.datasets", "vllm.benchmarks.datasets.datasets",
        "vllm.benchmarks.datasets.utils", "vllm.benchmarks.lib", "vllm.benchmarks.lib.endpoint_request_func",
        "vllm.utils.argparse_utils")


class _Anything(type):
    """A stand-in class: any attribute, call, subscript or union gives a stand-in."""

    def __getattr__(cls, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _Anything(name, (), {})

    def __call__(cls, *args, **kwargs):
        return _Anything("called", (), {})

    def __getitem__(cls, item):
        return cls

    def __or__(cls, other):
        return cls

    __ror__ = __or__

    def __iter__(cls):
        return iter(())


class _StubModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _Anything(name, (), {})


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Real vLLM modules in REAL from SOURCE; stand-ins for every other vllm module and for missing packages."""

    def find_spec(self, name, path, target=None):
        if name == "vllm" or name in REAL or any(name.startswith(r + ".") for r in ("vllm.benchmarks",)):
            parts = name.split(".")
            folder = SOURCE.joinpath(*parts)
            if folder.is_dir():
                init = folder / "__init__.py"
                if name == "vllm":  # the package itself: its __init__ imports torch; only its path is needed
                    spec = importlib.machinery.ModuleSpec(name, self, is_package=True)
                    spec.submodule_search_locations = [str(folder)]
                    return spec
                return importlib.util.spec_from_file_location(name, init, submodule_search_locations=[str(folder)])
            file = SOURCE.joinpath(*parts[:-1], parts[-1] + ".py")
            if file.exists() and (name in REAL or name.startswith("vllm.benchmarks.")):
                return importlib.util.spec_from_file_location(name, file)
        if name.startswith("vllm.") and name not in REAL:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        if not name.startswith("vllm"):
            top = sys.modules.get(name.split(".")[0])
            if "." in name and not isinstance(top, _StubModule):
                return None  # a real package's submodule (or a name it imports from itself): the normal import
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                if finder.find_spec(name, path, target) is not None:
                    return None  # a real package: the normal import
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        module = _StubModule(spec.name)
        module.__path__ = spec.submodule_search_locations or []
        return module

    def exec_module(self, module):
        pass


sys.meta_path.insert(0, _Finder())
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
