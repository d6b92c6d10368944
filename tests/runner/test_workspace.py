from infrarsi.runner.workspace import SNAPSHOT_BYTES, Workspace

from .conftest import tree_digest


def make_tree(root):
    (root / "pkg").mkdir(parents=True)
    (root / "train.py").write_text("lr = 1e-3\nsteps = 10\nprint(lr)\n")
    (root / "pkg" / "model.py").write_text("x = 1\n")
    (root / "big.bin").write_bytes(b"\0" * (SNAPSHOT_BYTES + 1))
    for skipped in (".git", ".infrarsi", "pkg/__pycache__"):
        (root / skipped).mkdir(parents=True)
        (root / skipped / "junk").write_text("junk")
    (root / "myenv").mkdir()
    (root / "myenv" / "pyvenv.cfg").write_text("home = /usr\n")


def test_copy_skips_state_and_environments_and_reports_every_change(tmp_path):
    repo = tmp_path / "repo"
    make_tree(repo)
    before = tree_digest(repo)
    ws = Workspace(repo)
    try:
        copied = sorted(p.relative_to(ws.root).as_posix() for p in ws.root.rglob("*") if p.is_file())
        assert copied == ["big.bin", "pkg/model.py", "train.py"]
        assert ws.changed() == [] and ws.hunks() == []

        (ws.root / "train.py").write_text("lr = 2e-3\nsteps = 10\nprint(lr)\n")
        (ws.root / "pkg" / "model.py").unlink()
        (ws.root / "new.py").write_text("y = 2")
        with open(ws.root / "big.bin", "ab") as f:
            f.write(b"\1")
        assert ws.changed() == ["big.bin", "new.py", "pkg/model.py", "train.py"]
        hunks = {h.path: h for h in ws.hunks()}
        assert hunks["train.py"].header == "@@ -1,3 +1,3 @@"
        assert "-lr = 1e-3\n+lr = 2e-3\n" in hunks["train.py"].text
        assert hunks["pkg/model.py"].text == "-x = 1\n"
        assert hunks["new.py"].text == "+y = 2\n\\ No newline at end of file\n"
        assert hunks["big.bin"].header == "@@ large file changed @@"
    finally:
        ws.remove()
    assert not ws.root.exists()
    assert tree_digest(repo) == before


def test_flagless_knobs_are_written_into_the_copy_only(tmp_path):
    repo = tmp_path / "repo"
    make_tree(repo)
    ws = Workspace(repo)
    try:
        assert ws.write_knobs({"train.py": {"lr": 0.002}}) is None
        assert "lr = 0.002" in (ws.root / "train.py").read_text()
        assert (repo / "train.py").read_text().startswith("lr = 1e-3")
        reason = ws.write_knobs({"train.py": {"no_such_knob": 1}})
        assert "no_such_knob" in reason and "train.py" in reason
        assert "missing.py" in ws.write_knobs({"missing.py": {"lr": 1}})
    finally:
        ws.remove()


def test_every_folder_of_the_copy_is_compared_skipped_ones_included(tmp_path):
    """The copy leaves __pycache__ out, but a file that appears there later is a change: the
    comparison covers the whole copy (a .pyc planted next to a locked module once went unseen)."""
    repo = tmp_path / "repo"
    make_tree(repo)
    ws = Workspace(repo)
    try:
        (ws.root / "pkg" / "__pycache__").mkdir()
        (ws.root / "pkg" / "__pycache__" / "model.cpython-311.pyc").write_bytes(b"\x00planted")
        (ws.root / "link").symlink_to("/tmp")
        assert ws.changed() == ["link", "pkg/__pycache__/model.cpython-311.pyc"]
        assert {h.path: h.header for h in ws.hunks()}["link"] == "@@ symbolic link changed @@"
        ws.mark_prepared()
        assert ws.run_writes() == []
        (ws.root / "notes.txt").write_text("a log the job writes: not importable, not a link")
        (ws.root / "pkg" / "late.py").write_text("x = 2\n")
        (ws.pycache / "x.pyc").write_bytes(b"")
        assert ws.run_writes() == ["pkg/late.py", "pycache/x.pyc (the pycache prefix)"]
    finally:
        ws.remove()
