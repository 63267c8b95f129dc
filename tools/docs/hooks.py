"""MkDocs hook (mkdocs.yml `hooks:`): fills each `<!-- generated: NAME -->` marker of a page with the reference
`tools/docs/reference.py` generates from the code, so the reference is rebuilt from the objects on every build.

An unknown marker, or a generator that cannot describe the code truthfully, stops the build (`PluginError`)."""

from __future__ import annotations

import importlib.util
import posixpath
import re
import sys
from pathlib import Path

from mkdocs.exceptions import PluginError

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # the project's packages, from a checkout
    sys.path.insert(0, str(ROOT))


def load_reference():
    """`tools/docs/reference.py` as a module (tools/ is not a package)."""
    spec = importlib.util.spec_from_file_location("servingblueprints_docs_reference", Path(__file__).with_name(
        "reference.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


reference = load_reference()

MARKER = re.compile(r"^<!-- generated: ([a-z-]+) -->$", re.MULTILINE)
#: `<!-- readme: NAME -->` takes the README's text between `<!-- NAME:start -->` and `<!-- NAME:end -->` (the tour),
#: its links into docs/ made relative to the page, so one text serves both.
README_MARKER = re.compile(r"^<!-- readme: ([a-z-]+) -->$", re.MULTILINE)
DOCS_LINK = re.compile(r"\]\(docs/([^)#]+)(#[^)]*)?\)")


def readme_section(name: str, page_uri: str) -> str:
    """The README's section `name`, its `docs/...` links relative to the page `page_uri` (under docs/)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    if start not in text or end not in text:
        raise PluginError(f"{page_uri}: README.md has no {start} ... {end} section")
    section = text.split(start, 1)[1].split(end, 1)[0]
    here = posixpath.dirname(page_uri)
    return DOCS_LINK.sub(lambda m: f"]({posixpath.relpath(m.group(1), here or '.')}{m.group(2) or ''})", section)


def on_page_markdown(markdown: str, page, config, files) -> str:
    def fill(match: re.Match) -> str:
        name = match.group(1)
        if name not in reference.GENERATORS:
            raise PluginError(f"{page.file.src_uri}: unknown marker 'generated: {name}' (known: "
                              f"{sorted(reference.GENERATORS)})")
        try:
            return reference.GENERATORS[name]()
        except reference.ReferenceError as exc:
            raise PluginError(f"{page.file.src_uri}: {exc}") from None

    markdown = README_MARKER.sub(lambda m: readme_section(m.group(1), page.file.src_uri), markdown)
    return MARKER.sub(fill, markdown)
