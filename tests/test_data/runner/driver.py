"""Runs one trial of REPO's contract from a separate process, so a test can interrupt it."""

import sys
from pathlib import Path

from infrarsi.contract import load_contract
from infrarsi.trials import Candidate
from infrarsi.runner.trial import TrialSpec, run_trial

repo, log_dir = Path(sys.argv[1]), Path(sys.argv[2])
spec = TrialSpec(
    repo=repo,
    contract=load_contract(repo),
    candidate=Candidate(),
    log_dir=log_dir,
    on_event=lambda event: print(event.kind, event.message, flush=True),
)
try:
    run_trial(spec)
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.exit(130)
