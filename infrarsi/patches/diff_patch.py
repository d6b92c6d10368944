"""LLM-proposed patches: unified diffs, checked against the contract, applied with ``git apply``.

A diff is parsed here first, strictly: file headers, hunk headers whose line counts match their
bodies, paths relative to the repo without ``..``. Git's extended headers are refused, each with
its name: a mode change, a new or deleted file, a rename or copy, a binary patch (``git apply``
acts on them even where a reader of the hunks sees only commentary). So are edits of a locked
file, of a file outside the editable scope or of a symbolic link, and — read on the syntax tree of
the patched file, see ``static_checks`` — changes to the loss, the probe calls, the training step,
the clock, the import system, and anything that reaches outside the trial's work tree.

Only the parsed hunks reach ``git apply``: they are written out again as a plain unified diff, so
nothing the parser did not read can act. ``git apply`` needs no repository (it acts like
``patch`` there), matches context exactly and applies all files or none. Git looks for a
repository upwards from the work tree; ``GIT_CEILING_DIRECTORIES`` stops it at the work tree, so a
copy that sits inside another checkout resolves the diff's paths against itself, never against
the enclosing repository.

A stored diff is named after the first 8 hex digits of its sha256 (``llm:<id>``); one whose
content no longer matches its name is refused.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import re
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from infrarsi.contract import STATE_DIR, Contract
from infrarsi.patches.base import APPLIED, FAILED, PatchOutcome, diff_hunks
from infrarsi.patches.scope import scope_violation
from infrarsi.patches.static_checks import diff_problem

LLM_PREFIX = "llm:"
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_ID = re.compile(r"[0-9a-f]{8}")
# Git's extended header lines (git-apply(1), "diff --git" format), by what they do.
_EXTENDED = {
    "old mode": "mode change",
    "new mode": "mode change",
    "deleted file mode": "file deletion",
    "new file mode": "new file",
    "rename from": "rename",
    "rename to": "rename",
    "rename old": "rename",
    "rename new": "rename",
    "copy from": "copy",
    "copy to": "copy",
    "similarity index": "rename or copy",
    "dissimilarity index": "rename or copy",
    "GIT binary patch": "binary patch",
    "Binary files ": "binary patch",
    "literal ": "binary patch",
    "delta ": "binary patch",
}


class DiffError(ValueError):
    """A diff that cannot be used; the message says why."""


class DiffRefused(DiffError):
    """A well-formed diff that does something only text edits of existing files may not."""

    def __init__(self, kind: str, message: str):
        self.kind = kind
        super().__init__(message)


@dataclass
class FileDiff:
    path: str
    """Repo-relative path the diff changes."""
    strip: int
    """Leading path components git must strip (``a/`` ``b/`` prefixes: 1)."""
    hunks: list[list[str]] = field(default_factory=list)
    """Each hunk's body lines, with their `` ``/``+``/``-`` markers."""
    ranges: list[tuple[int, int, int, int]] = field(default_factory=list)
    """Each hunk's header: old start, old length, new start, new length."""


def diff_id(text: str) -> str:
    """The id a diff is stored and named under: the first 8 hex digits of its sha256."""
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def _clean(raw: str) -> str:
    return raw.split("\t", 1)[0].strip()


def _relative(old: str, new: str) -> tuple[str, int]:
    if old == "/dev/null":
        raise DiffRefused("new file", f"creates or deletes a file ({old} -> {new}): a new file; only edits are accepted")
    if new == "/dev/null":
        raise DiffRefused("file deletion", f"creates or deletes a file ({old} -> {new}): a deletion; only edits are accepted")
    strip = 1 if old.startswith("a/") and new.startswith("b/") else 0
    path = new[2:] if strip else new
    if (old[2:] if strip else old) != path:
        raise DiffRefused("rename", f"renames {old} to {new}; only edits in place are accepted")
    norm = posixpath.normpath(path)
    if path.startswith("/") or norm.startswith("..") or norm != path or norm.split("/")[0] in (".git", STATE_DIR):
        raise DiffError(f"path {path!r} is not a plain path inside the repo")
    return path, strip


