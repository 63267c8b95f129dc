"""A stack settings file's `config:` map as the Pulumi CLI reads it, and what the engine hands the program.

Facts, recorded with their sources and tests in `blueprints/catalog/pulumi_config.yaml` (pulumi/pulumi at
v3.259.0-14-g1b5949891b; the Python SDK in uv.lock is 3.272):
- A key is `<namespace>:<name>`, or the old form `<namespace>:config:<name>` read as `<namespace>:<name>`; any other
  key with a colon makes the CLI refuse the file (`sdk/go/common/resource/config/key.go` `ParseKey`).
- A key without a colon is in the project's namespace: `blueprint` is read as `<project>:blueprint`, the project
  being `Pulumi.yaml`'s `name:` (`sdk/go/common/workspace/loaders.go` `stackConfigNamespacedWithProject`, called by
  `LoadProjectStackBytes`; https://www.pulumi.com/docs/iac/concepts/config/ "Configuration Keys": "In cases where a
  simple name without a colon is used, Pulumi automatically uses the current project name ... as the namespace"). That
  rewrite fills a Go map while ranging over another (random order): a key spelled both ways keeps one value at random.
- A mapping with the single key `secure` holding a string is a secret (ciphertext); an object or list that contains
  one is a secret as a whole (`sdk/go/common/resource/config/object.go` `isSecureValue`, `object.Secure`).
- The engine passes the program a string per key: a string as it is, a bool or number as its JSON text, an object
  or list as JSON (`object.go` `MarshalString`); the SDK's `pulumi.Config(ns).get(name)` reads `<ns>:<name>`.
- YAML is read with gopkg.in/yaml.v3 (`sdk/go/common/encoding/marshal.go`): a key repeated in one mapping is an error
  (so is it for `blueprints.core.yamlio.load_yaml`); its plain scalars resolve by YAML 1.2 rules (`resolve.go`
  `resolve`, and `decode.go` keeps a timestamp as text in an untyped value), where PyYAML's follow YAML 1.1 (`yes`,
  `on`, `1:30`, dates, `1e3`, `0o17`, `08` read differently): `yaml_v3_differences` names every such scalar.
"""

from __future__ import annotations

import functools
import json
import math
import re
from dataclasses import dataclass
from typing import Any, Mapping

import yaml

from blueprints.core.errors import StackConfigError

#: The form `pulumi config set` writes and the CLI reads: `<namespace>:<name>`.
KEY_FORM = "<namespace>:<name>"


@dataclass(frozen=True)
class ConfigEntry:
    """One config value as the CLI reads it: `key` (`<namespace>:<name>`), the key as the file spells it, the YAML
    value, and whether it is (or contains) a `secure:` value."""

    key: str
    spelled: str
    value: Any
    secret: bool

    @property
    def namespace(self) -> str:
        return self.key.split(":", 1)[0]

    @property
    def name(self) -> str:
        return self.key.split(":", 1)[1]


def cli_key(spelled: str, *, project: str) -> str:
    """The key the Pulumi CLI reads for a key as spelled in a stack file (`ParseKey` after the project-namespace
    default). Raises `ValueError` with the CLI's own complaint for a key it refuses."""
    colons = spelled.count(":")
    if colons == 0:
        return f"{project}:{spelled}"
    if colons == 1:
        return spelled
    parts = spelled.split(":")
    if colons == 2 and parts[1] == "config":
        return f"{parts[0]}:{parts[2]}"
    raise ValueError(f"could not parse {spelled} as a configuration key (configuration keys should be of the form "
                     f"`{KEY_FORM}`)")


def is_secure_value(value: Any) -> bool:
    """A `{secure: <ciphertext>}` value (exactly that one key, a string)."""
    return isinstance(value, dict) and set(value) == {"secure"} and isinstance(value["secure"], str)


def contains_secure(value: Any) -> bool:
    """The value is a secure value or an object or list holding one at any depth (`object.Secure`)."""
    if is_secure_value(value):
        return True
    if isinstance(value, dict):
        return any(contains_secure(v) for v in value.values())
    if isinstance(value, list):
        return any(contains_secure(v) for v in value)
    return False


