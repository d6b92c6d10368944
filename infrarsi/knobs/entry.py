"""Finding a repo's training entry point, and whether it is meant for ``torchrun``."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst
from libcst.metadata import MetadataWrapper

from infrarsi.knobs.loop import find_loop, is_backward, is_main_guard
from infrarsi.knobs.source import DiscoveryError, dotted, parse, python_files, read_text, walk

# Environment variables only torchrun (or another launcher) sets; reading one without a default
# or calling init_process_group means the script expects a process group.
TORCHRUN_ENV = ("LOCAL_RANK", "RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE")


@dataclass(frozen=True, slots=True, eq=False)
class EntryPoint:
    path: str
    """Repo-relative path of the script."""
    wrapper: MetadataWrapper = field(repr=False)
    launcher: str
    """python | torchrun."""
    launcher_why: str = ""
    trains: bool = False
    """Whether the script itself calls ``.backward()``."""
    why: str = ""
    """Why this file is the entry point (the command names it, or how its loop is reached)."""


def _trains(module: cst.Module) -> bool:
    return any(is_backward(n) for n in walk(module))


def torchrun_reason(module: cst.Module) -> str:
    """Why the script needs torchrun's environment (empty: it runs under plain python)."""
    for node in walk(module):
        if isinstance(node, cst.Call) and dotted(node.func).endswith("init_process_group"):
            return "calls init_process_group"
        if isinstance(node, cst.Subscript) and dotted(node.value) == "os.environ":
            index = node.slice[0].slice
            if isinstance(index, cst.Index) and isinstance(index.value, cst.SimpleString):
                if index.value.evaluated_value in TORCHRUN_ENV:
                    return f"reads os.environ[{index.value.value}]"
    return ""


def _score(rel: str, trains: bool) -> int:
    """Prefer scripts that train, are named train*, sit near the root, and are not tests."""
    name = Path(rel).name
    parts = Path(rel).parts
    score = 4 * trains + 2 * name.startswith("train") - (len(parts) - 1)
    if name.startswith("test_") or "tests" in parts or "test" in parts:
        score -= 10
    return score


def find_entry(repo: Path, entry: str | None = None, why: str = "chosen with --entry") -> EntryPoint:
    """The training script of ``repo``: the given one, or the best-scoring file with a ``__main__``
    guard or a top-level training loop. Raises DiscoveryError when there is none or the choice is a tie."""
    if entry is not None:
        rel = Path(entry).as_posix()
        if not (repo / rel).is_file():
            raise DiscoveryError(f"entry point {rel} does not exist under {repo}")
        return _entry(repo, rel, parse(repo, rel), why)
    candidates: list[tuple[int, str, MetadataWrapper, str]] = []
    for rel in python_files(repo):
        text = read_text(repo, rel)
        if not any(marker in text for marker in ("__main__", ".backward(", ".train(", ".fit(")):
            continue
        wrapper = parse(repo, rel, text)
        module = wrapper.module
        loop = find_loop((rel, wrapper))
        guarded = any(is_main_guard(s) for s in module.body)
        if guarded or loop.found:
            why = loop.why if loop.found else "it has a __main__ block (its loop is in code it imports)"
            candidates.append((_score(rel, _trains(module) or loop.found), rel, wrapper, why))
    if not candidates:
        raise DiscoveryError(
            f"no entry point found in {repo}: no Python file has an `if __name__ == \"__main__\":` block "
            "or reaches a training loop (.backward(), a Trainer's train()/fit()) when run. "
            "Pass the script with --entry FILE, or the command after --."
        )
    candidates.sort(key=lambda c: (-c[0], c[1]))
    best = [c for c in candidates if c[0] == candidates[0][0]]
    if len(best) > 1:
        names = ", ".join(c[1] for c in best)
        raise DiscoveryError(f"several entry points look alike in {repo}: {names}. Choose one with --entry FILE.")
    _, rel, wrapper, why = best[0]
    return _entry(repo, rel, wrapper, f"the best-scoring script: {why}")


def _entry(repo: Path, rel: str, wrapper: MetadataWrapper, why: str) -> EntryPoint:
    needs = torchrun_reason(wrapper.module)
    return EntryPoint(
        path=rel,
        wrapper=wrapper,
        launcher="torchrun" if needs else "python",
        launcher_why=needs,
        trains=_trains(wrapper.module),
        why=why,
    )
