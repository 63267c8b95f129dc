"""YAML reading through PyYAML's libyaml-backed safe loader when it is built in (same results, ~10x faster on
large stack configs), else its pure-Python safe loader, bounded against hostile input:

- a key given twice in one mapping is an error, not "the last one wins";
- a document larger than `MAX_DOCUMENT_BYTES` is refused before parsing;
- a document whose aliases expand it beyond `MAX_EXPANDED_NODES` nodes (an "alias bomb": a few hundred bytes that
  reference anchors of anchors) is refused after composing, before anything is built or validated, as is a
  recursive alias. Requirements files and stack configs are a few kilobytes; these bounds leave ample room.
"""

from __future__ import annotations

from typing import Any

import yaml

_BASE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
#: Largest document accepted, bytes (UTF-8). The biggest generated stack config (a 100-model estate) is ~200 KB.
MAX_DOCUMENT_BYTES = 2 * 1024 * 1024
#: Most YAML nodes a document may expand to once every alias is followed.
MAX_EXPANDED_NODES = 200_000


class BoundsError(yaml.YAMLError):
    """The document is too large, or its aliases expand it too far or recursively."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem
        self.problem_mark = None


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


def expanded_size(node: yaml.Node, *, limit: int = MAX_EXPANDED_NODES) -> int:
    """Nodes `node` expands to with every alias followed (a shared node counts each time it is referenced).

    Raises:
        BoundsError: beyond `limit`, or an alias refers to a node that contains it.
    """
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()

    def size(current: yaml.Node) -> int:
        key = id(current)
        if key in sizes:
            return sizes[key]
        if key in open_nodes:
            raise BoundsError("a YAML alias refers to a node that contains it (a recursive document)")
        open_nodes.add(key)
        if isinstance(current, yaml.MappingNode):
            total = 1 + sum(size(k) + size(v) for k, v in current.value)
        elif isinstance(current, yaml.SequenceNode):
            total = 1 + sum(size(item) for item in current.value)
        else:
            total = 1
        open_nodes.discard(key)
        if total > limit:
            raise BoundsError(f"the document expands to more than {limit:,} YAML nodes through its aliases (anchors "
                              "referenced over and over); write the values out instead of aliasing them")
        sizes[key] = total
        return total

    return size(node)


def load_yaml(text: str) -> Any:
    """Parse one YAML document safely, within `MAX_DOCUMENT_BYTES` and `MAX_EXPANDED_NODES`.

    Raises:
        yaml.YAMLError: malformed input (with `problem_mark`), a key repeated within one mapping, or a document out of
            bounds (`BoundsError`, with `problem`).
    """
    if len(text.encode("utf-8", "surrogatepass")) > MAX_DOCUMENT_BYTES:
        raise BoundsError(f"the document is larger than {MAX_DOCUMENT_BYTES // 1024 // 1024} MiB; requirements files "
                          "and stack configs are a few kilobytes")
    loader = SafeUniqueKeyLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        expanded_size(node)
        return loader.construct_document(node)
    finally:
        loader.dispose()
