import pytest

from infrarsi.runner.workspace import SNAPSHOT_BYTES, Workspace, WorkspaceError

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


def test_links_inside_the_repo_point_into_the_copy_and_look_unchanged(tmp_path):
    repo = tmp_path / "repo"
    make_tree(repo)
    (repo / "alias.py").symlink_to("pkg/model.py")
    (repo / "absolute.py").symlink_to(repo / "train.py")
    (repo / "pkg_link").symlink_to(repo / "pkg")
    ws = Workspace(repo)
    try:
        for name in ("alias.py", "absolute.py", "pkg_link"):
            link = ws.root / name
            assert link.is_symlink() and ws.root.resolve() in link.resolve().parents, name
        assert (ws.root / "pkg_link" / "model.py").read_text() == "x = 1\n"
        assert ws.changed() == [] and ws.hunks() == []
    finally:
        ws.remove()


def test_a_link_to_outside_becomes_a_read_only_copy_never_written_through(tmp_path):
    outside = tmp_path / "outside"
    (outside / "data").mkdir(parents=True)
    (outside / "data" / "shard.bin").write_bytes(b"\0" * 100)
    (outside / "config.py").write_text("lr = 1e-3\n")
    repo = tmp_path / "repo"
    make_tree(repo)
    (repo / "config.py").symlink_to(outside / "config.py")
    (repo / "data").symlink_to(outside / "data")
    before = tree_digest(outside)
    ws = Workspace(repo)
    try:
        assert not (ws.root / "config.py").is_symlink() and not (ws.root / "data").is_symlink()
        assert (ws.root / "data" / "shard.bin").read_bytes() == b"\0" * 100
        assert not (ws.root / "data").stat().st_mode & 0o222
        assert ws.changed() == []
        # A knob rewrite lands in the copy, not in the file the link named.
        assert ws.write_knobs({"config.py": {"lr": 0.002}}) is None
        assert "lr = 0.002" in (ws.root / "config.py").read_text()
        assert tree_digest(outside) == before
    finally:
        ws.remove()
    assert tree_digest(outside) == before and not ws.root.exists()


def test_a_dangling_link_to_outside_refuses_the_copy_naming_it(tmp_path):
    repo = tmp_path / "repo"
    make_tree(repo)
    (repo / "cache").symlink_to(tmp_path / "nowhere")
    with pytest.raises(WorkspaceError, match=r"cache is a link to .*nowhere"):
        Workspace(repo)


def test_a_declared_read_only_target_stays_a_link(tmp_path):
    data = tmp_path / "datasets" / "tiny"
    data.mkdir(parents=True)
    (data / "a.bin").write_bytes(b"1")
    repo = tmp_path / "repo"
    make_tree(repo)
    (repo / "data").symlink_to(data)
    ws = Workspace(repo, mounted=(str(tmp_path / "datasets"),))
    try:
        assert (ws.root / "data").is_symlink() and ws.outside_targets == [data]
        assert ws.changed() == []
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
