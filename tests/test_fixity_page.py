"""The fixity page says what the summary says (SPEC 13.1 and 14): the failures carried
from earlier runs and the true share of the archive, in headless Chromium at 700 and
1,280 px wide, with no label clipped and nothing scrolling sideways."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from conftest import run_cli
from test_page_browser import Browser, _need

from bundler.fixity.select import group_of

# Every SVG <text> must end inside its viewBox, and the page must not be wider than
# the window.
LAYOUT = """(() => {
  const clipped = [];
  for (const svg of document.querySelectorAll('svg')) {
    const width = svg.viewBox.baseVal.width;
    for (const t of svg.querySelectorAll('text')) {
      const box = t.getBBox();
      if (box.x < 0 || box.x + box.width > width + 0.5) clipped.push(t.textContent);
    }
  }
  const doc = document.documentElement;
  return {clipped, scroll: doc.scrollWidth - doc.clientWidth, text: document.body.innerText};
})()"""


@pytest.fixture(scope="module")
def summary_and_page(
    bundles: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> tuple[dict[str, Any], Path]:
    """A summary with failures carried from an earlier run and a share below 100%."""
    work = tmp_path_factory.mktemp("fixity-page")
    root = work / "archive"
    root.mkdir()
    for i in range(9):
        shutil.copyfile(bundles["rpt-clean/alice"], root / f"b{i}.tar.zst")
    rotted = "b1.tar.zst"
    data = bytearray((root / rotted).read_bytes())
    data[len(data) // 2] ^= 1
    (root / rotted).write_bytes(bytes(data))
    groups = [group_of(f"b{i}.tar.zst", 3) for i in range(9)]
    other = next(k for k in range(3) if k != groups[1] and k in groups)
    assert len(set(groups)) == 3  # so two runs of --sample K/3 leave some unchecked
    ledger = str(work / "l.sqlite")
    found = run_cli(
        "fixity", str(root), "--ledger", ledger, "--workers", "1", "--sample", f"{groups[1]}/3"
    )
    assert found.returncode == 1, found.stderr
    done = run_cli(
        "fixity",
        str(root),
        "--ledger",
        ledger,
        "--workers",
        "1",
        "--json",
        "--sample",
        f"{other}/3",
        "--level",
        "object",
    )
    assert done.returncode == 1, done.stderr
    summary = orjson.loads(done.stdout)
    assert [c["key"] for c in summary["carried"]] == [rotted] and summary["problems"] == []
    (work / "fixity.json").write_bytes(done.stdout)
    page = work / "fixity.html"
    assert run_cli("render", str(work / "fixity.json"), "--html", str(page)).returncode == 0
    # The widest labels: every share at 100 %.
    whole = {**summary, "shares": {"30d": 1.0, "90d": 1.0, "365d": 1.0}}
    (work / "whole.json").write_bytes(orjson.dumps(whole))
    assert (
        run_cli("render", str(work / "whole.json"), "--html", str(work / "whole.html")).returncode
        == 0
    )
    return summary, page


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    b = Browser(_need("chromium"), tmp_path_factory.mktemp("profile"))
    try:
        yield b
    finally:
        b.close()


def _open(browser: Browser, page: Path, width: int) -> str:
    """A new tab showing ``page`` in a window ``width`` CSS pixels wide."""
    session = browser.open(page.as_uri())
    browser.call(
        "Emulation.setDeviceMetricsOverride",
        session,
        width=width,
        height=900,
        deviceScaleFactor=1,
        mobile=False,
    )
    return session


@pytest.mark.parametrize("width", [700, 1280])
def test_fixity_page_shows_carried_failures_and_true_shares_unclipped(
    browser: Browser, summary_and_page: tuple[dict[str, Any], Path], width: int
) -> None:
    summary, page = summary_and_page
    session = _open(browser, page, width)
    found = browser.evaluate(session, LAYOUT)
    assert found["clipped"] == [] and found["scroll"] <= 0, found
    text = found["text"]
    assert "FAILED" in browser.evaluate(session, "document.getElementById('verdict').textContent")
    (carried,) = summary["carried"]
    assert carried["key"] in text and carried["found"] in text
    assert "still open" in text
    share = f"{round(100 * summary['shares']['30d'], 1)} %"
    assert share in text and 0 < summary["shares"]["30d"] < 1
    session = _open(browser, page.with_name("whole.html"), width)
    found = browser.evaluate(session, LAYOUT)
    assert found["clipped"] == [] and found["scroll"] <= 0, found
    assert "100.0 %" in found["text"]
