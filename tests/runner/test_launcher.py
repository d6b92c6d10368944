"""Jobs measured from outside through the launcher: real trials of small scripts written here, none
of which calls the probe or has a max-steps option unless the test says so."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from infrarsi.contract import Knob
from infrarsi.launcher import ENV_RECORDS, launcher_env
from infrarsi.runner.sandbox import TOKEN_ENV
from infrarsi.runner.trial import TrialSpec, run_trial
from infrarsi.trials import Candidate, TrialStatus

from .conftest import make_contract, reader_lag, tree_digest

pytestmark = pytest.mark.e2e
STEPS = 6  # the contract's 2 warm-up + 4 measured steps


def job(tmp_path: Path, script: str, *, knob_list: list[Knob] | None = None, **contract_args):
    """The script as repo/train.py, launched as ``python train.py`` with no knob but those given."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "train.py").write_text(textwrap.dedent(script))
    (repo / "helpers.py").write_text("SCALE = 1.0\n")
    contract = make_contract(repo, knob_list=knob_list or [], **contract_args)
    return repo, contract


def trial(repo, contract, **spec_args):
    """One trial; the losses are the script's own, not the runner tests' reference."""
    before = tree_digest(repo)
    spec_args.setdefault("check_loss", False)
    result = run_trial(TrialSpec(repo=repo, contract=contract, candidate=Candidate(), timeout_s=120, **spec_args))
    assert tree_digest(repo) == before
    return result


EPOCHS_ONLY = """
    import argparse
    import torch

    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=1000)
    args = parser.parse_args()
    torch.manual_seed(0)
    data = torch.randint(0, 50, (40, 8))
    model = torch.nn.Sequential(torch.nn.Embedding(50, 16), torch.nn.Flatten(), torch.nn.Linear(128, 50))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    step = 0
    for epoch in range(args.epochs):
        for batch in data.split(4):
            loss = torch.nn.functional.cross_entropy(model(batch), batch[:, 0])
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            print(f"epoch {epoch} batch loss {loss.item():.5f} step {step}", flush=True)
            step += 1
    print("trained every epoch")
"""


def test_an_epochs_only_loop_is_stopped_after_the_contracts_steps(tmp_path):
    repo, contract = job(tmp_path, EPOCHS_ONLY)
    result = trial(repo, contract)
    assert result.status is TrialStatus.OK, result.detail
    assert result.source == "launcher" and len(result.losses) == STEPS and len(result.step_times) == 4
    log = Path(result.log_path).read_text()
    printed = [float(line.split("loss ")[1].split()[0]) for line in log.splitlines() if "batch loss" in line]
    # Stopped inside the 6th optimizer step: 5 steps printed their loss, the 6th never got to.
    assert len(printed) == STEPS - 1 and "trained every epoch" not in log
    assert result.losses[:5] == pytest.approx(printed, abs=1e-5)
    assert result.tokens_per_step == 4 * 8 and result.samples_per_step == 4
    assert result.param_checksum is not None and result.param_checksum[1] > 0


HAND_WRITTEN_SGD = """
    import time
    import torch

    torch.manual_seed(0)
    w = torch.randn(8, 1, requires_grad=True)
    x, y = torch.randn(16, 8), torch.randn(16, 1)
    for it in range(1000):
        time.sleep(0.02)
        loss = ((x @ w - y) ** 2).mean()
        loss.backward()
        with torch.no_grad():
            w -= 0.05 * w.grad
            w.grad = None
        print(f"it {it} loss {loss.item():.6f}", flush=True)
"""


