"""safepath, and every state-changing command against planted paths: a state directory, work
directory or journal that another user could have created or can change is refused (78)
before anything is done as root; a --device directory is used only through a private
directory made inside it."""

from __future__ import annotations

import os
import pwd
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import bb, one_line_error

from backburner import system
from backburner.base.errors import UnsafePathError
from backburner.files import safepath

NOBODY = pwd.getpwnam("nobody").pw_uid


@pytest.fixture
def base(tmp_path: Path) -> Path:
    """A private (0700, root-owned) place to plant things in."""
    tmp_path.chmod(0o700)
    return tmp_path


def test_a_private_chain_is_accepted_and_created_0700(base: Path) -> None:
    made = safepath.private_dir(base / "a" / "b")
    assert made == base / "a" / "b"
    for d in (base / "a", base / "a" / "b"):
        st = os.lstat(d)
        assert stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == os.geteuid()


@pytest.mark.parametrize("plant", ["symlink", "other-owner", "world-writable",
                                   "group-writable", "file"])
def test_planted_components_are_refused(base: Path, plant: str) -> None:
    target = base / "state"
    if plant == "symlink":
        (base / "elsewhere").mkdir()
        target.symlink_to(base / "elsewhere")
        os.lchown(target, NOBODY, -1)  # planted by another user
    elif plant == "file":
        target.write_text("")
    else:
        target.mkdir(mode=0o755)
        if plant == "other-owner":
            os.chown(target, NOBODY, -1)
        else:
            target.chmod(0o777 if plant == "world-writable" else 0o775)
    with pytest.raises(UnsafePathError) as err:
        safepath.private_dir(target / "journal")
    assert err.value.exit_status == 78 and str(target) in str(err.value)


def test_a_symlink_only_root_could_have_made_is_followed(base: Path) -> None:
    """Merged /usr (/lib -> usr/lib) and /var/run -> /run are root's own links in root's own
    directories: nobody else could have planted them."""
    (base / "real").mkdir()
    (base / "link").symlink_to(base / "real")
    safepath.check_chain(base / "link" / "journal")
    with pytest.raises(UnsafePathError, match="symbolic link"):
        safepath.check_chain(base / "link")  # the directory itself must be real


def test_a_sticky_world_writable_ancestor_is_fine_but_not_as_the_directory_itself(
        base: Path) -> None:
    sticky = base / "tmp"
    sticky.mkdir()
    sticky.chmod(0o1777)
    safepath.check_chain(sticky / "ours")  # like /tmp/pytest-of-root/...
    with pytest.raises(UnsafePathError):
        safepath.check_chain(sticky)
    safepath.check_chain(sticky, sticky_ok=True)  # only to mkdtemp a private dir in it
    loose = base / "loose"
    loose.mkdir()
    loose.chmod(0o777)  # writable by all and not sticky: a child can be replaced
    with pytest.raises(UnsafePathError):
        safepath.check_chain(loose, sticky_ok=True)
    with pytest.raises(UnsafePathError):
        safepath.check_chain(loose / "x")


def test_check_file(base: Path) -> None:
    f = base / "rules.toml"
    f.write_text("")
    f.chmod(0o644)
    safepath.check_file(f)
    f.chmod(0o666)
    with pytest.raises(UnsafePathError, match="writable by other users"):
        safepath.check_file(f)
    f.chmod(0o644)
    os.chown(f, NOBODY, -1)
    with pytest.raises(UnsafePathError, match="owned by uid"):
        safepath.check_file(f)
    link = base / "link.toml"
    link.symlink_to(f)
    with pytest.raises(UnsafePathError, match="not a regular file"):
        safepath.check_file(link)


def test_create_new_never_follows_or_reuses(base: Path) -> None:
    victim = base / "victim"
    victim.write_text("precious")
    link = base / "out"
    link.symlink_to(victim)
    with pytest.raises(FileExistsError):
        safepath.create_new(link)
    assert victim.read_text() == "precious"
    os.close(safepath.create_new(base / "new"))
    with pytest.raises(FileExistsError):
        safepath.create_new(base / "new")


# --- the commands, against a planted state directory ---------------------------------------


