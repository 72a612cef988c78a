"""``oanp verify --jobs N`` prints what ``--jobs 1`` prints, byte for byte, and exits the same.

Bundles good and bad, as the writer lays them out and otherwise, are verified in this process
(``--jobs 1``) and by three worker processes: the lines on stdout and stderr, their order and
the exit code are the same. :class:`oanp.net.workers.Workers` gives results in the items'
order, reading the items only as workers may soon take them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from oanp.net import cli
from oanp.net.workers import Workers, usable_cores
from tests.oanp.audit.test_audit_stream import _write, earlier, moved
from tests.oanp.audit.test_bundled_logs import one_log_a_line
from tests.oanp.net.test_cli import run
from tests.support.factories.logs import THREE_SESSIONS, bundle_of

#: Twenty-four logs: more than one read of the file, more than one chunk of lines.
WRITTEN = _write(THREE_SESSIONS * 8)


def _in_a_log(old: bytes, new: bytes, log: int = 20) -> Callable[[bytes], bytes]:
    """The first ``old`` of the ``log``-th log (a late one by default) made ``new``."""

    def edit(data: bytes) -> bytes:
        lines = data.split(b"\n")
        assert old in lines[log]
        lines[log] = lines[log].replace(old, new, 1)
        return b"\n".join(lines)

    return edit


def _flip_checkpoint_signature(data: bytes) -> bytes:
    head, signature = data.rsplit(b'"signature":"', 1)
    return head + b'"signature":"' + (b"A" if signature[:1] != b"A" else b"B") + signature[1:]


def _manifest_edited(old: bytes, new: bytes) -> Callable[[bytes], bytes]:
    def edit(data: bytes) -> bytes:
        head, manifest = data.split(b'"manifest":', 1)
        assert old in manifest
        return head + b'"manifest":' + manifest.replace(old, new, 1)

    return edit


def _written(bundle: Any) -> Callable[[bytes], bytes]:
    return lambda _: one_log_a_line(bundle).encode()


BUNDLES = [
    pytest.param(lambda data: data, id="good"),
    pytest.param(_in_a_log(b'"price":', b'"price":1'), id="tampered-entry"),
    pytest.param(_in_a_log(b'"prev_hash":"sha256:', b'"prev_hash":"sha256:0'), id="broken-link"),
    pytest.param(_flip_checkpoint_signature, id="bad-checkpoint-signature"),
    pytest.param(
        _in_a_log(b'"signature":"', b'"signature":"A', log=19), id="bad-agreement-signature"
    ),
    pytest.param(_manifest_edited(b'"entries":9', b'"entries":8'), id="bad-manifest"),
    pytest.param(lambda data: data[: len(data) // 2], id="truncated-in-a-log"),
    pytest.param(lambda data: data[: data.index(b'"manifest":') + 40], id="truncated-after"),
    pytest.param(_in_a_log(b'"seq":1}', b'"seq":1,}'), id="malformed-json"),
    pytest.param(_in_a_log(b'"seq":1}', b'"seq":1e400}'), id="unhashable-number"),
    pytest.param(_in_a_log(b'"seq":1}', b'"seq":1}}'), id="a-bracket-too-many"),
    pytest.param(_in_a_log(b'"sess', b'"\xff'), id="not-utf-8"),
    pytest.param(_in_a_log(b'"session_id":', b'"session":'), id="a-log-without-its-id"),
    pytest.param(
        _manifest_edited(b'"scope":{', b'"scope":{"a":"' + b"a" * 300_000 + b'\xff",'),
        id="not-utf-8-far-after",
    ),
    pytest.param(lambda data: json.dumps(json.loads(data)).encode(), id="on-one-line"),
    pytest.param(lambda data: json.dumps(json.loads(data), indent=1).encode(), id="indented"),
    pytest.param(_written(moved("jwks", after="sessions")(bundle_of())), id="keys-after-logs"),
    pytest.param(_written(moved("manifest", after="proofs")(bundle_of())), id="manifest-first"),
    pytest.param(_written(earlier()), id="another-writer"),
]


@pytest.mark.parametrize("edit", BUNDLES)
def test_verify_prints_the_same_with_workers(capsys, tmp_path, edit):
    path = tmp_path / "bundle.json"
    path.write_bytes(edit(WRITTEN))
    alone = run(capsys, "verify", str(path), "--jobs", "1")
    assert run(capsys, "verify", str(path), "--jobs", "3") == alone
    assert alone[0] in (0, 1, 2)
    assert alone[1] or alone[2]


def test_a_verdict_with_workers_is_that_of_the_bundle(capsys, tmp_path):
    path = tmp_path / "bundle.json"
    path.write_bytes(WRITTEN)
    code, out, err = run(capsys, "verify", str(path), "--jobs", "3")
    assert (code, err) == (0, "")
    assert out.splitlines()[-1] == (
        "VERIFIED: 240/240 entries valid, 16/16 agreements valid, 24/24 sessions pass I1-I7"
    )
    path.write_bytes(_in_a_log(b'"price":', b'"price":1')(WRITTEN))
    code, out, _ = run(capsys, "verify", str(path), "--jobs", "3")
    assert code == 1
    assert "FAIL merkle root: 240 leaves against the signed root" in out.splitlines()


class Recorded:
    """Stands in for :class:`Workers`, checking in this process, noting how many it was given."""

    jobs: ClassVar[list[int]] = []

    def __init__(self, jobs: int) -> None:
        self.jobs.append(jobs)

    def __enter__(self) -> Recorded:
        return self

    def __exit__(self, *exc_info: object) -> None:
        pass

    def map(self, task: Callable[[Any], Any], items: Iterable[Any]) -> Iterator[Any]:
        return map(task, items)


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    monkeypatch.setattr(cli, "Workers", Recorded)
    Recorded.jobs = []
    return Recorded.jobs


def test_verify_defaults_to_a_worker_per_usable_core(capsys, tmp_path, monkeypatch, recorded):
    monkeypatch.setattr(cli, "usable_cores", lambda: 5)
    path = tmp_path / "bundle.json"
    path.write_bytes(WRITTEN)
    assert run(capsys, "verify", str(path))[0] == 0
    assert recorded == [5]


def test_verify_with_one_job_starts_no_worker(capsys, tmp_path, recorded):
    path = tmp_path / "bundle.json"
    path.write_bytes(WRITTEN)
    assert run(capsys, "verify", str(path), "--jobs", "1")[0] == 0
    assert recorded == []


@pytest.mark.parametrize("jobs", ["0", "-2", "two"])
def test_verify_refuses_a_number_of_jobs_that_is_none(capsys, tmp_path, jobs):
    with pytest.raises(SystemExit) as exited:
        cli.main(["verify", str(tmp_path / "bundle.json"), "--jobs", jobs])
    assert exited.value.code == 2
    assert "--jobs: not a number of processes, 1 or more" in capsys.readouterr().err


def test_usable_cores_are_those_this_process_may_run_on():
    assert usable_cores() == len(os.sched_getaffinity(0))


# Workers ------------------------------------------------------------------------------------


def test_workers_give_each_result_in_the_items_order():
    with Workers(3) as workers:
        assert list(workers.map(abs, range(-50, 50))) == [abs(n) for n in range(-50, 50)]


def test_workers_read_items_only_as_they_may_soon_take_them():
    taken: list[int] = []

    def items() -> Iterator[int]:
        for n in range(100):
            taken.append(n)
            yield n

    with Workers(2) as workers:
        results = workers.map(abs, items())
        assert next(results) == 0
        assert len(taken) == 4  # two for each worker: the one it works on and the next
        assert next(results) == 1
        assert len(taken) == 5
        assert list(results) == list(range(2, 100))


def test_a_task_s_exception_is_raised_where_its_result_comes():
    with Workers(2) as workers:
        results = workers.map(bytes.fromhex, ["00", "zz", "01"])
        assert next(results) == b"\x00"
        with pytest.raises(ValueError, match="non-hexadecimal"):
            next(results)


def test_verify_writes_nothing_of_its_own_with_workers(capsys, tmp_path: Path):
    path = tmp_path / "bundle.json"
    path.write_bytes(WRITTEN)
    run(capsys, "verify", str(path), "--jobs", "2")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bundle.json"]
