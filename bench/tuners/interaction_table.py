"""A table with issue 53's interaction, derived from the measured dense table: bf16 fast, bf16 + SDPA slow.

    .venv/bin/python -m bench.tuners.interaction_table [--out bench/data/dense_gpt_bf16_sdpa_synthetic.json]

On the 2-core CPU of issue 53 (bf16 units), bf16 autocast ran the dense GPT 1.6x faster than float32
without the SDPA patch and 1.5x slower than float32 with it (run 1's search trials: bf16 + SDPA
188-294 ms a step, bf16 alone 108-176 ms, float32 + SDPA 155-176 ms, the baseline 201 ms). The
measured dense table (``bench/data/dense_gpt_space.json``) was taken on an AVX2 CPU without bf16
and pinned to float32. This table unpins ``dtype`` and adds a bfloat16 row for each float32 one:
its runs are the float32 row's measured runs with every step (warm-up included) scaled by
``BF16_ALONE`` without SDPA and ``BF16_WITH_SDPA`` with it, the wall time by the same seconds, the
peak by ``BF16_PEAK`` (autocast's measured 10% less RSS on this fixture); an OOM stays an OOM. The
machine is marked as one with bf16 units (``cpu_isa`` AVX512_BF16, hardware id ``synthetic-bf16``).

It is not a measurement: it holds the measured noise and the interaction issue 53 describes, so a
replay shows whether a search condemns bf16 after trying it only with SDPA. The oracle table
measured on a CPU with fast bf16 replaces it where one exists (``measure_space dense_gpt``).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from dataclasses import replace
from pathlib import Path

from bench.tuners.fixture import ROOT
from bench.tuners.table import contract_from_toml
from infrarsi.contract import contract_path, save_contract

BF16_ALONE = 0.62
"""bf16 against float32 without SDPA: 1.6x faster."""
BF16_WITH_SDPA = 1.5
"""bf16 + SDPA against float32 + SDPA: 1.5x slower."""
BF16_PEAK = 0.9
SOURCE = ROOT / "bench" / "data" / "dense_gpt_space.json"
OUT = ROOT / "bench" / "data" / "dense_gpt_bf16_sdpa_synthetic.json"


def _scaled(run: dict, factor: float, peak: float) -> dict:
    steps = [t * factor for t in run["step_times"]]
    warmup = [t * factor for t in run["warmup_times"]]
    saved = sum(run["step_times"]) + sum(run["warmup_times"]) - sum(steps) - sum(warmup)
    return {**run, "step_times": steps, "warmup_times": warmup, "wall_s": run["wall_s"] - saved,
            "peak_bytes": int(run["peak_bytes"] * peak) if run.get("peak_bytes") else run.get("peak_bytes")}


def derive(data: dict, alone: float = BF16_ALONE, with_sdpa: float = BF16_WITH_SDPA) -> dict:
    """``data``, a float32-pinned dense table, with bfloat16 rows and ``dtype`` tunable."""
    contract = contract_from_toml(data["contract_toml"])
    knobs = [replace(k, tunable=True, domain=["float32", "bfloat16"]) if k.role == "dtype" else k
             for k in contract.knobs]
    dtype = next(k.name for k in knobs if k.role == "dtype")
    with tempfile.TemporaryDirectory() as tmp:
        save_contract(replace(contract, knobs=knobs), Path(tmp))
        toml = contract_path(Path(tmp)).read_text()
    rows = []
    for row in data["rows"]:
        cand = row["candidate"]
        rows.append({**row, "candidate": {**cand, "knobs": {**cand["knobs"], dtype: "float32"}}})
        factor = with_sdpa if "sdpa_attention" in cand["patches"] else alone
        rows.append({**row, "candidate": {**cand, "knobs": {**cand["knobs"], dtype: "bfloat16"}},
                     "runs": [_scaled(r, factor, BF16_PEAK) for r in row["runs"]]})
    hardware = {**data["hardware"], "cpu_isa": "AVX512_BF16", "id": "synthetic-bf16"}
    return {**data, "fixture": "dense_gpt_bf16_sdpa_synthetic", "contract_toml": toml, "rows": rows,
            "hardware": hardware, "pins": {},
            "synthetic": f"derived from {SOURCE.relative_to(ROOT)} by bench/tuners/interaction_table.py: "
                         f"bfloat16 rows are the float32 rows' runs, steps x{alone} without SDPA, x{with_sdpa} "
                         f"with it, peak x{BF16_PEAK} (issue 53's interaction; not measured)"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", type=Path, default=SOURCE)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    table = derive(json.loads(args.source.read_text()))
    args.out.write_text(json.dumps(table, indent=1))
    print(f"{args.out}: {len(table['rows'])} configurations")


if __name__ == "__main__":
    main()
