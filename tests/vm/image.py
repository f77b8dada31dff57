"""The guest's disk image: Debian from Debian's own packages (debootstrap), cached by a hash
of everything that went into it, under a root-owned private directory.

A cached image is used only when its manifest checks out (every file's size and SHA-256,
and the key it was built for); anything else (a build killed halfway, a truncated or
altered file) is removed and built again, never booted. A build happens in a private
directory beside the cache entries and becomes an entry by one rename, after its manifest
is written and checked; debootstrap runs in a PID and mount namespace of its own, so a
killed build leaves neither a process nor a mount behind.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from backburner.files.safepath import private_dir

from .proc import dies_with_us

Log = Callable[[str], None]
HERE = Path(__file__).parent
ROOTFS = HERE / "rootfs"  # files laid over the debootstrapped tree (boot glue, no checks)

SUITE = "bookworm"
MIRROR = os.environ.get("BACKBURNER_VM_MIRROR", "http://deb.debian.org/debian")
CACHE = Path(os.environ.get("BACKBURNER_VM_CACHE", "/var/cache/backburner-vm"))
DISK_SIZE = "8G"  # sparse: room for what checks write (fio files, extra file systems)

# What the guest has: the one list later checks extend (the image is rebuilt when it changes).
PACKAGES = (
    # boot: systemd as PID 1, udev, D-Bus, Debian's stock kernel and initramfs
    "systemd-sysv", "udev", "dbus", "linux-image-amd64", "kmod",
    # this commit's wheel goes in with pip; D-Bus from Python; bench's statistics
    "python3", "python3-pip", "python3-jeepney", "python3-numpy", "python3-scipy", "python3-rich",
    "python3-matplotlib",  # the HTML report a bench writes beside its database
    # the rest of the .deb's dependencies (tests/vm/test_guest_deb.py installs it offline);
    # python3-regex also for the wheel: govern searches rules' cmdline patterns with it
    "python3-shtab", "python3-regex",
    # the kernel interfaces the checks drive: network, processes, disks, device-mapper
    "iproute2", "procps", "util-linux", "e2fsprogs", "xfsprogs", "btrfs-progs", "dmsetup",
    "fio", "strace",
)

# Timers that would wake up in the middle of a check and do IO of their own.
MASKED_UNITS = ("apt-daily.timer", "apt-daily-upgrade.timer", "dpkg-db-backup.timer",
                "e2scrub_all.timer", "fstrim.timer", "e2scrub_reap.service", "getty@tty1.service")

# Pruned after the install: not needed in a test guest, and every byte is checksummed.
PRUNED = ("var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc", "usr/share/man",
          "usr/share/locale", "usr/share/info", "debootstrap")

# Written between debootstrap's stages, so that the second obeys them (and kept in the guest).
BUILD_CONFIG = {
    "etc/dpkg/dpkg.cfg.d/backburner-vm": "force-unsafe-io\n" + "".join(
        f"path-exclude=/{p}/*\n" for p in ("usr/share/doc", "usr/share/man", "usr/share/info",
                                           "usr/share/locale")),
    # an initramfs of what mounts the root file system: generated and unpacked in seconds
    "etc/initramfs-tools/conf.d/backburner-vm": "MODULES=list\nCOMPRESS=gzip\n",
    "usr/share/initramfs-tools/modules.d/backburner-vm": "virtio_pci\nvirtio_blk\next4\n",
}

IMAGE_FILES = ("disk.qcow2", "vmlinuz", "initrd.img")
MANIFEST = "manifest.json"
KEEP = 2  # cache entries kept: this image and the one before (another branch's, say)
IN_USE = 2 * 3600  # and any entry a guest booted from this recently


@dataclass(frozen=True)
class Image:
    """A verified cache entry: boot `kernel` + `initrd` with root on (an overlay of) `disk`."""

    path: Path
    key: str
    disk: Path
    kernel: Path
    initrd: Path
    manifest: dict


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def build_inputs() -> dict:
    """Everything the image is made of: what changes here changes the key."""
    sources = [HERE / "image.py", *sorted(p for p in ROOTFS.rglob("*") if p.is_file())]
    return {
        "suite": SUITE, "mirror": MIRROR, "packages": list(PACKAGES), "disk_size": DISK_SIZE,
        "masked": list(MASKED_UNITS), "pruned": list(PRUNED), "config": BUILD_CONFIG,
        "files": {str(p.relative_to(HERE)): _sha256(p) for p in sources},
    }


def image_key(inputs: dict | None = None) -> str:
    text = json.dumps(inputs or build_inputs(), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def verify(entry: Path, key: str) -> Image | None:
    """The cache entry as an Image if its manifest and every file check out, else None."""
    try:
        manifest = json.loads((entry / MANIFEST).read_text())
        files = manifest["files"]
        if manifest["key"] != key or set(files) != set(IMAGE_FILES):
            return None
        for name, want in files.items():
            path = entry / name
            st = os.lstat(path)
            if not stat.S_ISREG(st.st_mode) or st.st_size != want["size"]:
                return None
            if _sha256(path) != want["sha256"]:
                return None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return Image(entry, key, entry / "disk.qcow2", entry / "vmlinuz", entry / "initrd.img",
                 manifest)


def write_manifest(entry: Path, key: str, extra: dict) -> None:
    files = {n: {"size": (entry / n).stat().st_size, "sha256": _sha256(entry / n)}
             for n in IMAGE_FILES}
    tmp = entry / f".{MANIFEST}.tmp"
    with open(tmp, "w") as f:
        json.dump({"key": key, "files": files, **extra}, f, indent=1, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, entry / MANIFEST)


@contextmanager
def _locked(root: Path) -> Iterator[None]:
    """One builder at a time per cache (two test sessions may start together)."""
    fd = os.open(root / ".lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def remove_tree(path: Path) -> None:
    if os.path.lexists(path):
        shutil.rmtree(path)


def ensure_image(cache: Path = CACHE, *, build: Callable[[Path, Log], dict] | None = None,
                 key: str | None = None, log: Log = print) -> Image:
    """The verified image for `key` (default: this rig's), built first if the cache has none.

    `build(dir, log)` fills a fresh private directory with IMAGE_FILES and returns facts for the
    manifest (the tests of this cache logic pass a small one).
    """
    root = private_dir(cache, "the VM image cache")
    key = key or image_key()
    build = build or build_image
    entry = root / key
    with _locked(root):
        for stale in root.glob(".build-*"):  # a build killed (SIGKILL) before its rename
            log(f"vm image: removing an unfinished build {stale.name}")
            remove_tree(stale)
        image = verify(entry, key)
        if image:
            os.utime(entry)  # the newest entries are the ones kept (see prune)
            return image
        if entry.exists():
            log(f"vm image: cache entry {key} does not check out: building it again")
            remove_tree(entry)
        tmp = Path(tempfile.mkdtemp(prefix=f".build-{key[:12]}-", dir=root))
        try:
            started = time.monotonic()
            extra = build(tmp, log)
            extra["build_seconds"] = round(time.monotonic() - started, 1)
            write_manifest(tmp, key, extra)
            for name in (*IMAGE_FILES, MANIFEST):
                os.chmod(tmp / name, 0o400)
            if not verify(tmp, key):
                raise RuntimeError(f"vm image: the build in {tmp} does not check out")
            os.chmod(tmp, 0o700)
            os.rename(tmp, entry)
        finally:
            remove_tree(tmp)
        image = verify(entry, key)
        assert image, entry
        log(f"vm image: built {key} in {image.manifest['build_seconds']} s")
        for old in _prune(root, KEEP):
            log(f"vm image: removed {old.name}, the least recently used")
        return image


def prune(cache: Path = CACHE, keep: int = KEEP) -> list[Path]:
    """Remove all but the `keep` most recently used entries (each is about 1.5 GB)."""
    root = private_dir(cache, "the VM image cache")
    with _locked(root):
        return _prune(root, keep)


def _prune(root: Path, keep: int) -> list[Path]:
    """Beyond the `keep` newest, entries not used for IN_USE seconds (a guest's boot marks
    its image as used: another session may still be booting guests from it)."""
    entries = sorted((p for p in root.iterdir()
                      if p.is_dir() and re.fullmatch(r"[0-9a-f]{32}", p.name)),
                     key=lambda p: p.stat().st_mtime, reverse=True)
    old = [p for p in entries[keep:] if time.time() - p.stat().st_mtime > IN_USE]
    for entry in old:
        remove_tree(entry)
    return old


# --- the real build ------------------------------------------------------------------------


def _run(argv: list[str], log: Log, **kw: object) -> None:
    """A build step to completion; killed with us (parent-death signal)."""
    started = time.monotonic()
    done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          preexec_fn=dies_with_us(), **kw)
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-30:])
        raise RuntimeError(f"vm image: {argv[0]} failed with status {done.returncode}:\n{tail}")
    log(f"vm image: {' '.join(argv[:3])} ... {time.monotonic() - started:.0f} s")


def build_image(out: Path, log: Log = print) -> dict:
    """debootstrap the packages, lay the rig's boot glue over them, make an ext4 image of
    the tree without a loop device (mkfs.ext4 -d) and take the kernel and initramfs out."""
    tree = out / "tree"
    _debootstrap(tree, log)
    _lay_glue(tree)
    versions = installed_versions(tree)
    (kernel,) = (tree / "boot").glob("vmlinuz-*")
    (initrd,) = (tree / "boot").glob("initrd.img-*")
    shutil.copyfile(kernel, out / "vmlinuz")
    shutil.copyfile(initrd, out / "initrd.img")
    raw = out / "disk.raw"
    with open(raw, "wb") as f:
        f.truncate(_bytes(DISK_SIZE))
    _run(["mkfs.ext4", "-q", "-F", "-L", "bbroot", "-d", str(tree), str(raw)], log)
    shutil.rmtree(tree)
    _run(["qemu-img", "convert", "-O", "qcow2", str(raw), str(out / "disk.qcow2")], log)
    raw.unlink()
    return {"suite": SUITE, "mirror": MIRROR, "kernel": kernel.name.removeprefix("vmlinuz-"),
            "versions": versions, "inputs": build_inputs(),
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def _debootstrap(tree: Path, log: Log) -> None:
    # A PID and mount namespace of its own: killed, debootstrap and every maintainer script
    # die with it (the namespace's init is killed), and its /proc and /sys mounts in the
    # tree vanish with the namespace.
    isolated = ["unshare", "--mount", "--pid", "--fork", "--kill-child=SIGKILL", "--"]
    # Two stages, to configure dpkg in between: the first downloads and unpacks the
    # essential packages, the second installs everything with dpkg told not to fsync each
    # file (a throwaway tree: the image is checksummed after) and to skip documentation.
    # The first is the one that needs the network: tried twice.
    for attempt in (1, 2):
        try:
            _run([*isolated, "debootstrap", "--foreign", "--variant=minbase",
                  f"--include={','.join(PACKAGES)}", SUITE, str(tree), MIRROR], log)
            break
        except RuntimeError as err:
            if attempt == 2:
                raise
            log(f"{err}\nvm image: trying the download once more")
            shutil.rmtree(tree, ignore_errors=True)
    for rel, text in BUILD_CONFIG.items():
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / rel).write_text(text)
    _run([*isolated, "chroot", str(tree), "/debootstrap/debootstrap", "--second-stage"], log)


def _lay_glue(tree: Path) -> None:
    """The rig's files over the tree; no docs or package caches; noisy timers masked."""
    for rel in PRUNED:
        shutil.rmtree(tree / rel, ignore_errors=True)
    for src in sorted(ROOTFS.rglob("*")):
        if src.is_file():
            dst = tree / src.relative_to(ROOTFS)
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dst)
            os.chmod(dst, 0o755 if os.access(src, os.X_OK) else 0o644)
    for unit in MASKED_UNITS:
        link = tree / "etc/systemd/system" / unit
        link.unlink(missing_ok=True)
        link.symlink_to("/dev/null")
    for wants in (tree / "etc/systemd/system").glob("*.wants"):
        for link in wants.iterdir():
            if link.name in MASKED_UNITS:
                link.unlink()


def installed_versions(tree: Path) -> dict[str, str]:
    """The versions of PACKAGES (and systemd) dpkg installed: the mirror moves on, and the
    manifest says what this image has."""
    wanted = {*PACKAGES, "systemd"}
    versions = {}
    for stanza in (tree / "var/lib/dpkg/status").read_text().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in stanza.splitlines()
                      if ": " in line and not line.startswith(" "))
        if fields.get("Package") in wanted and fields.get("Status", "").endswith(" installed"):
            versions[fields["Package"]] = fields["Version"]
    return dict(sorted(versions.items()))


def _bytes(size: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(size[:-1]) * units[size[-1]] if size[-1] in units else int(size)
