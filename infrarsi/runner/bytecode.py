"""Bytecode shared by every sandboxed trial: compiled by InfraRSI, read-only to the trials.

Every trial looks its modules' bytecode up under ``PYTHONPYCACHEPREFIX`` and never next to the
sources, where a stale or planted ``.pyc`` could stand in for what was checked
(``environment.interpreter_env``). An empty prefix per trial means compiling torch and the rest of
the job's imports from source at every start, seconds per trial (docs/benchmarks.md). So sandboxed
trials share one prefix per environment (``cache_dir``), mounted read-only in their sandbox (at
``sandbox.BYTECODE_MOUNT``), and only InfraRSI's own warm-up writes it: a sandboxed process that
imports the modules the launcher and the owner's repository import (read from their sources, never
from a candidate's), and then compiles, without importing, every module of the standard library and
of the installed distributions those imports come from, with what they require: a job imports much
lazily (torch loads ``torch._dynamo`` and sympy at its first optimizer step), and each such module
compiled from source at every start cost about 4.8 s a trial here (docs/benchmarks.md). A module a
trial imports that neither compiled is compiled in memory, as before. Without the sandbox nothing
would keep a trial from writing the shared prefix, so ``--no-sandbox`` trials keep an empty prefix
each.
"""

from __future__ import annotations

import ast
import fcntl
import functools
import hashlib
import importlib.metadata
import os
import platform
import re
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

from infrarsi.knobs.source import python_files
from infrarsi.launcher import SITE_DIR
from infrarsi.runner import sandbox
from infrarsi.runner.environment import trial_environment

WARM_TIMEOUT_S = 120
"""A module that hangs at import costs the first trial this much once, then is skipped."""
WARMED_FILE = "warmed.txt"
"""In the cache: the module names a warm-up has already imported, one per line."""
COMPILE_TIMEOUT_S = 600
"""Compiling torch, sympy and the standard library takes about 20 s on two cores, once."""
COMPILED_FILE = "compiled.txt"
"""In the cache: what has been compiled whole, one ``name==version@installed`` per line (``stdlib`` for
the standard library; ``installed``: when its metadata was written, ``_mtime_ns``): a distribution
upgraded or reinstalled in place is compiled again."""
OWN_DISTRIBUTION = "infrarsi"
"""What InfraRSI itself requires is not the job's: its probe and launcher import the standard
library and torch only."""
_SKIPPED_DIRS = {"test", "tests", "idlelib", "turtledemo", "lib2to3", "site-packages", "dist-packages"}

_WARM = """
import importlib, sys
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except BaseException:
        pass
"""


