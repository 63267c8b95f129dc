"""Bad input for the CLI, and what the CLI must do with it: shared by the suite's fuzz and parity tests
(`tests/test_fuzz.py`, `tests/test_schema_parity.py`: bounded in count, derandomized) and `benchmarks/fuzz.py`
(thousands of documents, timed).

Inputs: mutations of the bundled requirements files and stack configs (`mutate`; `hostile`: text no mapping can
carry, a number of thousands of digits or lists nested 200,000 deep), and documents generated from
`blueprint schema` (`schema_documents`, hypothesis-jsonschema). Verdicts: the loader's and the planner's (`verdict`),
the schema's (`schema_validator`), and the CLI's (`Project.plan`, `Project.preview`: exit code, output size,
traceback, and whether the stack folder changed all or nothing).
"""

from __future__ import annotations

import copy
import functools
import datetime as dt
import json
import random
import re
import shutil
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from pydantic import ValidationError

from blueprints.core.errors import BlueprintError, problem_lines
from blueprints.core.journal import STAGING_DIR
from blueprints.requirements.rules import documented

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "stacks" / "requirements"
PLAN_DATE = dt.date(2026, 12, 1)

# --- The schema as editors apply it ----------------------------------------------------------------------------------


def _ecma(pattern: str) -> str:
    """A JSON Schema (ECMA-262) pattern for Python's `re`: `$` ends the value (Python's `$` also matches before a
    trailing newline)."""
    return pattern[:-1] + r"\Z" if pattern.endswith("$") and not pattern.endswith(r"\$") else pattern


