"""What this checkout's search would propose after each trial of a recorded run.

Replays a finished run's own history (its study, as measured) through the sampler of the checkout
that runs this script: after the first k trials, the candidate it asks for next and what its models
expect of it. The same run replayed in two checkouts shows whether a change alters the search's
decisions on the same measurements, which two live runs cannot (their measurements differ).

    python bench/proposals.py REPO [--trials N] [--sampler infrarsi] > proposals.txt

Nothing is run and nothing in REPO is written; the bank is not read (``--no-bank``'s view).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from infrarsi.contract import load_contract
from infrarsi.experiment.store import TrialStore, default_storage_url
from infrarsi.llm import load_llm_config
from infrarsi.project import Project, editable_sources
from infrarsi.records import load_doctor, load_run
from infrarsi.search.space import SearchSpace
from infrarsi.search.strategy import SAMPLERS, make_strategy


def proposals(repo: Path, trials: int | None, sampler: str) -> list[dict]:
    contract, doctor, run = load_contract(repo), load_doctor(repo), load_run(repo)
    if doctor is None or run is None:
        raise SystemExit(f"{repo}: no doctor.json or run.json; run `infrarsi optimize` there first")
    validated = [c.name for c in run.patch_checks if c.status == "validated"]
    project = Project(repo=repo, contract=contract, doctor=doctor, llm=load_llm_config(repo),
                      sources=editable_sources(repo, contract))
    strategy = make_strategy(sampler, project)
    store = TrialStore.open(contract, validated, storage_url=run.storage_url or default_storage_url(repo))
    prepared = strategy.prepare(SearchSpace.from_contract(contract, validated))
    history = [t for t in store.history() if t.candidate is not None]
    out = []
    for k in range(1, min(trials or len(history), len(history)) + 1):
        asked = prepared.sampler.ask(history[:k])
        out.append({
            "after": k, "last": history[k - 1].candidate.key(), "last_status": history[k - 1].status.value,
            "next": asked.candidate.key() if asked else None, "why": asked.reason if asked else prepared.sampler.stop_reason,
            "expected": {name: round(v, 4) for name, v in (asked.predicted if asked else {}).items()},
        })
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repo", type=Path)
    parser.add_argument("--trials", type=int, help="replay only the first N trials (default: all)")
    parser.add_argument("--sampler", default="infrarsi", choices=[s for s in SAMPLERS if s not in ("tpe", "gp")])
    args = parser.parse_args()
    for row in proposals(args.repo.resolve(), args.trials, args.sampler):
        print(json.dumps(row))


if __name__ == "__main__":
    main()