def cache_dir() -> Path:
    """This environment's shared prefix, under the user's cache folder (``XDG_CACHE_HOME``): one per
    interpreter and ``sys.prefix``, since virtual environments of one interpreter hold different
    packages and the warm-up's record of what it imported is per prefix."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    key = f"{os.path.realpath(sys.executable)}\0{os.path.realpath(sys.prefix)}"
    interpreter = hashlib.sha256(key.encode()).hexdigest()[:12]
    return base / "infrarsi" / "bytecode" / f"{sys.implementation.cache_tag}-{interpreter}"


@functools.cache
def imported_modules(repo: Path) -> frozenset[str]:
    """The modules the sources under ``repo`` import (dotted names), less the repo's own: the
    installed packages and standard modules its job will load."""
    names: set[str] = set()
    own: set[str] = set()
    for rel in python_files(repo):
        path = Path(rel)
        own.add(path.parent.name if path.name == "__init__.py" else path.stem)
        try:
            tree = ast.parse((repo / rel).read_bytes())
        except (SyntaxError, ValueError, OSError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module)
    return frozenset(n for n in names if n.split(".")[0] not in own and n not in sys.builtin_module_names)


def warm(repo: Path) -> Path:
    """The shared prefix, after importing into it whatever the launcher and ``repo`` import that no
    earlier warm-up imported. Concurrent callers wait on one lock; a module that
    fails to import is not tried again."""
    cache = cache_dir()
    cache.mkdir(parents=True, exist_ok=True, mode=0o700)
    with open(cache / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done_file = cache / WARMED_FILE
        done = set(done_file.read_text().split()) if done_file.exists() else set()
        modules = imported_modules(SITE_DIR) | imported_modules(repo)
        missing = sorted(modules - done)
        if missing:
            _import_into(cache, missing, repo)
            done_file.write_text("".join(f"{name}\n" for name in sorted(done | set(missing))))
        _compile_into(cache, frozenset(name.split(".")[0] for name in modules))
    return cache


def _compile_into(cache: Path, top_levels: frozenset[str]) -> None:
    """Compile, never import, what the standard library and the distributions behind ``top_levels``
    hold, unless an earlier warm-up compiled that version and install of it."""
    compiled_file = cache / COMPILED_FILE
    compiled = set(compiled_file.read_text().split()) if compiled_file.exists() else set()
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    units = {f"stdlib=={platform.python_version()}@{_mtime_ns(stdlib / 'os.py')}": _stdlib_sources} | {
        f"{_canonical(d.metadata['Name'])}=={d.version}@{_mtime_ns(_metadata_file(d))}":
            functools.partial(_distribution_sources, d)
        for d in distributions_behind(top_levels)}
    todo = {key: sources for key, sources in units.items() if key not in compiled}
    if not todo:
        return
    files = [str(path) for sources in todo.values() for path in sources()]
    try:
        # Errors (a test file in a newer syntax) are the module's, and a trial would hit them too.
        subprocess.run([sys.executable, "-X", f"pycache_prefix={cache}", "-m", "compileall", "-qq", "-j", "0",
                        "-i", "-"], input="\n".join(files), text=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=COMPILE_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        pass
    compiled_file.write_text("".join(f"{key}\n" for key in sorted(compiled | set(todo))))


@functools.cache
def distributions_behind(top_levels: frozenset[str]) -> tuple[importlib.metadata.Distribution, ...]:
    """The installed distributions that provide these top-level modules, with every distribution
    they require (extras aside), InfraRSI's own requirements aside. Once per process: reading every
    distribution's metadata costs about 0.17 s, and every trial's warm-up asks."""
    providers = importlib.metadata.packages_distributions()
    todo = [name for top in sorted(top_levels) for name in providers.get(top, [])]
    found: dict[str, importlib.metadata.Distribution] = {}
    while todo:
        key = _canonical(todo.pop())
        if key in found:
            continue
        try:
            dist = importlib.metadata.distribution(key)
        except importlib.metadata.PackageNotFoundError:
            continue
        found[key] = dist
        if key != OWN_DISTRIBUTION:
            todo += [m.group(0) for req in dist.requires or []
                     if not re.search(r";.*\bextra\s*==", req) and (m := re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", req))]
    return tuple(found.values())


@functools.cache
def _metadata_file(dist: importlib.metadata.Distribution) -> Path | None:
    """The file an install of ``dist`` writes its metadata to (once per process: finding it reads
    the distribution's whole file list)."""
    for f in dist.files or []:
        if f.name in ("METADATA", "PKG-INFO") and f.parent.name.endswith((".dist-info", ".egg-info")):
            path = Path(str(dist.locate_file(f)))
            return path if path.is_absolute() else None  # an editable install's, relative to nothing fixed
    return None


def _mtime_ns(path: Path | None) -> int:
    """When ``path`` was written: a distribution reinstalled at the same version (a virtual
    environment made again at the same path) has new sources, whose modification times no longer
    match the bytecode compiled from the old ones, so Python would compile every module again in
    memory at every trial's start (seconds a trial, docs/benchmarks.md)."""
    try:
        return path.stat().st_mtime_ns if path is not None else 0
    except OSError:
        return 0


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _distribution_sources(dist: importlib.metadata.Distribution) -> list[Path]:
    return [Path(str(dist.locate_file(f))) for f in dist.files or [] if f.suffix == ".py"]


def _stdlib_sources() -> list[Path]:
    root = Path(sysconfig.get_paths()["stdlib"])
    return [p for p in root.rglob("*.py") if not _SKIPPED_DIRS.intersection(p.relative_to(root).parts[:-1])]


def _import_into(cache: Path, modules: list[str], repo: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="infrarsi-warm-") as scratch:
        argv = [sys.executable, "-X", f"pycache_prefix={sandbox.BYTECODE_MOUNT}", "-c", _WARM, *modules]
        command = sandbox.wrap(argv, sandbox.Mounts(workspace=Path(scratch), cwd=Path(scratch), repo=repo,
                                                    bytecode=cache, bytecode_writable=True))
        env = trial_environment(home=Path(scratch))
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # writing is the point here
        try:
            subprocess.run(command, cwd=scratch, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=WARM_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            pass
