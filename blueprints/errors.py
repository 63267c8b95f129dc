"""Errors a user can cause. The CLI prints them as `Type: message` and exits 2; anything else is a bug."""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError


class BlueprintError(Exception):
    """Base class of every error caused by user input (files, flags, catalog choices)."""


class RequirementsError(BlueprintError):
    """Raised when a requirements file is missing, is not YAML, or breaks the requirements schema."""


class CatalogError(BlueprintError):
    """Raised when a catalog id (model, GPU, instance type) is unknown or a catalog file is malformed."""


class SizingError(BlueprintError):
    """Raised when no plan meets the requirements; the message names the constraint to relax."""


class StackConfigError(BlueprintError):
    """Raised when a stack config (`stacks/Pulumi.<stack>.yaml`) is missing or does not hold a valid blueprint."""


#: Longest excerpt of a bad value an error message quotes, characters: a huge value (a pasted file, an expanded
#: alias) must not turn one error into megabytes of output.
MAX_EXCERPT_CHARS = 80


def excerpt(value: object, *, limit: int = MAX_EXCERPT_CHARS) -> str:
    """`repr(value)`, cut to `limit` characters with the full length noted when longer."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"


def format_validation_error(exc: ValidationError, *, source: Path | str, prefix: str = "") -> str:
    """Render a pydantic `ValidationError` as one line per problem: `file: field.path: message (got value)`.

    Args:
        exc: the error pydantic raised.
        source: the file (or config key) the data came from, named in every line.
        prefix: a dotted path prepended to each field path (e.g. `servingblueprints:blueprint`).

    Returns:
        A multi-line message, one problem per line, ready to print.
    """
    lines = [f"{source}: {exc.error_count()} problem(s)"]
    for err in exc.errors(include_url=False):
        loc = ".".join(str(part) for part in err["loc"] if part != "__root__")
        loc = ".".join(p for p in (prefix, loc) if p) or "(top level)"
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = "unknown field; check the spelling against `blueprint schema`"
        got = err.get("input")
        shown = "" if err["type"] in ("missing", "extra_forbidden") or isinstance(got, dict) else \
            f" (got {excerpt(got)})"
        if isinstance(got, bool) and err["type"] == "string_type":
            msg += "; YAML reads unquoted yes/no/on/off/true/false as booleans: quote the value"
        elif isinstance(got, (int, float)) and err["type"] == "string_type":
            msg += ("; YAML reads an unquoted number as a number (1.30 becomes 1.3): quote the value as written, "
                    'e.g. "1.30"')
        lines.append(f"  {loc}: {msg}{shown}")
    return "\n".join(lines)


def read_text_file(path: Path, error: type[BlueprintError], what: str, *, hint: str = "") -> str:
    """A UTF-8 text file's content; `error` naming the file when it is missing, unreadable or not UTF-8 text.

    Args:
        path: the file.
        error: the `BlueprintError` subclass to raise.
        what: what the file is, for the message (e.g. "requirements file").
        hint: appended to the message (e.g. "; run `blueprint plan` first").
    """
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{path}: the {what} is not UTF-8 text (byte {exc.start}){hint}") from None
    except OSError as exc:
        raise error(f"{path}: cannot read {what} ({exc.strerror}){hint}") from None
