"""Fixtures of the guest checks: the image (built once, then cached), this commit's wheel,
one guest shared by the session's checks, and fresh guests for checks that need their own.

A check that fails gets the guest's failed units, their journals and the journal's tail
attached to its report ("guest" section); a guest that hung is reported with its console.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from helpers import build_wheel

from .image import Image, ensure_image
from .rig import BootSpec, Guest, SharedGuest, remove_stale_runs

ROOT = Path(__file__).parents[2]
GUESTS = pytest.StashKey[list[Guest]]()
SHARED_DISKS = {"scratch": "4G"}  # the shared guest's spare disk: /dev/disk/by-id/virtio-scratch
#: and a small disk on QEMU's NVMe controller: /dev/disk/by-id/nvme-QEMU_NVMe_Ctrl_bbnvme
SHARED_NVME = {"bbnvme": "256M"}
#: what test_rig.py checks a guest boots with, carried by the shared guest (a boot of the
#: rig's own would cost a boot's emulated CPU): a unit that notes each boot, files, a
#: kernel argument, an empty disk and a read-only image the host holds
RIG_UNITS = {"bb-rig-boots.service": """\
[Unit]
Description=rig check: note each boot
[Service]
Type=oneshot
ExecStart=/bin/sh -c 'cat /proc/sys/kernel/random/boot_id >> /var/lib/bb-rig/boots'
[Install]
WantedBy=multi-user.target
"""}
RIG_FILES = {"/var/lib/bb-rig/note": "seeded\n",
             "/usr/local/bin/bb-rig-hello": "#!/bin/sh\necho hello from the seed\n"}
RIG_KERNEL_ARGS = ("bb_rig.marker=42",)
RIG_DISKS = {"extra": "1G"}
RIG_IMAGE = bytes(range(256)) * 4096  # 1 MiB the guest must see, read-only


@contextmanager
def _uncaptured(config: pytest.Config) -> Iterator[None]:
    """Progress of a minutes-long step (the image build) shown as it happens."""
    capture = config.pluginmanager.getplugin("capturemanager")
    if capture is None:
        yield
        return
    with capture.global_and_fixture_disabled():
        yield


def _say(config: pytest.Config) -> Callable[[str], None]:
    def say(line: str) -> None:
        with _uncaptured(config):
            print(line, file=sys.stderr, flush=True)

    return say


@pytest.fixture(scope="session")
def vm_image(pytestconfig: pytest.Config) -> Image:
    say = _say(pytestconfig)
    for stale in remove_stale_runs():
        say(f"vm: removed the run directory of a killed session: {stale}")
    return ensure_image(log=say)


@pytest.fixture(scope="session")
def vm_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This commit's wheel, built as a user's pip would build it (not a copy of src/)."""
    return build_wheel(ROOT, tmp_path_factory.mktemp("vm-wheel"))


@pytest.fixture(scope="session")
def _shared_guest(vm_image: Image, vm_wheel: Path, tmp_path_factory: pytest.TempPathFactory
                  ) -> Iterator[SharedGuest]:
    ro = tmp_path_factory.mktemp("rig-image") / "ro.img"
    ro.write_bytes(RIG_IMAGE)
    shared = SharedGuest(vm_image, BootSpec(
        wheel=vm_wheel, disks={**SHARED_DISKS, **RIG_DISKS}, nvme=SHARED_NVME, units=RIG_UNITS,
        files=RIG_FILES, kernel_args=RIG_KERNEL_ARGS, images={"ro": ro}))
    try:
        yield shared
    finally:
        shared.close()


@pytest.fixture
def guest(_shared_guest: SharedGuest, request: pytest.FixtureRequest) -> Guest:
    """The session's shared guest, with this commit's wheel installed. A check that changes
    it puts back what it changed; one that needs a pristine system uses `make_guest`."""
    g = _shared_guest.get()
    request.node.stash.setdefault(GUESTS, []).append(g)
    return g


