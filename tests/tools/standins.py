"""Import an engine's own modules from the source of its pinned release without torch: stand-ins for what cannot be
imported here, for the scripts that run the engines' parsers (vllm_bench_argv.py, vllm_serve_argv.py, sglang_argv.py).

`install(source, package, real=..., packages=...)` puts a finder first on `sys.meta_path`: a module of `package`
(`vllm`, `sglang`) for which `real` holds is imported from `source` (the folder holding `<package>/`); any other module
of `package`, and the third-party packages named in `packages` (None: every one this Python does not have, the
standard library excepted), are stand-ins. A
stand-in module answers any attribute with a stand-in class; a stand-in class answers any attribute, call, subscript,
`|`, iteration, subclassing (with class keywords) and pydantic schema (any value), so module-level code that only
names torch types or calls torch at import runs. Nothing a parser computes should come from a stand-in: each script
reports the options that do (`standin_options`).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from collections.abc import Callable, Collection, Mapping
from pathlib import Path


class Anything(type):
    """A stand-in class: any attribute, call, subscript or union gives a stand-in."""

    def __new__(mcs, name, bases, namespace, **kwargs):  # `class S(msgspec.Struct, omit_defaults=True)`
        return super().__new__(mcs, name, bases, namespace)

    def __init__(cls, name, bases, namespace, **kwargs):
        super().__init__(name, bases, namespace)

    def __getattr__(cls, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return Anything(name, (), {})

    def __call__(cls, *args, **kwargs):
        return Anything("called", (), {})

    def __getitem__(cls, item):
        return cls

    def __or__(cls, other):
        return cls

    __ror__ = __or__

    def __iter__(cls):
        return iter(())

    def __get_pydantic_core_schema__(cls, source, handler):  # a field typed with a stand-in takes any value
        from pydantic_core import core_schema

        return core_schema.any_schema()


class StubModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return Anything(name, (), {})


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, source: Path, package: str, real: Callable[[str], bool], packages: Collection[str] | None,
                 attributes: Mapping[str, Mapping[str, object]]):
        self.source, self.package, self.real, self.packages = source, package, real, packages
        self.attributes = attributes

    def find_spec(self, name, path, target=None):
        if name == self.package or name.startswith(self.package + "."):
            parts = name.split(".")
            folder = self.source.joinpath(*parts)
            if self.real(name):
                if (folder / "__init__.py").exists():
                    return importlib.util.spec_from_file_location(name, folder / "__init__.py",
                                                                  submodule_search_locations=[str(folder)])
                if folder.is_dir():  # a namespace package (sglang/srt/ has no __init__.py)
                    spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
                    spec.submodule_search_locations = [str(folder)]
                    return spec
                file = self.source.joinpath(*parts[:-1], parts[-1] + ".py")
                if file.exists():
                    return importlib.util.spec_from_file_location(name, file)
            spec = importlib.machinery.ModuleSpec(name, self, is_package=True)
            if name == self.package:  # only its path: the real modules below it are found there
                spec.submodule_search_locations = [str(folder)]
            return spec
        top = name.split(".")[0]
        if self.packages is not None:
            return importlib.machinery.ModuleSpec(name, self, is_package=True) if top in self.packages else None
        if top in sys.stdlib_module_names:
            return None
        if "." in name and not isinstance(sys.modules.get(top), StubModule):
            return None  # a real package's submodule (or a name it imports from itself): the normal import
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            if finder.find_spec(name, path, target) is not None:
                return None  # a real package: the normal import
        return importlib.machinery.ModuleSpec(name, self, is_package=True)

    def create_module(self, spec):
        module = StubModule(spec.name)
        module.__path__ = spec.submodule_search_locations or []
        module.__dict__.update(self.attributes.get(spec.name, {}))
        return module

    def exec_module(self, module):
        pass


def install(source: Path, package: str, *, real: Callable[[str], bool], packages: Collection[str] | None = None,
            attributes: Mapping[str, Mapping[str, object]] | None = None) -> None:
    """Put the finder first on `sys.meta_path` (see the module's docstring). `attributes`: `{stand-in module:
    {name: value}}`, the values it gives where module-level code needs a real one (`torch.__version__`)."""
    sys.meta_path.insert(0, _Finder(source, package, real, packages, attributes or {}))


def is_standin(value, depth: int = 0) -> bool:
    """Whether `value` is a stand-in, a stand-in module's function, or holds one (in a list, set, dict or
    dataclass, 4 levels deep)."""
    if isinstance(value, Anything) or isinstance(type(value), Anything):
        return True
    if depth > 3:
        return False
    if isinstance(value, (list, tuple, set, frozenset)):
        return any(is_standin(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return any(is_standin(v, depth + 1) for v in value.values())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return any(is_standin(getattr(value, f.name, None), depth + 1) for f in dataclasses.fields(value))
    module = getattr(value, "__module__", None)
    return callable(value) and isinstance(sys.modules.get(module or ""), StubModule)


def standin_options(parser: argparse.ArgumentParser) -> dict[str, list[str]]:
    """`{option: [default|type|choices|const, ...]}` of each of `parser`'s options that takes a stand-in there; empty
    choices count (what a list built by iterating a stand-in gives: no value would be accepted)."""
    found = {}
    for action in parser._actions:
        where = [a for a in ("default", "type", "choices", "const") if is_standin(getattr(action, a, None))
                 or (a == "choices" and action.choices is not None and len(action.choices) == 0)]
        if where:
            found[(action.option_strings or [action.dest])[0]] = where
    return found
