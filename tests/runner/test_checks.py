import math

from infrarsi.runner import abort, checks
from infrarsi.runner.measure import Step
from infrarsi.trials import Candidate

from .conftest import REFERENCE, make_contract


def steps(losses, tokens=32):
    return [Step(index=i, dt=0.1, loss=x, tokens=tokens) for i, x in enumerate(losses)]


def contract(tmp_path):
    (tmp_path / "helpers.py").write_text("")
    return make_contract(tmp_path)


def test_loss_within_tolerance_passes_and_outside_fails(tmp_path):
    loss = contract(tmp_path).loss
    assert checks.loss_problem(steps([x + 5e-4 for x in REFERENCE]), loss, compare=True, by_design=False) is None
    problem = checks.loss_problem(steps([x + 0.01 for x in REFERENCE]), loss, compare=True, by_design=False)
    assert "step 0" in problem and "tolerance" in problem
    # The declared numerics tolerance admits it; no comparison at all admits anything finite.
    assert checks.loss_problem(steps([x + 0.01 for x in REFERENCE]), loss, compare=True, by_design=True) is None
    assert checks.loss_problem(steps([99.0]), loss, compare=False, by_design=False) is None


def test_nan_and_inf_fail_even_without_a_reference(tmp_path):
    loss = contract(tmp_path).loss
    assert "nan" in checks.loss_problem(steps([4.0, math.nan]), loss, compare=False, by_design=False)
    assert "inf" in checks.loss_problem(steps([math.inf]), loss, compare=False, by_design=True)


def test_tokens_must_match_on_every_step():
    assert checks.tokens_problem(steps([1.0, 1.0]), 32) is None
    assert checks.tokens_problem(steps([1.0], tokens=None), 32) is None
    assert "64 tokens" in checks.tokens_problem(steps([1.0], tokens=64), 32)


def test_candidate_may_not_touch_the_workload_or_invent_knobs(tmp_path):
    c = contract(tmp_path)
    assert checks.candidate_problem(c, Candidate(knobs={"step_s": 0.1, "batch_size": 4})) is None
    assert "workload" in checks.candidate_problem(c, Candidate(knobs={"batch_size": 8}))
    assert "does not define" in checks.candidate_problem(c, Candidate(knobs={"nope": 1}))


def test_abort_needs_three_measured_steps_clearly_above_the_bound():
    assert not abort.clearly_slower([5.0, 5.0], 1.0)
    assert not abort.clearly_slower([1.05, 1.08, 1.02], 1.0)
    assert not abort.clearly_slower([1.0, 9.0, 1.0], 1.0)  # one outlier is not a trend
    assert abort.clearly_slower([1.2, 1.3, 1.25], 1.0)
    assert not abort.clearly_slower([9.0, 9.0, 9.0], None)


def test_a_run_far_slower_than_the_bound_stops_on_two_steps_after_the_first():
    assert abort.far_slower([3.5, 4.0], 1.0)
    assert not abort.far_slower([4.0], 1.0)  # one step is not enough
    assert not abort.far_slower([2.5, 2.9], 1.0)  # slower, but left to the measured-step rule
    assert not abort.far_slower([9.0, 9.0], None)


def test_memory_errors_are_recognised():
    assert checks.memory_error("RuntimeError: [enforce fail at alloc_cpu.cpp:118] DefaultCPUAllocator: can't allocate memory")
    assert checks.memory_error("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB")
    assert not checks.memory_error("RuntimeError: shape mismatch")
    # A raw CUDA call, a ROCm build, a cuBLAS handle: all out of device memory.
    assert checks.memory_error("RuntimeError: CUDA error: out of memory\nCompile with `TORCH_USE_CUDA_DSA`")
    assert checks.memory_error("torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.23 GiB")
    assert checks.memory_error("RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`")
    assert not checks.memory_error("triton.runtime.errors.OutOfResources: out of resource: shared memory")


def test_the_memory_error_line_is_the_last_that_says_so():
    text = "Traceback\ntorch.OutOfMemoryError: CUDA out of memory. Tried 1\nsummary\nexitcode: 1"
    assert checks.memory_error_line(text) == "torch.OutOfMemoryError: CUDA out of memory. Tried 1"
    assert checks.memory_error_line("RuntimeError: shape mismatch") is None


def test_a_step_must_say_its_size_once_the_contract_fixes_it(tmp_path):
    (tmp_path / "helpers.py").write_text("SCALE = 1.0\n")
    workload = make_contract(tmp_path).workload
    sized = [Step(index=i, dt=0.02, loss=1.0, tokens=32, samples=4) for i in range(3)]
    samples_only = [Step(index=i, dt=0.02, loss=1.0, tokens=None, samples=4) for i in range(3)]
    unsized = sized[:2] + [Step(index=2, dt=0.001, loss=1.0, tokens=None, samples=None)]
    assert checks.unsized_steps_problem(sized, workload) is None
    assert checks.unsized_steps_problem(samples_only, workload) is None
    assert "step 2 first" in checks.unsized_steps_problem(unsized, workload)
    workload.tokens_per_step = 0  # unknown until doctor measures it: nothing to hold the steps to
    assert checks.unsized_steps_problem(unsized, workload) is None