def _pattern(validator, pattern, instance, schema):
    if validator.is_type(instance, "string") and not re.search(_ecma(pattern), instance):
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(validator, patterns, instance, schema):
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if re.search(_ecma(pattern), key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(validator, additional, instance, schema):
    if not validator.is_type(instance, "object") or additional is not False:
        yield from jsonschema._keywords.additionalProperties(validator, additional, instance, schema)
        return
    patterns = [_ecma(p) for p in schema.get("patternProperties", {})]
    extra = [k for k in instance if k not in schema.get("properties", {})
             and not any(re.search(p, k) for p in patterns)]
    if extra:
        yield jsonschema.ValidationError(f"additional properties {extra!r} are not allowed")


#: Draft 2020-12 with ECMA-262 `$` in `pattern`, `patternProperties` and the keys `additionalProperties` rejects.
EcmaValidator = jsonschema.validators.extend(jsonschema.Draft202012Validator, {
    "pattern": _pattern, "patternProperties": _pattern_properties, "additionalProperties": _additional_properties})


def schema_validator() -> Any:
    """A validator of `blueprint schema` as an editor applies it."""
    from blueprints.requirements.service import requirements_json_schema

    return EcmaValidator(requirements_json_schema())


def _ecma_schema(schema: dict) -> dict:
    """`schema` with every pattern's `$` written `\\Z`, so hypothesis generates no trailing newline that an ECMA-262
    `$` would refuse."""

    def fix(node: Any) -> Any:
        if isinstance(node, dict):
            out = {}
            for key, value in node.items():
                if key == "pattern" and isinstance(value, str):
                    out[key] = _ecma(value)
                elif key == "patternProperties" and isinstance(value, dict):
                    out[key] = {_ecma(p): fix(v) for p, v in value.items()}
                else:
                    out[key] = fix(value)
            return out
        if isinstance(node, list):
            return [fix(v) for v in node]
        return node

    return fix(schema)


#: JSON Schema keywords that relate an object's fields to each other (the cross-field rules `blueprint schema`
#: states). hypothesis-jsonschema resolves them by rejection and canonicalisation: with them a document takes about a
#: minute to generate, without them a tenth of a second.
_CONDITIONALS = ("allOf", "anyOf", "oneOf", "if", "then", "else", "not")
_NULL = {"type": "null"}


def _without_conditionals(node: Any) -> Any:
    """`node` without the conditionals of its object schemas (those with `properties`); a field's own `anyOf` (a
    type or null) stays."""
    if isinstance(node, dict):
        return {k: _without_conditionals(v) for k, v in node.items()
                if not ("properties" in node and k in _CONDITIONALS)}
    if isinstance(node, list):
        return [_without_conditionals(v) for v in node]
    return node


def structural_schema() -> dict:
    """`blueprint schema` without its cross-field rules: every field's own type, bounds and pattern, and nothing
    relating fields. Documents generated from it are fast to make; the full schema accepts some and refuses others,
    and the loader must agree with it on each (`tests/test_schema_parity.py`)."""
    from blueprints.requirements.service import requirements_json_schema

    return _ecma_schema(_without_conditionals(requirements_json_schema()))


def generation_schema() -> dict:
    """A subset of `blueprint schema` fast to generate from: the structural schema tightened so that every cross-field
    rule the schema states holds by construction (one `model` with top-level `traffic`, a catalog `id`, no measured
    latency, quantization or task override, no cluster add-ons or Roles Anywhere, internal exposure with the open
    internet acknowledged, every environment on demand and always on). Every document generated from it is valid
    against the full schema (the tests assert it), so the loader must plan it or fail only on a rule the schema
    documents as one it cannot state."""
    schema = structural_schema()
    defs = schema["$defs"]
    schema["properties"]["models"] = _NULL
    for name in ("model", "traffic"):
        schema["properties"][name] = next(b for b in schema["properties"][name]["anyOf"] if b != _NULL)
    schema["required"] = [*schema["required"], "model", "traffic"]
    model = defs["ModelSpec"]
    model["required"] = [*model.get("required", []), "id"]
    model["properties"]["id"] = next(b for b in model["properties"]["id"]["anyOf"] if b != _NULL)
    for name in ("architecture", "measured_latency_ms", "measured_instance_type", "quantization", "task", "traffic"):
        model["properties"][name] = _NULL
    for name in ("cluster_addons", "roles_anywhere"):
        defs["Operations"]["properties"][name] = _NULL
    exposure = defs["Exposure"]["properties"]
    exposure["scope"] = {"const": "internal"}
    exposure["acknowledge_open_internet"] = {"const": True}
    environment = defs["Environment"]["properties"]
    environment["spot"] = {"const": False}
    environment["min_replicas"] = {"anyOf": [{"type": "integer", "minimum": 1, "maximum": 1000}, _NULL]}
    return schema


def schema_documents():
    """A hypothesis strategy of documents valid against `blueprint schema` (generated from `generation_schema`).
    Built at the first draw, once per process (`_from_schema`), not when a test module is imported."""
    from hypothesis import strategies as st

    return st.deferred(lambda: _from_schema("generation"))


def structural_documents():
    """A hypothesis strategy of documents with every field of the right type and within its bounds, the fields'
    relations left to chance (generated from `structural_schema`). Built at the first draw, as `schema_documents`."""
    from hypothesis import strategies as st

    return st.deferred(lambda: _from_schema("structural"))


@functools.cache
def _from_schema(which: str):
    """hypothesis-jsonschema's strategy of `which` schema (`generation_schema`, `structural_schema`): seconds of
    canonicalising, which a test process that never draws from it (a worker that runs other tests) never pays."""
    from hypothesis_jsonschema import from_schema

    _remember_subschema_strategies()
    _remember_validator_classes()
    return from_schema(generation_schema() if which == "generation" else structural_schema())


@functools.cache
def _remember_subschema_strategies() -> None:
    """Make hypothesis-jsonschema build each subschema's strategy once per process, not at every draw.

    Its `object_schema` strategy builds the strategy of every property it draws anew, inside the draw
    (`from_object_schema` calls `__from_schema`, which canonicalises and merges the subschema): three quarters of a
    draw's time (py-spy, tests/test_schema_parity.py, hypothesis-jsonschema 0.23.1 as uv.lock pins). A strategy is a
    function of (schema, alphabet, custom formats) alone, and hypothesis strategies are meant to be reused, so the
    strategy built for a schema's canonical JSON serves every later draw of it: the derandomized examples are the
    same documents, drawn about 3x faster. Another version without the private `__from_schema` keeps its own."""
    import hypothesis_jsonschema._from_schema as library

    build = vars(library).get("__from_schema")
    if build is None:
        return
    built: dict[tuple[str, int, int], tuple[Any, Any, Any]] = {}

    def remembered(schema: Any, *, alphabet: Any, custom_formats: Any) -> Any:
        key = (json.dumps(schema, sort_keys=True), id(alphabet), id(custom_formats))
        found = built.get(key)  # the ids are only trusted while the objects they name are the stored ones
        if found is None or found[0] is not alphabet or found[1] is not custom_formats:
            found = built[key] = (alphabet, custom_formats,
                                  build(schema, alphabet=alphabet, custom_formats=custom_formats))
        return found[2]

    remembered.__wrapped__ = build  # type: ignore[attr-defined]
    setattr(library, "__from_schema", remembered)


@functools.cache
def _remember_validator_classes() -> None:
    """Make hypothesis-jsonschema check each subschema against its metaschema once per process.

    Canonicalising a subschema asks `_get_validator_class`, which runs `check_schema` (the subschema validated against
    the JSON Schema metaschema) under an `lru_cache` of 128 schemas: a draw of the generation schema canonicalises more
    than that, so the cache kept evicting what the next draw asked for again (890 checks in
    tests/test_schema_parity.py's two property tests, a fifth of their time; hypothesis-jsonschema 0.23.1 as uv.lock
    pins). The validator class is a function of the schema alone, so an unbounded cache of the same function answers
    the same: the derandomized examples are the same documents. Another version without the private
    `__get_validator_class` keeps its own."""
    import hypothesis_jsonschema._canonicalise as library

    cached = vars(library).get("__get_validator_class")
    if cached is None or not hasattr(cached, "__wrapped__"):
        return
    setattr(library, "__get_validator_class", functools.cache(cached.__wrapped__))


# --- The loader's and the planner's verdicts -------------------------------------------------------------------------


@dataclass
class Verdict:
    """What the loader and the planner made of a document: `loaded`, `planned`, and every problem that names no
    documented cross-field rule (`undocumented`: rule, message)."""

    loaded: bool = False
    planned: bool = False
    rules: list[str] = field(default_factory=list)
    undocumented: list[tuple[str | None, str]] = field(default_factory=list)


def verdict(doc: Any, *, plan: bool = True) -> Verdict:
    """Load `doc` as a requirements file's content and (with `plan`) plan every environment on its own platforms."""
    from blueprints.catalog import load_catalog
    from blueprints.plan.planner import plan as plan_requirements
    from blueprints.requirements.service import Requirements

    out = Verdict()
    try:
        req = Requirements.model_validate(doc)
    except ValidationError as exc:
        for where, message, rule in problem_lines(exc, data=doc):
            out.rules.append(rule or "(schema)")
            if not documented(rule):
                out.undocumented.append((rule, f"{where}: {message}"))
        return out
    out.loaded = True
    if plan:
        try:
            plan_requirements(req, load_catalog(), as_of=PLAN_DATE)
            out.planned = True
        except BlueprintError as exc:
            out.rules.append(exc.rule or "(none)")
            if not documented(exc.rule):
                out.undocumented.append((exc.rule, str(exc)[:500]))
    return out


# --- Mutations -------------------------------------------------------------------------------------------------------

#: Values a mutation puts in place of another: the break-it pass's reproducers among them.
VALUES: tuple[Any, ...] = (
    None, True, False, 0, -1, 1, 2, 0.5, 5e-324, 1e-310, 1e-6, 1e307, 1e12, 2**31, 2**63, 10**30, -0.0, "", " ", "x",
    "5", "yes", "null", "hf://../..", "s3://b/../x", "ml.g5.xlarge", "p5.48xlarge", "h100", "a\nb", "a=b,c",
    "x" * 300, "üñí", [], {}, ["x"], [None], {"x": 1}, "prod", "platform", "0.0.0.0/0", "10.0.0.1/8", "llama-3.1-8b",
    "vision", "onnx", "int4", "fp8", "existing-cluster", "managed", "public", "eu-west-1", "us-east-1",
)


def paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path into `node` (mapping keys and list indices), outermost first."""
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, value in node.items():
            out += paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += paths(value, (*prefix, i))
    return out


def _get(node: Any, path: tuple) -> Any:
    for part in path:
        node = node[part]
    return node


def _number_variant(value: Any, rng: random.Random) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return rng.choice(VALUES)
    return rng.choice([value * 10 ** rng.randint(1, 12), value / 10 ** rng.randint(1, 12), -value, 0,
                       value + 1, value - 1, float(value) + 0.5, 2**31 + value, int(value) if value == value else 0])


def mutate(doc: Any, rng: random.Random, *, edits: int | None = None) -> Any:
    """A copy of `doc` with one to three edits at random paths: a value replaced (by one of `VALUES`, or a number
    scaled, negated or shifted), a key deleted, an unknown key added, a list entry duplicated or dropped."""
    doc = copy.deepcopy(doc)
    for _ in range(edits or rng.randint(1, 3)):
        all_paths = paths(doc)
        if not all_paths:
            return rng.choice(VALUES)
        path = rng.choice(all_paths)
        parent, key = (_get(doc, path[:-1]), path[-1])
        action = rng.random()
        if action < 0.5:
            parent[key] = _number_variant(parent[key], rng) if rng.random() < 0.5 else rng.choice(VALUES)
        elif action < 0.65 and isinstance(parent, dict):
            del parent[key]
        elif action < 0.75 and isinstance(parent, dict):
            parent[f"{key}_typo"] = parent[key]
        elif action < 0.9 and isinstance(parent[key], list) and parent[key]:
            items = parent[key]
            items.append(copy.deepcopy(rng.choice(items))) if rng.random() < 0.5 else items.pop(rng.randrange(len(items)))
        else:
            parent[key] = copy.deepcopy(_get(doc, rng.choice(all_paths)))  # another field's value
    return doc


#: Text no value of a mapping can carry (the break-it pass's): a number of 5,000 digits (Python refuses to convert an
#: integer of more than 4,300), lists nested 200,000 deep in flow style and 100 deep in block style.
HOSTILE_VALUES: tuple[str, ...] = ("7" * 5000, "-" + "9" * 5000 + ".5", "[" * 200_000 + "]" * 200_000,
                                   "\n" + "".join("  " * i + "- \n" for i in range(1, 100)))


def hostile(doc: Any, rng: random.Random) -> str:
    """`doc` as YAML text with one `key: value` line's value replaced by one of `HOSTILE_VALUES`."""
    lines = dump(doc).splitlines()
    scalars = [i for i, line in enumerate(lines) if re.fullmatch(r"\s*(- )?[\w.-]+: [^\s\[{].*", line)]
    i = rng.choice(scalars)
    key = lines[i].split(": ", 1)[0]
    lines[i] = f"{key}: {rng.choice(HOSTILE_VALUES)}"
    return "\n".join(lines) + "\n"


def example(name: str) -> dict:
    """A bundled requirements file as a mapping."""
    return yaml.safe_load((EXAMPLES / f"{name}.yaml").read_text())


def example_names() -> list[str]:
    return sorted(p.stem for p in EXAMPLES.glob("*.yaml") if p.stem != "platform")


# --- The CLI in a project of its own -----------------------------------------------------------------------------------

#: Most bytes an error message (exit 2) may print.
MAX_ERROR_OUTPUT = 10_000


@dataclass
class Outcome:
    """One CLI run: exit code, output, the traceback if one escaped, seconds, and whether the stack folder is as it
    must be (unchanged after a failure; every stack the plan names written and readable after success)."""

    exit_code: int
    output: str
    traceback: str | None
    seconds: float
    all_or_nothing: bool = True

    @property
    def ok(self) -> bool:
        """No traceback, a documented exit code, a bounded error, and no half-written stack folder."""
        return (self.traceback is None and self.exit_code in (0, 1, 2) and self.all_or_nothing
                and (self.exit_code != 2 or len(self.output) < MAX_ERROR_OUTPUT))


class Project:
    """A project folder (Pulumi.yaml, the program, policy configs, platform.yaml) to run `blueprint` in."""

    def __init__(self, root: Path, *, with_examples: bool = False) -> None:
        from typer.testing import CliRunner

        self.root = root
        self.with_examples = with_examples
        self.runner = CliRunner()
        shutil.copy(ROOT / "Pulumi.yaml", root / "Pulumi.yaml")
        shutil.copy(ROOT / "__main__.py", root / "__main__.py")
        shutil.copytree(ROOT / "policies" / "config", root / "policies" / "config")
        (root / "stacks" / "requirements").mkdir(parents=True)
        shutil.copy(EXAMPLES / "platform.yaml", self.requirements / "platform.yaml")
        if with_examples:
            for name in example_names():
                shutil.copy(EXAMPLES / f"{name}.yaml", self.requirements / f"{name}.yaml")
            for stack in (ROOT / "stacks").glob("Pulumi.*.yaml"):
                shutil.copy(stack, self.stacks / stack.name)

    def _platform_file_for(self, text: str) -> None:
        """platform.yaml with only the `platforms:` entries the document lands on (`environments.<env>.platform`,
        else `<env>-<region>`): planned alone, a document leaves the other examples' entries unused, which
        `blueprint plan` refuses."""
        from blueprints.core.yamlio import load_yaml

        preq = yaml.safe_load((EXAMPLES / "platform.yaml").read_text())
        try:
            doc = load_yaml(text)  # bounded, as the CLI reads it: hostile text must not break the harness
            envs = doc["environments"] if isinstance(doc, dict) and isinstance(doc.get("environments"), dict) else {}
        except yaml.YAMLError:
            envs = {}
        names = {str(spec.get("platform") or f"{env}-{spec.get('region')}") for env, spec in envs.items()
                 if isinstance(spec, dict)}
        preq["platforms"] = {k: v for k, v in (preq.get("platforms") or {}).items() if k in names}
        if not preq["platforms"]:
            del preq["platforms"]
        (self.requirements / "platform.yaml").write_text(yaml.safe_dump(preq, sort_keys=False))

    @property
    def stacks(self) -> Path:
        return self.root / "stacks"

    @property
    def requirements(self) -> Path:
        return self.stacks / "requirements"

    def leftovers(self) -> list[Path]:
        """Temporary files or staged writes left in the stack folder (none after any run, killed or not, once the
        next command has run: `blueprints.core.journal`)."""
        return [*self.stacks.glob(".Pulumi.*"), *self.stacks.glob(STAGING_DIR)]

    def snapshot(self) -> dict[str, bytes]:
        return {p.name: p.read_bytes() for p in sorted(self.stacks.glob("*.yaml"))}

    def restore(self, snapshot: dict[str, bytes]) -> None:
        for path in self.stacks.glob("*.yaml"):
            if path.name not in snapshot:
                path.unlink()
        for name, data in snapshot.items():
            (self.stacks / name).write_bytes(data)
        for temp in self.stacks.glob(".Pulumi.*"):
            temp.unlink()
        shutil.rmtree(self.stacks / STAGING_DIR, ignore_errors=True)

    def run(self, args: list[str]) -> Outcome:
        """`blueprint <args>` in the project folder, in this process."""
        import os

        cwd = os.getcwd()
        os.chdir(self.root)
        start = time.perf_counter()
        try:
            result = self.runner.invoke(_app(), args, catch_exceptions=True)
        finally:
            os.chdir(cwd)
        seconds = time.perf_counter() - start
        exc = result.exception
        trace = None
        if exc is not None and not isinstance(exc, SystemExit):
            trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        elif "Traceback (most recent call last)" in result.output:
            trace = result.output
        return Outcome(result.exit_code, result.output, trace, seconds)

    def plan(self, text: str, *, name: str = "fuzz.yaml", keep: bool = False) -> Outcome:
        """`blueprint plan` a requirements file with `text` in the project's requirements folder. The stack folder
        must change all or nothing: unchanged after a failure; after success, each stack named in the output is
        written and reads back. Without `keep` the folder is restored afterwards."""
        from blueprints.contracts.stackconfig import read_config

        path = self.requirements / name
        path.write_text(text, encoding="utf-8")
        if not self.with_examples:
            self._platform_file_for(text)
        before = self.snapshot()
        outcome = self.run(["plan", str(path.relative_to(self.root)), "--as-of", PLAN_DATE.isoformat()])
        after = self.snapshot()
        if outcome.exit_code != 0:
            outcome.all_or_nothing = after == before and not self.leftovers()
        else:
            written = re.findall(r"wrote\s+(\S+Pulumi\.[\w.-]+\.yaml)", outcome.output)
            try:
                outcome.all_or_nothing = bool(written) and all(
                    read_config(self.root / w if not Path(w).is_absolute() else Path(w)) for w in written)
            except BlueprintError as exc:
                outcome.all_or_nothing = False
                outcome.output += f"\n(written stack config does not read back: {exc})"
        if not keep:
            self.restore(before)
            path.unlink()
        return outcome

    def preview(self, stack: str) -> Outcome:
        """`blueprint preview <stack>` (nothing is written without `--out`)."""
        before = self.snapshot()
        outcome = self.run(["preview", stack])
        outcome.all_or_nothing = self.snapshot() == before
        return outcome


def _app():
    from blueprints.cli import app

    return app


def dump(doc: Any) -> str:
    """A document as YAML text (JSON-compatible values only)."""
    return yaml.safe_dump(json.loads(json.dumps(doc)), sort_keys=False, allow_unicode=True)