def test_hand_written_sgd_without_an_optimizer_is_stepped_by_backward(tmp_path):
    repo, contract = job(tmp_path, HAND_WRITTEN_SGD)
    # No module, so no input to count: the contract this job gets holds no size (doctor finds none).
    contract = replace(contract, workload=replace(contract.workload, tokens_per_step=0, seq_len=0, global_batch=0))
    result = trial(repo, contract)
    assert result.status is TrialStatus.OK, result.detail
    assert len(result.losses) == STEPS and sum(result.step_times) >= 4 * 0.02 - reader_lag(result, 1)
    printed = [float(line.split("loss ")[1]) for line in Path(result.log_path).read_text().splitlines()]
    # A step ends at its backward(): the 6th was stopped before its update and its print.
    assert len(printed) == STEPS - 1 and result.losses[:5] == pytest.approx(printed, abs=1e-5)
    assert result.losses[-1] < result.losses[0]
    # x is a float input, but no module is called: no samples or tokens to count.
    assert result.tokens_per_step is None and result.samples_per_step is None


LYING_CLOCKS = """
    import time
    import torch
    from infrarsi import probe

    # Every clock the job can reach runs 50x slow from here on, and its log says 1 ms a step.
    for name in ("perf_counter", "monotonic", "time"):
        real = getattr(time, name)
        start = real()
        setattr(time, name, lambda real=real, start=start: start + (real() - start) / 50)
    model = torch.nn.Embedding(16, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    tokens = torch.randint(0, 16, (4, 8))
    for it in range(1000):
        time.sleep(0.05)
        loss = model(tokens).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        probe.step(loss=loss.item(), tokens=tokens.numel())
        print(f"iter {it}: loss {loss.item():.4f}, time 1.00ms", flush=True)
"""


def test_a_job_lying_about_its_time_is_timed_at_its_real_pace(tmp_path):
    repo, contract = job(tmp_path, LYING_CLOCKS)
    result = trial(repo, contract)
    assert result.status in (TrialStatus.OK, TrialStatus.CONTRACT), result.detail
    # Never faster than it ran: each step sleeps 50 ms of real time (less only by how late InfraRSI
    # read the record the measured steps are timed from).
    assert result.step_times and sum(result.step_times) >= 4 * 0.05 - reader_lag(result, 1), result.step_times
    assert result.tokens_per_step == 32


PROBE_ONLY = """
    import time
    from infrarsi import probe

    # No torch: the probe's calls are the steps. Its own clock runs 50x fast, so its dt would lie.
    real = time.perf_counter
    time.perf_counter = lambda: real() * 50
    for it in range(1000):
        with probe.phase("forward"):
            time.sleep(0.05)
        probe.step(loss=4.0 * 0.9**it, tokens=32)
"""


def test_a_job_without_torch_is_stepped_by_its_probe_and_timed_by_infrarsi(tmp_path):
    repo, contract = job(tmp_path, PROBE_ONLY)
    result = trial(repo, contract, check_loss=True)
    assert result.status is TrialStatus.OK, result.detail
    assert len(result.losses) == STEPS and result.tokens_per_step == 32
    assert sum(result.step_times) >= 4 * 0.05 - reader_lag(result, 1), result.step_times
    assert result.startup_s is not None and result.flops_per_step is None and result.param_checksum is None
    records = [json.loads(line) for line in open(result.probe_path)]
    assert {r["via"] for r in records if r["kind"] == "step"} == {"probe"}


FORGED_RECORDS = """
    import json, os, time

    # Writes step records of its own into the launcher's channel, stamped 1 ms apart, every 100 ms.
    fd = os.open(os.environ["INFRARSI_RECORDS"], os.O_WRONLY)
    t0 = time.monotonic()
    for i in range(12):
        time.sleep(0.1)
        record = {"kind": "step", "step": i, "rank": 0, "pid": os.getpid(), "t": t0 + 0.001 * i,
                  "loss": 1.0, "tokens": 32}
        os.write(fd, (json.dumps(record) + "\\n").encode())
"""


def test_records_stamped_by_another_clock_fail_the_trial(tmp_path):
    repo, contract = job(tmp_path, FORGED_RECORDS)
    result = trial(repo, contract)
    assert result.status is TrialStatus.CONTRACT, result.detail
    assert "the job's clock disagrees with InfraRSI's" in result.detail