def cli_config(config: Mapping[Any, Any], *, project: str, source: str) -> dict[str, ConfigEntry]:
    """The config map as the Pulumi CLI reads it: key (`<namespace>:<name>`) -> entry, in file order.

    Args:
        config: the stack file's `config:` mapping, as YAML gives it.
        project: the project's name (`Pulumi.yaml` `name:`), the namespace of a bare key.
        source: what messages name (the stack config's path).

    Raises:
        StackConfigError: a key that is not text, one the CLI refuses, or two spellings of one key (the CLI keeps
            one of them at random); the message names the key as spelled, what the CLI reads and the fix.
    """
    found: dict[str, ConfigEntry] = {}
    problems = []
    for spelled, value in config.items():
        if not isinstance(spelled, str):
            problems.append(f"config key {spelled!r} is not text; write it as `{project}:<name>` (quoted if needed)")
            continue
        try:
            key = cli_key(spelled, project=project)
        except ValueError as exc:
            problems.append(f"{exc}: `pulumi up` refuses this file; fix or remove {spelled}")
            continue
        if key in found:
            bare = ":" not in found[key].spelled or ":" not in spelled
            why = (f"a key without a namespace is in the project's, {project}" if bare else
                   "`<namespace>:config:<name>` is the old spelling of `<namespace>:<name>`")
            problems.append(f"{found[key].spelled} and {spelled} are both {key} to the Pulumi CLI ({why}), "
                            "which reads one of the two values at random (its namespacing fills a Go map): the review "
                            f"cannot show what `pulumi up` reads; keep only {key}")
            continue
        found[key] = ConfigEntry(key=key, spelled=spelled, value=value, secret=contains_secure(value))
    if problems:
        raise StackConfigError(f"{source}: " + "; ".join(problems))
    return found


def engine_value(entry: ConfigEntry) -> str:
    """The string the engine passes the program for a (non-secret) value: text as it is, no value as "", anything else
    as compact JSON (Go's `encoding/json`: sorted keys, no spaces, integral floats without a fraction)."""
    if isinstance(entry.value, str):
        return entry.value
    if entry.value is None:
        return ""  # `key:` with no value reads as "" (sdk/go/common/workspace/loaders_test.go TestEmptyValueWarning)
    return json.dumps(_go_numbers(entry.value), sort_keys=True, separators=(",", ":"))


