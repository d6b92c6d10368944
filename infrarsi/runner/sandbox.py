"""Where a trial runs: a bubblewrap sandbox around the workspace, and a process lifetime bound to it.

The sandbox (``bwrap``) gives the trial a root of its own: the system, the Python interpreter and
its packages read-only; the workspace (the repo copy, the trial's home and the launcher's record channel) writable; a
private ``/tmp``, ``/dev/shm`` and home; no network unless the contract says the job needs it
(``[sandbox] network = true``); ``/dev/nvidia*`` passed through. The user's repository and home
are not mounted, so nothing the trial runs can read or write them. The trial is pid 1's child in
a pid namespace of its own: when it ends, or InfraRSI dies (``--die-with-parent``), the kernel
kills everything it started. See docs/sandbox.md.

When bwrap cannot run (not installed; a container without user namespaces) trials refuse to start
with :func:`bwrap_problem`'s message, unless the user passed ``--no-sandbox``.

Process lifetime, with or without the sandbox: every trial gets a cgroup of its own where one can
be made (killed whole at the end), else InfraRSI becomes a child subreaper so orphaned daemons are
reparented to it and killed with their trial. Workspaces and cgroups carry their owner's pid and
start time; those of a dead InfraRSI are removed at the next start.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import psutil

BYTECODE_MOUNT = "/var/cache/infrarsi-bytecode"
"""Where the shared bytecode prefix appears inside the sandbox."""
NO_SANDBOX_HINT = "pass --no-sandbox to run trials without it (they then see your files and network)"
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/sys")
"""Mounted read-only when present (symlinks such as ``/lib -> usr/lib`` are recreated as links)."""
HIDDEN_FILES = ("/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-", "/etc/sudoers")
"""System secrets masked inside the read-only /etc."""
HIDDEN_DIRS = ("/etc/ssh", "/etc/sudoers.d", "/etc/ssl/private")
OWNER_FILE = ".infrarsi-owner"
"""In each workspace: ``<pid> <process start time>`` of the InfraRSI that made it."""
WORKSPACE_PREFIX = "infrarsi-trial-"
CGROUP_PREFIX = "infrarsi-"


@functools.cache
def bwrap_path() -> str | None:
    return shutil.which("bwrap")


@functools.cache
def bwrap_problem() -> str | None:
    """Why trials cannot be sandboxed here (one line, with what to do), or None when they can."""
    bwrap = bwrap_path()
    if bwrap is None:
        return ("the trial sandbox needs bubblewrap, which is not installed "
                f"(Debian/Ubuntu: apt-get install bubblewrap); or {NO_SANDBOX_HINT}")
    probe = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid", "--unshare-net",
             "--die-with-parent", "--", "true"]
    try:
        done = subprocess.run(probe, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"bubblewrap could not be started ({err}); {NO_SANDBOX_HINT}"
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        return (f"bubblewrap cannot create a sandbox here ({why}); containers without user namespaces "
                f"cannot run it: {NO_SANDBOX_HINT}")
    return None


def mode_words(sandbox: bool) -> str:
    """How trials ran, for the run record and the report."""
    return "bubblewrap" if sandbox else "off (--no-sandbox)"


@dataclass(kw_only=True, slots=True)
class Mounts:
    """What the sandbox shows the trial, beyond the system directories."""

    workspace: Path
    """The workspace's directory (the repo copy and the trial's home): writable."""
    cwd: Path
    repo: Path
    """The user's repository: never mounted."""
    read_only: list[Path] = field(default_factory=list)
    """More read-only paths (the contract's ``[sandbox] read_only``: data outside the repo)."""
    writable: list[Path] = field(default_factory=list)
    """More writable folders at their own paths; never the user's repo or home."""
    bytecode: Path | None = None
    """The bytecode prefix trials share (``runner/bytecode.py``), shown at :data:`BYTECODE_MOUNT`
    whatever its real path, so its place in the user's home never appears in the sandbox."""
    bytecode_writable: bool = False
    """Only for InfraRSI's own warm-up; trials read it."""
    network: bool = False


def _within(path: Path, other: Path) -> bool:
    return path == other or other in path.parents


