"""What InfraRSI knows about a training repo, kept in step with ``.infrarsi/`` on disk.

A repo is the nearest folder above a file that holds ``.infrarsi/`` (else the workspace folder
the file is in, which init would turn into one). Its state is reloaded when one of the files the
stages write changes: each request stats them (three ``stat`` calls, microseconds), so a CLI run
in a terminal shows up in the editor without any file watching.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

from infrarsi.contract import Contract, ContractError, load_contract
from infrarsi.records import DoctorReport, RunResult, load_doctor, load_run, record_paths
from infrarsi.records.files import state_dir


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The repo's state as loaded at one moment; features read it, never change it."""

    root: Path
    contract: Contract | None = None
    doctor: DoctorReport | None = None
    """When doctor has run."""
    run: RunResult | None = None
    """When a run has finished."""
    problems: list[str] = field(default_factory=list)
    """State files that exist but cannot be read, and why."""
    stamp: tuple = ()
    """Changes whenever a state file does: caches keyed on it stay valid until then."""

    def rel(self, path: Path) -> str | None:
        """``path`` relative to the repo root, POSIX-style; None outside the repo."""
        try:
            return Path(path).resolve().relative_to(self.root).as_posix()
        except ValueError:
            return None


def _stat(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_mtime_ns, st.st_size


class RepoState:
    def __init__(self, root: Path):
        self.root = root
        self._lock = threading.Lock()
        self._snapshot = Snapshot(root, stamp=("unloaded",))

    def _files(self) -> tuple[Path, Path, Path]:
        return record_paths(self.root)

    def snapshot(self) -> Snapshot:
        stamp = tuple(_stat(p) for p in self._files())
        with self._lock:  # features run on the loop and in jobs' threads
            if stamp != self._snapshot.stamp:
                self._snapshot = self._load(stamp)
            return self._snapshot

    def _load(self, stamp: tuple) -> Snapshot:
        contract_file, doctor_file, run_file = self._files()
        problems: list[str] = []
        contract = doctor = run = None
        if contract_file.exists():
            try:
                contract = load_contract(self.root)
            except ContractError as err:
                problems.append(str(err))
        if doctor_file.exists():
            try:
                doctor = load_doctor(self.root)
            except Exception as err:  # an unreadable report must not take the editor down
                problems.append(f"{doctor_file}: {err}")
        if run_file.exists():
            try:
                run = load_run(self.root)
            except Exception as err:
                problems.append(f"{run_file}: {err}")
        return Snapshot(self.root, contract, doctor, run, problems, stamp)


class Repos:
    """Every repo the editor has touched, by root."""

    def __init__(self) -> None:
        self._repos: dict[Path, RepoState] = {}
        self._lock = threading.Lock()
        self.folders: list[Path] = []
        """The workspace folders, which bound the walk up from a file."""

    def root_of(self, path: Path) -> Path:
        path = Path(path).resolve()
        folder = max((f for f in self.folders if path.is_relative_to(f)), key=lambda f: len(f.parts), default=None)
        for parent in path.parents:
            if state_dir(parent).is_dir():
                return parent
            if parent == folder:
                break
        return folder or path.parent

    def get(self, root: Path) -> RepoState:
        root = Path(root).resolve()
        with self._lock:
            if root not in self._repos:
                self._repos[root] = RepoState(root)
            return self._repos[root]

    def for_path(self, path: Path) -> Snapshot:
        return self.get(self.root_of(path)).snapshot()
