"""YAML and JSON reading, bounded against hostile input: every document the CLI reads (requirements files, stack
configs, platform.yaml, calibration and result files, baseline reports, policy configs) goes through `load_yaml` or
`load_json`, and every file through `blueprints.core.errors.read_text_file` (regular files only, bounded in bytes).

YAML goes through PyYAML's libyaml-backed safe loader when it is built in (same results, ~10x faster on large stack
configs), else its pure-Python safe loader. Bounds, each checked before anything is composed or built:

- a document larger than `MAX_DOCUMENT_BYTES` is refused before parsing;
- a number of more than `MAX_NUMBER_DIGITS` digits, or mappings and lists nested more than `MAX_DEPTH` deep, are
  refused naming the field, from the parser's event stream (YAML: the parser keeps its own stack, nothing recurses)
  or a token scan (JSON) before any value is built: Python refuses to convert an integer of more than 4,300 digits
  (`sys.get_int_max_str_digits`) and recursion overflows long before 200,000 nested lists;
- a key given twice in one mapping (YAML) or object (JSON) is an error, not "the last one wins";
- a YAML document whose aliases expand it beyond `MAX_EXPANDED_NODES` nodes or `MAX_DEPTH` levels (an "alias bomb":
  a few hundred bytes that reference anchors of anchors) is refused after composing, before anything is built or
  validated, as is a recursive alias. Requirements files and stack configs are a few kilobytes and nest about ten
  levels; these bounds leave ample room.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import yaml

from blueprints.core.memo import remembered

_BASE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
#: Largest document accepted, bytes (UTF-8). The biggest generated stack config (a 100-model estate) is ~200 KB.
MAX_DOCUMENT_BYTES = 2 * 1024 * 1024
#: Most YAML nodes a document may expand to once every alias is followed.
MAX_EXPANDED_NODES = 200_000
#: Deepest nesting of mappings and lists accepted. The deepest generated stack config nests 9 levels
#: (config > blueprint > predictions > cost_lines > [i] > ...); a preview report about as many.
MAX_DEPTH = 64
#: Most digits a number may have (no value any file holds needs more than 20; Python refuses to convert an integer
#: of more than 4,300, `sys.get_int_max_str_digits`, CVE-2020-10735).
MAX_NUMBER_DIGITS = 100


class BoundsError(yaml.YAMLError):
    """The document is too large, nested too deep, holds a number of too many digits, or its aliases expand it too
    far or recursively. `problem`: what, naming the field."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem
        self.problem_mark = None
        self.pos = 0  # where in the text, when known (a JSON token's offset)