def _interpreter_paths() -> list[Path]:
    """InfraRSI's interpreter, its packages and InfraRSI itself: the trial imports them."""
    import infrarsi

    paths = [Path(sys.prefix), Path(sys.base_prefix), Path(sys.exec_prefix), Path(sys.executable).resolve().parent,
             Path(infrarsi.__file__).resolve().parent]
    paths += [Path(p) for p in sys.path if p]
    for entry in os.environ.get("PATH", "").split(os.pathsep):
        if entry:
            here = Path(entry)
            paths.append(here.parent if (here.parent / "pyvenv.cfg").exists() else here)
    return paths


def _in_venv(path: Path, repo: Path) -> bool:
    """Whether ``path``, inside ``repo``, is in a virtual environment there (repo/.venv): the
    workspace leaves those out, so the trial needs the real one."""
    return any((parent / "pyvenv.cfg").exists() for parent in [path, *path.parents] if _within(parent, repo))


def _read_only_paths(mounts: Mounts) -> list[Path]:
    home = Path.home().resolve()
    repo = mounts.repo.resolve()
    workspace = mounts.workspace.resolve()
    out: list[Path] = []
    for path in [*_interpreter_paths(), *mounts.read_only]:
        try:
            path = path.resolve()
        except OSError:
            continue
        # Never the user's repo or home, nor a folder holding them (a sys.path entry '/root'), nor
        # anything in the repo but a virtual environment; nor a folder holding the workspace (it
        # would hide the private /tmp).
        if not path.exists() or _within(repo, path) or _within(home, path) or _within(workspace, path):
            continue
        if _within(path, repo) and not _in_venv(path, repo):
            continue
        if any(_within(path, Path(d)) for d in ("/usr", "/etc", "/sys", "/proc", "/dev")):
            continue
        out.append(path)
    # Parents first, so a child mount lands on top of its parent's.
    return sorted(set(out), key=lambda p: (len(p.parts), p.as_posix()))


def wrap(argv: list[str], mounts: Mounts) -> list[str]:
    """``argv`` run inside the sandbox (the environment passes through bwrap unchanged)."""
    out = [bwrap_path() or "bwrap", "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc",
           "--unshare-uts", "--unshare-cgroup-try"]
    if not mounts.network:
        out.append("--unshare-net")
    if os.geteuid() == 0:  # bwrap keeps a root caller's capabilities unless told otherwise
        out += ["--cap-drop", "ALL"]
    for name in SYSTEM_DIRS:
        path = Path(name)
        if path.is_symlink():
            out += ["--symlink", os.readlink(path), name]
        elif path.exists():
            out += ["--ro-bind", name, name]
    for name in HIDDEN_FILES:
        if Path(name).exists():
            out += ["--ro-bind", "/dev/null", name]
    for name in HIDDEN_DIRS:
        if Path(name).is_dir():
            out += ["--tmpfs", name]
    out += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/dev/shm", "--tmpfs", "/tmp"]
    for dev in sorted(Path("/dev").glob("nvidia*")):
        out += ["--dev-bind", str(dev), str(dev)]
    for path in _read_only_paths(mounts):
        out += ["--ro-bind", str(path), str(path)]
    out += ["--bind", str(mounts.workspace), str(mounts.workspace)]
    for path in mounts.writable:
        path = path.resolve()
        if _within(mounts.repo.resolve(), path) or _within(path, mounts.repo.resolve()) or _within(Path.home(), path):
            raise ValueError(f"{path} would expose the user's repository or home to the trial")
        out += ["--bind", str(path), str(path)]
    if mounts.bytecode is not None:
        out += ["--bind" if mounts.bytecode_writable else "--ro-bind", str(mounts.bytecode), BYTECODE_MOUNT]
    out += ["--remount-ro", "/", "--chdir", str(mounts.cwd), "--", *argv]
    return out


# ----- process lifetime -----------------------------------------------------------------------

_PR_SET_CHILD_SUBREAPER = 36
TOKEN_ENV = "INFRARSI_TRIAL_TOKEN"
"""Set in every trial's environment: the subreaper fallback finds a trial's orphans by it."""


def _owner_stamp(pid: int | None = None) -> str:
    proc = psutil.Process(pid or os.getpid())
    return f"{proc.pid} {proc.create_time():.3f}"


def _owner_alive(stamp: str) -> bool:
    try:
        pid, created = stamp.split()
        return f"{psutil.Process(int(pid)).create_time():.3f}" == created
    except (ValueError, psutil.Error):
        return False


