"""An isolated copy of the user's repository for one trial, and what the candidate changed in it.

The user's working tree is only ever read. Patches and knob values are written into the copy;
the copy's changes are then measured against a snapshot taken while copying (not against the
user's tree, which may be edited while the trial runs).
"""

from __future__ import annotations

import difflib
import os
import shutil
import tempfile
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
        self._snapshot: dict[str, bytes | tuple[int, int]] = {}
        try:
            self._copy()
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
                rel = dest.relative_to(self.root).as_posix()
                if source.is_symlink():
                    os.symlink(os.readlink(source), dest)
                    continue
                if source.stat().st_size <= SNAPSHOT_BYTES:
                    data = source.read_bytes()
                    dest.write_bytes(data)
                    shutil.copymode(source, dest)
                    self._snapshot[rel] = data
                else:
                    shutil.copy2(source, dest)
                    self._snapshot[rel] = _signature(dest)

    @property
    def private(self) -> Path:
        """The workspace's own directory beside the copy (the record channel lives here): never part
        of the repository, removed with it."""
        return self._tmp

    def changed(self) -> list[str]:
        """Repo-relative paths created, modified or deleted in the copy since it was made."""
        now = set(self._files())
        out = [rel for rel in self._snapshot if rel not in now]
        for rel in now:
            before = self._snapshot.get(rel)
            path = self.root / rel
            if before is None:
                out.append(rel)
            elif isinstance(before, bytes):
                if path.stat().st_size != len(before) or path.read_bytes() != before:
                    out.append(rel)
            elif _signature(path) != before:
                out.append(rel)
        return sorted(out)

    def hunks(self) -> list[Hunk]:
        """Every change in the copy as unified-diff hunks (large files as one opaque hunk)."""
        out: list[Hunk] = []
        for rel in self.changed():
            before = self._snapshot.get(rel, b"")
            path = self.root / rel
            after = path.read_bytes() if path.exists() else b""
            if isinstance(before, tuple) or len(after) > SNAPSHOT_BYTES:
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
            from infrarsi.knobs.config_files import DATA_SUFFIXES, set_data_config
            from infrarsi.knobs.rewrite import set_defaults
        except ImportError as err:
            return f"knobs {sorted(k for v in by_file.values() for k in v)} need a source rewrite: {err}"
        for rel, values in by_file.items():
            path = self.root / rel
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
        shutil.rmtree(self._tmp, ignore_errors=True)

    def _files(self):
        for directory, dirs, files in os.walk(self.root):
            here = Path(directory)
            dirs[:] = [d for d in dirs if not _skipped(here, d)]
            for name in files:
                yield (here / name).relative_to(self.root).as_posix()


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