class SafeUniqueKeyLoader(_BASE_LOADER):  # type: ignore[misc, valid-type]
    """Safe loader that refuses duplicate mapping keys (PyYAML silently keeps the last)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: set = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep)


def expanded_size(node: yaml.Node, *, limit: int = MAX_EXPANDED_NODES, depth: int = MAX_DEPTH) -> int:
    """Nodes `node` expands to with every alias followed (a shared node counts each time it is referenced), walked
    with a stack of its own (no recursion, however deep the document).

    Raises:
        BoundsError: beyond `limit` nodes or `depth` levels, or an alias refers to a node that contains it.
    """
    sizes: dict[int, int] = {}
    depths: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(node, False)]
    while stack:
        current, done = stack.pop()
        key = id(current)
        children = [n for pair in current.value for n in pair] if isinstance(current, yaml.MappingNode) else \
            list(current.value) if isinstance(current, yaml.SequenceNode) else []
        if done:
            open_nodes.discard(key)
            sizes[key] = 1 + sum(sizes[id(c)] for c in children)
            depths[key] = 1 + max((depths[id(c)] for c in children), default=0) if children or \
                not isinstance(current, yaml.ScalarNode) else 0
            if sizes[key] > limit:
                raise BoundsError(f"the document expands to more than {limit:,} YAML nodes through its aliases "
                                  "(anchors referenced over and over); write the values out instead of aliasing them")
            if depths[key] > depth:
                raise BoundsError(f"the document nests mappings and lists more than {depth} levels deep through its "
                                  "aliases; write the values out instead of aliasing them")
            continue
        if key in sizes:
            continue
        if key in open_nodes:
            raise BoundsError("a YAML alias refers to a node that contains it (a recursive document)")
        open_nodes.add(key)
        stack.append((current, True))
        stack.extend((c, False) for c in children if id(c) not in sizes)
    return sizes[id(node)]


def _where(path: list[str | int]) -> str:
    """A field path as messages write it: `models[0].traffic.peak_requests_per_s`; `(top level)` for none; a deep
    one by its first and last parts."""
    out = ""
    for part in (path if len(path) <= 12 else [*path[:6], "...", *path[-4:]]):
        out += f"[{part}]" if isinstance(part, int) else part if part == "..." else f".{part}" if out else str(part)
    return out or "(top level)"


def _too_deep(path: list[str | int]) -> BoundsError:
    return BoundsError(f"{_where(path)}: mappings and lists nested more than {MAX_DEPTH} levels deep; no file a "
                       "blueprint reads nests more than about ten")


def _too_long(path: list[str | int], digits: int) -> BoundsError:
    return BoundsError(f"{_where(path)}: a number of {digits:,} digits; no value a blueprint reads has more than "
                       f"{MAX_NUMBER_DIGITS} (quote it if it is text)")


class _Path:
    """The field path of the node a scan is at: one frame per open mapping or list (its kind, the current key or
    index, and whether a mapping waits for a key)."""

    def __init__(self) -> None:
        self.frames: list[list] = []

    def here(self) -> list[str | int]:
        return [f[1] for f in self.frames if f[1] is not None]

    def node(self, key: object = None) -> None:
        """A node starts in the current collection: the next list index, a mapping's key (`key`: its value when it
        is a scalar) or the value of the key before."""
        if not self.frames:
            return
        frame = self.frames[-1]
        if frame[0] == "seq":
            frame[1] = (frame[1] + 1) if isinstance(frame[1], int) else 0
        elif frame[2]:
            frame[1], frame[2] = str(key) if key is not None else "?", False
        else:
            frame[2] = True

    def open(self, kind: str) -> None:
        self.frames.append([kind, None, True])
        if len(self.frames) > MAX_DEPTH:
            raise _too_deep(self.here())

    def close(self) -> None:
        self.frames.pop()


def _check_yaml_events(text: str) -> None:
    """Depth and number lengths of a YAML document from its parser events, before anything is composed.

    Raises:
        BoundsError: naming the field; yaml.YAMLError: malformed input.
    """
    loader = _BASE_LOADER(text)
    path = _Path()
    try:
        while loader.check_event():
            event = loader.get_event()
            if isinstance(event, yaml.ScalarEvent):
                path.node(event.value)
                digits = sum(c.isdigit() for c in event.value)
                if digits > MAX_NUMBER_DIGITS and event.implicit[0] and \
                        loader.resolve(yaml.ScalarNode, event.value, event.implicit) in _NUMBER_TAGS:
                    raise _too_long(path.here(), digits)
            elif isinstance(event, yaml.AliasEvent):
                path.node()
            elif isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
                path.node()
                path.open("seq" if isinstance(event, yaml.SequenceStartEvent) else "map")
            elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
                path.close()
    finally:
        loader.dispose()


_NUMBER_TAGS = ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")
#: A JSON token: a string, a punctuation mark, or a bare literal (number, true, false, null).
_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"?|[\[\]{}:,]|[^\s\[\]{}:,"]+')


def _check_json_tokens(text: str) -> None:
    """Depth and number lengths of a JSON document from a token scan, before `json.loads` builds anything.

    Raises:
        BoundsError: naming the field.
    """
    deep = text.count("[") + text.count("{") > MAX_DEPTH
    if not deep and not re.search(rf"\d{{{MAX_NUMBER_DIGITS + 1},}}", text):
        return  # neither bound can be reached: no scan
    path = _Path()
    pending: str | None = None  # a string token that may be an object's key
    for match in _JSON_TOKEN.finditer(text):
        token = match.group()
        if token == ":":
            if pending is not None:
                path.node(pending)
            pending = None
            continue
        if pending is not None:  # the string was a value
            path.node()
            pending = None
        if token == ",":
            continue
        if token in ("[", "{"):
            path.node()
            try:
                path.open("seq" if token == "[" else "map")
            except BoundsError as exc:
                exc.pos = match.start()
                raise
        elif token in ("]", "}"):
            if path.frames:
                path.close()
        elif token.startswith('"'):
            if path.frames and path.frames[-1][0] == "map" and path.frames[-1][2]:
                pending = json.loads(token) if token.endswith('"') and len(token) > 1 else token
            else:
                path.node()
        else:
            path.node()
            digits = sum(c.isdigit() for c in token)
            if digits > MAX_NUMBER_DIGITS:
                exc = _too_long(path.here(), digits)
                exc.pos = match.start()
                raise exc


def _check_size(text: str) -> None:
    if len(text.encode("utf-8", "surrogatepass")) > MAX_DOCUMENT_BYTES:
        raise BoundsError(f"the document is larger than {MAX_DOCUMENT_BYTES // 1024 // 1024} MiB; requirements files "
                          "and stack configs are a few kilobytes")


#: Documents `load_yaml` has parsed in this process, by their exact text: `blueprint plan --check` reads each stack
#: config and requirements file of the project many times over (once per requirements file it plans), and the
#: bounds checks and the unique-key loader cost ~25x a copy of what they build. Keyed on the text itself, an edited
#: document is parsed again; only documents that parse are kept; each caller gets its own copy (callers may change
#: what they read). Bounded: documents up to `_PARSED_MAX_CHARS` characters (stack configs are ~15 kB), cleared at
#: `_PARSED_KEPT` entries.
_parsed: dict[str, Any] = {}
_PARSED_KEPT = 512
_PARSED_MAX_CHARS = 200_000


def load_yaml(text: str) -> Any:
    """Parse one YAML document safely, within `MAX_DOCUMENT_BYTES`, `MAX_DEPTH`, `MAX_NUMBER_DIGITS` and
    `MAX_EXPANDED_NODES` (once per text in this process: `_parsed`).

    Raises:
        yaml.YAMLError: malformed input (with `problem_mark`), a key repeated within one mapping, or a document out of
            bounds (`BoundsError`, with `problem` naming the field).
    """
    if len(text) > _PARSED_MAX_CHARS:
        return _load_yaml(text)
    return copy.deepcopy(remembered(_parsed, text, lambda: _load_yaml(text), kept=_PARSED_KEPT))


def _load_yaml(text: str) -> Any:
    _check_size(text)
    _check_yaml_events(text)
    loader = SafeUniqueKeyLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        expanded_size(node)
        return loader.construct_document(node)
    finally:
        loader.dispose()


class JsonBoundsError(json.JSONDecodeError):
    """A JSON document out of bounds (`load_json`): a `JSONDecodeError`, so every reader's message for bad JSON
    names the file and, in `msg`, the field and the bound."""


def load_json(text: str) -> Any:
    """Parse one JSON document within `MAX_DOCUMENT_BYTES`, `MAX_DEPTH` and `MAX_NUMBER_DIGITS`, checked before
    anything is built.

    Raises:
        json.JSONDecodeError: malformed input, a key repeated within one object (JSON's "last one wins" is not read
            as meant), or out of bounds (`JsonBoundsError`, its `msg` naming the field).
    """
    try:
        _check_size(text)
        _check_json_tokens(text)
    except BoundsError as exc:
        raise JsonBoundsError(exc.problem, text, exc.pos) from None

    def unique(pairs: list[tuple[str, Any]]) -> dict:
        seen: dict = {}
        for key, value in pairs:
            if key in seen:
                raise json.JSONDecodeError(f"duplicate key {key!r}", text, 0)
            seen[key] = value
        return seen

    return json.loads(text, object_pairs_hook=unique)