def _go_numbers(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return int(value)  # Go's encoding/json writes float64 600000.0 as 600000
    if isinstance(value, dict):
        return {k: _go_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_go_numbers(v) for v in value]
    return value


def project_config_problems(project: Any, *, source: str) -> list[str]:
    """Values the project file (`Pulumi.yaml`) gives every stack's config: a `config:` entry with `value:` or
    `default:`, or a shorthand scalar or list (read as one), which `pulumi up` applies where a stack config sets no
    value and the review of a stack config cannot see (`sdk/go/common/workspace/project.go`
    `RewriteShorthandConfigValues`, `Project.Validate`). A type-only declaration gives none. Each with the fix."""
    config = project.get("config") if isinstance(project, dict) else None
    if config is None:
        return []
    if not isinstance(config, dict):
        return [f"{source}: `config:` must be a mapping of key declarations"]
    return [f"{source}: config.{key} gives every stack a value that `pulumi up` applies and no stack config shows; "
            "remove it (stack configs hold every setting they apply: set it per stack with `pulumi config set`)"
            for key, declared in config.items()
            if not isinstance(declared, dict) or "value" in declared or "default" in declared]


#: yaml.v3's table of plain scalars read by name (`resolve.go` `resolveMapList`; `<<` is a merge key, not a value).
_V3_NAMED: dict[str, Any] = {
    **dict.fromkeys(("true", "True", "TRUE"), True), **dict.fromkeys(("false", "False", "FALSE"), False),
    **dict.fromkeys(("", "~", "null", "Null", "NULL"), None), **dict.fromkeys((".nan", ".NaN", ".NAN"), math.nan),
    **dict.fromkeys((".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"), math.inf),
    **dict.fromkeys(("-.inf", "-.Inf", "-.INF"), -math.inf)}
#: `resolve.go` `yamlStyleFloat`.
_V3_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
#: Go's `strconv.ParseInt(s, 0, 64)` syntax (sign, then 0x / 0o / 0b / leading-0 octal / decimal).
_GO_INT = re.compile(r"([-+]?)(0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)")
#: `resolve.go` `parseTimestamp`: four digits and a dash start every timestamp it accepts.
_V3_TIMESTAMP = re.compile(r"[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}([Tt ][0-9]{1,2}:[0-9]{1,2}:[0-9]{1,2}(\.[0-9]+)?"
                           r"(Z|[-+][0-9]{2}:[0-9]{2})?)?")


def yaml_v3_scalar(text: str) -> Any:
    """What gopkg.in/yaml.v3 decodes an untagged plain scalar into, decoding into an untyped value (`resolve.go`
    `resolve`; `decode.go` keeps a timestamp as its text there): None, bool, int, float or str."""
    if text in _V3_NAMED:
        return _V3_NAMED[text]
    first = text[:1]
    if first == ".":
        return float(text) if _V3_FLOAT.fullmatch(text) else text
    if not (first.isdigit() and first.isascii()) and first not in "+-":
        return text
    if _V3_TIMESTAMP.fullmatch(text):
        return text
    plain = text.replace("_", "")
    match = _GO_INT.fullmatch(plain)
    if match:
        digits = match.group(2)
        prefix = digits[:2].lower()
        if prefix in ("0x", "0o", "0b"):
            value = int(digits[2:], {"0x": 16, "0o": 8, "0b": 2}[prefix])
        else:
            value = int(digits, 8 if digits.startswith("0") else 10)
        value = -value if match.group(1) == "-" else value
        if -(2 ** 63) <= value < 2 ** 64:
            return value
    if _V3_FLOAT.fullmatch(plain):
        return float(plain)
    return text


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b


def yaml_v3_differences(text: str, *, under: str = "config") -> list[str]:
    """Plain scalars below the top-level key `under` that PyYAML (YAML 1.1, what this project reads) and the Pulumi
    CLI's yaml.v3 (YAML 1.2) read differently: `<path>: <text> is <PyYAML's> here but <yaml.v3's> to the Pulumi CLI`.
    `text` must already have been read with `blueprints.core.yamlio.load_yaml` (bounded); a node reached twice through
    aliases is judged once. Remembered per (text, under) in this process: a plan re-reads the account's stack
    configs, and a plan check every project's."""
    return list(_v3_differences(text, under))


@functools.lru_cache(maxsize=256)
def _v3_differences(text: str, under: str) -> tuple[str, ...]:
    # libyaml's composer when built in (~10x faster on a stack config; every plan reads the account's stack configs):
    # it marks a plain scalar's style '' where the pure-Python one writes None.
    root = yaml.compose(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    if not isinstance(root, yaml.MappingNode):
        return ()
    constructor = yaml.constructor.SafeConstructor()
    seen: set[int] = set()
    found: list[str] = []

    def walk(node: yaml.Node, path: str) -> None:
        if id(node) in seen:
            return
        seen.add(id(node))
        if isinstance(node, yaml.ScalarNode):
            if not node.style and node.tag.startswith("tag:yaml.org,2002:"):
                ours, theirs = constructor.construct_object(node), yaml_v3_scalar(node.value)
                if not _same(ours, theirs):
                    found.append(f"{path}: {node.value} is {ours!r} here but {theirs!r} to the Pulumi CLI (YAML 1.2)")
        elif isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                walk(value, f"{path}.{key.value}" if isinstance(key, yaml.ScalarNode) else path)
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                walk(item, f"{path}[{i}]")

    for key, value in root.value:
        if isinstance(key, yaml.ScalarNode) and key.value == under:
            walk(value, under)
    return tuple(found)
