"""docs/config.md: the config reference, generated from the config's JSON schema (rankone.config).

`rankone schema --markdown > docs/config.md` writes it; a test fails when the committed file
differs from what the schema gives, so the reference cannot go stale.
"""

from __future__ import annotations

import json
import sys

HEADER = """# Config reference

Generated from the config schema (`src/rankone/config.py`) by
`rankone schema --markdown > docs/config.md`; do not edit. A study is
`config/default.yaml` with experiments layered over it (`--configfile a.yaml b.yaml`);
a bad value fails at load with the field's name. `rankone resolve --config X --out Y`
writes a config with every default filled in.
"""


def markdown(schema: dict, registries: dict[str, dict] | None = None, tasks: dict | None = None) -> str:
    """Every field of the schema: top-level fields in one table, then one table per section, then for
    each field whose value is a name looked up in a registry (`registries`: dotted field -> {name: an
    entry with an `about`}), the names it knows and what each is; then each task's params (`tasks`:
    name -> a Task class, whose `Params` model gives them)."""
    defs = schema.get("$defs", {})
    out = [HEADER, "## Top level", "", *_table(schema, defs)]
    for name, prop in schema["properties"].items():
        section = _section(prop, defs)
        if section is not None:
            out += ["", f"## `{name}`", "", *_describe(prop, section), *_table(section, defs, prefix=f"{name}.")]
    shown = {_section(p, defs).get("title") for p in schema["properties"].values() if _section(p, defs)}
    for name in sorted(_refs(schema, defs)):  # objects held in maps and lists (a task, a grid, ...)
        target = defs[name]
        if "properties" in target and target.get("title") not in shown:
            out += ["", f"## `{name}`", "", *_describe({}, target), *_table(target, defs)]
    if registries:
        out += ["", "## Names looked up in registries", "", REGISTRIES]
        for field, registry in registries.items():
            out += ["", f"### `{field}`", "", "| name | what |", "| --- | --- |"]
            out += [f"| `{key}` | {_one_line(entry.about)} |" for key, entry in registry.items()]
    if tasks:
        out += ["", "## Tasks and their params", "", TASK_PARAMS]
        for name, task in tasks.items():
            params = task.Params.model_json_schema()
            about = (task.__doc__ or sys.modules[task.__module__].__doc__ or "").strip().split("\n\n")[0]
            out += ["", f"### `{name}`", "", *([_one_line(about), ""] if about else [])]
            out += (
                _table(params, params.get("$defs", {}), prefix="params.")
                if params.get("properties")
                else ["No params."]
            )
    return "\n".join(out) + "\n"


TASK_PARAMS = (
    "`tasks.<regime>` names a task (`name`) and sets its `params`, which the task's own model checks at load. "
    "`dataset` builds a task from any dataset without code; an installed package adds one through the entry point "
    "group `rankone.tasks` (docs/running.md)."
)

REGISTRIES = (
    "These fields take a name that a registry of rankone's knows; a config naming another fails at load "
    "with the known names. A new entry is one module (or class) and one line in the registry."
)


def _refs(node, defs: dict, seen: set | None = None) -> set[str]:
    """Every definition the schema reaches, through sections, maps and lists."""
    seen = set() if seen is None else seen
    if isinstance(node, dict):
        ref = node.get("$ref")
        if ref and (name := ref.split("/")[-1]) not in seen:
            seen.add(name)
            _refs(defs[name], defs, seen)
        for key, value in node.items():
            if key != "$defs":
                _refs(value, defs, seen)
    elif isinstance(node, list):
        for value in node:
            _refs(value, defs, seen)
    return seen


def _section(prop: dict, defs: dict) -> dict | None:
    """The object schema a field holds (directly, or through an optional), None for a plain value."""
    for option in [prop, *prop.get("anyOf", [])]:
        if "$ref" in option:
            return defs[option["$ref"].split("/")[-1]]
    return None


def _describe(prop: dict, section: dict) -> list[str]:
    text = prop.get("description") or section.get("description")
    return [_one_line(text), ""] if text else []


def _table(obj: dict, defs: dict, prefix: str = "") -> list[str]:
    rows = ["| field | type | default | what |", "| --- | --- | --- | --- |"]
    for name, prop in obj.get("properties", {}).items():
        if prefix == "" and _section(prop, defs) is not None:
            kind = f"section ([below](#{name.replace('_', '')}))"
        else:
            kind = _type(prop, defs)
        default = (
            f"`{json.dumps(prop['default'])}`"
            if "default" in prop
            else ("required" if name in obj.get("required", []) else "")
        )
        rows.append(f"| `{prefix}{name}` | {kind} | {default} | {_one_line(prop.get('description', ''))} |")
    return rows


def _type(prop: dict, defs: dict) -> str:
    if "anyOf" in prop:
        return " or ".join(_type(p, defs) for p in prop["anyOf"])
    if "$ref" in prop:
        target = defs[prop["$ref"].split("/")[-1]]
        return _type(target, defs) if "enum" in target else prop["$ref"].split("/")[-1]
    if "enum" in prop:
        return " \\| ".join(f"`{v}`" for v in prop["enum"])
    if "const" in prop:
        return f"`{prop['const']}`"
    kind = prop.get("type", "any")
    if kind == "array":
        return f"list of {_type(prop.get('items', {}), defs)}"
    if kind == "object" and "additionalProperties" in prop:
        keys = prop.get("propertyNames", {}).get("enum")
        value = prop["additionalProperties"]
        value = _type(value, defs) if isinstance(value, dict) else "any"
        return f"map {'(' + ', '.join(keys) + ') ' if keys else ''}to {value}"
    return kind


def _one_line(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")
