"""What each library patch that applies to a fixture does to its step time, memory and loss.

For each fixture: a git copy, ``init`` with the fixture's budget, ``doctor`` (the loss reference
and tolerance every trial is checked against), then the baseline and every applicable patch (each
alone on the baseline's settings, gate knobs on) run through the trial runner in interleaved
rounds. Per patch: median step time before and after with the speedup's 95% CI over the rounds,
peak memory, the largest |Δloss| against the same round's baseline over the contract's compared
steps, and the trial status (a patch whose run breaks the loss invariant shows ``numerics``).

    .venv/bin/python bench/patch_effects.py [dense_gpt moe_gpt] [--rounds 3] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from bench.tuners.fixture import MIB, budget_mib, git_copy
from infrarsi import patches as patch_library
from infrarsi.contract import load_contract
from infrarsi.hardware import fingerprint
from infrarsi.noise import speedup_interval
from infrarsi.project import editable_sources
from infrarsi.records.files import state_dir
from infrarsi.runner.trial import TrialSpec, run_trial
from infrarsi.stages.doctor import doctor
from infrarsi.stages.init import init
from infrarsi.trials import Candidate, TrialResult


@dataclass(kw_only=True, slots=True)
class PatchEffect:
    fixture: str
    patch: str
    sites: int
    statuses: list[str]
    base_ms: float | None
    patched_ms: float | None
    speedup: tuple[float, float, float] | None
    base_peak_mib: float | None
    patched_peak_mib: float | None
    max_loss_diff: float | None
    tolerance: float
    numerics_by_design: bool


def _median_ms(runs: list[TrialResult]) -> float | None:
    times = [r.step_time for r in runs if r.ok]
    return 1000 * statistics.median(times) if times else None


def _peak_mib(runs: list[TrialResult]) -> float | None:
    peaks = [r.peak_bytes for r in runs if r.peak_bytes]
    return max(peaks) / MIB if peaks else None


def _loss_diff(base: list[TrialResult], patched: list[TrialResult], steps: int) -> float | None:
    diffs = [abs(p - b) for br, pr in zip(base, patched, strict=False)
             for b, p in zip(br.losses[:steps], pr.losses[:steps], strict=False)
             if math.isfinite(p) and math.isfinite(b)]
    return max(diffs) if diffs else None


def measure(fixture: str, rounds: int, console: Console) -> list[PatchEffect]:
    with tempfile.TemporaryDirectory(prefix=f"patch-effects-{fixture}-") as tmp:
        repo = git_copy(fixture, Path(tmp))
        if not (ok := init(repo, budget_bytes=budget_mib(fixture) * MIB)).ok:
            raise SystemExit(f"init {fixture}: {ok.message}")
        console.print(f"[bold]{fixture}[/]: doctor (loss reference and tolerance)")
        if not (measured := doctor(repo, repeats=2)).ok:
            raise SystemExit(f"doctor {fixture}: {measured.message}")
        contract = load_contract(repo)
        device = fingerprint().device
        sites: dict[str, int] = {}
        for name, _site in patch_library.find_sites(editable_sources(repo, contract), contract):
            sites[name] = sites.get(name, 0) + 1
        names = [n for n in sites if not (patch_library.REGISTRY[n].gpu_only and device != "cuda")]
        console.print(f"{fixture}: applicable patches {names} (GPU-only skipped on {device}: "
                      f"{sorted(set(sites) - set(names))})")
        arms = [Candidate(), *(Candidate(patches=(n,)) for n in names)]
        runs: dict[str, list[TrialResult]] = {a.key(): [] for a in arms}
        for r in range(rounds):
            for arm in arms:
                by_design = any(patch_library.REGISTRY[p].numerics_by_design for p in arm.patches)
                spec = TrialSpec(repo=repo, contract=contract, candidate=arm, numerics_by_design=by_design,
                                 log_dir=state_dir(repo) / "bench" / f"{'-'.join(arm.patches) or 'base'}-{r}")
                out = run_trial(spec)
                runs[arm.key()].append(out)
                step = f"{1000 * out.step_time:.0f} ms" if out.step_time else "-"
                console.print(f"  round {r + 1} {'+'.join(arm.patches) or 'baseline'}: {out.status.value} {step}")
        base = runs[arms[0].key()]
        effects = []
        for arm in arms[1:]:
            got = runs[arm.key()]
            ok_b = [x.step_time for x in base if x.ok]
            ok_p = [x.step_time for x in got if x.ok]
            interval = speedup_interval(ok_b, ok_p) if len(ok_b) > 1 and len(ok_p) > 1 else None
            name = arm.patches[0]
            effects.append(PatchEffect(
                fixture=fixture, patch=name, sites=sites[name], statuses=[x.status.value for x in got],
                base_ms=_median_ms(base), patched_ms=_median_ms(got), speedup=tuple(interval) if interval else None,
                base_peak_mib=_peak_mib(base), patched_peak_mib=_peak_mib(got),
                max_loss_diff=_loss_diff(base, got, contract.loss.compare_steps),
                tolerance=(contract.loss.numerics_tolerance if patch_library.REGISTRY[name].numerics_by_design
                           else contract.loss.tolerance),
                numerics_by_design=patch_library.REGISTRY[name].numerics_by_design))
        return effects


def table(effects: list[PatchEffect], rounds: int) -> Table:
    out = Table(title=f"Patch effects (each patch alone on the baseline, {rounds} interleaved rounds)")
    for col in ("fixture", "patch", "sites", "statuses", "baseline ms", "patched ms", "speedup (95% CI)",
                "peak MiB before → after", "max |Δloss| (tolerance)"):
        out.add_column(col)
    for e in effects:
        speed = f"{e.speedup[0]:.3f}x [{e.speedup[1]:.3f}, {e.speedup[2]:.3f}]" if e.speedup else "-"
        peak = f"{e.base_peak_mib:.0f} → {e.patched_peak_mib:.0f}" if e.base_peak_mib and e.patched_peak_mib else "-"
        loss = f"{e.max_loss_diff:.2g} ({e.tolerance:.2g})" if e.max_loss_diff is not None else "-"
        out.add_row(e.fixture, e.patch, str(e.sites), ",".join(sorted(set(e.statuses))),
                    f"{e.base_ms:.0f}" if e.base_ms else "-", f"{e.patched_ms:.0f}" if e.patched_ms else "-",
                    speed, peak, loss)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("fixtures", nargs="*", default=["dense_gpt", "moe_gpt"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path, help="also write the rows as JSON here")
    args = parser.parse_args()
    console = Console(width=200)
    effects = [e for f in args.fixtures for e in measure(f, args.rounds, console)]
    console.print(table(effects, args.rounds))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps([asdict(e) for e in effects], indent=2))


if __name__ == "__main__":
    main()
