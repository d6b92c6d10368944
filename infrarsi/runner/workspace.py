"""An isolated copy of the user's repository for one trial, and what the candidate changed in it.

The user's working tree is only ever read. Patches and knob values are written into the copy;
the copy's changes are then measured against a snapshot taken right after copying (not against
the user's tree, which may be edited while the trial runs).

The copy leaves out git, InfraRSI's state, virtual environments and ``__pycache__`` folders: the
user's bytecode may be stale, and a trial imports its sources (it runs with a fresh
``PYTHONPYCACHEPREFIX``, see ``environment.interpreter_env``). Every comparison covers the whole copy, whatever it
holds now: a file appearing in ``__pycache__`` is a change like any other.

Symbolic links never lead a write back to the user's files: a link to a place inside the repo
becomes a link to the same place in the copy; a link to a place outside is replaced by a read-only
copy of its target (a file or a whole folder, up to ``OUTSIDE_COPY_BYTES``), or kept as a link when
the contract declares the target in ``[sandbox] read_only`` (the sandbox mounts it read-only).
Anything else refuses the trial with the link named (:class:`WorkspaceError`).
"""

from __future__ import annotations

import difflib
import os
import shutil
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

from infrarsi.byte_units import GIB, MIB
from infrarsi.contract import STATE_DIR, Contract, KnobValue
from infrarsi.hunk import Hunk
from infrarsi.knobs.config_files import DATA_SUFFIXES, set_data_config
from infrarsi.knobs.rewrite import set_defaults
from infrarsi.patches import apply_patches
from infrarsi.records.files import patch_dir
from infrarsi.runner import sandbox

SKIPPED_DIRS = frozenset({".git", STATE_DIR, "__pycache__"})
# Files up to this size are kept in memory for diffs; larger ones (data, checkpoints) are
# compared by size and modification time only.
SNAPSHOT_BYTES = MIB
OUTSIDE_COPY_BYTES = GIB
"""The most a link to outside the repo may hold to be copied into each trial's workspace."""
HOME_DIR = ".trial-home"
"""The trial's private home, next to the copy in the workspace directory."""


class WorkspaceError(ValueError):
    """The repository cannot be copied safely (a link that would leak out of it)."""


def _skipped(directory: Path, name: str) -> bool:
    # A virtual environment is recognised by its pyvenv.cfg, whatever it is called.
    return name in SKIPPED_DIRS or (directory / name / "pyvenv.cfg").exists()