_PRIORITY = ("binary patch", "symbolic link", "new file", "file deletion", "rename", "copy", "rename or copy",
             "mode change")
"""Which refusal names a diff that has several: the most specific (a binary patch's section also
says "new file mode")."""


def _extended(line: str, section: str, number: int) -> tuple[str, str] | None:
    for prefix, kind in _EXTENDED.items():
        if line.startswith(prefix):
            if kind in ("new file", "mode change") and line.rstrip().endswith("120000"):
                kind = "symbolic link"
            where = f" for {section}" if section else ""
            return kind, (f"carries a {kind}{where} (line {number}: {line.strip()[:60]!r}); "
                          "only text edits of existing files are accepted")
    return None


def _first(refusals: list[tuple[str, str]]) -> DiffRefused:
    return DiffRefused(*min(refusals, key=lambda r: _PRIORITY.index(r[0])))


def parse_unified_diff(text: str) -> list[FileDiff]:
    """The files and hunks of a unified diff; raises DiffError on anything malformed and
    DiffRefused on git's extended headers (mode changes, new files, renames, binary patches)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    files: list[FileDiff] = []
    refusals: list[tuple[str, str]] = []
    section = ""
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("diff --git "):
            parts = line.split()
            section = parts[-1][2:] if parts[-1].startswith("b/") else parts[-1]
        if line.startswith("--- "):
            if i + 1 >= len(lines) or not lines[i + 1].startswith("+++ "):
                raise DiffError(f"line {i + 1}: '---' header without '+++'")
            try:
                path, strip = _relative(_clean(line[4:]), _clean(lines[i + 1][4:]))
            except DiffRefused as err:
                refusals.append((err.kind, str(err)))
                raise _first(refusals) from None
            if any(f.path == path for f in files):
                raise DiffError(f"line {i + 1}: {path} appears twice; one section per file")
            files.append(FileDiff(path, strip))
            i += 2
            continue
        if line.startswith("@@"):
            match = _HUNK.match(line)
            if match is None or not files:
                raise DiffError(f"line {i + 1}: bad hunk header {line!r}")
            old_len = int(match.group(2) or 1)
            new_len = int(match.group(4) or 1)
            files[-1].ranges.append((int(match.group(1)), old_len, int(match.group(3)), new_len))
            body = []
            i += 1
            while old_len > 0 or new_len > 0:
                if i >= len(lines):
                    raise DiffError(f"hunk in {files[-1].path} ends early: its header promises more lines")
                entry = lines[i] or " "  # some tools drop the space of an empty context line
                marker = entry[0]
                if marker == " ":
                    old_len, new_len = old_len - 1, new_len - 1
                elif marker == "-":
                    old_len -= 1
                elif marker == "+":
                    new_len -= 1
                elif marker != "\\":
                    raise DiffError(f"line {i + 1}: {entry!r} is not a hunk line")
                if old_len < 0 or new_len < 0:
                    raise DiffError(f"line {i + 1}: hunk longer than its header says")
                body.append(entry)
                i += 1
            while i < len(lines) and lines[i].startswith("\\"):
                body.append(lines[i])
                i += 1
            files[-1].hunks.append(body)
            continue
        if files and files[-1].hunks and line.startswith(("+", "-", " ")):
            raise DiffError(f"line {i + 1}: hunk longer than its header says")
        refusal = _extended(line, section, i + 1)
        if refusal:
            refusals.append(refusal)
        i += 1  # preamble: "diff --git", "index …", commentary around the diff
    if refusals:
        raise _first(refusals)
    if not files or not all(f.hunks for f in files):
        raise DiffError("no file with a hunk in the diff")
    return files


def serialize(files: list[FileDiff]) -> str:
    """The parsed hunks as a plain unified diff with ``a/`` ``b/`` prefixes: all git will see."""
    out: list[str] = []
    for f in files:
        out += [f"--- a/{f.path}", f"+++ b/{f.path}"]
        for (old_start, old_len, new_start, new_len), body in zip(f.ranges, f.hunks, strict=True):
            out.append(f"@@ -{old_start},{old_len} +{new_start},{new_len} @@")
            out += body
    return "\n".join(out) + "\n"


def _refusal(files: list[FileDiff], contract: Contract, workdir: Path) -> str | None:
    for f in files:
        if f.path in contract.scope.locked:
            return f"contract: touches locked file {f.path}"
        if not contract.scope.allows(f.path):
            return f"contract: touches {f.path}, outside the editable scope"
        if (workdir / f.path).is_symlink():
            return f"contract: {f.path} is a symbolic link in the work tree; only regular files are edited"
    return None


def _git_apply(workdir: Path, diff: Path, check: bool) -> subprocess.CompletedProcess:
    env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(workdir.resolve().parent)}
    args = ["git", "apply", "-p1", "--whitespace=nowarn", *(["--check"] if check else []), str(diff.resolve())]
    return subprocess.run(args, cwd=workdir, env=env, capture_output=True, text=True, timeout=60)


def apply_diff(workdir: Path, diff_path: Path, contract: Contract, *, name: str | None = None) -> PatchOutcome:
    """Check a stored diff against the contract and apply its parsed hunks in ``workdir``; never raises."""
    name = name or LLM_PREFIX + diff_path.stem
    if not diff_path.is_file():
        return PatchOutcome(name, FAILED, f"no diff at {diff_path}")
    try:
        text = diff_path.read_text()
        files = parse_unified_diff(text)
    except DiffRefused as err:
        return PatchOutcome(name, FAILED, f"contract: {err.kind}: the diff {err}", breaks_contract=True)
    except (DiffError, UnicodeDecodeError) as err:
        return PatchOutcome(name, FAILED, f"malformed diff: {err}")
    if _ID.fullmatch(diff_path.stem) and diff_id(text) != diff_path.stem:
        return PatchOutcome(name, FAILED, f"contract: the stored diff {diff_path.name} was changed after it was "
                                          f"proposed (its content hashes to {diff_id(text)})", breaks_contract=True)
    refusal = _refusal(files, contract, workdir)
    if refusal:
        return PatchOutcome(name, FAILED, refusal, breaks_contract=True)
    before = {}
    for f in files:
        target = workdir / f.path
        if not target.is_file():
            return PatchOutcome(name, FAILED, f"the diff edits {f.path}, which is not in the work tree")
        before[f.path] = target.read_text()
    with tempfile.TemporaryDirectory(prefix="infrarsi-diff-") as tmp:
        parsed = Path(tmp) / "parsed.diff"
        parsed.write_text(serialize(files))
        checked = _git_apply(workdir, parsed, check=True)
        if checked.returncode != 0:
            return PatchOutcome(name, FAILED, f"does not apply: {checked.stderr.strip() or checked.stdout.strip()}")
        done = _git_apply(workdir, parsed, check=False)
    after = {rel: (workdir / rel).read_text() for rel in before}
    problem, breaks = None, False
    if done.returncode != 0:
        problem = f"git apply failed: {done.stderr.strip()}"
    for rel in after:
        if problem is None and (violation := scope_violation(rel, before[rel], after[rel], contract)):
            problem, breaks = violation, True
        try:
            compile(after[rel], rel, "exec")
        except SyntaxError as err:
            problem = problem or f"the patched {rel} does not compile: {err}"
        if problem is None and (forbidden := diff_problem(rel, before[rel], after[rel])):
            problem, breaks = forbidden, True
    if problem:
        for rel, text in before.items():  # leave the work tree as it was
            (workdir / rel).write_text(text)
        return PatchOutcome(name, FAILED, problem, breaks_contract=breaks)
    changed = {rel: text for rel, text in after.items() if text != before[rel]}
    hunks = [h for rel in changed for h in diff_hunks(rel, before[rel], changed[rel])]
    return PatchOutcome(name, APPLIED, "", changed=changed, hunks=hunks)
