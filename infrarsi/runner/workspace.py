"""An isolated copy of the user's repository for one trial, and what the candidate changed in it.

The user's working tree is only ever read. Patches and knob values are written into the copy;
the copy's changes are then measured against a snapshot taken right after copying (not against
the user's tree, which may be edited while the trial runs).

The copy leaves out git, InfraRSI's state, virtual environments and ``__pycache__`` folders: the
user's bytecode may be stale, and a trial imports its sources (it runs with a fresh
``PYTHONPYCACHEPREFIX``, see ``trial_env``). Every comparison covers the whole copy, whatever it
holds now: a file appearing in ``__pycache__`` is a change like any other.
"""

from __future__ import annotations

import difflib
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from infrarsi.contract import STATE_DIR, Contract, KnobValue
from infrarsi.runner.result import Hunk

SKIPPED_DIRS = frozenset({".git", STATE_DIR, "__pycache__"})
# Files up to this size are kept in memory for diffs; larger ones (data, checkpoints) are
# compared by size and modification time only.
SNAPSHOT_BYTES = 1 << 20


def _skipped(directory: Path, name: str) -> bool:
    # A virtual environment is recognised by its pyvenv.cfg, whatever it is called.
    return name in SKIPPED_DIRS or (directory / name / "pyvenv.cfg").exists()


class Workspace:
    """A copy of ``repo`` in a temporary directory; :meth:`remove` deletes it."""

    def __init__(self, repo: Path):
        self.repo = Path(repo).resolve()
        self._tmp = Path(tempfile.mkdtemp(prefix="infrarsi-trial-"))
        self.root = self._tmp / self.repo.name
        self.pycache = self._tmp / "pycache"
        """The trial's ``PYTHONPYCACHEPREFIX``: fresh, outside the copy, and empty after an honest run."""
        self._snapshot: dict[str, Entry] = {}
        self._prepared: dict[str, Entry] = {}
        try:
            self._copy()
            self.pycache.mkdir()
            self._snapshot = _scan(self.root)
        except BaseException:
            self.remove()
            raise

    def _copy(self) -> None:
        for directory, dirs, files in os.walk(self.repo):
            here = Path(directory)
            dirs[:] = [d for d in dirs if not _skipped(here, d)]
            target = self.root / here.relative_to(self.repo)
            target.mkdir(parents=True, exist_ok=True)
            for name in files:
                source, dest = here / name, target / name
                if source.is_symlink():
                    os.symlink(os.readlink(source), dest)
                elif source.stat().st_size <= SNAPSHOT_BYTES:
                    dest.write_bytes(source.read_bytes())
                    shutil.copymode(source, dest)
                else:
                    shutil.copy2(source, dest)

    @property
    def private(self) -> Path:
        """The workspace's own directory beside the copy (the record channel lives here): never part
        of the repository, removed with it."""
        return self._tmp

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
        try:
            from infrarsi.patches import apply_patches
        except ImportError as err:
            return f"patches {list(names)} requested but the patch library cannot be loaded: {err}", False
        try:
            # LLM diffs live in the user's state directory, which the copy leaves out.
            outcomes = apply_patches(self.root, list(names), contract, contract.memory.device,
                                     diff_dir=self.repo / STATE_DIR / "patches")
        except Exception as err:  # a patch that blows up is this candidate's failure, not ours
            return f"applying patches {list(names)} raised {type(err).__name__}: {err}", False
        for outcome in outcomes:
            if outcome.status == "failed":
                reason = outcome.reason or "no reason given"
                # The patch library marks refusals on scope grounds with this prefix.
                return f"patch {outcome.name} failed: {reason}", reason.startswith("contract:")
        return None

    def write_knobs(self, by_file: dict[str, dict[str, KnobValue]]) -> str | None:
        """Write flag-less knob values into their defining files; a reason when it cannot."""
        if not by_file:
            return None
        try:
            from infrarsi.knobs.rewrite import set_defaults
        except ImportError as err:
            return f"knobs {sorted(k for v in by_file.values() for k in v)} need a source rewrite: {err}"
        for rel, values in by_file.items():
            path = self.root / rel
            if not path.is_file():
                return f"knobs {sorted(values)} are defined in {rel}, which is not in the repository"
            try:
                path.write_text(set_defaults(path.read_text(), values))
            except Exception as err:  # a rewrite failure of any kind is this candidate's failure
                return f"could not write knobs {sorted(values)} into {rel}: {type(err).__name__}: {err}"
        return None

    def remove(self) -> None:
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
    header, body = "", []
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
