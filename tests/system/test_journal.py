"""The journal: a torn last line is still replayed, and a journal this version cannot read
is kept, warned about, and does not stop the commands that change state.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import TIMEOUT, bb, one_line_error

from backburner import system
from backburner.base.errors import BackburnerError

from .holders import hold, journals_in, stale_journal

pytestmark = pytest.mark.timeout(60)  # a hang fails fast instead of at 300 s


def test_torn_last_line_is_still_replayed(state_dir: Path, tmp_path: Path) -> None:
    made = [tmp_path / "a", tmp_path / "b"]
    with hold(made=made) as proc:
        proc.kill()
        proc.wait(TIMEOUT)
    (journal,) = journals_in(state_dir)
    with open(journal, "a") as f:
        f.write('{"event": "intent", "seq": 3, "kind": "mkd')  # the crash cut this write
    undone = system.restore_stale()
    assert len(undone) == 2
    assert not made[0].exists() and not made[1].exists()
    assert journals_in(state_dir) == []


def _broken_journal(jdir: Path, case: str, victim: Path) -> Path:
    """A stale journal this backburner cannot (or must not) replay."""
    if case == "newer-field":  # a change kind we know, with a field added by a newer version
        return stale_journal(jdir, "bad.jsonl", [
            {"event": "intent", "seq": 1, "kind": "mkdir",
             "spec": {"path": str(victim), "owner_from_the_future": 0}, "old": False}])
    if case == "unknown-kind":
        return stale_journal(jdir, "bad.jsonl", [
            {"event": "intent", "seq": 1, "kind": "from-the-future", "spec": {}, "old": None}])
    if case == "retired-kind":  # an older version's "tree" (its undo removed a whole tree)
        return stale_journal(jdir, "bad.jsonl", [
            {"event": "intent", "seq": 1, "kind": "tree", "spec": {"path": str(victim)},
             "old": None}])
    if case == "not-an-object":
        return stale_journal(jdir, "bad.jsonl", [[1, 2]])  # type: ignore[list-item]
    path = jdir / "bad.jsonl"
    jdir.mkdir(parents=True, exist_ok=True)
    if case == "garbage-text":
        path.write_text("this is not a journal\nat all\n")
    elif case == "garbage-bytes":
        path.write_bytes(bytes(range(256)) * 4)
    elif case == "unsafe":  # writable by anyone: its content cannot be trusted
        stale_journal(jdir, "bad.jsonl", [
            {"event": "intent", "seq": 1, "kind": "mkdir", "spec": {"path": str(victim)},
             "old": False}])
        path.chmod(0o666)
    return path


BROKEN = ["newer-field", "unknown-kind", "retired-kind", "not-an-object", "garbage-text",
          "garbage-bytes", "unsafe"]


@pytest.mark.parametrize("case", BROKEN)
def test_a_journal_this_version_cannot_read_is_kept_and_warned_about(
        state_dir: Path, tmp_path: Path, case: str) -> None:
    """Recovery (what every state-changing command does first) restores the journals it can
    and warns once, in one line naming the journal it keeps and saying what to do."""
    jdir = state_dir / "journal"
    made = tmp_path / "made-by-a-crashed-run"
    made.mkdir()
    victim = tmp_path / "not-to-be-touched"
    (victim / "data").mkdir(parents=True)
    good = stale_journal(jdir, "good.jsonl", [
        {"event": "intent", "seq": 1, "kind": "mkdir", "spec": {"path": str(made)},
         "old": False}])
    bad = _broken_journal(jdir, case, victim)
    content = bad.read_bytes()
    said: list[str] = []
    system.recover(said.append)
    assert not made.exists() and not good.exists()  # the good one is restored
    assert bad.read_bytes() == content and (victim / "data").is_dir()  # the bad one is kept
    warnings = [m for m in said if "could not recover" in m]
    assert len(warnings) == 1 and "\n" not in warnings[0], said
    assert str(bad) in warnings[0] and "delete it" in warnings[0]
    assert list(system.journals()) == []  # `slowdisk remove` and cgroup pruning skip it
    with pytest.raises(BackburnerError):  # `backburner restore` says it failed
        system.restore_stale()


@pytest.mark.root
@pytest.mark.parametrize("case", ["newer-field", "garbage-bytes", "unsafe"])
def test_state_changing_commands_still_work_with_a_broken_journal(
        state_dir: Path, tmp_path: Path, case: str) -> None:
    bad = _broken_journal(state_dir / "journal", case, tmp_path / "victim")
    root = tmp_path / "image"
    root.mkdir()
    r = bb("apply", "--remove", "--root", str(root))
    assert r.returncode == 0, r.err
    assert "nothing to remove" in r.out
    (line,) = r.err.splitlines()
    assert line.startswith("backburner: could not recover") and str(bad) in line
    assert "Traceback" not in r.err and bad.exists()
    r = bb("restore")
    assert r.returncode == (78 if case == "unsafe" else 71), r.err
    assert str(bad) in one_line_error(r)
