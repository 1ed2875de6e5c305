"""SPEC 16 and 5: an import refuses up front what the export of its report would refuse.

The export refuses a member name the bundle's reader refuses (a collision after NFC and
case folding, more members than a bundle holds) and a document over the reader's caps
(one document, the bag's kept bytes, its JSON values); all depend only on the report's
documents. The import asks the exporter's own ledger (``bagwriter.BagAdmission``,
through ``importers.exportable.check_exportable``) before it moves anything, so such a
run is refused at import: one line naming the run file and the rule, exit 3, no store.
Each limit just under (imports, and the CLI case also exports) and just over (refused).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_cli
from test_import_groups import RESULTS, SAMPLES

from bundler.archive.bag_reader import MAX_DOCUMENT_BYTES, MAX_JSON_VALUES, MAX_KEPT_BYTES
from bundler.archive.names import MAX_MEMBERS
from bundler.core.errors import InputError
from bundler.importers.exportable import check_exportable
from bundler.importers.storewriter import Staged

TASK = RESULTS.parent.parent / "tasks" / "fixture_mc.yaml"


def _import(tmp: Path, names: tuple[str, str]) -> tuple[int, bytes, Path]:
    tasks = []
    for name in names:
        d = tmp / f"t{len(tasks)}"
        d.mkdir()
        (d / name).write_bytes(TASK.read_bytes() + name.encode())
        tasks += ["--task", str(d / name)]
    store = tmp / "store"
    args = [str(RESULTS)]
    for s in SAMPLES:
        args += ["--samples", str(s)]
    done = run_cli(
        "import-lm-eval", *args, *tasks, "--store", str(store), "--principal", "a", "--json"
    )
    return done.returncode, done.stderr if done.returncode else done.stdout, store


@pytest.mark.parametrize(
    "names",
    [
        ("fixture_mc.yaml", "Fixture_MC.yaml"),  # case
        ("task.yaml", "TASK.YAML"),
    ],
    ids=["case", "upper"],
)
def test_task_files_the_bundle_cannot_hold_are_refused_at_import(
    names: tuple[str, str], tmp_path: Path
) -> None:
    code, out, store = _import(tmp_path, names)
    assert code == 3, out
    lines = out.decode().strip().splitlines()
    assert len(lines) == 1, lines
    assert RESULTS.name in lines[0] and "could never be exported" in lines[0]
    assert "collides with an earlier member after NFC and case folding" in lines[0]
    assert not store.exists()  # nothing written


# Names a scorer's file path cannot carry (each segment an identifier, SPEC 3): the
# export refuses them, so the import does, before anything is read or written. Names
# that would collide only after folding (straße/strasse, the ligature fi) are not
# identifiers either, so this rule refuses them first.
BAD_TASK_NAMES = {
    "non-ascii": "é.yaml",
    "space": "a b.yaml",
    "plus": "x+y.yaml",
    "underscore first": "_x.yaml",
    "dash first": "-x.yaml",
    "dot first": ".hidden.yaml",
    "tilde": "x~.yaml",
    "at": "x@y.yaml",
    "dotless i": "\u0131.yaml",
    "fullwidth": "\uff41.yaml",
    "sharp s": "straße.yaml",
    "ligature": "\ufb01x.yaml",
    "129 characters": "a" * 124 + ".yaml",
}


@pytest.mark.parametrize("runner", ["lm-eval", "inspect"])
@pytest.mark.parametrize("name", sorted(BAD_TASK_NAMES))
def test_a_task_file_name_export_refuses_is_refused_at_import(
    name: str, runner: str, tmp_path: Path
) -> None:
    from test_importers import inspect_args, lm_args, snapshot

    bad = BAD_TASK_NAMES[name]
    task = tmp_path / "t" / bad
    task.parent.mkdir()
    task.write_bytes(TASK.read_bytes())
    store = tmp_path / "store"
    args = inspect_args if runner == "inspect" else lm_args
    for existing in (False, True):
        if existing:  # an existing store is left as it was
            done = run_cli(*args(store), "--principal", "a")
            assert done.returncode == 0, done.stderr
        before = snapshot(store) if existing else None
        done = run_cli(*args(store), "--task", str(task), "--principal", "a")
        assert done.returncode == 3, done.stderr
        lines = done.stderr.decode().strip().splitlines()
        assert len(lines) == 1, lines
        assert f"--task {task}" in lines[0] and "invalid file path" in lines[0]
        assert "each segment must be an identifier" in lines[0]
        if existing:
            assert snapshot(store) == before
        else:
            assert not store.exists()


def test_distinct_task_files_import_and_export(tmp_path: Path) -> None:
    """Just under: two names that differ after folding import, and the report exports."""
    code, out, store = _import(tmp_path, ("fixture_mc.yaml", "fixture_mc2.yaml"))
    assert code == 0, out
    report_id = json.loads(out.decode().splitlines()[0])["report_id"]
    done = run_cli(
        "export", "--store", str(store), "--report", report_id, "--principal", "a",
        "--out", str(tmp_path / "b.tar.zst"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


# ---- each limit of the reader, just under and just over, through the import's check


def _file(tmp: Path, name: str, data: bytes) -> str:
    path = tmp / name
    path.write_bytes(data)
    return str(path)


RID = "rpt"


def test_members_just_under_and_just_over(tmp_path: Path) -> None:
    """A bag holds the top directory, data/, data/blobs/, data/blobs/sha256/ and the
    payloads: MAX_MEMBERS - 4 payloads fit, one more does not."""
    blob = _file(tmp_path, "blob", b"x")
    fit = MAX_MEMBERS - 4
    staged = [Staged(f"blobs/sha256/{i:064x}", blob, None, None) for i in range(fit)]
    check_exportable(staged, RID, "results.json")
    staged.append(Staged(f"sso/sha256/{fit:064x}", blob, None, None))
    with pytest.raises(InputError, match=r"^results.json: .*more than max_members=65536"):
        check_exportable(staged, RID, "results.json")


def _case_file(size: int) -> bytes:
    line = b'{"a":"' + b"x" * 100 + b'"}\n'
    body = line * ((size - 1) // len(line))
    return body + b" " * (size - len(body) - 1) + b"\n"


@pytest.mark.parametrize("over", [False, True], ids=["under", "over"])
def test_a_document_at_the_cap(over: bool, tmp_path: Path) -> None:
    data = _case_file(MAX_DOCUMENT_BYTES + over)
    assert len(data) == MAX_DOCUMENT_BYTES + over
    staged = [Staged(f"reports/{RID}/cases/c.jsonl", _file(tmp_path, "c", data), None, None)]
    if not over:
        check_exportable(staged, RID, "results.json")
        return
    with pytest.raises(InputError, match=r"data/cases/c.jsonl: document of .* over the"):
        check_exportable(staged, RID, "results.json")


@pytest.mark.parametrize("over", [False, True], ids=["under", "over"])
def test_kept_bytes_at_the_cap(over: bool, tmp_path: Path) -> None:
    first = _file(tmp_path, "a", _case_file(MAX_DOCUMENT_BYTES))
    second = _file(tmp_path, "b", _case_file(MAX_KEPT_BYTES - MAX_DOCUMENT_BYTES + over))
    staged = [
        Staged(f"reports/{RID}/cases/a.jsonl", first, None, None),
        Staged(f"reports/{RID}/cases/b.jsonl", second, None, None),
    ]
    if not over:
        check_exportable(staged, RID, "results.json")
        return
    with pytest.raises(InputError, match=rf"exceed {MAX_KEPT_BYTES} bytes in total"):
        check_exportable(staged, RID, "results.json")


@pytest.mark.parametrize("over", [False, True], ids=["under", "over"])
def test_json_values_at_the_cap(over: bool, tmp_path: Path) -> None:
    """The reader's bound counts one value per ``[]`` line, and one more."""
    from bundler.archive.bag_reader import json_values

    data = b"[]\n" * (MAX_JSON_VALUES - 1 + over)
    assert json_values(data) == MAX_JSON_VALUES + over
    staged = [Staged(f"reports/{RID}/cases/a.jsonl", _file(tmp_path, "a", data), None, None)]
    if not over:
        check_exportable(staged, RID, "results.json")
        return
    with pytest.raises(InputError, match=rf"more than {MAX_JSON_VALUES} values"):
        check_exportable(staged, RID, "results.json")


@pytest.mark.parametrize("in_memory", [False, True], ids=["on-disk", "in-memory"])
def test_a_document_held_in_memory_is_checked_as_one_on_disk(
    in_memory: bool, tmp_path: Path
) -> None:
    """The writer keeps small documents whole; the check reads those bytes, not the file
    (here the file says otherwise, so the test tells which was read)."""
    bad = b"[]\n" * (MAX_JSON_VALUES + 1)
    good = b"[]\n"
    path = _file(tmp_path, "a", good if in_memory else bad)
    staged = [Staged(f"reports/{RID}/cases/a.jsonl", path, None, bad if in_memory else None)]
    with pytest.raises(InputError, match=rf"more than {MAX_JSON_VALUES} values"):
        check_exportable(staged, RID, "results.json")
