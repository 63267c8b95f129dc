"""Errors a user can cause. The CLI prints them as `Type: message` and exits 2; anything else is a bug."""

from __future__ import annotations

import os
import stat
import typing
from dataclasses import dataclass

from pathlib import Path

from pydantic import BaseModel, ValidationError

from blueprints.core import bounds


class BlueprintError(Exception):
    """Base class of every error caused by user input (files, flags, catalog choices).

    `rule` names the cross-field rule the input broke when a JSON Schema cannot state it
    (`blueprints.requirements.rules.CROSS_FIELD_RULES`; `blueprint schema` documents each), else None.
    """

    rule: str | None = None

    def __init__(self, message: str, *, rule: str | None = None) -> None:
        super().__init__(message)
        if rule is not None:
            self.rule = rule


class RequirementsError(BlueprintError):
    """Raised when a requirements file is missing, is not YAML, or breaks the requirements schema."""


class CatalogError(BlueprintError):
    """Raised when a catalog id (model, GPU, instance type) is unknown or a catalog file is malformed."""


@dataclass(frozen=True)
class Fix:
    """One change a refusal proposes (`SizingError.fixes`), for `blueprints.plan.hints` to prove by planning again.

    Attributes:
        field: a requirements field by its dotted path (`budget.max_monthly_usd`, `slo.itl_p95_ms`,
            `environments.prod.max_replicas`) or a policy limit (`policy:<env>:maxGpus`).
        value: the value proposed.
        text: the words proposing it, e.g. `raise budget.max_monthly_usd to >= 16276`.
        slot: the words in the message this fix would replace, when it is an alternative to another fix (the least
            and the cheapest option's GPUs); None: `text` itself.
    """

    field: str
    value: float
    text: str
    slot: str | None = None


class SizingError(BlueprintError):
    """Raised when no plan meets the requirements; the message names the constraint to relax.

    `fixes`: the changes the message proposes (`Fix`), each proven by `blueprints.plan.hints.prove` before the
    message reaches a user; `groups`: after proving, the changes to make together, one tuple per proven fix.
    """

    rule = "feasible-plan"

    def __init__(self, message: str, *, rule: str | None = None, fixes: tuple[Fix, ...] = (),
                 groups: tuple[tuple[Fix, ...], ...] = ()) -> None:
        super().__init__(message, rule=rule)
        self.fixes = fixes
        self.groups = groups


class StackConfigError(BlueprintError):
    """Raised when a stack config (`stacks/Pulumi.<stack>.yaml`) is missing or does not hold a valid blueprint."""


class DeployedStackError(BlueprintError):
    """Raised when a command about a deployed stack (`verify`, `benchmark`) lacks what it needs: the Pulumi CLI and
    the stack's outputs, AWS credentials, or access to the cluster; the message says what to provide."""


class BenchmarkError(BlueprintError):
    """Raised when benchmark settings (`--rates`, `--duration`) or a benchmark result file are invalid."""


class CalibrationError(BlueprintError):
    """Raised when `blueprint calibrate` cannot fit a stack's runs (another model or GPU, too many errors, too few
    requests) or a calibration file (`stacks/calibration/*.yaml`) is invalid."""


class ChoiceError(BlueprintError):
    """Raised when `blueprint choose` cannot compare the finalists' results (another workload than the pilot's, fewer
    than two finalists, failed requests, a result older than its pilot, an expired pilot, an unreadable file)."""


#: Longest excerpt of a bad value an error message quotes, characters: a huge value (a pasted file, an expanded
#: alias) must not turn one error into megabytes of output.
MAX_EXCERPT_CHARS = 80
#: Longest single problem message, characters (a validator's message may embed what it was given).
MAX_PROBLEM_CHARS = 600
#: Most problems one message lists; the rest are counted.
MAX_PROBLEMS_LISTED = 25


def excerpt(value: object, *, limit: int = MAX_EXCERPT_CHARS) -> str:
    """`repr(value)`, cut to `limit` characters with the full length noted when longer."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"


def clip(text: str, *, limit: int = MAX_PROBLEM_CHARS) -> str:
    """`text` cut to `limit` characters with the full length noted when longer."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"


