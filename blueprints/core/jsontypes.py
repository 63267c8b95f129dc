"""JSON types, as the JSON Schema states them, for every input model.

pydantic's lax mode converts `"5"` into 5, `"yes"` and `1` into True and `True` into 1; the JSON Schema that
`blueprint schema` prints (and every editor applies) refuses them. `check_json_types` runs before a model's own
validation and refuses a value whose JSON type is not one its field's type allows, so the loader accepts exactly the
types the schema states (an integral number such as `2.0` is an integer in both). Every input base class uses it:
a new field gets it with no code of its own.
"""

from __future__ import annotations

import types
import typing
from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

from blueprints.core.errors import FieldProblem, excerpt, raise_problems

def absent_when_none(value: Any) -> bool:
    """`Field(exclude_if=absent_when_none)`: an optional field left unset writes no key, so stack configs and
    recorded shapes change only where it is set (pydantic's per-field exclusion)."""
    return value is None


def absent_when_off(value: Any) -> bool:
    """`Field(exclude_if=absent_when_off)`: a flag left off (or unset) writes no key."""
    return not value


#: JSON Schema type names, and how messages say them.
_SAY = {"null": "null", "boolean": "true or false", "integer": "a whole number", "number": "a number",
        "string": "a string", "array": "a list", "object": "a mapping"}


def _kinds(annotation: Any) -> tuple[frozenset[str], Any, Any] | None:
    """(JSON types allowed, list item annotation, dict value annotation) for a field annotation; None when any value
    is left to pydantic."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _kinds(typing.get_args(annotation)[0])
    if annotation is type(None):
        return frozenset({"null"}), None, None
    if annotation is bool:
        return frozenset({"boolean"}), None, None
    if annotation is int:
        return frozenset({"integer"}), None, None
    if annotation is float:
        return frozenset({"integer", "number"}), None, None
    if annotation is str:
        return frozenset({"string"}), None, None
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return frozenset(_value_kind(m.value) for m in annotation), None, None
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return frozenset({"object"}), None, None
    if origin is typing.Literal:
        return frozenset(_value_kind(v) for v in typing.get_args(annotation)), None, None
    if origin in (typing.Union, types.UnionType):
        parts = [_kinds(a) for a in typing.get_args(annotation)]
        if any(p is None for p in parts):
            return None
        items = [p[1] for p in parts if p[1] is not None]  # type: ignore[index]
        values = [p[2] for p in parts if p[2] is not None]  # type: ignore[index]
        return (frozenset().union(*(p[0] for p in parts)), items[0] if len(items) == 1 else None,  # type: ignore[index]
                values[0] if len(values) == 1 else None)
    if origin in (list, tuple, set, frozenset):
        args = typing.get_args(annotation)
        return frozenset({"array"}), args[0] if args else None, None
    if origin is dict:
        args = typing.get_args(annotation)
        return frozenset({"object"}), None, args[1] if len(args) == 2 else None
    return None


def _value_kind(value: Any) -> str:
    """The JSON type of a Python value as YAML or JSON loads it ("other" for anything else)."""
    if isinstance(value, Enum):
        value = value.value
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, (dict, BaseModel)):
        return "object"
    return "other"


#: The order messages list JSON types in.
_ORDER = ("object", "array", "string", "number", "integer", "boolean", "null")


def _unquoted_kind(text: str) -> str:
    """The JSON type `text` would have without quotes (`"5"` -> integer, `"true"` -> boolean); text out of
    `load_json`'s bounds (a quoted number of thousands of digits, brackets nested thousands deep) stays a string."""
    from blueprints.core.yamlio import load_json

    try:
        return _value_kind(load_json(text))
    except ValueError:
        return "string"


def _unquoted_hint(text: str) -> str:
    """The fix for a number or boolean that arrived as text: write it without quotes; but YAML 1.1 (PyYAML) reads an
    exponent without a decimal point or without a sign as text even unquoted (`1e30`), so then the form it reads as a
    number (`1.0e+30`)."""
    from blueprints.core.yamlio import load_yaml

    if not isinstance(load_yaml(text), str):
        return "; write it without quotes"
    mantissa, _, exponent = text.lower().partition("e")
    if "." not in mantissa:
        mantissa += ".0"
    if exponent[:1] not in ("+", "-"):
        exponent = "+" + exponent
    return (f"; YAML reads {text} as text even without quotes (an exponent needs a decimal point and a sign): write "
            f"{mantissa}e{exponent}")


#: What YAML did to an unquoted scalar where a string was meant.
YAML_HINTS = {
    "boolean": "; YAML reads unquoted yes/no/on/off/true/false as booleans: quote the value",
    "number": '; YAML reads an unquoted number as a number (1.30 becomes 1.3): quote the value as written, e.g. "1.30"',
    "integer": "; YAML reads an unquoted number as a number: quote the value",
}


def _fits(value: Any, allowed: frozenset[str]) -> bool:
    kind = _value_kind(value)
    return kind == "other" or kind in allowed or (kind == "integer" and "number" in allowed)


def _check(value: Any, annotation: Any, loc: tuple[str | int, ...], problems: list[FieldProblem]) -> None:
    spec = _kinds(annotation)
    if spec is None:
        return
    allowed, item, entry = spec
    if not _fits(value, allowed):
        kinds = [k for k in _ORDER if k in allowed and not (k == "integer" and "number" in allowed)]
        hint = _unquoted_hint(value) if isinstance(value, str) and _unquoted_kind(value) in allowed else \
            YAML_HINTS.get(_value_kind(value), "") if "string" in allowed else ""
        problems.append(FieldProblem(loc, f"expected {' or '.join(_SAY[k] for k in kinds)}, got "
                                          f"{_SAY.get(_value_kind(value), 'a value')} {excerpt(value)}{hint}"))
        return
    if item is not None and isinstance(value, (list, tuple)):
        for i, element in enumerate(value):
            _check(element, item, (*loc, i), problems)
    if entry is not None and isinstance(value, dict):
        for key, element in value.items():
            _check(element, entry, (*loc, str(key)), problems)


def check_json_types(model: type[BaseModel], data: Any) -> Any:
    """A `model_validator(mode="before")` body: refuse values whose JSON type the field's type does not allow.

    Raises:
        FieldProblem / FieldProblems: naming each field and what it expected.
    """
    if not isinstance(data, dict):
        return data
    problems: list[FieldProblem] = []
    for name, field in model.model_fields.items():
        if name in data:
            _check(data[name], field.annotation, (name,), problems)
    raise_problems(problems)
    return data


class ClosedModel(BaseModel):
    """Base of every closed, frozen model read from a file (a platform.yaml section, a stack config): unknown keys,
    inf/NaN and values of another JSON type than the schema states (`check_json_types`) are refused."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _json_types(cls, data: Any) -> Any:
        return check_json_types(cls, data)