@pytest.fixture
def planted(base: Path, request: pytest.FixtureRequest) -> Iterator[Path]:
    """BACKBURNER_STATE_DIR pointing at a directory another user controls."""
    kind = request.param
    state = base / "state"
    if kind == "symlink":
        (base / "real").mkdir()
        state.symlink_to(base / "real")
        os.lchown(state, NOBODY, -1)  # planted by another user
    else:
        state.mkdir(mode=0o755)
        if kind == "nobody":
            os.chown(state, NOBODY, -1)
        else:
            state.chmod(0o777)
    old = os.environ.get("BACKBURNER_STATE_DIR")
    os.environ["BACKBURNER_STATE_DIR"] = str(state)
    try:
        yield state
    finally:
        if old is None:
            del os.environ["BACKBURNER_STATE_DIR"]
        else:
            os.environ["BACKBURNER_STATE_DIR"] = old


COMMANDS = [
    ["run", "--policy", "background", "--", "true"],
    ["bench", "--probe", "/bin/true", "--device", "testbed:64M", "--trials", "1",
     "--scheduler", "bfq"],
    ["slowdisk", "create", "IMAGE", "--profile", "flat:1", "--size", "8M"],
    ["restore"],
]


@pytest.mark.root
@pytest.mark.parametrize("planted", ["symlink", "nobody", "world-writable"], indirect=True)
@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: a[0])
def test_commands_refuse_a_planted_state_directory(planted: Path, base: Path,
                                                   args: list[str]) -> None:
    (planted / "journal").mkdir(exist_ok=True) if not planted.is_symlink() else None
    args = [a.replace("IMAGE", str(base / "img")) for a in args]
    r = bb(*args, "-o", str(base / "r.db")) if args[0] == "bench" else bb(*args)
    assert r.returncode == (125 if args[0] == "run" else 78), r.err  # run's own: 125
    line = one_line_error(r)
    assert "state directory" in line or "work directory" in line, line
    assert not (base / "r.db").exists() and not (base / "img").exists()
    assert system.loops_backed_by(str(base / "img")) == []


@pytest.mark.root
def test_restore_refuses_a_journal_others_can_write(base: Path, state_dir: Path) -> None:
    """A journal entry can name any path to write as root: one that is not ours is refused
    (and left alone), never replayed."""
    jdir = state_dir / "journal"
    jdir.mkdir(mode=0o700)
    target = base / "victim"
    target.write_text("0")
    evil = jdir / "run-1-1.jsonl"
    evil.write_text('{"event": "begin", "label": "run", "pid": 999999999, "start": 1}\n'
                    '{"event": "intent", "seq": 1, "kind": "sysfs", '
                    f'"spec": {{"path": "{target}", "value": "1"}}, "old": "pwned"}}\n')
    evil.chmod(0o666)
    r = bb("restore")
    assert r.returncode == 78, r.err
    assert "journal" in one_line_error(r) and "writable by other users" in r.err
    assert target.read_text() == "0" and evil.exists()


@pytest.mark.root
def test_a_device_path_is_used_through_a_private_directory_only(
        base: Path, state_dir: Path) -> None:
    """In a world-writable (non-sticky) directory the load's files could be swapped: refused.
    In a sticky one (like /tmp) a random private directory is made and removed."""
    loose = base / "loose"
    loose.mkdir()
    loose.chmod(0o777)
    r = bb("bench", "--probe", "/bin/true", "--device", str(loose), "--trials", "1",
           "--scheduler", "bfq", "-o", str(base / "r.db"))
    assert r.returncode == 78, r.err
    assert "writable by other users" in one_line_error(r)
    assert list(loose.iterdir()) == []


def test_no_fixed_names_in_shared_temporary_directories() -> None:
    """No source file names a path in /tmp or /var/tmp: work directories live under the
    root-owned state directory or are made with mkdtemp."""
    import backburner

    src = Path(backburner.__file__).parent
    hits = [f"{p.relative_to(src)}:{n}" for p in src.rglob("*.py")
            for n, line in enumerate(p.read_text().splitlines(), 1)
            if any(q + d in line for q in "\"'" for d in ("/tmp/", "/var/tmp"))]
    assert hits == []
