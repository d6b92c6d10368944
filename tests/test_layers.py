"""The layers stay layers: what reads records does not import what writes them.

Each check imports modules in a fresh interpreter and looks at ``sys.modules``, so what an earlier
test imported cannot hide (or fake) an arrow. docs/INTERFACES.md describes the layers.
"""

from __future__ import annotations

import ast
import graphlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from infrarsi.records import DoctorReport, RunResult, Verdict, save_doctor, save_run
from infrarsi.trials import Candidate

ROOT = Path(__file__).resolve().parents[1]

READERS = [
    "infrarsi.report", "infrarsi.report.model", "infrarsi.report.document", "infrarsi.report.tables",
    "infrarsi.report.plots", "infrarsi.report.markdown", "infrarsi.report.html",
    "infrarsi_server", "infrarsi_server.server", "infrarsi_server.state", "infrarsi_server.evidence",
    "infrarsi_server.features.diagnostics", "infrarsi_server.features.hover",
    "infrarsi_server.features.code_actions", "infrarsi_server.features.code_lens",
    "infrarsi_server.features.commands",
]


def _imported_after(code: str) -> list[str]:
    """The module names loaded in a fresh interpreter after running ``code``."""
    script = f"import json, sys\n{code}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.splitlines()[-1])


WRITERS = ("infrarsi.stages", "infrarsi.experiment")
"""What runs trials and writes the records: the stages, and the experiment engine under the run stage."""


def _writers(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == w or m.startswith(f"{w}.") for w in WRITERS)]


def test_report_and_server_do_not_import_the_stages():
    modules = _imported_after("\n".join(f"import {m}" for m in READERS))
    assert _writers(modules) == []
    # The report prices MFU from datasheets and records: nothing it does needs torch.
    assert "torch" not in modules


def test_reading_the_records_imports_neither_torch_nor_the_stages(tmp_path):
    # A doctor.json and a run.json as the stages write them, from the report tests' recorded data.
    data = ROOT / "tests" / "test_data" / "report"
    save_doctor(DoctorReport.from_dict(json.loads((data / "doctor.json").read_text())), tmp_path)
    promoted = Verdict(candidate=Candidate(knobs={"micro_batch_size": 8}), promoted=True, reason="clears the floor",
                       job_speedup=(1.2, 1.1, 1.3))
    save_run(RunResult(status="ok", message="promoted", verdicts=[promoted], promoted=promoted,
                       **json.loads((data / "run.json").read_text())), tmp_path)
    modules = _imported_after(
        "from pathlib import Path\n"
        "from infrarsi.records import load_doctor, load_run\n"
        "from infrarsi_server.state import RepoState\n"
        f"repo = Path({str(tmp_path)!r})\n"
        "assert load_doctor(repo).hardware.id and load_run(repo).run_id\n"
        "snap = RepoState(repo).snapshot()\n"
        "assert snap.doctor is not None and snap.run is not None, snap.problems\n")
    assert "torch" not in modules
    assert _writers(modules) == []


def _lazy_imports_under_except_import_error(path: Path) -> list[int]:
    """Lines of ``import`` statements inside a ``try`` whose handler catches ImportError."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Try):
            continue
        catches = [h.type for h in node.handlers if h.type is not None]
        names = {n.id for t in catches for n in ast.walk(t) if isinstance(n, ast.Name)}
        if names & {"ImportError", "ModuleNotFoundError"}:
            found += [n.lineno for stmt in node.body for n in ast.walk(stmt)
                      if isinstance(n, (ast.Import, ast.ImportFrom)) and _is_ours(n)]
    return found


def _is_ours(node: ast.Import | ast.ImportFrom) -> bool:
    names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
    return any(n.split(".")[0] in ("infrarsi", "infrarsi_server") for n in names)


@pytest.mark.parametrize("package", ["infrarsi", "server/infrarsi_server"])
def test_no_import_of_our_own_modules_is_hidden_behind_except_import_error(package):
    hidden = {str(p.relative_to(ROOT)): lines for p in sorted((ROOT / package).rglob("*.py"))
              if "site" not in p.relative_to(ROOT).parts and (lines := _lazy_imports_under_except_import_error(p))}
    assert hidden == {}


def _imported_modules(path: Path) -> set[str]:
    """Every module an ``import`` in ``path`` names (a relative import counted from its package)."""
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1]) if node.level else ""
            found.add(".".join(p for p in (base, node.module or "") if p))
    return found


FLOORS = [
    # The trial vocabulary lives in infrarsi/trials.py and infrarsi/background.py: reading a
    # record, finding a knob or a patch site never loads the runner.
    ("infrarsi/records", "infrarsi.runner"),
    ("infrarsi/knobs", "infrarsi.runner"),
    ("infrarsi/patches", "infrarsi.runner"),
    # The experiment engine runs the run stage's trials and verify's reruns: the stages use it,
    # never the other way round.
    ("infrarsi/experiment", "infrarsi.stages"),
    # Samplers choose trials; the engine runs them. The Optuna peers encode candidates with the
    # codec below both (infrarsi/study_codec.py), never with the engine's store.
    ("infrarsi/search", "infrarsi.experiment"),
]
"""Each package and a layer above it that it never imports."""


@pytest.mark.parametrize(("floor", "above"), FLOORS)
def test_the_floors_do_not_import_the_layers_above_them(floor, above):
    upward = {str(p.relative_to(ROOT)): sorted(m for m in _imported_modules(p) if m == above or m.startswith(f"{above}."))
              for p in sorted((ROOT / floor).rglob("*.py"))}
    assert {path: mods for path, mods in upward.items() if mods} == {}


def test_in_the_engine_only_the_store_and_its_adapter_import_optuna():
    """The store is the one reader and writer of a stored trial's attributes and state: the session,
    the shared round and the summary get typed values from it."""
    importing = {str(p.relative_to(ROOT)) for p in sorted((ROOT / "infrarsi/experiment").rglob("*.py"))
                 if any(m == "optuna" or m.startswith("optuna.") for m in _imported_modules(p))}
    assert importing == {"infrarsi/experiment/store.py", "infrarsi/experiment/optuna_adapter.py"}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_no_module_of_the_package_imports_itself_round_a_circle():
    """Imports inside functions included (a lazy import hides a circle, it does not remove it): the
    modules of ``infrarsi`` form a graph with no cycle."""
    paths = {_module_name(p): p for p in sorted((ROOT / "infrarsi").rglob("*.py"))}
    graph = {}
    for name, path in paths.items():
        named = _imported_modules(path)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                named |= {f"{node.module}.{a.name}" for a in node.names}
        graph[name] = {m for m in named if m in paths and m != name and not name.startswith(f"{m}.")}
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as error:
        pytest.fail(f"import circle: {' -> '.join(error.args[1])}")
