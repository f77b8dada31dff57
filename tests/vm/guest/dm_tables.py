"""In the guest: a fragmented file on a fresh file system (on a loop device), its dm-linear
table from `backburner extents map --dm-table`, then (unmounted: a mounted file system holds
its device) the table loaded by `dmsetup create --readonly` and the mapped device compared
with the file's bytes. Prints one JSON object (run by test_guest_dm)."""

import hashlib
import json
import os
import subprocess
import sys

FS, WORK = sys.argv[1], sys.argv[2]
MKFS = {"ext4": ["mkfs.ext4", "-q", "-F"], "xfs": ["mkfs.xfs", "-q", "-f"],
        "btrfs": ["mkfs.btrfs", "-q", "-f"]}
CHUNK = 64 * 1024


def sh(*argv: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(argv, check=True, capture_output=True, text=True, **kw)


def digest(path: str, size: int) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read(size)).hexdigest()


def interleaved(paths: list[str], chunks: int) -> None:
    """Files written a chunk at a time in turn, each chunk made durable: their blocks
    alternate on the device (a fragmented file, as a long-lived system has them)."""
    files = [open(p, "wb") for p in paths]
    for i in range(chunks):
        for n, f in enumerate(files):
            f.write(bytes([(i * 7 + n) % 251 + 1]) * 4096 * (CHUNK // 4096))
            f.flush()
            os.fsync(f.fileno())
    for f in files:
        f.close()


def load_and_compare(name: str, table: str, size: int, want: str) -> dict:
    sh("dmsetup", "create", name, "--readonly", input=table)
    try:
        got = digest(f"/dev/mapper/{name}", size)
        dev_size = int(sh("blockdev", "--getsize64", f"/dev/mapper/{name}").stdout)
    finally:
        sh("dmsetup", "remove", name)
    return {"same": got == want, "dev_size": dev_size}


os.makedirs(WORK, exist_ok=True)
img, mnt = f"{WORK}/{FS}.img", f"{WORK}/{FS}.mnt"
with open(img, "wb") as f:
    f.truncate(300 << 20)
loop = sh("losetup", "--find", "--show", img).stdout.strip()
out: dict = {"fs": FS}
try:
    sh(*MKFS[FS], loop)
    os.makedirs(mnt, exist_ok=True)
    sh("mount", loop, mnt)
    target = f"{mnt}/target"
    interleaved([target, f"{mnt}/other"], 64)
    size = os.path.getsize(target)
    shown = json.loads(sh("backburner", "extents", "show", "--json", target).stdout)
    out["runs"] = shown["totals"]["runs"]
    out["device"] = shown["device"]["path"]
    table = sh("backburner", "extents", "map", "--dm-table", target).stdout
    out["lines"] = len(table.splitlines())
    want = digest(target, size)
    if FS == "ext4":  # unwritten space (fallocate) read through dm zero targets
        sparse = f"{mnt}/sparse"
        sh("fallocate", "-l", "1M", sparse)
        with open(sparse, "r+b") as f:
            f.seek(256 * 1024)
            f.write(b"\x5a" * 65536)
            os.fsync(f.fileno())
        sparse_table = sh("backburner", "extents", "map", "--dm-table", "--zero-unwritten",
                          sparse).stdout
        sparse_want = digest(sparse, 1 << 20)
        sh("backburner", "extents", "save", "-o", f"{WORK}/target.map", target)
    sh("umount", mnt)
    out["target"] = load_and_compare(f"bbt-{FS}", table, size, want)
    out["size"] = size
    if FS == "ext4":
        out["sparse"] = load_and_compare("bbt-sparse", sparse_table, 1 << 20, sparse_want)
        # moved by the defragmenter after save: check says so (status 1)
        sh("mount", loop, mnt)
        before = sh("backburner", "extents", "check", f"{WORK}/target.map")
        sh("e4defrag", target)
        after = subprocess.run(["backburner", "extents", "check", f"{WORK}/target.map"],
                               capture_output=True, text=True)
        out["check"] = {"before": before.returncode, "after": after.returncode,
                        "said": (after.stdout + after.stderr).strip()}
        sh("umount", mnt)
finally:
    subprocess.run(["umount", mnt], capture_output=True)
    sh("losetup", "-d", loop)
    os.unlink(img)
print(json.dumps(out))
