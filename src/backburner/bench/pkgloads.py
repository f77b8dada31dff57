"""Loads that run the real package managers on the device under test: dpkg and flatpak.

`install-loop` imitates an install (a tar unpacked with fsync); these run the programs users
run, with their own IO: dpkg unpacks to `.dpkg-new` names, fsyncs and renames, and keeps its
database; flatpak pulls a bundle into an OSTree repository (one object file per file),
checks it out as hardlinks, syncs the filesystem, and prunes the repository again at
uninstall. Each installs the generated app of `packages` and removes it, round after round:

  dpkg-loop      `dpkg --root` into an installation on the testbed (its own database), a
                 new dpkg for every install and purge, from a shell loop
  flatpak-loop   the `flatpak` command, install --bundle and uninstall, from a shell loop,
                 into a flatpak installation on the testbed (FLATPAK_SYSTEM_DIR)
  flatpak-api    one long-lived process holding the installation through libflatpak, as
                 GNOME Software and Discover do (`flatpak_worker`)

Nothing is written outside the load's directory on the testbed: dpkg gets --root and --log,
flatpak its system directory and cache there, and HOME, the XDG directories and TMPDIR of
every tool point into it too. Each install appends "FILES BYTES" to the progress file, so the
bulk work's own speed (bytes, files and rounds) is stored as for the other loads. A load
stopped mid-install (every trial ends so) or failing on its own is cleaned up by `recover`
before the next round: the app purged or uninstalled, and SystemStateError if it stays.
"""

from __future__ import annotations

import glob
import os
import shlex
import shutil
from pathlib import Path

from .. import spawn
from ..base.errors import SystemStateError, UnavailableError
from . import packages
from .packages import Shape, run_logged

KINDS = ("dpkg-loop", "flatpak-loop", "flatpak-api")
#: The Python that has GObject introspection: python3-gi and the Flatpak typelib are
#: Debian packages for the system's interpreter; backburner's virtual environment has
#: neither (PyGObject would have to be compiled into it), so the worker runs here.
SYSTEM_PYTHON = "/usr/bin/python3"
GI_MODULES = ("/usr/lib/python3/dist-packages/gi/__init__.py",)
TYPELIBS = ("/usr/lib/*/girepository-1.0/Flatpak-1.0.typelib",
            "/usr/lib/girepository-1.0/Flatpak-1.0.typelib")
WORKER = str(Path(__file__).with_name("flatpak_worker.py"))
#: OSTree's min-free-space-size in flatpak's repositories (500MB): an install that would
#: leave less free is refused by flatpak itself, so a testbed must have this much to spare.
FLATPAK_MIN_FREE = 500 * 1000 * 1000


def require(kind: str) -> None:
    """One line naming the package to install when the load's tools are missing: checked
    by plan(), before anything is built."""
    if kind == "dpkg-loop":
        for tool in ("dpkg", "dpkg-deb"):
            if shutil.which(tool) is None:
                raise UnavailableError(f"load dpkg-loop needs {tool}, which is not installed",
                                       "apt-get install dpkg")
        return
    if shutil.which("flatpak") is None:
        raise UnavailableError(f"load {kind} needs flatpak, which is not installed",
                               "apt-get install flatpak")
    if kind == "flatpak-api" and not (
            os.access(SYSTEM_PYTHON, os.X_OK) and any(map(os.path.exists, GI_MODULES))
            and any(glob.glob(pattern) for pattern in TYPELIBS)):
        raise UnavailableError("load flatpak-api needs libflatpak's GObject introspection "
                               f"for {SYSTEM_PYTHON}, which is not installed",
                               "apt-get install python3-gi gir1.2-flatpak-1.0")


