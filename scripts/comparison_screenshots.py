"""Screenshots of the HTML comparison tables at 1400 px, as a reader's browser shows them (issue 46).

    .venv/bin/python scripts/comparison_screenshots.py OUT_DIR

Builds `bench report`'s page of two H200 fixtures (tests/fixtures/h200): the SmolLM2 run with its captured inputs
against their controls and `--pair-kernels sdpa-cudnn=sdpa-flash`, and the issue-2 run (a slower verdict). For each
it writes the page with only its comparison sections (the same rendering as the full report: `render_html`) and a
headless Chromium screenshot of its first 1400 x 1000 px: the verdict column must be in it, no scrolling. Needs
`chromium` on PATH (Debian: apt-get install -y chromium). Look at the PNGs: a figure is done when it was seen.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "h200"
PAGES = {"smollm2-pairs": ("20261130-043801-smollm2-217172", (("sdpa-cudnn", "sdpa-flash"),)),
         "issue2-slower": ("20261130-043508-issue2-b7147a", ())}
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--no-first-run", "--window-size=1400,1000", "--virtual-time-budget=3000"]


def main(out: Path) -> int:
    sys.path.insert(0, str(ROOT))
    from harness.report import build_report, render_html
    from harness.results import read_run

    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    out = out.absolute()
    out.mkdir(parents=True, exist_ok=True)
    for name, (run, pairs) in PAGES.items():
        rep = build_report(read_run(FIXTURES / run), figures=False, kernel_pairs=pairs)
        sections = [s for s in rep.sections if "compared" in s.title]
        page = out / f"comparison-{name}.html"
        page.write_text(render_html(rep.title, rep.header, sections), encoding="utf-8")
        print(f"wrote {page}")
        if browser is None:
            print("chromium not on PATH: no screenshot (apt-get install -y chromium)")
            continue
        png = out / f"comparison-{name}-1400px.png"
        subprocess.run([browser, *FLAGS, f"--screenshot={png}", page.as_uri()], check=True, capture_output=True,
                       timeout=120)
        print(f"wrote {png}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/screenshots")))