GAN = """
    import torch

    torch.manual_seed(0)
    G = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    D = torch.nn.Sequential(torch.nn.Linear(2, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    opt_d = torch.optim.Adam(D.parameters(), lr=1e-3)
    opt_g = torch.optim.Adam(G.parameters(), lr=1e-3)
    bce = torch.nn.BCEWithLogitsLoss()
    real_data = torch.randn(512, 2) * 0.5 + 2.0
    for it in range(1000):
        real = real_data[(it * 8) % 512:(it * 8) % 512 + 8]
        fake = G(torch.randn(8, 4))
        d_loss = bce(D(real), torch.ones(8, 1)) + bce(D(fake.detach()), torch.zeros(8, 1))
        opt_d.zero_grad()
        d_loss.backward()
        opt_d.step()
        g_loss = bce(D(fake), torch.ones(8, 1))
        opt_g.zero_grad()
        g_loss.backward()
        opt_g.step()
        print(f"it {it} d {d_loss.item():.6f} g {g_loss.item():.6f}", flush=True)
"""


def test_a_two_optimizer_loop_steps_once_per_cycle_of_the_first(tmp_path):
    repo, contract = job(tmp_path, GAN)
    result = trial(repo, contract, check_loss=False)
    assert result.status is TrialStatus.OK, result.detail
    lines = [line.split() for line in Path(result.log_path).read_text().splitlines() if line.startswith("it ")]
    d, g = [float(parts[3]) for parts in lines], [float(parts[5]) for parts in lines]
    # Step i ends at D's step in iteration i: G's loss of iteration i-1 falls into it.
    assert len(lines) == STEPS - 1
    assert result.losses[0] == pytest.approx(d[0], abs=1e-5)
    assert result.losses[1:5] == pytest.approx([d[i] + g[i - 1] for i in range(1, 5)], abs=1e-5)
    # G is the first module called at top level, on noise: 8 samples a step, D's calls not counted.
    assert result.samples_per_step == 8 and result.tokens_per_step is None
    assert result.flops_per_step and result.flops_source == "FlopCounterMode"


MLP = """
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 16))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(8, 32), torch.randn(8, 16)
    while True:
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
"""


def test_flops_match_the_analytic_count_and_the_checksum_the_trained_weights(tmp_path):
    import torch

    repo, contract = job(tmp_path, MLP)
    result = trial(repo, contract)
    assert result.status is TrialStatus.OK, result.detail
    batch, d_in, hidden, d_out = 8, 32, 64, 16
    forward = 2 * batch * (d_in * hidden + hidden * d_out)
    # Backward: both weight gradients, and the input gradient of the second layer only (x needs none).
    backward = 2 * batch * (d_in * hidden + hidden * d_out) + 2 * batch * hidden * d_out
    assert result.flops_per_step == forward + backward and result.flops_source == "FlopCounterMode"
    assert result.samples_per_step == batch
    # The same STEPS steps here: the exit record's checksum is of the weights they trained.
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 16))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(8, 32), torch.randn(8, 16)
    for _ in range(STEPS):
        torch.nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
        optimizer.zero_grad()
    params = [p.detach().double() for p in model.parameters()]
    expected = [sum(float(p.sum()) for p in params), sum(float((p * p).sum()) for p in params)]
    assert result.param_checksum == pytest.approx(expected, rel=1e-9)
    records = [json.loads(line) for line in open(result.probe_path)]
    assert [r["kind"] for r in records] == ["start"] + ["step"] * STEPS + ["exit"]
    assert all(r["arrived"] >= r["t"] for r in records)


def test_the_users_own_sitecustomize_still_runs(tmp_path):
    repo, contract = job(tmp_path, MLP)
    (repo / "theirs").mkdir()
    (repo / "theirs" / "sitecustomize.py").write_text("print('their sitecustomize ran', flush=True)\n")
    # The job's own PYTHONPATH, declared in the contract (InfraRSI's environment is not passed on).
    contract = replace(contract, workload=replace(contract.workload, env={"PYTHONPATH": "theirs"}))
    result = trial(repo, contract)
    assert result.status is TrialStatus.OK, result.detail
    assert "their sitecustomize ran" in Path(result.log_path).read_text()


