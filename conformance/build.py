"""Build the conformance corpus (SPEC 15): every case a bundle or proof made by a
deterministic recipe from the committed fixtures, the options to verify it with, and
the expectation, written from the SPEC (docs/SPEC.md sections 5, 8, 10.2, 11), never
from either verifier's output.

    python conformance/build.py OUT_DIR

writes OUT_DIR/manifest.json and the case files beside it. Run it with the project's
Python (it uses the exporter, and tests/hostile.py and tests/repack.py to build hostile
archives byte by byte). The same fixtures give the same corpus.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

import hostile  # noqa: E402
import repack  # noqa: E402

from bundler.core import canonical  # noqa: E402

EXPORTED_AT = "2026-11-30T00:00:00Z"
EB_EXPORTED_AT = "2026-12-01T00:00:00Z"  # after the eval-banana runs completed
MAIN = ROOT / "fixtures" / "stores" / "main"
AUDIT = ROOT / "fixtures" / "stores" / "audit"
EB_RUNS = ROOT / "fixtures" / "eval-banana" / "runs"
EB_PROJECT = ROOT / "fixtures" / "eval-banana" / "project"
ZERO = "sha256:" + "0" * 64
# Fixed Ed25519 test keys (they sign only the corpus; Ed25519 signatures are
# deterministic, so signed cases are byte-identical at every build).
KEYS = Path(__file__).resolve().parent / "keys"


class Corpus:
    def __init__(self, out: Path) -> None:
        self.out = out
        self.cases: list[dict[str, Any]] = []
        self.tmp = Path(tempfile.mkdtemp(prefix="conformance-"))

    def add(
        self,
        case_id: str,
        klass: str,
        spec: str,
        file: str,
        expect: dict[str, Any],
        *,
        command: str = "verify",
        args: list[str] | None = None,
        why: str = "",
    ) -> None:
        self.cases.append(
            {
                "id": case_id,
                "class": klass,
                "spec": spec,
                "why": why,
                "command": command,
                "input": file,
                "args": args or [],
                "expect": expect,
            }
        )

    def write(self, name: str, data: bytes) -> str:
        (self.out / name).write_bytes(data)
        return name

    def text(self, name: str, text: str) -> str:
        return self.write(name, text.encode())


def cli(*args: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "bundler", *args],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={"PATH": "/usr/bin:/bin", "EVALBOOK_SIGN_PASSPHRASE": "", "HOME": "/nonexistent"},
        cwd=ROOT,
    )


def export(store: Path, report: str, principal: str, out: Path, key: Path | None = None) -> Path:
    args = ["export", "--store", str(store), "--report", report, "--principal", principal]
    args += ["--exported-at", EXPORTED_AT, "--out", str(out)]
    if key is not None:
        args += ["--key", str(key)]
    cli(*args)
    return out


def verified(reasons: list[str] | None = None) -> dict[str, Any]:
    """A bundle every claim of which is proven or unprovable with these reasons."""
    e: dict[str, Any] = {
        "exit_code": 0,
        "verdict": "verified",
        "failed": [],
        "no_other_failures": True,
    }
    if reasons is not None:
        e["unprovable_reasons"] = sorted(reasons)
    return e


def failed(*claims: tuple[int, str | None], exact: bool = False) -> dict[str, Any]:
    """At least these failed claims (group, path or None for any path)."""
    e: dict[str, Any] = {
        "exit_code": 1,
        "verdict": "failed",
        "failed": [{"group": g, "path": p} for g, p in claims],
    }
    if exact:
        e["failed_groups"] = sorted({g for g, _ in claims})
    return e


def error() -> dict[str, Any]:
    return {"exit_code": 3, "verdict": "error"}


# ---------------------------------------------------------------------------- fixtures

# What each fixture report holds, from fixtures/stores (fixturegen): the reasons SPEC 4.3
# lists for it. Bob lacks dataset.read_body (access.json), so his bundles also list
# example bodies and case outputs as no_dataset_read_body.
MAIN_REASONS = {
    "rpt-clean": [],
    "rpt-superseded": [],
    "rpt-evidence-manifest": [],
    "rpt-retention": ["removed_by_retention"],
    "rpt-scorer-drift": ["scorer_digest_mismatch", "scorer_version_missing"],
    "rpt-sso-traces": ["payload_at_sso", "trace_capture_policy"],
    "rpt-every-reason": None,  # several; only the verdict is pinned
}


def fixture_cases(c: Corpus) -> dict[str, Path]:
    built: dict[str, Path] = {}
    for report in sorted(p.name for p in (MAIN / "reports").iterdir()):
        for principal in ("alice", "bob"):
            name = f"fixture-{report}-{principal}.tar.zst"
            path = export(MAIN, report, principal, c.out / name)
            built[f"{report}/{principal}"] = path
            reasons = MAIN_REASONS.get(report)
            if reasons is not None and principal == "bob":
                reasons = sorted({*reasons, "no_dataset_read_body"} - {"removed_by_retention"})
            expect = verified(reasons)
            if reasons is None or principal == "bob":
                expect.pop("unprovable_reasons", None)
            c.add(
                f"fixture/{report}/{principal}",
                "fixture",
                "5",
                name,
                expect,
                why="an exported fixture bundle verifies",
            )
            if principal == "bob":
                c.add(
                    f"fixture/{report}/{principal}/strict",
                    "fixture",
                    "5",
                    name,
                    {
                        "exit_code": 1,
                        "verdict": "failed",
                        "failed": [],
                        "failed_reasons_include": ["no_dataset_read_body"],
                    },
                    args=["--strict"],
                    why="--strict turns the redactions into failures",
                )
    for report in sorted(p.name for p in (AUDIT / "reports").iterdir()):
        name = f"fixture-audit-{report}.tar.zst"
        export(AUDIT, report, "alice", c.out / name)
        c.add(
            f"fixture/audit/{report}",
            "fixture",
            "5",
            name,
            verified(),
            why="an exported fixture bundle verifies (its audit findings are not verify's)",
        )
    for report_json in sorted(EB_RUNS.rglob("report.json")):
        run = report_json.parent
        name = f"fixture-eb-{run.relative_to(EB_RUNS).parts[0]}.tar.zst"
        cli(
            "export-eb",
            str(run),
            "--project",
            str(EB_PROJECT),
            "--exported-at",
            EB_EXPORTED_AT,
            "--out",
            str(c.out / name),
        )
        c.add(
            f"fixture/eval-banana/{name[11:-8]}",
            "fixture",
            "10.2",
            name,
            verified(),
            why="an exported eval-banana run verifies",
        )
    return built


# ------------------------------------------------------------- archive-level hostiles


def _top_tar(members: list[bytes]) -> bytes:
    return hostile.tar([hostile.dir_member("evalbook-bundle-x"), *members])


def archive_cases(c: Corpus, clean: Path) -> None:
    """Threat model 4/5: every refusal of SPEC 5 before a verdict, several spellings each."""
    good_tar = repack.archive_tar(clean)
    zstd = hostile.zstd
    t = "evalbook-bundle-x"
    f = hostile.file_member
    d = hostile.dir_member
    cases: dict[str, bytes] = {
        # zstd layer
        "zstd/gzip": b"\x1f\x8b\x08\x00" + bytes(60),
        "zstd/plain-tar": good_tar,
        "zstd/empty": b"",
        "zstd/skippable-first": hostile.skippable_frame() + zstd(good_tar),
        "zstd/skippable-after": zstd(good_tar) + hostile.skippable_frame(),
        "zstd/no-checksum": zstd(good_tar, checksum=False),
        "zstd/window-16MiB": zstd(good_tar, level=3, window_log=24),
        "zstd/dictionary-id": hostile.frame_header(dict_id=7)
        + hostile.raw_blocks(good_tar)
        + hostile.close_frame(),
        "zstd/truncated-half": zstd(good_tar)[: len(zstd(good_tar)) // 2],
        "zstd/truncated-last-byte": zstd(good_tar)[:-1],
        "zstd/bad-checksum": zstd(good_tar)[:-4] + bytes(4),
        "zstd/second-frame": zstd(good_tar) + zstd(b"\0" * 1024),
        "zstd/trailing-byte": zstd(good_tar) + b"\0",
        "zstd/trailing-text": zstd(good_tar) + b"extra",
        "zstd/zero-bomb-10GiB": hostile.zero_bomb(10 * 2**30),
        # tar layer: member types
        "tar/symlink": zstd(_top_tar([f(f"{t}/link", typeflag=b"2", linkname="/etc/passwd")])),
        "tar/hardlink": zstd(_top_tar([f(f"{t}/link", typeflag=b"1", linkname=f"{t}/x")])),
        "tar/fifo": zstd(_top_tar([f(f"{t}/fifo", typeflag=b"6")])),
        "tar/char-device": zstd(_top_tar([f(f"{t}/dev", typeflag=b"3")])),
        "tar/gnu-longname": zstd(_top_tar([f("././@LongLink", b"x" * 10, typeflag=b"L")])),
        "tar/pax-global": zstd(
            hostile.tar([hostile.pax_member([("comment", "x")], typeflag=b"g"), d(t)])
        ),
        "tar/sparse-pax": zstd(
            _top_tar([hostile.pax_member([("GNU.sparse.size", "10")]), f(f"{t}/s", b"x")])
        ),
        "tar/unknown-pax-key": zstd(
            _top_tar([hostile.pax_member([("linkpath", "/etc")]), f(f"{t}/s", b"x")])
        ),
        "tar/oversize-pax": zstd(
            _top_tar([hostile.pax_member([("comment", "x" * 70000)]), f(f"{t}/s", b"x")])
        ),
        "tar/pax-size-disagrees": zstd(
            _top_tar([hostile.pax_member([("size", "5")]), f(f"{t}/s", b"x")])
        ),
        "tar/pax-malformed-length": zstd(
            _top_tar([hostile.pax_member(b"99 path=x\n"), f(f"{t}/s", b"x")])
        ),
        # tar layer: names
        "name/absolute": zstd(hostile.tar([d("/evalbook-bundle-x")])),
        "name/dotdot": zstd(_top_tar([f(f"{t}/../evil.txt", b"x")])),
        "name/dotdot-pax": zstd(
            _top_tar([hostile.pax_member([("path", "../evil.txt")]), f(f"{t}/ok", b"x")])
        ),
        "name/backslash": zstd(_top_tar([f(f"{t}\\evil.txt", b"x")])),
        "name/empty-segment": zstd(_top_tar([f(f"{t}//x", b"x")])),
        "name/dot-segment": zstd(_top_tar([f(f"{t}/./x", b"x")])),
        "name/control-char": zstd(_top_tar([f(f"{t}/a\x1bb", b"x")])),
        "name/not-utf8": zstd(_top_tar([f(f"{t}/".encode() + b"\xff\xfe", b"x")])),
        "name/not-nfc": zstd(_top_tar([f(f"{t}/cafe\u0301", b"x")])),
        "name/case-collision": zstd(_top_tar([f(f"{t}/A", b"x"), f(f"{t}/a", b"y")])),
        "name/nfc-collision": zstd(_top_tar([f(f"{t}/\u00e9", b"x"), f(f"{t}/\u00c9", b"y")])),
        "name/sharp-s-collision": zstd(
            _top_tar([f(f"{t}/stra\u00dfe", b"x"), f(f"{t}/STRASSE", b"y")])
        ),
        "name/duplicate": zstd(_top_tar([f(f"{t}/x", b"x"), f(f"{t}/x", b"y")])),
        "name/outside-top": zstd(_top_tar([f("other/x", b"x")])),
        "name/two-tops": zstd(_top_tar([d("second")])),
        "name/parent-missing": zstd(_top_tar([f(f"{t}/sub/x", b"x")])),
        "name/first-not-directory": zstd(hostile.tar([f("x", b"x")])),
        # tar layer: structure
        "tar/bad-checksum": zstd(
            _top_tar([hostile.header(f"{t}/x", size=1, checksum=1) + hostile.pad(b"x")])
        ),
        "tar/gnu-magic": zstd(
            _top_tar(
                [
                    hostile.header(f"{t}/x", size=1, magic=b"ustar ", version=b" \0")
                    + hostile.pad(b"x")
                ]
            )
        ),
        "tar/base256-size": zstd(
            _top_tar(
                [
                    hostile.header(f"{t}/x", size_field=b"\x80" + bytes(10) + b"\x01")
                    + hostile.pad(b"x")
                ]
            )
        ),
        "tar/directory-with-data": zstd(
            _top_tar([hostile.header(f"{t}/d/", typeflag=b"5", size=1) + hostile.pad(b"x")])
        ),
        "tar/no-end-marker": zstd(hostile.tar([d(t), f(f"{t}/x", b"x")], end=False)),
        "tar/truncated-member": zstd(good_tar[: len(good_tar) // 2]),
        "tar/one-zero-block": zstd(
            hostile.tar([d(t)], end=False) + bytes(512) + b"x" * 512 + bytes(10240)
        ),
        "tar/data-after-end": zstd(good_tar + b"\0" * 512 + b"junk"),
        "tar/nonzero-padding": zstd(good_tar[:-1] + b"x"),
        "tar/extra-record": zstd(good_tar + bytes(10240)),
    }
    for name, data in cases.items():
        file = c.write(f"hostile-{name.replace('/', '-')}.tar.zst", data)
        c.add(
            f"hostile/{name}",
            "archive",
            "5",
            file,
            error(),
            why="refused before any verdict (SPEC 5), exit 3 (SPEC 8)",
        )
    bomb = c.write("hostile-member-bomb.tar.zst", hostile.member_bomb(2**30))
    c.add(
        "hostile/member-bomb-over-max-bytes",
        "archive",
        "5",
        bomb,
        error(),
        args=["--max-bytes", "100000000"],
        why="more decompressed bytes than --max-bytes",
    )
    c.add(
        "hostile/max-bytes-below-bundle",
        "archive",
        "5",
        clean.name,
        error(),
        args=["--max-bytes", "20000"],
        why="a real bundle larger than --max-bytes",
    )


# ---------------------------------------------------------------- edits to real bundles

Edit = Callable[[repack.EditableBag], None]


def _first(eb: repack.EditableBag, prefix: str, suffix: str = "") -> str:
    return next(p for p in eb.files if p.startswith(prefix) and p.endswith(suffix))


def _flip_byte(eb: repack.EditableBag, path: str) -> None:
    data = bytearray(eb.files[path])
    data[len(data) // 2] ^= 0x01
    eb.files[path] = bytes(data)


def _edit_case(eb: repack.EditableBag, change: Callable[[dict[str, Any]], None]) -> str:
    path = _first(eb, "data/cases/", ".jsonl")
    lines = eb.lines(path)
    case = canonical.loads(lines[0], source=path)
    change(case)
    lines[0] = canonical.dumps(case)
    eb.set_lines(path, lines)
    return path


def edit_cases(c: Corpus, bundles: dict[str, Path]) -> None:
    """Tampering and crafted documents (threat model 1, 2 and 3), each named by the claim
    group SPEC 5 gives it. "sealed" edits redo every digest bundle.json and the tag files
    carry (what an attacker who edits files would do), so only the claim about the edited
    item can catch them."""
    clean = bundles["rpt-clean/alice"]

    def build(name: str, source: Path, edit: Edit, **recompute: bool) -> str:
        eb = repack.open_bundle(source)
        edit(eb)
        file = f"edit-{name.replace('/', '-')}.tar.zst"
        repack.write_bundle(eb, c.out / file, **recompute)
        return file

    blob = lambda eb: _first(eb, "data/blobs/sha256/")  # noqa: E731
    unsealed = {
        "bundle_json": False,
        "manifest": False,
        "bag_info": False,
        "head": False,
        "tagmanifest": False,
    }

    # Group 1: BagIt.
    def flip_blob(eb: repack.EditableBag) -> None:
        _flip_byte(eb, blob(eb))

    def flip_example(eb: repack.EditableBag) -> None:
        _flip_byte(eb, _first(eb, "data/datasets/", ".json"))

    for name, edit, what in [
        ("bagit/payload-byte", flip_blob, "a payload byte changed"),
        ("bagit/example-byte", flip_example, "a byte of a dataset file changed"),
    ]:
        eb = repack.open_bundle(clean)
        edit(eb)
        path = next(p for p in eb.files if eb.files[p] != repack.open_bundle(clean).files.get(p))
        file = build(name, clean, edit, **unsealed)
        c.add(f"edit/{name}", "tamper", "5 claim 1", file, failed((1, path)), why=what)

    def extra_tag(depth: str) -> Edit:
        def run(eb: repack.EditableBag) -> None:
            eb.files[f"{depth}extra.txt"] = b"unbound\n"

        return run

    for depth in ("", "sub/", "sub/deeper/"):
        file = build(f"bagit/tag-file-{depth.count('/')}", clean, extra_tag(depth))
        c.add(
            f"edit/bagit/tag-file-depth-{depth.count('/')}",
            "tamper",
            "5 claim 1",
            file,
            failed((1, f"{depth}extra.txt")),
            why="only the known tag files, at the bag root",
        )

    def bagit_txt(eb: repack.EditableBag) -> None:
        eb.files["bagit.txt"] = b"BagIt-Version: 0.97\nTag-File-Character-Encoding: UTF-8\n"

    c.add(
        "edit/bagit/bagit-version",
        "tamper",
        "5 claim 1",
        build("bagit/bagit-version", clean, bagit_txt),
        failed((1, "bagit.txt")),
        why="bagit.txt must declare BagIt 1.0",
    )

    def bag_info(eb: repack.EditableBag) -> None:
        eb.files["bag-info.txt"] += b"Contact-Name: someone\n"

    c.add(
        "edit/bagit/bag-info-extra-field",
        "tamper",
        "5 claim 1",
        build("bagit/bag-info-extra", clean, bag_info, bag_info=False),
        failed((1, "bag-info.txt")),
        why="bag-info.txt must be what bundle.json determines",
    )

    def oxum(eb: repack.EditableBag) -> None:
        info = eb.files["bag-info.txt"].decode()
        eb.files["bag-info.txt"] = "\n".join(
            "Payload-Oxum: 1.1" if line.startswith("Payload-Oxum") else line
            for line in info.split("\n")
        ).encode()

    c.add(
        "edit/bagit/payload-oxum",
        "tamper",
        "5 claim 1",
        build("bagit/payload-oxum", clean, oxum, bag_info=False),
        failed((1, "bag-info.txt")),
        why="Payload-Oxum must add up",
    )

    def unnamed(eb: repack.EditableBag) -> None:
        eb.files["data/extra/unnamed.txt"] = b"not named in bundle.json\n"

    c.add(
        "edit/accounting/unnamed-data-file",
        "tamper",
        "5 claim 10",
        build("accounting/unnamed", clean, unnamed),
        failed((10, "data/extra/unnamed.txt")),
        why="every file under data/ is named by bundle.json",
    )

    # Names that collide after NFC + full case folding (Python's str.casefold()) are
    # refused before a verdict; names that do not collide are two unnamed files. Each pair
    # is one where a fold by toUpperCase().toLowerCase() answers otherwise, and a code
    # point assigned after Unicode 14.0.0 is refused (docs/format.md, "Member names").
    def extra_files(*names: str) -> Edit:
        def run(eb: repack.EditableBag) -> None:
            for name in names:
                eb.files[f"data/extra/{name}"] = f"{name}\n".encode()

        return run

    for label, pair in [
        ("capital-sharp-s", ("\u1e9e.json", "ss.json")),
        ("sharp-s", ("\u00df.json", "SS.json")),
        ("final-sigma", ("\u03c2.json", "\u03a3.json")),
        ("long-s", ("\u017f.json", "s.json")),
        ("fi-ligature", ("\ufb01.json", "FI.json")),
        ("cherokee", ("\u13a0.json", "\uab70.json")),
    ]:
        c.add(
            f"edit/names/fold-collision-{label}",
            "archive",
            "5",
            build(f"names/fold-{label}", clean, extra_files(*pair)),
            error(),
            why="two names that are one after NFC and full case folding: refused before a verdict",
        )
    for label, pair in [
        ("dotless-i", ("\u0131.json", "i.json")),
        ("dotted-capital-i", ("\u0130.json", "i.json")),
    ]:
        c.add(
            f"edit/names/fold-distinct-{label}",
            "tamper",
            "5 claim 10",
            build(f"names/distinct-{label}", clean, extra_files(*pair)),
            failed(*((10, f"data/extra/{name}") for name in pair), exact=True),
            why="two names full case folding keeps apart (no Turkic rule): two unnamed files",
        )
    c.add(
        "edit/names/unassigned-in-unicode-14",
        "archive",
        "5",
        build("names/unassigned", clean, extra_files("\U0001e08f.json")),
        error(),
        why="a name with a code point not assigned in Unicode 14.0.0 (docs/format.md)",
    )

    # Group 2: bundle.json and the head.
    def non_canonical(eb: repack.EditableBag) -> None:
        value = eb.bundle
        eb.files["data/bundle.json"] = json.dumps(value, indent=1).encode()

    c.add(
        "edit/bundle/not-canonical",
        "tamper",
        "5 claim 2",
        build("bundle/not-canonical", clean, non_canonical, bundle_json=False),
        failed((2, "data/bundle.json")),
        why="bundle.json is stored canonical",
    )

    def head(eb: repack.EditableBag) -> None:
        value = canonical.loads(eb.files["bundle-head.json"], source="head")
        value["exported_at"] = "2030-01-01T00:00:00Z"
        eb.files["bundle-head.json"] = canonical.dumps(value)

    c.add(
        "edit/bundle/head-differs",
        "tamper",
        "11.2",
        build("bundle/head", clean, head, head=False),
        failed((2, "bundle-head.json")),
        why="bundle-head.json is what bundle.json gives",
    )

    def no_head(eb: repack.EditableBag) -> None:
        del eb.files["bundle-head.json"]

    c.add(
        "edit/bundle/head-missing",
        "tamper",
        "11.2",
        build("bundle/head-missing", clean, no_head, head=False),
        failed((2, "bundle-head.json")),
        why="bundle-head.json present",
    )

    c.add(
        "anchor/expect-bundle-digest-wrong",
        "anchor",
        "5 claim 2",
        clean.name,
        failed((2, "data/bundle.json")),
        args=["--expect-bundle-digest", ZERO],
        why="the bundle digest is not the one expected",
    )
    c.add(
        "anchor/expect-report-digest-wrong",
        "anchor",
        "5 claim 3",
        clean.name,
        failed((3, "data/report/body.json")),
        args=["--expect-report-digest", ZERO],
        why="the report digest is not the one expected",
    )
    bundle_digest = (
        repack.open_bundle(clean)
        .files["bag-info.txt"]
        .decode()
        .split("Bundle-Digest: ")[1]
        .split("\n")[0]
    )
    body = repack.open_bundle(clean).files["data/report/body.json"]
    report_digest = "sha256:" + __import__("hashlib").sha256(body).hexdigest()
    c.add(
        "anchor/expect-both-right",
        "anchor",
        "5",
        clean.name,
        verified([]),
        args=["--expect-bundle-digest", bundle_digest, "--expect-report-digest", report_digest],
        why="both anchors hold",
    )

    # Group 3: the report.
    def report_result(eb: repack.EditableBag) -> None:
        eb.edit_json("data/report/body.json", lambda v: v.update(result="fail"))

    file = build("report/result-sealed", clean, report_result)
    c.add(
        "edit/report/result-sealed-with-anchor",
        "tamper",
        "5 claim 3",
        file,
        failed((3, "data/report/body.json")),
        args=["--expect-report-digest", report_digest],
        why="a resealed report edit shows against the trust anchor",
    )
    file = build("report/result-unsealed", clean, report_result, bundle_json=False)
    c.add(
        "edit/report/result-unsealed",
        "tamper",
        "5 claim 3",
        file,
        failed((3, "data/report/body.json")),
        why="report body sha256 differs from bundle.json",
    )

    def report_schema(eb: repack.EditableBag) -> None:
        eb.edit_json("data/report/body.json", lambda v: v.update(result="maybe"))

    c.add(
        "edit/report/not-schema-valid",
        "tamper",
        "5 claim 3",
        build("report/schema", clean, report_schema),
        failed((3, "data/report/body.json")),
        why="the report body is schema-valid",
    )

    def report_pretty(eb: repack.EditableBag) -> None:
        eb.files["data/report/body.json"] = json.dumps(
            eb.json("data/report/body.json"), indent=2
        ).encode()

    c.add(
        "edit/report/not-canonical",
        "tamper",
        "5 claim 3",
        build("report/pretty", clean, report_pretty),
        failed((3, "data/report/body.json")),
        why="the report body is stored canonical",
    )

    # Groups 4 to 8: pinned documents resealed.
    def suite(eb: repack.EditableBag) -> None:
        eb.edit_json(
            _first(eb, "data/suite/"), lambda v: v.update(validity_hours=v["validity_hours"] + 1)
        )

    c.add(
        "edit/suite/changed",
        "tamper",
        "5 claim 4",
        build("suite/changed", clean, suite),
        failed((4, None)),
        why="the suite's JSON digest equals suite_ref.digest",
    )

    def scorer(eb: repack.EditableBag) -> None:
        path = next(p for p in eb.files if "/files/" in p and p.startswith("data/scorers/"))
        eb.files[path] += b"# changed\n"

    c.add(
        "edit/scorers/file-changed",
        "tamper",
        "5 claim 5",
        build("scorers/file", clean, scorer),
        failed((5, None)),
        why="the framed digest equals every scorer_ref.digest",
    )

    def manifest(eb: repack.EditableBag) -> None:
        path = _first(eb, "data/datasets/", "manifest.json")
        eb.edit_json(path, lambda v: v["examples"][0].update(size=v["examples"][0]["size"] + 1))

    c.add(
        "edit/datasets/manifest-changed",
        "tamper",
        "5 claim 6",
        build("datasets/manifest", clean, manifest),
        failed((6, None)),
        why="the manifest digest equals the dataset_refs digest",
    )

    def example(eb: repack.EditableBag) -> None:
        path = next(p for p in eb.files if "/examples/" in p)
        eb.files[path] = canonical.dumps({"changed": True})

    c.add(
        "edit/datasets/example-changed",
        "tamper",
        "5 claim 6",
        build("datasets/example", clean, example),
        failed((6, None)),
        why="each example body hashes to its manifest entry",
    )

    def check_result(eb: repack.EditableBag) -> None:
        eb.edit_json(_first(eb, "data/checks/"), lambda v: v.update(check_id="another"))

    c.add(
        "edit/checks/check-id-inside",
        "tamper",
        "5 claim 7",
        build("checks/id", clean, check_result),
        failed((7, None)),
        why="check results' ids are consistent with the report's checks",
    )

    def case_score(eb: repack.EditableBag) -> None:
        _edit_case(eb, lambda v: v.update(status="fail" if v["status"] == "pass" else "pass"))

    c.add(
        "edit/cases/status-sealed",
        "tamper",
        "5 claim 8",
        build("cases/status", clean, case_score),
        {"exit_code": 0, "verdict": "verified", "failed": []},
        why="a resealed case edit is self-consistent (only an anchor or audit catches it)",
    )
    c.add(
        "edit/cases/status-sealed-anchored",
        "tamper",
        "5 claim 2",
        build("cases/status-a", clean, case_score),
        failed((2, "data/bundle.json")),
        args=["--expect-bundle-digest", bundle_digest],
        why="... and fails against the expected bundle digest",
    )

    def case_output(eb: repack.EditableBag) -> None:
        _edit_case(eb, lambda v: v["output"].update(digest=ZERO))

    c.add(
        "edit/cases/output-digest-unlisted",
        "tamper",
        "5 claim 8",
        build("cases/output", clean, case_output),
        failed((8, None)),
        why="each output digest is proven by a payload in the bundle or listed",
    )

    def case_noncanonical(eb: repack.EditableBag) -> None:
        path = _first(eb, "data/cases/", ".jsonl")
        lines = eb.lines(path)
        lines[0] = json.dumps(json.loads(lines[0])).encode()
        eb.set_lines(path, lines)

    c.add(
        "edit/cases/line-not-canonical",
        "tamper",
        "5 claim 8",
        build("cases/noncanon", clean, case_noncanonical),
        failed((8, None)),
        why="each case line is canonical",
    )

    def case_tree(eb: repack.EditableBag) -> None:
        b = eb.bundle
        b["cases_tree"]["root"] = "0" * 64
        eb.set_bundle(b)

    c.add(
        "edit/cases/tree-root",
        "tamper",
        "11.1",
        build("cases/tree", clean, case_tree, bundle_json=False),
        failed((8, None)),
        why="verify recomputes the case tree root",
    )

    def no_newline(eb: repack.EditableBag) -> None:
        path = _first(eb, "data/cases/", ".jsonl")
        eb.files[path] = eb.files[path].rstrip(b"\n")

    c.add(
        "edit/cases/no-final-newline",
        "tamper",
        "5 claim 8",
        build("cases/nl", clean, no_newline),
        failed((8, None)),
        why="a case file ends with a newline",
    )

    # Group 9: evidence refs.
    def evidence(eb: repack.EditableBag) -> None:
        def change(v: dict[str, Any]) -> None:
            v["checks"][0]["evidence_refs"] = [{"kind": "output", "digest": ZERO}]

        eb.edit_json("data/report/body.json", change)

    c.add(
        "edit/evidence/unknown-ref",
        "tamper",
        "5 claim 9",
        build("evidence/ref", clean, evidence),
        failed((9, None)),
        why="every evidence_refs digest is among the check's case outputs and evidence",
    )

    # Group 10: the listing.
    def _listing(entry: dict[str, Any]) -> Edit:
        def run(eb: repack.EditableBag) -> None:
            b = eb.bundle
            b["unavailable"].append(entry)
            eb.set_bundle(b)

        return run

    eb0 = repack.open_bundle(clean)
    b0 = eb0.bundle
    payload = b0["payloads"][0]["digest"]
    suite_ref = f"{b0['suite']['suite_id']}@{b0['suite']['version']}"
    for name, entry in [
        (
            "present-payload",
            {
                "kind": "output",
                "ref": payload,
                "digest": payload,
                "reason": "payload_at_sso",
                "detail": None,
            },
        ),
        (
            "present-suite",
            {
                "kind": "suite",
                "ref": suite_ref,
                "digest": b0["suite"]["digest"],
                "reason": "missing_from_store",
                "detail": None,
            },
        ),
        (
            "suite-ref-leading-zero",
            {
                "kind": "suite",
                "ref": suite_ref.replace("@", "@0"),
                "digest": b0["suite"]["digest"],
                "reason": "missing_from_store",
                "detail": None,
            },
        ),
        (
            "reason-for-other-kind",
            {
                "kind": "suite",
                "ref": suite_ref,
                "digest": b0["suite"]["digest"],
                "reason": "payload_at_sso",
                "detail": None,
            },
        ),
        (
            "unknown-payload",
            {
                "kind": "artifact",
                "ref": ZERO,
                "digest": ZERO,
                "reason": "missing_from_store",
                "detail": None,
            },
        ),
    ]:
        c.add(
            f"edit/listing/{name}",
            "listing",
            "5 claim 10",
            build(f"listing/{name}", clean, _listing(entry)),
            failed((10, None)),
            why="a listing never contradicts the bundle",
        )

    def hide_output(eb: repack.EditableBag) -> None:
        """Drop a payload and list it as at SSO although the case stores it inline."""
        path = blob(eb)
        digest = "sha256:" + path.rsplit("/", 1)[1]
        del eb.files[path]
        b = eb.bundle
        b["unavailable"].append(
            {
                "kind": "output",
                "ref": digest,
                "digest": digest,
                "reason": "payload_at_sso",
                "detail": None,
            }
        )
        eb.set_bundle(b)

    c.add(
        "edit/listing/hide-inline-output-as-sso",
        "listing",
        "5 claim 10",
        build("listing/hide", clean, hide_output),
        failed((10, None)),
        why="a case payload whose location is inline cannot be payload_at_sso",
    )

    # Group 11: coherence.
    def no_export(eb: repack.EditableBag) -> None:
        b = eb.bundle
        b["exporter"]["permissions"] = [
            p for p in b["exporter"]["permissions"] if p != "report.export"
        ]
        eb.set_bundle(b)

    c.add(
        "edit/coherence/no-report-export",
        "coherence",
        "5 claim 11",
        build("coherence/perm", clean, no_export),
        failed((11, "data/bundle.json")),
        why="the recorded permissions include report.export",
    )

    def elsewhere(eb: repack.EditableBag) -> None:
        eb.files["data/report/other.json"] = eb.files.pop("data/report/envelope.json")
        b = eb.bundle
        b["report"]["envelope"]["path"] = "data/report/other.json"
        eb.set_bundle(b)

    c.add(
        "edit/coherence/path-elsewhere",
        "coherence",
        "5 claim 11",
        build("coherence/path", clean, elsewhere),
        failed((11, "data/report/other.json")),
        why="every file at the path the contract defines",
    )

    def size_lie(eb: repack.EditableBag) -> None:
        _edit_case(eb, lambda v: v["output"].update(size=v["output"]["size"] + 1))

    c.add(
        "edit/coherence/payload-size",
        "coherence",
        "5 claim 11",
        build("coherence/size", clean, size_lie),
        failed((11, None)),
        why="a case's payload reference agrees with the payload's size",
    )

    def big_inline(eb: repack.EditableBag) -> None:
        _edit_case(eb, lambda v: v["output"].update(size=300000))

    c.add(
        "edit/coherence/inline-over-limit",
        "coherence",
        "5 claim 8",
        build("coherence/inline", clean, big_inline),
        failed((8, None)),
        why="the 262,144-byte inline limit (the case schema holds it)",
    )

    # bundle.json that is not schema-valid or not JSON: no verdict.
    def bad_schema(eb: repack.EditableBag) -> None:
        b = eb.bundle
        b["schema"] = "evalbook.reproducibility_bundle.v2"
        eb.set_bundle(b)

    def dup_key(eb: repack.EditableBag) -> None:
        eb.files["data/bundle.json"] = b'{"schema":"a","schema":"b"}'

    def big_int(eb: repack.EditableBag) -> None:
        eb.files["data/bundle.json"] = eb.files["data/bundle.json"].replace(
            b'"max_cases":20000', b'"max_cases":12345678901234567890'
        )

    def bom(eb: repack.EditableBag) -> None:
        eb.files["data/bundle.json"] = b"\xef\xbb\xbf" + eb.files["data/bundle.json"]

    def lone_surrogate(eb: repack.EditableBag) -> None:
        eb.files["data/bundle.json"] = eb.files["data/bundle.json"].replace(
            b'"alice"', b'"\\ud800"'
        )

    def deep(eb: repack.EditableBag) -> None:
        eb.files["data/bundle.json"] = b"[" * 65 + b"]" * 65

    def no_bundle(eb: repack.EditableBag) -> None:
        del eb.files["data/bundle.json"]

    for name, edit in [
        ("unknown-schema", bad_schema),
        ("duplicate-key", dup_key),
        ("big-integer", big_int),
        ("byte-order-mark", bom),
        ("lone-surrogate", lone_surrogate),
        ("nesting-65", deep),
        ("missing", no_bundle),
    ]:
        file = build(f"bundle-json/{name}", clean, edit, bundle_json=False, head=False)
        c.add(
            f"edit/bundle-json/{name}",
            "malformed",
            "2 and 5",
            file,
            error(),
            why="a malformed bundle.json leaves no verdict possible",
        )


# ------------------------------------------------------- tag-file text, member metadata


def _patch_headers(tar: bytes, fields: dict[str, tuple[int, int, bytes]]) -> bytes:
    """``tar`` with one header field of each named member rewritten (checksum updated):
    name -> (start, end, value)."""
    out = bytearray(tar)
    for h in repack.header_blocks(tar):
        if h.typeflag != b"x" and h.name in fields:
            start, end, value = fields[h.name]
            block = bytearray(out[h.offset : h.offset + 512])
            block[start:end] = value
            block[148:156] = b" " * 8
            block[148:156] = b"%06o\0 " % sum(block)
            out[h.offset : h.offset + 512] = block
    return bytes(out)


def text_cases(c: Corpus, clean: Path) -> None:
    """Tag files read as bytes, alike in both verifiers: a BOM is not skipped, and a
    manifest path starting or ending with any space character (one written-out set, not
    a regex engine's) makes its line malformed. Member metadata (mode, uid, mtime) and
    manifest order are not claims (docs/format.md): such a bundle verifies."""

    def write(name: str, edit: Callable[[repack.EditableBag], None], **recompute: bool) -> str:
        eb = repack.open_bundle(clean)
        edit(eb)
        return repack.write_bundle(eb, c.out / f"text-{name}.tar.zst", **recompute).name

    def prefixed(name: str, prefix: bytes) -> Callable[[repack.EditableBag], None]:
        def run(eb: repack.EditableBag) -> None:
            repack.refresh_tag_files(eb)
            eb.files[name] = prefix + eb.files[name]

        return run

    def path_with(space: str, at_end: bool) -> Callable[[repack.EditableBag], None]:
        def run(eb: repack.EditableBag) -> None:
            repack.refresh_tag_files(eb)
            lines = eb.files["manifest-sha256.txt"].decode().split("\n")
            digest, path = lines[0].split("  ", 1)
            lines[0] = f"{digest}  {path}{space}" if at_end else f"{digest}  {space}{path}"
            eb.files["manifest-sha256.txt"] = "\n".join(lines).encode()

        return run

    for tag in ("manifest-sha256.txt", "tagmanifest-sha256.txt"):
        file = write(
            f"bom-{tag.split('.')[0]}",
            prefixed(tag, b"\xef\xbb\xbf"),
            manifest=False,
            tagmanifest=tag != "tagmanifest-sha256.txt",
        )
        c.add(
            f"text/bom/{tag}",
            "tamper",
            "4.1 and 5 claim 1",
            file,
            failed((1, tag)),
            why="a manifest is `<hex>  <path>` lines; a BOM before the first is not one",
        )
    for name, space in [("bom", "\ufeff"), ("nel", "\x85"), ("fs", "\x1c"), ("nbsp", "\xa0")]:
        for at_end in (False, True):
            where = "end" if at_end else "start"
            file = write(f"path-{name}-{where}", path_with(space, at_end), manifest=False)
            c.add(
                f"text/manifest-path/{name}-at-{where}",
                "tamper",
                "4.1 and 5 claim 1",
                file,
                failed((1, "manifest-sha256.txt")),
                why="a manifest line whose path starts or ends with a space character is "
                "malformed (the same set in every verifier)",
            )

    def bom_top(eb: repack.EditableBag) -> None:
        eb.top = "\ufeff" + eb.top

    c.add(
        "text/bom/top-directory",
        "tamper",
        "4.1 and 5 claim 1",
        write("bom-top-directory", bom_top),
        failed((1, None)),
        why="a member name is its bytes: a BOM before the top directory is part of its name, "
        "which then does not name the report",
    )

    def unsorted(eb: repack.EditableBag) -> None:
        repack.refresh_tag_files(eb)
        lines = eb.files["manifest-sha256.txt"].split(b"\n")[:-1]
        eb.files["manifest-sha256.txt"] = b"\n".join(reversed(lines)) + b"\n"

    c.add(
        "text/manifest-unsorted",
        "metadata",
        "5 claim 1",
        write("manifest-unsorted", unsorted, manifest=False),
        verified([]),
        why="claim 1 asks for every file with a matching digest and no extra entries; "
        "order is how the exporter writes, not a claim (docs/format.md)",
    )
    tar = repack.archive_tar(clean)
    first = next(h.name for h in repack.header_blocks(tar) if h.typeflag == b"0")
    for name, field in [
        ("setuid", (100, 108, b"%07o\0" % 0o4755)),
        ("uid-1000", (108, 116, b"%07o\0" % 1000)),
        ("owner-name", (265, 297, b"mallory".ljust(32, b"\0"))),
        ("mtime-0", (136, 148, b"%011o\0" % 0)),
    ]:
        file = f"text-member-{name}.tar.zst"
        repack.write_tar(_patch_headers(tar, {first: field}), c.out / file)
        c.add(
            f"text/member-metadata/{name}",
            "metadata",
            "4.1 and 5",
            file,
            verified([]),
            why="member mode, owner and mtime are how the exporter writes (4.1); no digest "
            "covers them and SPEC 5 does not refuse them: both verifiers ignore them",
        )


# ---------------------------------------------------------------------------- options


def option_cases(c: Corpus, signed: Path, unsigned: Path) -> None:
    """SPEC 7 and 8: a badly written option is a usage error (exit 2); a file an option
    names that cannot be read or is not a valid allowed_signers file is an input error
    (exit 3); both before any bundle is read, with --json one error object. A BOM at the
    start of allowed_signers is not skipped (ssh-keygen does not skip it), so its first
    principal is not the identity asked for."""
    pub = " ".join((KEYS / "conformance.key.pub").read_text().split()[:2])
    good = f"auditor@example.org {pub}\n"
    (c.out / "option-a-directory").mkdir()
    files = {
        "missing": "option-does-not-exist",
        "directory": "option-a-directory",
        "empty": c.text("option-signers-empty", ""),
        "comments-only": c.text("option-signers-comments", "# nobody\n\n"),
        "unknown-option": c.text(
            "option-signers-unknown-option", f"auditor@example.org unknownopt {pub}\n"
        ),
        "no-key": c.text("option-signers-no-key", "auditor@example.org\n"),
        "not-utf8": c.write(
            "option-signers-latin1", b"caf\xe9@example.org " + pub.encode() + b"\n"
        ),
    }
    for name, file in files.items():
        for command, target in (
            ("verify", unsigned.name),
            ("check-proof", "option-does-not-exist.json"),
        ):
            c.add(
                f"options/{command}/allowed-signers-{name}",
                "options",
                "8",
                target,
                {"exit_code": 3},
                command=command,
                args=["--allowed-signers", file],
                why="an option file that cannot be read or is not an allowed_signers file is "
                "an input error, before any bundle or proof is read",
            )
    bom = c.write("option-signers-bom", b"\xef\xbb\xbf" + good.encode())
    c.add(
        "options/allowed-signers-bom",
        "options",
        "11.3 and 15",
        signed.name,
        failed((2, None)),
        args=["--allowed-signers", bom, "--identity", "auditor@example.org"],
        why="a BOM is part of the first principal, as ssh-keygen reads the file: the "
        "identity is not listed, so no allowed signer signed",
    )
    signers = c.text("option-signers-good", good)
    for name, args in [
        ("max-bytes-zero", ["--max-bytes", "0"]),
        ("max-bytes-plus", ["--max-bytes", "+5"]),
        ("max-bytes-underscore", ["--max-bytes", "1_000"]),
        ("max-bytes-arabic-digits", ["--max-bytes", "\u0661\u0662"]),
        ("digest-upper", ["--expect-bundle-digest", "sha256:" + "A" * 64]),
        ("digest-short", ["--expect-bundle-digest", "sha256:XYZ"]),
        ("identity-alone", ["--identity", "auditor@example.org"]),
        ("signature-alone", ["--signature", signers]),
        ("unknown", ["--no-such-option"]),
    ]:
        c.add(
            f"options/usage/{name}",
            "options",
            "8",
            unsigned.name,
            {"exit_code": 2},
            args=args,
            why="a badly written option is a usage error",
        )
    c.add(
        "options/max-bytes-huge",
        "options",
        "5 and 8",
        unsigned.name,
        verified([]),
        args=["--max-bytes", "9" * 24],
        why="any positive whole number of bytes is a cap; one above the archive is no cap",
    )


# --------------------------------------------------------------------------- signatures


def _key(c: Corpus, name: str) -> Path:
    path = c.tmp / name
    shutil.copyfile(KEYS / name, path)
    path.chmod(0o600)
    return path


def signature_cases(c: Corpus) -> tuple[Path, Path]:
    """SPEC 11.3: every signature present is checked; allowed_signers anchors."""
    key = _key(c, "conformance.key")
    other = _key(c, "other.key")
    pub = (KEYS / "conformance.key.pub").read_text().split()[:2]
    other_pub = (KEYS / "other.key.pub").read_text().split()[:2]
    allowed = c.text("allowed_signers", f"auditor@example.org {' '.join(pub)}\n")
    other_allowed = c.text("allowed_signers_other", f"auditor@example.org {' '.join(other_pub)}\n")
    ns_allowed = c.text(
        "allowed_signers_namespace",
        f'auditor@example.org namespaces="evalbook-fixity-v1" {" ".join(pub)}\n',
    )
    signed = export(MAIN, "rpt-clean", "alice", c.out / "signed-rpt-clean.tar.zst", key)
    unsigned = c.out / "fixture-rpt-clean-alice.tar.zst"
    s = signed.name
    c.add(
        "signature/embedded-no-anchor",
        "signature",
        "11.3",
        s,
        verified([]),
        why="a valid embedded signature, not anchored",
    )
    c.add(
        "signature/embedded-allowed",
        "signature",
        "11.3",
        s,
        verified([]),
        args=["--allowed-signers", allowed, "--identity", "auditor@example.org"],
        why="signed by an allowed signer",
    )
    c.add(
        "signature/embedded-allowed-any-identity",
        "signature",
        "11.3",
        s,
        verified([]),
        args=["--allowed-signers", allowed],
        why="without --identity any principal of the line",
    )
    # ssh-keygen's time spellings (parse_absolute_time): Z or UTC in any case, a day past
    # the month's end normalised; a past valid-after lets the signer sign, a future one not.
    for label, value, expect in [
        ("z-lower", "20200101z", verified([])),
        ("utc-mixed-case", "20200101uTc", verified([])),
        ("seconds-z", "20200101000000Z", verified([])),
        ("february-30", "20200230Z", verified([])),
        ("future", "29991231z", failed((2, None))),
    ]:
        timed = c.text(
            f"allowed_signers_valid_after_{label}",
            f'auditor@example.org valid-after="{value}" {" ".join(pub)}\n',
        )
        c.add(
            f"signature/valid-after-{label}",
            "signature",
            "11.3",
            s,
            expect,
            args=["--allowed-signers", timed, "--identity", "auditor@example.org"],
            why=f'valid-after="{value}" read as ssh-keygen reads it',
        )
    for label, value in [("bad-month", "20201301Z"), ("seven-digits", "2020010Z")]:
        bad = c.text(
            f"allowed_signers_valid_after_{label}",
            f'auditor@example.org valid-after="{value}" {" ".join(pub)}\n',
        )
        c.add(
            f"options/allowed-signers-valid-after-{label}",
            "options",
            "8",
            s,
            {"exit_code": 3},
            args=["--allowed-signers", bad],
            why="a time ssh-keygen cannot parse makes the allowed_signers file invalid",
        )
    c.add(
        "signature/wrong-identity",
        "signature",
        "11.3",
        s,
        failed((2, None)),
        args=["--allowed-signers", allowed, "--identity", "mallory@example.org"],
        why="no signature by an allowed signer with that identity",
    )
    c.add(
        "signature/key-not-allowed",
        "signature",
        "11.3",
        s,
        failed((2, None)),
        args=["--allowed-signers", other_allowed],
        why="the signing key is not in allowed_signers",
    )
    c.add(
        "signature/namespace-restricted",
        "signature",
        "11.3",
        s,
        failed((2, None)),
        args=["--allowed-signers", ns_allowed],
        why="namespaces= excludes evalbook-bundle-head-v1",
    )
    c.add(
        "signature/unsigned-with-allowed-signers",
        "signature",
        "11.3",
        unsigned.name,
        failed((2, None)),
        args=["--allowed-signers", allowed],
        why="no signature verifies by an allowed signer",
    )

    def corrupt(eb: repack.EditableBag) -> None:
        text = eb.files["bundle-head.json.sig"].decode()
        lines = text.split("\n")
        body = lines[2]
        lines[2] = body[:20] + ("A" if body[20] != "A" else "B") + body[21:]
        eb.files["bundle-head.json.sig"] = "\n".join(lines).encode()

    eb = repack.open_bundle(signed)
    corrupt(eb)
    bad = "signed-bad-embedded.tar.zst"
    repack.write_bundle(eb, c.out / bad)
    c.add(
        "signature/embedded-corrupt-no-anchor",
        "signature",
        "11.3",
        bad,
        failed((2, "bundle-head.json.sig")),
        why="an embedded signature that does not verify fails, with or without --allowed-signers",
    )
    c.add(
        "signature/embedded-corrupt-allowed",
        "signature",
        "11.3",
        bad,
        failed((2, "bundle-head.json.sig")),
        args=["--allowed-signers", allowed],
    )

    # Sidecars (given with --signature).
    sidecar_target = c.tmp / "unsigned.tar.zst"
    shutil.copyfile(unsigned, sidecar_target)
    cli("sign", str(sidecar_target), "--key", str(key))
    sidecar = c.write("sidecar-conformance.sig", (c.tmp / "unsigned.tar.zst.sig").read_bytes())
    other_target = c.tmp / "unsigned2.tar.zst"
    shutil.copyfile(unsigned, other_target)
    cli("sign", str(other_target), "--key", str(other))
    other_sidecar = c.write("sidecar-other.sig", (c.tmp / "unsigned2.tar.zst.sig").read_bytes())
    c.add(
        "signature/sidecar-allowed",
        "signature",
        "11.3",
        unsigned.name,
        verified([]),
        args=["--allowed-signers", allowed, "--signature", sidecar],
        why="a sidecar by an allowed signer anchors",
    )
    c.add(
        "signature/sidecar-not-allowed",
        "signature",
        "11.3",
        unsigned.name,
        failed((2, other_sidecar)),
        args=["--allowed-signers", allowed, "--signature", other_sidecar],
        why="a valid sidecar by a signer not in the file fails nothing by itself, but nothing "
        "anchors; the signature claim names that sidecar, not bundle-head.json.sig",
    )
    garbage = c.text(
        "sidecar-garbage.sig", "-----BEGIN SSH SIGNATURE-----\nAAAA\n-----END SSH SIGNATURE-----\n"
    )
    c.add(
        "signature/sidecar-garbage-beside-valid-embedded",
        "signature",
        "11.3",
        s,
        verified([]),
        args=["--allowed-signers", allowed, "--signature", garbage],
        why="a sidecar that does not verify fails nothing by itself; the embedded one anchors",
    )
    return signed, key


# ------------------------------------------------------------------------------ proofs


def proof_cases(c: Corpus, signed: Path, unsigned: Path) -> None:
    """SPEC 11.4: check-proof without the bundle."""
    allowed = "allowed_signers"
    eb = repack.open_bundle(signed)
    case_path = _first(eb, "data/cases/", ".jsonl")
    case_id = json.loads(eb.lines(case_path)[1])["case_id"]
    good = c.tmp / "proof.json"
    cli("prove", str(signed), "--case", case_id, "--out", str(good))
    proof = json.loads(good.read_bytes())
    head_digest = proof["head"]["bundle_digest"]
    unsigned_proof = c.tmp / "proof-unsigned.json"
    eb_u = repack.open_bundle(unsigned)
    case_id_u = json.loads(eb_u.lines(_first(eb_u, "data/cases/", ".jsonl"))[0])["case_id"]
    cli("prove", str(unsigned), "--case", case_id_u, "--out", str(unsigned_proof))

    def add(
        name: str,
        value: Any,
        code: int,
        args: list[str] | None = None,
        why: str = "",
        raw: bytes | None = None,
    ) -> None:
        file = c.write(
            f"proof-{name}.json",
            raw if raw is not None else json.dumps(value, sort_keys=True).encode(),
        )
        c.add(
            f"proof/{name}",
            "proof",
            "11.4",
            file,
            {"exit_code": code},
            command="check-proof",
            args=args,
            why=why,
        )

    def changed(change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        value = json.loads(json.dumps(proof))
        change(value)
        return value

    add("good-unanchored", proof, 0, why="proven, unanchored")
    add(
        "good-allowed",
        proof,
        0,
        ["--allowed-signers", allowed, "--identity", "auditor@example.org"],
        "anchored by an allowed signer",
    )
    add(
        "good-allowed-expect",
        proof,
        0,
        ["--allowed-signers", allowed, "--expect-bundle-digest", head_digest],
    )
    add(
        "expect-alone",
        proof,
        1,
        ["--expect-bundle-digest", head_digest],
        "a digest alone cannot anchor a proof",
    )
    add(
        "allowed-expect-other",
        proof,
        1,
        ["--allowed-signers", allowed, "--expect-bundle-digest", ZERO],
    )
    add(
        "wrong-identity",
        proof,
        1,
        ["--allowed-signers", allowed, "--identity", "mallory@example.org"],
    )
    add("key-not-allowed", proof, 1, ["--allowed-signers", "allowed_signers_other"])
    add(
        "pretty-crlf",
        None,
        0,
        raw=json.dumps(proof, indent=3).replace("\n", "\r\n").encode() + b"\r\n",
        why="any layout of the same JSON is the same proof",
    )
    add(
        "case-changed",
        changed(lambda v: v["case"].update(repeat=v["case"]["repeat"] + 1)),
        1,
        why="the leaf is the case shown",
    )
    add("path-hash-changed", changed(lambda v: v["audit_path"].__setitem__(0, "0" * 64)), 1)
    add("path-dropped", changed(lambda v: v["audit_path"].pop()), 1)
    add("leaf-index-moved", changed(lambda v: v.update(leaf_index=v["leaf_index"] + 1)), 1)
    add(
        "leaf-index-past-size",
        changed(lambda v: v.update(leaf_index=v["head"]["cases_tree"]["tree_size"])),
        1,
    )
    add(
        "head-root-changed-signed",
        changed(lambda v: v["head"]["cases_tree"].update(root="0" * 64)),
        1,
        ["--allowed-signers", allowed],
        "the signature covers the head",
    )
    add(
        "head-signature-corrupt",
        changed(lambda v: v.update(head_signature=v["head_signature"].replace("A", "B", 1))),
        1,
        ["--allowed-signers", allowed],
    )
    add(
        "head-signature-corrupt-unanchored",
        changed(lambda v: v.update(head_signature=v["head_signature"].replace("A", "B", 1))),
        1,
        why="check-proof checks the head against the signature it carries (SPEC 11.4, 11.3)",
    )
    add(
        "unsigned-with-allowed",
        json.loads(unsigned_proof.read_bytes()),
        1,
        ["--allowed-signers", allowed],
        "an unsigned head binds to no signer",
    )
    add("unsigned-unanchored", json.loads(unsigned_proof.read_bytes()), 0)
    jcs = canonical.dumps(proof["case"])
    confused = jcs.replace(b'"repeat":1', b'"repeat":1.0').replace(b"null", b"null")
    add(
        "case-bytes-same-value",
        changed(lambda v: v.update(case_bytes=base64.b64encode(confused).decode())),
        1,
        why="case_bytes are the leaf: other bytes for the same value are another leaf, not in the tree",
    )
    truthy = jcs.replace(b'"repeat":1', b'"repeat":true')
    add(
        "case-bytes-type-confusion",
        changed(lambda v: v.update(case_bytes=base64.b64encode(truthy).decode())),
        1,
        why="true is not 1: case_bytes must hold the case shown",
    )
    add(
        "duplicate-key",
        None,
        3,
        raw=b'{"schema":"evalbook.case_proof.v1",'
        + json.dumps(proof)[1:]
        .encode()
        .replace(b'"schema"', b'"schema2"', 0)
        .replace(b'{"schema":', b'{"schema":', 1)[:0]
        + json.dumps(proof).encode()[1:],
    )
    add(
        "nan",
        None,
        3,
        raw=json.dumps(proof).encode().replace(b'"leaf_index": ', b'"leaf_index": NaN, "x": ', 1),
    )
    add("not-json", None, 3, raw=b"not a proof\n")
    add(
        "uppercase-hash",
        changed(lambda v: v["audit_path"].__setitem__(0, v["audit_path"][0].upper())),
        3,
    )
    add("schema-other", changed(lambda v: v.update(schema="evalbook.case_proof.v2")), 3)


# ------------------------------------------------------------------------ eval-banana


def _reseal_eb(eb: repack.EditableBag) -> None:
    """What an attacker who edits an eval-banana bundle's files does: bundle.json's file
    list, sizes and report digest follow the files (the check map is left alone)."""
    import hashlib

    b = eb.bundle
    b["files"] = sorted(
        (
            {
                "path": p,
                "digest": "sha256:" + hashlib.sha256(eb.files[p]).hexdigest(),
                "size": len(eb.files[p]),
            }
            for p in eb.files
            if p.startswith("data/") and p != "data/bundle.json"
        ),
        key=lambda f: f["path"].encode(),
    )
    b["run"]["digest"] = "sha256:" + hashlib.sha256(eb.files["data/run/report.json"]).hexdigest()
    eb.set_bundle(b)


def eb_cases(c: Corpus) -> None:
    """SPEC 10.2 on a real eval-banana bundle, each edit resealed."""
    source = c.out / "fixture-eb-default.tar.zst"

    def build(name: str, edit: Edit, expect: dict[str, Any], why: str) -> None:
        eb = repack.open_bundle(source)
        edit(eb)
        _reseal_eb(eb)
        file = f"eb-{name}.tar.zst"
        repack.write_bundle(eb, c.out / file, bundle_json=False)
        c.add(f"eval-banana/{name}", "eval-banana", "10.2", file, expect, why=why)

    def report(change: Callable[[dict[str, Any]], None]) -> Edit:
        def run(eb: repack.EditableBag) -> None:
            value = json.loads(eb.files["data/run/report.json"])
            change(value)
            eb.files["data/run/report.json"] = json.dumps(value, indent=2).encode() + b"\n"

        return run

    def flip_status(v: dict[str, Any]) -> None:
        check = next(ch for ch in v["checks"] if ch["status"] == "failed")
        check["status"], check["score"] = "passed", 1

    build(
        "status-flipped",
        report(flip_status),
        failed((3, "data/run/report.json")),
        "the counts and run_passed follow from the statuses; the check file no longer equals its entry",
    )
    build(
        "percentage",
        report(lambda v: v.update(percentage=99.9)),
        failed((3, "data/run/report.json")),
        "percentage follows from the statuses",
    )
    build(
        "run-passed",
        report(lambda v: v.update(run_passed=not v["run_passed"])),
        failed((3, None)),
        "run_passed follows from the statuses and pass_threshold",
    )

    def stdout(eb: repack.EditableBag) -> None:
        path = next(p for p in eb.files if p.endswith(".stdout.txt"))
        eb.files[path] = eb.files[path] + b"appended\n"

    build(
        "stdout-file",
        stdout,
        failed((8, None)),
        "each bounded tail equals what the rule makes of the full stdout file",
    )

    def definition(eb: repack.EditableBag) -> None:
        path = next(
            p
            for p in eb.files
            if p.startswith("data/definitions/") and p.endswith((".yaml", ".yml"))
        )
        eb.files[path] = eb.files[path] + b"# changed after the run\n"

    build(
        "definition-changed",
        definition,
        failed((7, None)),
        "each check_definition_sha256 recomputes from the bundled definition",
    )

    def script(eb: repack.EditableBag) -> None:
        b = eb.bundle
        path = next(
            p
            for p in eb.files
            if p.startswith("data/definitions/") and not p.endswith((".yaml", ".yml"))
        )
        eb.files[path] = eb.files[path] + b"\n# changed\n"
        eb.set_bundle(b)

    build(
        "script-changed",
        script,
        failed((7, None)),
        "the script at the path its own YAML names is hashed",
    )

    def unnamed(eb: repack.EditableBag) -> None:
        eb.files["data/run/extra.txt"] = b"extra\n"

    def unnamed_only(eb: repack.EditableBag) -> None:
        unnamed(eb)

    eb0 = repack.open_bundle(source)
    unnamed_only(eb0)
    file = "eb-unnamed-file.tar.zst"
    repack.write_bundle(eb0, c.out / file, bundle_json=False)
    c.add(
        "eval-banana/unnamed-file",
        "eval-banana",
        "10.2",
        file,
        failed((10, "data/run/extra.txt")),
        why="every file under data/ is named by bundle.json",
    )

    def listed_present(eb: repack.EditableBag) -> None:
        b = eb.bundle
        check = b["checks"][0]
        b["unavailable"].append(
            {
                "kind": "definition",
                "ref": check["check_id"],
                "digest": check["check_definition_sha256"],
                "reason": "definition_missing",
                "detail": None,
            }
        )
        eb.set_bundle(b)

    build(
        "listed-yet-present",
        listed_present,
        failed((10, None)),
        "a listed definition is never also present",
    )


def imported_cases(c: Corpus) -> None:
    """Imported Inspect AI and lm-eval runs (SPEC 16), from scripts/runner_bundles.py:
    legitimate (alice; bob without dataset.read_body) and run-file listings against
    the rule, every digest re-sealed."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "runner_bundles", ROOT / "scripts" / "runner_bundles.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    built = c.tmp / "imported"
    expected = module.build(built)
    for name, e in sorted(expected.items()):
        shutil.copyfile(built / name, c.out / name)
        case_id = "imported/" + name.removesuffix(".tar.zst").removeprefix("imported-")
        if e["verdict"] == "verified":
            reasons = ["no_dataset_read_body"] if name.endswith("-bob.tar.zst") else []
            c.add(case_id, "fixture", "16", name, verified(reasons), why=e["why"])
        else:
            c.add(
                case_id,
                "listing",
                "16, 5 claim 10",
                name,
                failed((10, None), exact=True),
                why=e["why"],
            )


def main() -> int:
    out = Path(sys.argv[1]).resolve()
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    c = Corpus(out)
    try:
        bundles = fixture_cases(c)
        clean = bundles["rpt-clean/alice"]
        archive_cases(c, clean)
        edit_cases(c, bundles)
        text_cases(c, clean)
        signed, _ = signature_cases(c)
        option_cases(c, signed, bundles["rpt-clean/alice"])
        proof_cases(c, signed, clean)
        eb_cases(c)
        imported_cases(c)
    finally:
        shutil.rmtree(c.tmp, ignore_errors=True)
    manifest = {"schema": "evalbook.conformance.v1", "cases": c.cases}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    print(f"{len(c.cases)} cases in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
