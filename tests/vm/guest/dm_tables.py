"""In the guest: a fragmented file on a fresh file system (on a loop device, or on the
first partition of one), its dm-linear table from `backburner extents map --dm-table`;
while mounted, the hint says the kernel will not take the table and `dmsetup create`
indeed fails; unmounted, the table of the saved map (`map --saved`, proven against the
device's bytes) is the same, the hint says it can be loaded, and the table loaded by
`dmsetup create --readonly` reads back the file's bytes. Prints one JSON object (run by
test_guest_dm)."""

import hashlib
import json
import os
import subprocess
import sys

CASE, WORK = sys.argv[1], sys.argv[2]
FS, PARTITIONED = CASE.removesuffix("-partition"), CASE.endswith("-partition")
PART_START = 2048  # sectors: the first partition at 1 MiB, as partitioning tools put it
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


def mbr(image: str, start: int) -> None:
    """One Linux partition from sector `start` to the end, in a DOS partition table."""
    sectors = os.path.getsize(image) // 512 - start
    entry = bytes([0, 0, 0, 0, 0x83, 0, 0, 0]) + start.to_bytes(4, "little") \
        + sectors.to_bytes(4, "little")
    with open(image, "r+b") as f:
        f.seek(446)
        f.write(entry + bytes(48) + b"\x55\xaa")


def hint(stderr: str) -> str:
    return stderr.strip().splitlines()[-1].removeprefix("backburner: ")


def load_and_compare(name: str, table: str, size: int, want: str) -> dict:
    sh("dmsetup", "create", name, "--readonly", input=table)
    try:
        got = digest(f"/dev/mapper/{name}", size)
        dev_size = int(sh("blockdev", "--getsize64", f"/dev/mapper/{name}").stdout)
    finally:
        sh("dmsetup", "remove", name)
    return {"same": got == want, "dev_size": dev_size}


os.makedirs(WORK, exist_ok=True)
img, mnt = f"{WORK}/{CASE}.img", f"{WORK}/{CASE}.mnt"
with open(img, "wb") as f:
    f.truncate(300 << 20)
if PARTITIONED:
    mbr(img, PART_START)
loop = sh("losetup", "--find", "--show", *(["-P"] if PARTITIONED else []), img).stdout.strip()
dev = f"{loop}p1" if PARTITIONED else loop
out: dict = {"fs": FS, "case": CASE}
try:
    sh("udevadm", "settle")
    sh(*MKFS[FS], dev)
    os.makedirs(mnt, exist_ok=True)
    sh("mount", dev, mnt)
    target = f"{mnt}/target"
    interleaved([target, f"{mnt}/other"], 64)
    size = os.path.getsize(target)
    shown = json.loads(sh("backburner", "extents", "show", "--json", target).stdout)
    out["runs"] = shown["totals"]["runs"]
    out["device"] = {k: shown["device"][k] for k in ("path", "disk", "start")}
    mapped = sh("backburner", "extents", "map", "--dm-table", target)
    table = mapped.stdout
    out["lines"] = len(table.splitlines())
    out["table_devices"] = sorted({ln.split()[3] for ln in table.splitlines()})
    want = digest(target, size)
    if PARTITIONED:  # the partition's offsets plus its start are the whole disk's bytes
        first = table.splitlines()[0].split()
        with open(loop, "rb") as disk:
            disk.seek(shown["device"]["start"] + int(first[4]) * 512)
            on_disk = disk.read(int(first[1]) * 512)
        with open(target, "rb") as f:
            out["whole_disk_same"] = on_disk == f.read(len(on_disk))
    out["mounted_hint"] = hint(mapped.stderr)
    busy = subprocess.run(["dmsetup", "create", f"bbt-busy-{FS}", "--readonly"], input=table,
                          capture_output=True, text=True)
    out["mounted_load"] = {"status": busy.returncode, "said": busy.stderr.strip()[-200:]}
    if busy.returncode == 0:
        sh("dmsetup", "remove", f"bbt-busy-{FS}")
    sh("backburner", "extents", "save", "-o", f"{WORK}/{CASE}.map", target)
    if FS == "ext4" and not PARTITIONED:  # unwritten space read through dm zero targets
        sparse = f"{mnt}/sparse"
        sh("fallocate", "-l", "1M", sparse)
        with open(sparse, "r+b") as f:
            f.seek(256 * 1024)
            f.write(b"\x5a" * 65536)
            os.fsync(f.fileno())
        sparse_table = sh("backburner", "extents", "map", "--dm-table", "--zero-unwritten",
                          sparse).stdout
        sparse_want = digest(sparse, 1 << 20)
    sh("umount", mnt)
    saved = sh("backburner", "extents", "map", "--dm-table", "--saved", f"{WORK}/{CASE}.map")
    out["saved_same"] = saved.stdout == table
    out["unmounted_hint"] = hint(saved.stderr)
    out["target"] = load_and_compare(f"bbt-{FS}", saved.stdout, size, want)
    out["size"] = size
    if FS == "ext4" and not PARTITIONED:
        out["sparse"] = load_and_compare("bbt-sparse", sparse_table, 1 << 20, sparse_want)
        # moved by the defragmenter after save: check says so (status 1), and the old
        # map's table is refused (status 65), printing nothing
        sh("mount", dev, mnt)
        before = sh("backburner", "extents", "check", f"{WORK}/{CASE}.map")
        sh("e4defrag", target)
        after = subprocess.run(["backburner", "extents", "check", f"{WORK}/{CASE}.map"],
                               capture_output=True, text=True)
        old = subprocess.run(["backburner", "extents", "map", "--dm-table", "--saved",
                              f"{WORK}/{CASE}.map"], capture_output=True, text=True)
        out["check"] = {"before": before.returncode, "after": after.returncode,
                        "said": (after.stdout + after.stderr).strip()}
        out["old_map"] = {"status": old.returncode, "out": old.stdout,
                          "said": old.stderr.strip()}
        sh("umount", mnt)
finally:
    subprocess.run(["umount", mnt], capture_output=True)
    sh("losetup", "-d", loop)
    os.unlink(img)
print(json.dumps(out))