class Installation:
    """One package manager's installation in a load's directory, and the rounds run on it."""

    def __init__(self, kind: str, shape: Shape, directory: str) -> None:
        self.kind = kind
        self.shape = shape
        self.dir = directory
        self.home = os.path.join(directory, "home")
        self.tmp = os.path.join(directory, "tmp")
        self.files = shape.files
        self.bytes = packages.total_bytes(shape)

    # --- where things are -----------------------------------------------------------------

    @property
    def dpkg_root(self) -> str:
        return os.path.join(self.dir, "root")

    @property
    def flatpak_dir(self) -> str:
        return os.path.join(self.dir, "flatpak")

    @property
    def package(self) -> str:
        """What one round installs, on the testbed."""
        return os.path.join(self.dir, "app.deb" if self.kind == "dpkg-loop" else "app.flatpak")

    def env(self) -> dict[str, str]:
        """What the tools and the load run with, beside the caller's environment."""
        out = packages.private_env(self.home, self.tmp)
        if self.kind != "dpkg-loop":
            out |= {"FLATPAK_SYSTEM_DIR": self.flatpak_dir,
                    "FLATPAK_SYSTEM_CACHE_DIR": os.path.join(self.dir, "flatpak-cache")}
        return out

    def _tool_env(self) -> dict[str, str]:
        return {**os.environ, **self.env()}

    def dpkg(self) -> list[str]:
        log = os.path.join(self.dpkg_root, "var", "log", "dpkg.log")
        return ["dpkg", f"--root={self.dpkg_root}", f"--log={log}"]

    # --- before the trials ----------------------------------------------------------------

    def prepare(self) -> None:
        """The package built (or taken from the cache), copied onto the testbed, and an
        empty installation made there (for flatpak with the runtime installed)."""
        for d in (self.home, self.tmp):
            os.mkdir(d, 0o700)
        if self.kind == "dpkg-loop":
            built = packages.build("deb", self.shape, self._tool_env())
            packages.copy_into(built / "app.deb", self.dir)
            admin = os.path.join(self.dpkg_root, "var", "lib", "dpkg")
            for sub in ("info", "updates", "triggers"):
                os.makedirs(os.path.join(admin, sub), 0o755)
            os.makedirs(os.path.join(self.dpkg_root, "var", "log"), 0o755)
            for name in ("status", "available"):
                os.close(os.open(os.path.join(admin, name),
                                 os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644))
            return
        if self.kind == "flatpak-api":
            run_logged([SYSTEM_PYTHON, "-I", "-c", "import gi; gi.require_version('Flatpak', "
                      "'1.0'); from gi.repository import Flatpak"],
                     "loading libflatpak in python3 (python3-gi, gir1.2-flatpak-1.0)",
                     self.tmp, self._tool_env())
        built = packages.build("flatpak", self.shape, self._tool_env())
        packages.copy_into(built / "app.flatpak", self.dir)
        runtime = packages.copy_into(built / "runtime.flatpak", self.dir)
        os.mkdir(self.flatpak_dir, 0o755)
        run_logged(["flatpak", "--system", "install", "-y", "--noninteractive", "--bundle",
                  runtime], "installing the generated flatpak runtime", self.tmp,
                 self._tool_env())

    # --- the load -------------------------------------------------------------------------

    def argv(self, progress: str) -> list[str]:
        done = shlex.join(["echo", f"{self.files} {self.bytes}"]) + " >> " + shlex.quote(progress)
        if self.kind == "dpkg-loop":
            install = shlex.join([*self.dpkg(), "--install", self.package])
            remove = shlex.join([*self.dpkg(), "--purge", packages.DEB_PACKAGE])
        elif self.kind == "flatpak-loop":
            flatpak = ["flatpak", "--system"]
            install = shlex.join([*flatpak, "install", "-y", "--noninteractive", "--bundle",
                                  self.package])
            remove = shlex.join([*flatpak, "uninstall", "-y", "--noninteractive",
                                 packages.APP_ID])
        else:
            return [SYSTEM_PYTHON, "-I", WORKER, "--installation", self.flatpak_dir,
                    "--bundle", self.package, "--ref", packages.app_ref(), "--progress",
                    progress, "--files", str(self.files), "--bytes", str(self.bytes)]
        return ["sh", "-c", f"while :; do {install} || exit $?; {done}; "
                f"{remove} || exit $?; done"]

    def installed(self) -> bool:
        """Whether any trace of the app is in the installation's database."""
        if self.kind == "dpkg-loop":
            admin = os.path.join(self.dpkg_root, "var", "lib", "dpkg")
            out = spawn.run_tool(["dpkg-query", f"--admindir={admin}", "-W",
                                  "-f=${db:Status-Abbrev}", packages.DEB_PACKAGE],
                                 env=self.env())
            return out.status == 0 and out.stdout.strip() not in ("", "un")
        return spawn.run_tool(["flatpak", "--system", "info", packages.APP_ID],
                              env=self.env()).status == 0

    def recover(self) -> None:
        """After the load stopped (in the middle of an install, or failed): the app removed
        by the package manager itself, so the next round starts from a clean installation."""
        if self.installed():
            if self.kind == "dpkg-loop":
                argv = [*self.dpkg(), "--force-remove-reinstreq", "--purge",
                        packages.DEB_PACKAGE]
            else:
                argv = ["flatpak", "--system", "uninstall", "-y", "--noninteractive",
                        "--force-remove", packages.APP_ID]
            run_logged(argv, f"{self.kind}: removing what a stopped round left", self.tmp,
                       self._tool_env())
            if self.installed():
                raise SystemStateError(f"{self.kind}: the app is still installed after it "
                                       f"was removed from {self.dir}")
        if self.kind != "dpkg-loop":
            self._drop_stray_origins()

    def _drop_stray_origins(self) -> None:
        """An install stopped after it imported the bundle and before it deployed it leaves
        the bundle's origin remote, its ref and every object of the app in the repository:
        `flatpak info` says not installed, and each later round found the objects there and
        wrote almost nothing (56 rounds a minute moving 1-2 MB each, against 6-8 rounds of
        about 117 MB). Every remote but those of installed refs (the runtime's) is deleted
        with its refs, and `flatpak repair` prunes the objects no ref holds any more."""
        env = self._tool_env()
        used = self._flatpak_column(["list", "--columns=origin"], env)
        stray = [r for r in self._flatpak_column(["remotes", "--show-disabled",
                                                  "--columns=name"], env) if r not in used]
        if not stray and not self._app_refs():
            return
        for remote in stray:
            run_logged(["flatpak", "--system", "remote-delete", "--force", remote],
                       f"{self.kind}: deleting the origin a stopped round left", self.tmp, env)
        run_logged(["flatpak", "--system", "repair"],
                   f"{self.kind}: pruning what a stopped round left", self.tmp, env)
        if self._app_refs():
            raise SystemStateError(f"{self.kind}: the app's objects are still in "
                                   f"{self.flatpak_dir} after a stopped round was cleaned")

    def _flatpak_column(self, args: list[str], env: dict[str, str]) -> set[str]:
        out = spawn.run_tool(["flatpak", "--system", *args], env=env)
        if out.status != 0:
            raise SystemStateError(f"flatpak {args[0]} failed in {self.flatpak_dir}: "
                                   + (out.stderr.strip().splitlines() or ["?"])[-1])
        return {line.strip() for line in out.stdout.splitlines() if line.strip()}

    def _app_refs(self) -> list[str]:
        """The repository's refs of apps (any remote's): none once a round is complete."""
        remotes = os.path.join(self.flatpak_dir, "repo", "refs", "remotes")
        try:
            names = os.listdir(remotes)
        except FileNotFoundError:
            return []
        return [os.path.join(top, f) for name in names  # ostree leaves empty folders
                for top, _, files in os.walk(os.path.join(remotes, name, "app")) for f in files]


def progress(path: str) -> tuple[int, float, float] | None:
    """(rounds, files, bytes) installed, from the progress file; None when unreadable."""
    try:
        lines = Path(path).read_text().split("\n")
    except OSError:
        return None
    rounds, files, nbytes = 0, 0.0, 0.0
    for line in lines:
        parts = line.split()
        if len(parts) != 2:
            continue
        try:
            f, b = float(parts[0]), float(parts[1])
        except ValueError:
            continue
        rounds, files, nbytes = rounds + 1, files + f, nbytes + b
    return rounds, files, nbytes