class FieldProblem(ValueError):
    """A validator's problem with one field, named by its path below the model being validated.

    Raise it (or `FieldProblems`) from a pydantic validator instead of a plain `ValueError`, so the error names the
    exact field rather than the section: `format_validation_error` appends `loc` to the validator's own location.

    Args:
        loc: the field's path below the validated model, e.g. `("environments", "prod", "spot")` or `"traffic"`.
        message: what is wrong and the fix.
        rule: the id of the cross-field rule broken (`blueprints.requirements.rules.CROSS_FIELD_RULES`), when a JSON
            Schema cannot state it.
    """

    def __init__(self, loc: tuple[str | int, ...] | str, message: str, *, rule: str | None = None) -> None:
        super().__init__(message)
        self.loc = tuple(loc.split(".")) if isinstance(loc, str) else tuple(loc)
        self.message = message
        self.rule = rule


class FieldProblems(ValueError):
    """Several `FieldProblem`s found by one validator (each concern's checker returns all its problems)."""

    def __init__(self, problems: list[FieldProblem]) -> None:
        super().__init__("; ".join(p.message for p in problems))
        self.problems = list(problems)


def raise_problems(problems: list[FieldProblem]) -> None:
    """Raise `problems` from a validator: nothing when empty, the one problem, or `FieldProblems`."""
    if len(problems) == 1:
        raise problems[0]
    if problems:
        raise FieldProblems(problems)


#: pydantic error types of a number outside its bounds: the message adds the field's reason (`bounds.REASONS`).
_BOUND_ERRORS = frozenset({"greater_than", "greater_than_equal", "less_than", "less_than_equal"})
#: What a string pattern means, in words, by the pattern: modules that define a pattern register it here with
#: `describe_pattern`, so "should match '^(s3://[a-z0-9]...'" reads "should be an s3://bucket/prefix/ ... URI".
PATTERNS: dict[str, str] = {}


def describe_pattern(pattern: str, words: str) -> str:
    """Register what `pattern` means for error messages (`should be <words>`); returns `pattern`."""
    PATTERNS[pattern] = words
    return pattern


#: Parts of a pydantic error location that name no field: union members, validator functions, dict-key markers.
_TAG_PARTS = ("function-", "json-or-python[", "tagged-union[", "literal[", "enum[", "nullable[", "union[")
_TYPE_PARTS = frozenset({"str", "int", "float", "bool", "none", "list", "dict", "is-instance", "lax-or-strict"})


def _named(item: object) -> str | None:
    """A list entry's name for messages: its `name`, else its `id` (a model entry), when a short string."""
    if isinstance(item, dict):
        for key in ("name", "id"):
            value = item.get(key)
            if isinstance(value, str) and 0 < len(value) <= 63:
                return value
    return None


def field_path(loc: tuple[str | int, ...], data: object = None) -> str:
    """A pydantic error location as the field path users write, with list entries by index and name.

    Example: `("models", 1, "max_context_tokens")` over data whose second model is named `reranker` ->
    `models[1] (reranker).max_context_tokens`; a discriminated union's tag (`engine.vllm.port`) and pydantic's
    type and validator markers are left out (`engine.port`).

    Args:
        loc: the location (strings and list indices).
        data: the validated input, to name list entries and recognise union tags; optional.
    """
    out = ""
    node = data
    for i, part in enumerate(loc):
        if isinstance(part, int):
            item = node[part] if isinstance(node, list) and -len(node) <= part < len(node) else None
            name = _named(item)
            out += f"[{part}]" + (f" ({name})" if name else "")
            node = item
            continue
        text = str(part)
        if text == "__root__":
            continue
        present = isinstance(node, dict) and text in node
        is_tag = not present and (text.startswith(_TAG_PARTS) or text in _TYPE_PARTS or (
            isinstance(node, dict) and node.get("kind") == text))
        if is_tag and (i < len(loc) - 1 or not isinstance(node, dict)):
            continue
        if text == "[key]":
            out += " (the name)"
            continue
        out += f".{text}" if out else text
        node = node.get(text) if isinstance(node, dict) else None
    return out