def _cgroup_root() -> Path | None:
    """This process's own cgroup v2 directory, if there is a v2 hierarchy we may make children in."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    own = next((line.split(":", 2)[2] for line in lines if line.startswith("0::")), None)
    if own is None:
        return None
    for mount in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
        if (Path(mount) / "cgroup.procs").exists() and not (Path(mount) / "tasks").exists():
            base = Path(mount) / own.lstrip("/")
            if os.access(base, os.W_OK):
                return base
    return None


class Containment:
    """Keeps everything one trial starts inside one killable group.

    A cgroup when one can be made (``use_cgroup``), else the subreaper fallback: InfraRSI adopts
    orphans, and those carrying this trial's token are killed with it.
    """

    def __init__(self, *, use_cgroup: bool = True):
        self.token = uuid.uuid4().hex
        self.cgroup: Path | None = None
        if use_cgroup:
            root = _cgroup_root()
            if root is not None:
                path = root / f"{CGROUP_PREFIX}{os.getpid()}-{self.token[:12]}"
                with contextlib.suppress(OSError):
                    path.mkdir()  # cgroupfs holds no files of ours: the owner's pid is in the name
                    self.cgroup = path
        if self.cgroup is None:
            become_subreaper()

    @property
    def kind(self) -> str:
        return "cgroup" if self.cgroup is not None else "subreaper"

    def preexec(self) -> None:
        """In the forked child, before exec: join the trial's cgroup."""
        if self.cgroup is not None:
            fd = os.open(self.cgroup / "cgroup.procs", os.O_WRONLY)
            try:
                os.write(fd, b"0")
            finally:
                os.close(fd)

    def kill(self) -> None:
        """Kill whatever of the trial is still running, then forget the group."""
        if self.cgroup is not None:
            _kill_cgroup(self.cgroup)
            return
        orphans = []
        for child in psutil.Process().children():
            with contextlib.suppress(psutil.Error):
                if child.environ().get(TOKEN_ENV) == self.token:
                    orphans.append(child)
        for proc in _with_descendants(orphans):
            with contextlib.suppress(psutil.Error):
                proc.kill()
        psutil.wait_procs(orphans, timeout=5)


def _with_descendants(procs: Iterable[psutil.Process]) -> list[psutil.Process]:
    out = []
    for proc in procs:
        out.append(proc)
        with contextlib.suppress(psutil.Error):
            out += proc.children(recursive=True)
    return out


def _kill_cgroup(path: Path) -> None:
    kill_file = path / "cgroup.kill"
    for _ in range(100):
        try:
            pids = [int(p) for p in (path / "cgroup.procs").read_text().split()]
        except OSError:
            return
        if not pids:
            break
        if kill_file.exists():
            with contextlib.suppress(OSError):
                kill_file.write_text("1")
        else:
            for pid in pids:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
        time.sleep(0.01)
    with contextlib.suppress(OSError):
        path.rmdir()


@functools.cache
def become_subreaper() -> bool:
    """Make InfraRSI the reaper of its descendants' orphans (Linux); False where it cannot."""
    if not sys.platform.startswith("linux"):
        return False
    with contextlib.suppress(OSError, AttributeError):
        return ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    return False


# ----- workspaces -----------------------------------------------------------------------------

def claim_workspace(directory: Path) -> None:
    """Mark ``directory`` as this InfraRSI's, so a later one removes it if this one dies."""
    (directory / OWNER_FILE).write_text(_owner_stamp() + "\n")


def remove_stale(tmp: Path | None = None) -> list[Path]:
    """Remove the workspaces and cgroups of InfraRSI processes that are gone; what was removed."""
    removed: list[Path] = []
    tmp = Path(tempfile.gettempdir()) if tmp is None else tmp
    for directory in tmp.glob(f"{WORKSPACE_PREFIX}*"):
        stamp = directory / OWNER_FILE
        with contextlib.suppress(OSError):
            if stamp.is_file() and not _owner_alive(stamp.read_text()):
                shutil.rmtree(directory, ignore_errors=True)
                removed.append(directory)
    root = _cgroup_root()
    if root is not None:
        for group in root.glob(f"{CGROUP_PREFIX}*"):
            pid = group.name.removeprefix(CGROUP_PREFIX).split("-")[0]
            if pid.isdigit() and not psutil.pid_exists(int(pid)):
                _kill_cgroup(group)
                removed.append(group)
    return removed


@functools.cache
def remove_stale_once() -> list[Path]:
    """:func:`remove_stale` at this InfraRSI's first trial."""
    return remove_stale()