def test_a_process_that_never_imports_torch_does_not_pay_for_it(tmp_path):
    env = {**os.environ, **launcher_env(tmp_path / "unused.fifo", warmup_steps=2, pythonpath=None)}
    code = "import sys; print('_infrarsi_launcher' in sys.modules, 'torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["True", "False"], out.stderr
    env.pop(ENV_RECORDS)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["False", "False"], out.stderr


def test_a_cuda_budget_on_a_machine_without_cuda_leaves_the_job_measured(tmp_path):
    """The launcher caps the CUDA allocator only once the job itself initialised CUDA: here it never
    does, so the budget changes nothing and CUDA stays uninitialised."""
    script = MLP.replace("optimizer.zero_grad()\n",
                         "optimizer.zero_grad()\n        print('cuda initialised', torch.cuda.is_initialized(), flush=True)\n")
    repo, contract = job(tmp_path, script)
    contract = replace(contract, memory=replace(contract.memory, device="cuda"))
    result = trial(repo, contract)
    assert result.status is TrialStatus.OK, result.detail
    log = Path(result.log_path).read_text()
    assert result.step_times and "cuda initialised False" in log and "cuda initialised True" not in log


SEES_ITS_WORLD = """
    import json, os, sys, time
    import torch

    world = {"environ": dict(os.environ), "proc": open("/proc/self/environ", "rb").read().decode(errors="replace"),
             "argv": sys.argv}
    print("WORLD " + json.dumps(world), flush=True)
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 8)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(4, 8)
    for step in range(1000):
        model(x).square().mean().backward()
        optimizer.step()
        optimizer.zero_grad()
        time.sleep(0.5)
"""


def _world(result) -> dict:
    """What the job saw of its environment, with this trial's own workspace and token made generic."""
    line = next(x for x in Path(result.log_path).read_text().splitlines() if x.startswith("WORLD "))
    world = json.loads(line[len("WORLD "):])
    workspace = str(Path(world["environ"][ENV_RECORDS]).parent.parent)
    token = world["environ"].get(TOKEN_ENV, "")
    return json.loads(line.replace(workspace, "<workspace>").replace(token, "<token>")[len("WORLD "):])


def test_the_job_never_knows_how_many_steps_its_run_will_take(tmp_path):
    """Two runs of the same job, 3 and 7 steps: what the job sees of its environment (through
    Python and /proc) and its arguments (the step knob says the planned length) are the same in
    both, and each stops when InfraRSI says."""
    repo, contract = job(tmp_path, SEES_ITS_WORLD, knob_list=[
        Knob(name="max_iters", role="steps", type="int", default=1000, flag="--max_iters")])
    short, long = trial(repo, contract, steps=3), trial(repo, contract, steps=7)
    assert (short.status, short.steps_run, long.status, long.steps_run) == (TrialStatus.OK, 3, TrialStatus.OK, 7)
    assert _world(short) == _world(long)


def test_whole_process_times_come_from_infrarsis_clock_and_the_parameters_are_hashed_here(tmp_path):
    repo, contract = job(tmp_path, SEES_ITS_WORLD)
    short, long = trial(repo, contract, steps=2), trial(repo, contract, steps=8)
    for result, _steps in ((short, 2), (long, 8)):
        assert result.status is TrialStatus.OK, result.detail
        assert result.startup_s + sum(result.warmup_times + result.step_times) <= result.stopped_s <= result.process_s
        assert result.process_s < result.wall_s and result.param_checksum[1] > 0
    # Six more steps of at least 500 ms each, by the exits and by the stops, less what two start-ups
    # may differ by on a shared machine (0.4 s allowed with 200 ms steps failed once in CI: 0.78 s more).
    assert long.process_s - short.process_s >= 6 * 0.5 - 1.2 and long.stopped_s - short.stopped_s >= 6 * 0.5 - 1.2
    assert short.param_checksum != long.param_checksum