def _models_in(annotation: object) -> list[type[BaseModel]]:
    """The pydantic models an annotation holds: itself, or inside `X | None`, `list[X]`, `dict[str, X]`, `Annotated`."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]


def field_description(model: type[BaseModel] | None, loc: tuple[str | int, ...]) -> str | None:
    """The `description` of the field at pydantic error location `loc` below `model`, or None (no model given, no
    such field, no description). List indices, mapping keys (`environments.<name>`) and union tags are stepped over:
    a name no candidate model has as a field is taken for one of those, so the last field named is the one described
    (a list's own description for one of its entries); a section without a description is described by its model's
    docstring's first line."""
    candidates = [model] if model is not None else []
    info = None
    for part in loc:
        if isinstance(part, int):
            continue
        owner = next((m for m in candidates if part in m.model_fields), None)
        if owner is None:  # a mapping key, a union tag or a validator marker
            continue
        info = owner.model_fields[part]
        candidates = _models_in(info.annotation)
    if info is None:
        return None
    if info.description or len(candidates) != 1 or not candidates[0].__doc__:
        return info.description
    line = candidates[0].__doc__.strip().split("\n")[0].rstrip(".")  # a section's own docstring says what it is
    return line[:1].lower() + line[1:] if line[1:2].islower() else line


def _missing(where: str, description: str | None) -> str:
    """A required field's message: what to add, and what it holds when the model says."""
    return f"missing: add `{where}`" + (f" ({description})" if description else "")


def problem_lines(exc: ValidationError, *, data: object = None, prefix: str = "",
                  model: type[BaseModel] | None = None) -> list[tuple[str, str, str | None]]:
    """Each problem of a pydantic `ValidationError` as (field path, message, cross-field rule or None).

    A validator's `FieldProblem`s land on their own fields; a plain `ValueError` on the validated section. With
    `model` (the validated model), a missing field's message says what the field holds and a string that does not
    match a pattern no module described (`describe_pattern`) says what the field is, both from its `description`.
    """
    out = []
    for err in exc.errors(include_url=False):
        loc = tuple(err["loc"])
        error = (err.get("ctx") or {}).get("error")
        problems = error.problems if isinstance(error, FieldProblems) else [error] \
            if isinstance(error, FieldProblem) else None
        if problems:
            for problem in problems:
                where = field_path(loc + problem.loc, data)
                out.append((".".join(p for p in (prefix, where) if p) or "(top level)", clip(problem.message),
                            problem.rule))
            continue
        msg = err["msg"].removeprefix("Value error, ")
        where = ".".join(p for p in (prefix, field_path(loc, data)) if p) or "(top level)"
        if err["type"] == "missing":
            msg = _missing(where, field_description(model, loc))
        if err["type"] == "extra_forbidden":
            msg = "unknown field; check the spelling against `blueprint schema`"
        if err["type"] == "string_pattern_mismatch":
            pattern = str((err.get("ctx") or {}).get("pattern", ""))
            described = field_description(model, loc)
            msg = (f"should be {PATTERNS[pattern]}" if pattern in PATTERNS else
                   f"should be {described} (the pattern {excerpt(pattern)})" if described else
                   f"should match {excerpt(pattern)}")
        got = err.get("input")
        if err["type"] not in ("missing", "extra_forbidden") and not isinstance(got, dict):
            msg += f" (got {excerpt(got)})"
        field = next((str(p) for p in reversed(loc) if isinstance(p, str)), "")
        if err["type"] in _BOUND_ERRORS and field in bounds.REASONS:
            msg += f": {bounds.REASONS[field]}"
        if isinstance(got, bool) and err["type"] == "string_type":
            msg += "; YAML reads unquoted yes/no/on/off/true/false as booleans: quote the value"
        elif isinstance(got, (int, float)) and err["type"] == "string_type":
            msg += ("; YAML reads an unquoted number as a number (1.30 becomes 1.3): quote the value as written, "
                    'e.g. "1.30"')
        out.append((where, clip(msg), None))
    return out


def format_validation_error(exc: ValidationError, *, source: Path | str, prefix: str = "", data: object = None,
                            model: type[BaseModel] | None = None) -> str:
    """Render a pydantic `ValidationError` as one line per problem: `file: field.path: message (got value)`.

    Args:
        exc: the error pydantic raised.
        source: the file (or config key) the data came from, named in every line.
        prefix: a dotted path prepended to each field path (e.g. `servingblueprints:blueprint`).
        data: the validated input: list entries are then named by index and name (`models[1] (reranker)`).
        model: the validated model: a missing field, or a string of a pattern no module described, is then explained
            by the field's `description` (`problem_lines`).

    Returns:
        A multi-line message, one problem per line (at most `MAX_PROBLEMS_LISTED`), ready to print.
    """
    problems = problem_lines(exc, data=data, prefix=prefix, model=model)
    lines = [f"{source}: {len(problems)} problem(s)"]
    lines += [f"  {where}: {msg}" for where, msg, _ in problems[:MAX_PROBLEMS_LISTED]]
    if len(problems) > MAX_PROBLEMS_LISTED:
        lines.append(f"  ... and {len(problems) - MAX_PROBLEMS_LISTED} more")
    return "\n".join(lines)


#: The most bytes of any text input read (a requirements file or stack config is a few kilobytes, a baseline report
#: of a large estate a few megabytes): a larger file (or /dev/zero) is refused after reading this much, never read
#: whole.
MAX_TEXT_FILE_BYTES = 16 * 1024 * 1024


def refuse_non_regular(st: os.stat_result, path: Path, error: type[BlueprintError], what: str) -> None:
    """Raise `error` naming `path` when `st` (its `os.stat`) is not a regular file: a FIFO would block the read until
    a writer comes, a device may never end."""
    if not stat.S_ISREG(st.st_mode):
        kind = ("a directory" if stat.S_ISDIR(st.st_mode) else "a FIFO (named pipe)" if stat.S_ISFIFO(st.st_mode)
                else "a socket" if stat.S_ISSOCK(st.st_mode) else "a device" if stat.S_ISCHR(st.st_mode)
                or stat.S_ISBLK(st.st_mode) else "not a regular file")
        raise error(f"{path}: the {what} is {kind}, not a regular file; pass the file itself")


def read_file_bytes(path: Path, error: type[BlueprintError], what: str, *, max_bytes: int = MAX_TEXT_FILE_BYTES,
                    hint: str = "", too_large: str = "is it the right file?") -> bytes:
    """A regular file's bytes, at most `max_bytes`; `error` naming the file when it is missing, a symlink loop, not a
    regular file (a FIFO, device or socket: refused from `os.stat`, never opened for reading, so nothing blocks),
    unreadable or larger than `max_bytes` (read no further: /dev/zero behind a symlink is refused, not read whole;
    `too_large` is that message's fix)."""
    try:
        refuse_non_regular(os.stat(path), path, error, what)
        # O_NONBLOCK: a FIFO swapped in after the stat opens at once (and is refused by its fstat) instead of waiting
        # for a writer; on a regular file it changes nothing.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as file:
            refuse_non_regular(os.fstat(file.fileno()), path, error, what)
            data = file.read(max_bytes + 1)
    except OSError as exc:
        raise error(f"{path}: cannot read {what} ({exc.strerror}){hint}") from None
    if len(data) > max_bytes:
        bound = f"{max_bytes // 2**20} MiB" if max_bytes % 2**20 == 0 else f"{max_bytes:,} bytes"
        raise error(f"{path}: the {what} is larger than {bound}, far more than any {what} needs; {too_large}{hint}")
    return data


def read_text_file(path: Path, error: type[BlueprintError], what: str, *, hint: str = "") -> str:
    """A UTF-8 text file's content, its line ends read as `\\n` (as `Path.read_text` reads them); `error` naming the
    file as `read_file_bytes` does (missing, not a regular file, unreadable, larger than `MAX_TEXT_FILE_BYTES`) or
    when it is not UTF-8 text.

    Args:
        path: the file.
        error: the `BlueprintError` subclass to raise.
        what: what the file is, for the message (e.g. "requirements file").
        hint: appended to the message (e.g. "; run `blueprint plan` first").
    """
    data = read_file_bytes(path, error, what, hint=hint)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{path}: the {what} is not UTF-8 text (byte {exc.start}){hint}") from None
    return text.replace("\r\n", "\n").replace("\r", "\n")