@pytest.fixture
def make_guest(vm_image: Image, vm_wheel: Path,
               request: pytest.FixtureRequest) -> Iterator[Callable[..., Guest]]:
    """make_guest(**BootSpec fields) -> a fresh, booted guest of its own (wheel installed),
    killed and removed after the check."""
    made: list[Guest] = []

    def make(**spec: object) -> Guest:
        g = Guest(vm_image, BootSpec(**{"wheel": vm_wheel, **spec}))  # type: ignore[arg-type]
        made.append(g)
        request.node.stash.setdefault(GUESTS, []).append(g)
        return g.start()

    try:
        yield make
    finally:
        for g in made:
            g.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if report.when != "call" or not report.failed:
        return
    for g in item.stash.get(GUESTS, []):
        try:
            text = g.failure_report()
        except Exception as exc:  # the report must not hide the check's own failure
            text = f"(no report from the guest: {exc})"
        report.sections.append(("guest", text))


#: A directory shared by the pytest processes that split the guest checks between them
#: (scripts/test): each file is run by the process that claims it first.
CLAIMS_ENV = "BACKBURNER_TEST_CLAIMS"
RAN_HERE = pytest.StashKey[list[str]]()  # the files this pytest claimed, for its summary


def _by_file(items: list[pytest.Item]) -> list[list[pytest.Item]]:
    groups: dict[Path, list[pytest.Item]] = {}
    for item in items:
        groups.setdefault(Path(item.path), []).append(item)
    return list(groups.values())


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> bool | None:
    """With BACKBURNER_TEST_CLAIMS=DIR, a file's checks run here only if this process
    claims the file first (makes its directory in DIR), so a process started later takes
    what is left: scripts/test starts a second one, with a guest of its own, once the host
    tests are done and a core is free. A file is claimed as the last check of the one
    before begins: that check must know which comes next, for its module's fixtures (and
    at the end the session's, the guest) to be torn down in time."""
    claims = os.environ.get(CLAIMS_ENV)
    if not claims or session.config.option.collectonly or os.environ.get("PYTEST_XDIST_WORKER") \
            or getattr(session.config.option, "numprocesses", None):
        return None
    if session.testsfailed and not session.config.option.continue_on_collection_errors:
        raise session.Interrupted(f"{session.testsfailed} errors during collection")
    files = iter(_by_file(session.items))
    root = Path(session.config.rootpath)

    def claim_dir(items: list[pytest.Item]) -> Path:
        return Path(claims, Path(items[0].path).relative_to(root).as_posix().replace("/", "__"))

    def claim() -> list[pytest.Item]:
        for items in files:
            try:
                os.mkdir(claim_dir(items))
            except FileExistsError:
                continue
            session.config.stash[RAN_HERE].append(Path(items[0].path).relative_to(root).as_posix())
            return items
        return []

    session.config.stash[RAN_HERE] = []
    current = claim()
    while current:
        following: list[pytest.Item] = []
        try:
            for i, item in enumerate(current):
                if i + 1 < len(current):
                    nextitem: pytest.Item | None = current[i + 1]
                else:
                    following = claim()
                    nextitem = following[0] if following else None
                item.config.hook.pytest_runtest_protocol(item=item, nextitem=nextitem)
                if session.shouldfail:
                    raise session.Failed(session.shouldfail)
                if session.shouldstop:
                    raise session.Interrupted(session.shouldstop)
        except BaseException:
            if following:  # claimed, not begun: left for another pytest to take
                os.rmdir(claim_dir(following))
                session.config.stash[RAN_HERE].pop()
            raise
        current = following
    return True


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Which files this pytest claimed: the others ran in another one (scripts/test)."""
    ran = terminalreporter.config.stash.get(RAN_HERE, None)
    if ran is not None:
        terminalreporter.write_line(f"guest check files run by this pytest ({len(ran)}; the "
                                    f"others by another): {', '.join(ran) or 'none'}")
