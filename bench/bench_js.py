"""The JavaScript verifier in `make bench` (SPEC 15): the Node command beside the Python
verifier on every shape, and the offline page in headless Chromium.

``page_verify(archive)`` opens js/dist/verify-bundle.html from file:// in headless
Chromium (networking off), hands it the archive through the file input, clicks Verify
and times it from the click to the verdict on the page; the MB/s are of archive bytes.
The peak memory is the largest sum of the resident sizes of Chromium's processes,
sampled every 100 ms while the page works.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
JS_CLI = REPO / "js" / "verify-bundle.mjs"
PAGE = REPO / "js" / "dist" / "verify-bundle.html"


def node_command(archive: Path) -> list[str]:
    return ["node", str(JS_CLI), str(archive), "-q"]


def _tree_rss_mb(root: int) -> float:
    """Resident MiB of ``root`` and every process below it."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text()
            status = (proc / "status").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(proc.name))
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                rss[int(proc.name)] = int(line.split()[1])
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        total += rss.get(pid, 0)
        stack.extend(children.get(pid, []))
    return total / 1024


def page_verify(archive: Path, timeout: float = 600) -> dict[str, Any]:
    import websockets

    chromium = shutil.which("chromium")
    if chromium is None:
        raise SystemExit("bench: chromium is needed for the page measurement")
    profile = Path(tempfile.mkdtemp(prefix="bench-page-"))
    proc = subprocess.Popen(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-extensions",
            "--proxy-server=127.0.0.1:9",
            "--remote-debugging-port=0",
            f"--user-data-dir={profile}",
            "about:blank",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    peak = 0.0
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not stop.is_set():
            peak = max(peak, _tree_rss_mb(proc.pid))
            time.sleep(0.1)

    try:
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not (port_file.is_file() and len(port_file.read_text().splitlines()) >= 2):
            if time.monotonic() > deadline:
                raise SystemExit("bench: chromium did not open its DevTools port")
            time.sleep(0.05)
        port, path = port_file.read_text().splitlines()[:2]

        async def drive() -> float:
            ids = itertools.count(1)
            async with websockets.connect(f"ws://127.0.0.1:{port}{path}", max_size=None) as ws:

                async def call(method: str, session: str | None = None, **params: Any) -> Any:
                    ident = next(ids)
                    msg: dict[str, Any] = {"id": ident, "method": method, "params": params}
                    if session:
                        msg["sessionId"] = session
                    await ws.send(json.dumps(msg))
                    while True:
                        reply = json.loads(await ws.recv())
                        if reply.get("id") == ident:
                            if "error" in reply:
                                raise SystemExit(f"bench: {method}: {reply['error']}")
                            return reply.get("result", {})

                target = (await call("Target.createTarget", url="about:blank"))["targetId"]
                session = (await call("Target.attachToTarget", targetId=target, flatten=True))[
                    "sessionId"
                ]
                await call("Page.enable", session)
                await call("Page.navigate", session, url=PAGE.as_uri())

                async def value(expr: str) -> Any:
                    r = await call("Runtime.evaluate", session, expression=expr, returnByValue=True)
                    return r["result"].get("value")

                while await value("document.body && document.body.dataset.state") != "ready":
                    await asyncio.sleep(0.05)
                obj = await call(
                    "Runtime.evaluate", session, expression="document.getElementById('bundle')"
                )
                await call(
                    "DOM.setFileInputFiles",
                    session,
                    files=[str(archive)],
                    objectId=obj["result"]["objectId"],
                )
                await value("document.getElementById('go').click(); true")
                end = time.monotonic() + timeout
                while await value("document.body.dataset.state") != "done":
                    if time.monotonic() > end:
                        raise SystemExit("bench: the page did not finish")
                    await asyncio.sleep(0.2)
                verdict = await value("window.verificationView && window.verificationView.verdict")
                if verdict != "verified":
                    raise SystemExit(f"bench: the page says {verdict!r} for {archive}")
                return float(await value("window.verifySeconds"))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        seconds = asyncio.run(drive())
    finally:
        stop.set()
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(profile, ignore_errors=True)
    size = archive.stat().st_size
    return {
        "seconds": seconds,
        "mb_per_s": size / 1e6 / seconds,
        "peak_rss_mb": peak,
        "archive_bytes": size,
    }


if __name__ == "__main__":
    import sys

    print(json.dumps(page_verify(Path(sys.argv[1])), indent=1))
