import json
import math

from infrarsi.runner.measure import StepFeed, mean_phases, split_warmup


def write(path, records):
    with open(path, "a") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")


def step(i, dt, loss=1.0, tokens=32, phases=None):
    return {"event": "step", "step": i, "dt": dt, "loss": loss, "tokens": tokens, "phases": phases or {}}


def test_probe_lines_are_read_incrementally_and_partial_lines_wait(tmp_path):
    probe, log = tmp_path / "probe.jsonl", tmp_path / "output.log"
    feed = StepFeed(probe, log)
    assert feed.poll() == []
    write(probe, [{"event": "model", "params": 10, "layers": 1, "heads": 1, "head_dim": 4, "seq_len": 8}, step(0, 0.5)])
    with open(probe, "a") as f:
        f.write('{"event": "step", "step": 1, "dt": 0.2')
    assert [s.index for s in feed.poll()] == [0]
    with open(probe, "a") as f:
        f.write(', "loss": 0.9, "tokens": 32, "phases": {}}\n')
    write(probe, [{"event": "exit", "peak_bytes": 1234, "device": "cpu"}])
    assert [(s.index, s.dt) for s in feed.poll()] == [(1, 0.2)]
    report = feed.finish()
    assert report.source == "probe" and report.model_facts["params"] == 10
    assert report.exit_peak_bytes == 1234 and report.first_step_at is not None


def test_ranks_merge_at_the_slowest_rank_and_the_largest_memory(tmp_path):
    probe = tmp_path / "probe.jsonl"
    write(tmp_path / "probe.jsonl.rank0", [step(0, 0.1, loss=2.0, phases={"forward": 0.05}), step(1, 0.3)])
    write(tmp_path / "probe.jsonl.rank1", [step(0, 0.4, loss=2.5, phases={"forward": 0.3})])
    feed = StepFeed(probe, tmp_path / "output.log", ranks=3)
    assert feed.poll() == []  # rank 2 has not written yet
    (tmp_path / "probe.jsonl.rank2").write_text("")
    assert feed.poll() == []
    (tmp_path / "probe.jsonl.rank2").unlink()
    feed = StepFeed(probe, tmp_path / "output.log", ranks=2)
    merged = feed.poll()
    assert [(s.index, s.dt, s.loss, s.phases) for s in merged] == [(0, 0.4, 2.0, {"forward": 0.3})]
    write(tmp_path / "probe.jsonl.rank1", [step(1, 0.2), {"event": "exit", "peak_bytes": 900, "device": "cpu"}])
    write(tmp_path / "probe.jsonl.rank0", [{"event": "exit", "peak_bytes": 700, "device": "cpu"}])
    report = feed.finish()
    assert [s.dt for s in report.steps] == [0.4, 0.3] and report.exit_peak_bytes == 900


def test_log_lines_are_the_fallback_without_a_probe(tmp_path):
    log = tmp_path / "output.log"
    log.write_text(
        "step 0 of something else\n"
        "iter 0: loss 4.2874, time 1234.50ms, mfu -100.00%\n"
        "iter 1: loss nan, time 20.00ms\n"
        "iter 2: loss 3.5e-01, time 1.5e+01ms\n"
    )
    report = StepFeed(tmp_path / "probe.jsonl", log).finish()
    assert report.source == "log"
    assert [s.index for s in report.steps] == [0, 1, 2]
    assert report.steps[0].dt == 1.2345 and report.steps[0].tokens is None
    assert math.isnan(report.steps[1].loss) and report.steps[2].loss == 0.35 and report.steps[2].dt == 0.015


def test_warmup_split_keeps_a_measured_step_in_a_short_run(tmp_path):
    log = tmp_path / "output.log"
    log.write_text("".join(f"iter {i}: loss 1.0, time {10 * (i + 1)}ms\n" for i in range(5)))
    steps = StepFeed(tmp_path / "probe.jsonl", log).finish().steps
    warm, measured = split_warmup(steps, warmup_steps=2, total_steps=5)
    assert [s.index for s in warm] == [0, 1] and [s.index for s in measured] == [2, 3, 4]
    warm, measured = split_warmup(steps[:2], warmup_steps=5, total_steps=2)
    assert [s.index for s in measured] == [1]
    assert mean_phases(measured) == {}
