"""Config files a launch command names: Python files of assignments (nanoGPT's ``config/small.py``)
and YAML / JSON files (``--config x.yaml``). Read for the knobs' baseline values; a trial that
changes a knob only the file sets writes the value into the workspace's copy of the file.

Scalar values only (bool, int, float, str); a key in a nested table is found by its own name,
the first occurrence depth-first, the same way on reading and writing.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

from infrarsi.contract import KnobValue
from infrarsi.knobs.source import DiscoveryError, is_knob_value

DATA_SUFFIXES = (".yaml", ".yml", ".json")


def is_config_path(text: str) -> bool:
    return text.lower().endswith((*DATA_SUFFIXES, ".py"))


def read_python_config(path: Path, shown: str) -> dict[str, tuple[KnobValue, int]]:
    """Module-level ``name = literal`` assignments: name -> (value, line)."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise DiscoveryError(f"config file {shown} is not UTF-8 text ({err.reason} at byte {err.start})") from None
    try:
        tree = ast.parse(text, filename=shown)
    except SyntaxError as err:
        raise DiscoveryError(f"config file {shown} is not Python: SyntaxError line {err.lineno}: {err.msg}") from None
    out: dict[str, tuple[KnobValue, int]] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            try:
                value = ast.literal_eval(stmt.value)
            except ValueError:
                continue
            if is_knob_value(value):
                out[stmt.targets[0].id] = (value, stmt.lineno)
    return out


def _load(text: str, suffix: str, shown: str) -> object:
    if suffix == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as err:
            raise DiscoveryError(f"config file {shown} is not valid JSON: {err.msg} at line {err.lineno}") from None
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise DiscoveryError(f"config file {shown} is not valid YAML: {getattr(err, 'problem', err)}{where}") from None


def _leaves(doc: object, out: dict[str, KnobValue]) -> None:
    if isinstance(doc, dict):
        for key, value in doc.items():
            if isinstance(value, (dict, list)):
                _leaves(value, out)
            elif isinstance(key, str) and is_knob_value(value) and key not in out:
                out[key] = value
    elif isinstance(doc, list):
        for item in doc:
            _leaves(item, out)


def read_table(path: Path, shown: str) -> dict:
    """The YAML or JSON file's top-level table."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise DiscoveryError(f"config file {shown} is not UTF-8 text ({err.reason} at byte {err.start})") from None
    doc = _load(text, path.suffix.lower(), shown)
    if not isinstance(doc, dict):
        raise DiscoveryError(f"config file {shown} does not hold a table of settings (it is a {type(doc).__name__})")
    return doc


def read_data_config(path: Path, shown: str) -> dict[str, KnobValue]:
    """Scalar settings of a YAML or JSON file, by key."""
    doc = read_table(path, shown)
    out: dict[str, KnobValue] = {}
    _leaves(doc, out)
    return out


def nested_leaves(doc: dict, package: str = "") -> dict[str, KnobValue]:
    """Scalar settings of a table by dotted path (``trainer.max_iters``), as Hydra and OmegaConf
    address them, under ``package`` (a dotted path; empty: the root). Hydra's ``defaults`` list and
    mandatory ``???`` values are left out."""
    out: dict[str, KnobValue] = {}

    def walk(node: dict, prefix: str, top: bool) -> None:
        for key, value in node.items():
            if not isinstance(key, str) or (top and key == "defaults"):
                continue
            if isinstance(value, dict):
                walk(value, f"{prefix}{key}.", False)
            elif is_knob_value(value) and value != "???":
                out[f"{prefix}{key}"] = value

    walk(doc, f"{package}." if package else "", True)
    return out


def _set_first(doc: object, key: str, value: KnobValue) -> bool:
    if isinstance(doc, dict):
        if key in doc and not isinstance(doc[key], (dict, list)):
            doc[key] = value
            return True
        return any(_set_first(v, key, value) for v in doc.values() if isinstance(v, (dict, list)))
    if isinstance(doc, list):
        return any(_set_first(v, key, value) for v in doc)
    return False


def set_data_config(text: str, suffix: str, values: dict[str, KnobValue]) -> str:
    """``text`` (YAML or JSON) with each key set to its value; ValueError naming a missing key."""
    doc = _load(text, suffix.lower(), "(workspace copy)")
    missing = [k for k, v in values.items() if not _set_first(doc, k, v)]
    if missing:
        raise ValueError(f"key(s) {', '.join(missing)} not in this config file")
    if suffix.lower() == ".json":
        return json.dumps(doc, indent=2) + "\n"
    import yaml

    return yaml.safe_dump(doc, sort_keys=False)
