"""`infrarsi trial` as a user runs it: a real trial, JSON or a summary, clear setup errors."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from infrarsi.cli import main
from infrarsi.contract import save_contract

pytestmark = pytest.mark.e2e


def test_console_script_prints_the_result_as_json(make_repo):
    repo, contract = make_repo("good.py")
    save_contract(contract, repo)
    # The console script pip installed next to this interpreter.
    argv = [str(Path(sys.executable).parent / "infrarsi"), "trial", str(repo),
            "--set", "step_s=0.04", "--set", "in_child=false", "--steps", "4", "--json"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["status"] == "ok"
    assert result["candidate"]["knobs"] == {"step_s": 0.04, "in_child": False}
    # Arrival times jitter by the reader's wake-up; the steps' sum cannot read short of the sleeps.
    times = result["step_times"]
    assert len(result["losses"]) == 4 and sum(times) >= len(times) * 0.04 - 0.005, times


def test_failed_trial_exits_1_with_a_summary(make_repo, capsys):
    repo, contract = make_repo("raises.py")
    save_contract(contract, repo)
    assert main(["trial", str(repo), "--budget-gib", "1"]) == 1
    out = capsys.readouterr().out
    assert "crash" in out and "shape mismatch" in out


def test_setup_errors_exit_2_naming_what_is_wrong(make_repo, tmp_path, capsys):
    repo, contract = make_repo("good.py")
    save_contract(contract, repo)
    cases = [
        (["--set", "nope=1"], "no knob 'nope'"),
        (["--set", "alloc_mb=lots"], "is a int"),
        (["--set", "in_child=maybe"], "is a bool"),
        (["--set", "step_s"], "expected KNOB=VALUE"),
        (["--steps", "0"], "steps must be positive"),
    ]
    for args, message in cases:
        assert main(["trial", str(repo), *args]) == 2, args
        assert message in " ".join(capsys.readouterr().err.split()), args
    assert main(["trial", str(tmp_path / "elsewhere")]) == 2
    assert "infrarsi init" in capsys.readouterr().err
    (repo / "helpers.py").write_text("changed = True\n")
    assert main(["trial", str(repo)]) == 2
    assert "locked file helpers.py" in " ".join(capsys.readouterr().err.split())