def _within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _tree_bytes(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def _make_read_only(path: Path) -> None:
    for item in [path, *(path.rglob("*") if path.is_dir() else [])]:
        if not item.is_symlink():
            mode = item.stat().st_mode
            item.chmod(mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


class Workspace:
    """A copy of ``repo`` in a temporary directory; :meth:`remove` deletes it.

    ``mounted`` are absolute paths outside the repo that links may keep pointing to (the contract's
    ``[sandbox] read_only``); the links kept are listed in :attr:`outside_targets`.
    """

    def __init__(self, repo: Path, *, mounted: tuple[str, ...] = ()):
        self.repo = Path(repo).resolve()
        sandbox.remove_stale_once()
        self._tmp = Path(tempfile.mkdtemp(prefix=sandbox.WORKSPACE_PREFIX))
        self.root = self._tmp / self.repo.name
        self.home = self._tmp / HOME_DIR
        self._mounted = [Path(m).resolve() for m in mounted]
        self.outside_targets: list[Path] = []
        self.pycache = self._tmp / "pycache"
        """The trial's ``PYTHONPYCACHEPREFIX``: fresh, outside the copy, and empty after an honest run."""
        self._snapshot: dict[str, Entry] = {}
        self._prepared: dict[str, Entry] = {}
        try:
            sandbox.claim_workspace(self._tmp)
            self.home.mkdir()
            self._copy()
            self.pycache.mkdir()
            self._snapshot = _scan(self.root)
        except BaseException:
            self.remove()
            raise

    @property
    def private(self) -> Path:
        """The workspace's own directory beside the copy (the trial's home, its records): never part
        of the repository, removed with it."""
        return self._tmp

    def _copy(self) -> None:
        for directory, dirs, files in os.walk(self.repo):
            here = Path(directory)
            dirs[:] = [d for d in dirs if not _skipped(here, d)]
            target = self.root / here.relative_to(self.repo)
            target.mkdir(parents=True, exist_ok=True)
            for name in [d for d in dirs if (here / d).is_symlink()]:
                dirs.remove(name)
                self._copy_link(here / name, target / name)
            for name in files:
                source, dest = here / name, target / name
                if source.is_symlink():
                    self._copy_link(source, dest)
                elif source.stat().st_size <= SNAPSHOT_BYTES:
                    dest.write_bytes(source.read_bytes())
                    shutil.copymode(source, dest)
                else:
                    shutil.copy2(source, dest)

    def _copy_link(self, source: Path, dest: Path) -> None:
        """One symbolic link of the repo, at ``dest`` in the copy, never leading back out."""
        resolved = source.resolve()
        rel_link = source.relative_to(self.repo).as_posix()
        if _within(resolved, self.repo):
            os.symlink(os.path.relpath(self.root / resolved.relative_to(self.repo), dest.parent), dest)
            return
        if not resolved.exists():
            raise WorkspaceError(f"{rel_link} is a link to {resolved}, which does not exist; "
                                 "a trial could create it there, outside the repository")
        if any(_within(resolved, m) for m in self._mounted):
            os.symlink(resolved, dest)
            self.outside_targets.append(resolved)
            return
        size = _tree_bytes(resolved)
        if size > OUTSIDE_COPY_BYTES:
            raise WorkspaceError(
                f"{rel_link} is a link to {resolved} outside the repository, holding {size / GIB:.1f} GiB "
                f"(more than {OUTSIDE_COPY_BYTES / GIB:.0f} GiB to copy into every trial): declare it in the "
                "contract's [sandbox] read_only to mount it read-only instead")
        if resolved.is_dir():
            shutil.copytree(resolved, dest, symlinks=False)
        else:
            shutil.copy2(resolved, dest)
        _make_read_only(dest)

    def writable_path(self, rel: str) -> Path | None:
        """``rel`` in the copy, or None when writing it would leave the copy (through a link)."""
        path = self.root / rel
        resolved = path.resolve()
        if not _within(resolved, self.root.resolve()):
            return None
        return path

    def changed(self) -> list[str]:
        """Repo-relative paths created, modified or deleted anywhere in the copy since it was made."""
        return _differences(self._snapshot, _scan(self.root))

    def mark_prepared(self) -> None:
        """Remember the copy as the candidate left it, patched and with its knobs written."""
        self._prepared = _scan(self.root)

    def run_writes(self) -> list[str]:
        """What the run itself created, changed or removed that Python could import, or that
        redirects a path, since :meth:`mark_prepared`: sources, bytecode, extension modules, path
        files, symbolic links; and any bytecode under the fresh pycache prefix."""
        now = _scan(self.root)
        out = [rel for rel in _differences(self._prepared, now)
               if rel.endswith(_IMPORTABLE) or "__pycache__" in rel.split("/")
               or isinstance(now.get(rel, self._prepared.get(rel)), _Link)]
        out += [f"{self.pycache.name}/{rel} (the pycache prefix)" for rel in sorted(_scan(self.pycache))]
        return sorted(out)

    def hunks(self) -> list[Hunk]:
        """Every change in the copy as unified-diff hunks (large files as one opaque hunk)."""
        out: list[Hunk] = []
        now = _scan(self.root)
        for rel in _differences(self._snapshot, now):
            before, after = self._snapshot.get(rel, b""), now.get(rel, b"")
            if isinstance(before, _Link) or isinstance(after, _Link):
                out.append(Hunk(path=rel, header="@@ symbolic link changed @@", text=""))
            elif isinstance(before, tuple) or isinstance(after, tuple):
                out.append(Hunk(path=rel, header="@@ large file changed @@", text=""))
            else:
                out.extend(_text_hunks(rel, before, after))
        return out

    def apply_patches(self, names: tuple[str, ...], contract: Contract) -> tuple[str, bool] | None:
        """Apply the named patches to the copy. On failure: (reason, whether it broke the scope)."""
        leaving = [rel for rel in contract.scope.editable if self.writable_path(rel) is None]
        if leaving:
            return f"editable {leaving[0]} is a link to outside the repository: patches are not written through it", True
        try:
            # LLM diffs live in the user's state directory, which the copy leaves out.
            outcomes = apply_patches(self.root, list(names), contract, contract.memory.device,
                                     diff_dir=patch_dir(self.repo))
        except Exception as err:  # a patch that blows up is this candidate's failure, not ours
            return f"applying patches {list(names)} raised {type(err).__name__}: {err}", False
        for outcome in outcomes:
            if outcome.status == "failed":
                return f"patch {outcome.name} failed: {outcome.reason or 'no reason given'}", outcome.breaks_contract
        return None

    def write_knobs(self, by_file: dict[str, dict[str, KnobValue]]) -> str | None:
        """Write flag-less knob values into their defining files; a reason when it cannot."""
        if not by_file:
            return None
        for rel, values in by_file.items():
            path = self.writable_path(rel)
            if path is None:
                return f"knobs {sorted(values)} are defined in {rel}, a link to outside the repository: not written"
            if not path.is_file():
                return f"knobs {sorted(values)} are defined in {rel}, which is not in the repository"
            try:
                if path.suffix.lower() in DATA_SUFFIXES:  # a --config file the command names
                    path.write_text(set_data_config(path.read_text(), path.suffix, values))
                else:
                    path.write_text(set_defaults(path.read_text(), values))
            except Exception as err:  # a rewrite failure of any kind is this candidate's failure
                return f"could not write knobs {sorted(values)} into {rel}: {type(err).__name__}: {err}"
        return None

    def remove(self) -> None:
        # Read-only copies of outside targets: writable again, so rmtree can delete them.
        for directory, dirs, _ in os.walk(self._tmp):
            for name in dirs:
                path = Path(directory) / name
                if not path.is_symlink():
                    path.chmod(path.stat().st_mode | stat.S_IWUSR)
        shutil.rmtree(self._tmp, ignore_errors=True)


@dataclass(frozen=True, slots=True)
class _Link:
    target: str


Entry = bytes | tuple[int, int] | _Link
"""A file's content (up to SNAPSHOT_BYTES), its (size, mtime) beyond, or a symbolic link's target."""
_IMPORTABLE = (".py", ".pyc", ".pyo", ".so", ".pyd", ".pth")


def _scan(root: Path) -> dict[str, Entry]:
    """Every file and link under ``root``, nothing skipped; links are not followed."""
    out: dict[str, Entry] = {}
    for directory, dirs, files in os.walk(root):
        here = Path(directory)
        for name in [*files, *(d for d in dirs if (here / d).is_symlink())]:
            path = here / name
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                out[rel] = _Link(os.readlink(path))
            elif path.stat().st_size <= SNAPSHOT_BYTES:
                out[rel] = path.read_bytes()
            else:
                out[rel] = _signature(path)
    return out


def _differences(before: dict[str, Entry], after: dict[str, Entry]) -> list[str]:
    return sorted(rel for rel in before.keys() | after.keys() if before.get(rel) != after.get(rel))


def _signature(path: Path) -> tuple[int, int]:
    stat = path.stat()
    return stat.st_size, stat.st_mtime_ns


def _text_hunks(rel: str, before: bytes, after: bytes) -> list[Hunk]:
    try:
        old, new = before.decode(), after.decode()
    except UnicodeDecodeError:
        return [Hunk(path=rel, header="@@ binary file changed @@", text="")]
    diff = difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True), n=3)
    hunks: list[Hunk] = []
    header = ""
    body: list[str] = []
    for line in diff:
        if line.startswith(("---", "+++")) and not header:
            continue
        if line.startswith("@@"):
            if header:
                hunks.append(Hunk(path=rel, header=header, text="".join(body)))
            header, body = line.strip(), []
        else:
            body.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    if header:
        hunks.append(Hunk(path=rel, header=header, text="".join(body)))
    return hunks
