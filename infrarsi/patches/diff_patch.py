"""LLM-proposed patches: unified diffs, checked against the contract, applied with ``git apply``.

A diff is parsed here first, strictly: file headers, hunk headers whose line counts match their
bodies, paths relative to the repo without ``..``. It is refused (status ``failed``, reason
starting ``contract:``) when it touches a locked file, a file outside the editable scope, or a
line that calls the probe (which measures the steps), and when it creates or deletes a file.

Only then does ``git apply`` apply it, inside the work tree: it needs no repository (it acts like
``patch`` there), matches context exactly and applies all files or none. Git looks for a
repository upwards from the work tree; ``GIT_CEILING_DIRECTORIES`` stops it at the work tree, so a
copy that sits inside another checkout resolves the diff's paths against itself, never against
the enclosing repository.
"""

from __future__ import annotations

import os
import posixpath
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from infrarsi.contract import STATE_DIR, Contract
from infrarsi.patches.base import APPLIED, FAILED, PatchOutcome, diff_hunks
from infrarsi.patches.scope import scope_violation

LLM_PREFIX = "llm:"
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


class DiffError(ValueError):
    """A diff that cannot be used; the message says why."""


@dataclass
class FileDiff:
    path: str
    """Repo-relative path the diff changes."""
    strip: int
    """Leading path components git must strip (``a/`` ``b/`` prefixes: 1)."""
    hunks: list[list[str]] = field(default_factory=list)
    """Each hunk's body lines, with their `` ``/``+``/``-`` markers."""


def _clean(raw: str) -> str:
    return raw.split("\t", 1)[0].strip()


def _relative(old: str, new: str) -> tuple[str, int]:
    if old == "/dev/null" or new == "/dev/null":
        raise DiffError(f"creates or deletes a file ({old} -> {new}); only edits are accepted")
    strip = 1 if old.startswith("a/") and new.startswith("b/") else 0
    path = new[2:] if strip else new
    if (old[2:] if strip else old) != path:
        raise DiffError(f"renames {old} to {new}; only edits in place are accepted")
    norm = posixpath.normpath(path)
    if path.startswith("/") or norm.startswith("..") or norm != path or norm.split("/")[0] in (".git", STATE_DIR):
        raise DiffError(f"path {path!r} is not a plain path inside the repo")
    return path, strip


def parse_unified_diff(text: str) -> list[FileDiff]:
    """The files and hunks of a unified diff; raises DiffError on anything malformed."""
    lines = text.splitlines()
    files: list[FileDiff] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("--- "):
            if i + 1 >= len(lines) or not lines[i + 1].startswith("+++ "):
                raise DiffError(f"line {i + 1}: '---' header without '+++'")
            path, strip = _relative(_clean(line[4:]), _clean(lines[i + 1][4:]))
            files.append(FileDiff(path, strip))
            i += 2
            continue
        if line.startswith("@@"):
            match = _HUNK.match(line)
            if match is None or not files:
                raise DiffError(f"line {i + 1}: bad hunk header {line!r}")
            old_len = int(match.group(2) or 1)
            new_len = int(match.group(4) or 1)
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
        i += 1  # preamble: "diff --git", "index …", commentary around the diff
    if not files or not all(f.hunks for f in files):
        raise DiffError("no file with a hunk in the diff")
    return files


def _refusal(files: list[FileDiff], contract: Contract) -> str | None:
    for f in files:
        if f.path in contract.scope.locked:
            return f"contract: touches locked file {f.path}"
        if not contract.scope.allows(f.path):
            return f"contract: touches {f.path}, outside the editable scope"
        if any(line[:1] in "+-" and "probe." in line for hunk in f.hunks for line in hunk):
            return f"contract: changes the probe calls in {f.path} (they measure the steps)"
    return None


def _git_apply(workdir: Path, diff: Path, strip: int, check: bool) -> subprocess.CompletedProcess:
    env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(workdir.resolve().parent)}
    args = ["git", "apply", f"-p{strip}", "--whitespace=nowarn", *(["--check"] if check else []), str(diff.resolve())]
    return subprocess.run(args, cwd=workdir, env=env, capture_output=True, text=True, timeout=60)


def apply_diff(workdir: Path, diff_path: Path, contract: Contract, *, name: str | None = None) -> PatchOutcome:
    """Check a stored diff against the contract and apply it in ``workdir``; never raises."""
    name = name or LLM_PREFIX + diff_path.stem
    if not diff_path.is_file():
        return PatchOutcome(name, FAILED, f"no diff at {diff_path}")
    try:
        files = parse_unified_diff(diff_path.read_text())
    except (DiffError, UnicodeDecodeError) as err:
        return PatchOutcome(name, FAILED, f"malformed diff: {err}")
    refusal = _refusal(files, contract)
    if refusal:
        return PatchOutcome(name, FAILED, refusal)
    strips = {f.strip for f in files}
    if len(strips) != 1:
        return PatchOutcome(name, FAILED, "malformed diff: mixes a/ b/ prefixed and bare paths")
    strip = strips.pop()
    before = {}
    for f in files:
        target = workdir / f.path
        if not target.is_file():
            return PatchOutcome(name, FAILED, f"the diff edits {f.path}, which is not in the work tree")
        before[f.path] = target.read_text()
    checked = _git_apply(workdir, diff_path, strip, check=True)
    if checked.returncode != 0:
        return PatchOutcome(name, FAILED, f"does not apply: {checked.stderr.strip() or checked.stdout.strip()}")
    done = _git_apply(workdir, diff_path, strip, check=False)
    after = {rel: (workdir / rel).read_text() for rel in before}
    problem = None
    if done.returncode != 0:
        problem = f"git apply failed: {done.stderr.strip()}"
    for rel in after:
        problem = problem or scope_violation(rel, before[rel], after[rel], contract)
        try:
            compile(after[rel], rel, "exec")
        except SyntaxError as err:
            problem = problem or f"the patched {rel} does not compile: {err}"
    if problem:
        for rel, text in before.items():  # leave the work tree as it was
            (workdir / rel).write_text(text)
        return PatchOutcome(name, FAILED, problem)
    changed = {rel: text for rel, text in after.items() if text != before[rel]}
    hunks = [h for rel in changed for h in diff_hunks(rel, before[rel], changed[rel])]
    return PatchOutcome(name, APPLIED, "", changed=changed, hunks=hunks)
