"""The rules of the house (ARCHITECTURE.md), checked over all of src/ by reading the code:
no import cycles; only the spawn package creates, signals or reaps processes; only the system
package (and spawn's pre-exec hook, which puts a child into its cgroup) writes under
/sys, /proc or a cgroup file system; every kind of change lives in the system package and
is registered for journal replay; no module grows past the size a reader can hold; the pure
statistics hold no words (`report.words` says them)."""

from __future__ import annotations

import ast
import inspect
import itertools
from pathlib import Path

import backburner

SRC = Path(backburner.__file__).parent
PROCESS_PACKAGE = "spawn/"
STATE_MODULES = {"spawn/launch.py"}
STATE_PACKAGE = "system/"
MAX_LINES = 500  # "modules under ~500 lines": a cap, not a target to trim to
WORDLESS_PACKAGE = "stats/"
#: More words than this in one string is a sentence (codes and labels are one or two).
MAX_WORDS = 3

_OS_PROCESS_CALLS = {"fork", "forkpty", "system", "popen", "kill", "killpg", "setsid",
                     "wait", "waitpid", "wait3", "wait4", "waitid", "pidfd_open"}
_OS_PREFIXES = ("exec", "spawn", "posix_spawn")
_WRITE_CALLS = {"write_text", "write_bytes", "mkdir", "makedirs", "rmdir", "rmtree",
                "unlink", "remove", "symlink", "chmod", "chown"}
_STATE_PATHS = ("/sys/", "/proc/")


def _modules() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py"))


def _rel(path: Path) -> str:
    return str(path.relative_to(SRC))


def _module_name(path: Path) -> str:
    parts = ["backburner", *path.relative_to(SRC).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


_ALL_MODULES: set[str] = set()


def _imports(path: Path) -> set[str]:
    """Modules of this package that `path` imports (relative imports resolved)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if not mod.startswith("backburner"):
                continue
            submodules = {f"{mod}.{a.name}" for a in node.names} & _ALL_MODULES
            # `from . import sibling` needs the sibling, not the package's face
            out |= submodules if len(submodules) == len(node.names) else {mod, *submodules}
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("backburner")}
    return out


def test_no_import_cycles() -> None:
    names = {_module_name(p): p for p in _modules()}
    _ALL_MODULES.update(names)
    graph = {n: {m for m in _imports(p) if m in names and m != n} for n, p in names.items()}
    cycles = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> None:
        state[n] = 1
        stack.append(n)
        for m in sorted(graph[n]):
            if state.get(m) == 1:
                cycles.append(" -> ".join(stack[stack.index(m):] + [m]))
            elif m not in state:
                visit(m)
        stack.pop()
        state[n] = 2

    for n in sorted(graph):
        if n not in state:
            visit(n)
    # a package's __init__ importing its own modules is how a package shows its face; a
    # module importing its package's __init__ while __init__ imports it is a real cycle
    assert cycles == []


def _calls(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            attr = node.func.attr
            if isinstance(owner, ast.Name):
                found.append((node.lineno, f"{owner.id}.{attr}"))
    return found


def test_only_spawn_creates_signals_or_reaps_processes() -> None:
    offenders = []
    for path in _modules():
        if _rel(path).startswith(PROCESS_PACKAGE):
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
                process_module = any(n.split(".")[0] in ("subprocess", "multiprocessing", "pty")
                                     for n in names if n)
                if process_module and not _type_only(path):
                    offenders.append(f"{_rel(path)}:{node.lineno}: imports {names}")
        for line, call in _calls(tree):
            owner, _, attr = call.partition(".")
            if owner == "os" and (attr in _OS_PROCESS_CALLS or attr.startswith(_OS_PREFIXES)):
                offenders.append(f"{_rel(path)}:{line}: {call}")
            if owner in ("subprocess", "signal") and attr in (
                    "Popen", "run", "call", "check_call", "check_output", "getoutput",
                    "pidfd_send_signal", "pthread_kill"):
                offenders.append(f"{_rel(path)}:{line}: {call}")
    assert offenders == []


def _interpreter_uses(tree: ast.AST) -> list[tuple[int, bool]]:
    """Each `sys.executable` in the tree, and whether it starts an argv list that runs it
    isolated from the caller's directory (next item "-I", or "-P" for a probe that keeps
    its PYTHONPATH)."""
    def is_exe(node: ast.AST) -> bool:
        if isinstance(node, ast.Call) and node.args:  # os.path.realpath(sys.executable)
            node = node.args[0]
        return isinstance(node, ast.Attribute) and node.attr == "executable" and \
            isinstance(node.value, ast.Name) and node.value.id == "sys"

    safe = set()
    for node in ast.walk(tree):
        pairs = itertools.pairwise(node.elts) if isinstance(node, ast.List) else ()
        for item, after in pairs:
            if is_exe(item) and isinstance(after, ast.Constant) and after.value in ("-I", "-P"):
                safe |= {id(item), id(getattr(item, "args", [None])[0])}
        if isinstance(node, ast.Compare):  # asking whether an argv is ours starts nothing
            safe |= {id(n) for n in ast.walk(node)}
    return sorted((n.lineno, id(n) in safe) for n in ast.walk(tree)
                  if isinstance(n, ast.Attribute) and is_exe(n))


def test_our_interpreter_never_starts_with_the_callers_directory_on_its_path() -> None:
    """`python -m` puts the working directory first on sys.path: a module planted where
    root runs a command would be imported as root. Helpers go through
    `spawn.python_module` (-I); a probe of our own names -I or -P beside the interpreter."""
    offenders = [f"{_rel(path)}:{line}" for path in _modules()
                 for line, safe in _interpreter_uses(ast.parse(path.read_text())) if not safe]
    assert offenders == []


def test_the_interpreter_scan_tells_isolated_from_not() -> None:
    tree = ast.parse("import sys, os\n"
                     "a = [sys.executable, '-I', '-m', 'x']\n"
                     "b = [os.path.realpath(sys.executable), '-P', '-c', 'y']\n"
                     "c = [sys.executable, '-m', 'x']\n"
                     "d = sys.executable\n"
                     "e = ['env', 'A=1', sys.executable, '-P']\n"
                     "f = argv[0] == sys.executable\n")
    assert _interpreter_uses(tree) == [(2, True), (3, True), (4, False), (5, False), (6, True),
                                       (7, True)]


def _type_only(path: Path) -> bool:
    """`import subprocess` only for its constants (DEVNULL, PIPE) passed to spawn."""
    source = path.read_text()
    uses = {n.attr for n in ast.walk(ast.parse(source))
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
            and n.value.id == "subprocess"}
    return uses <= {"DEVNULL", "PIPE", "STDOUT"}


def _strings(node: ast.AST) -> list[str]:
    """String constants, docstrings left out."""
    docs = {id(n.value) for n in ast.walk(node) if isinstance(n, ast.Expr)
            and isinstance(n.value, ast.Constant)}
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant)
            and isinstance(n.value, str) and id(n) not in docs]


def _writes(func: ast.AST) -> list[int]:
    lines = []
    for node in ast.walk(func):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else (
            node.func.id if isinstance(node.func, ast.Name) else "")
        if name in _WRITE_CALLS:
            lines.append(node.lineno)
        elif name == "open":
            modes = [s for s in _strings(node) if set(s) <= set("rwabxt+") and s]
            flags = {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}
            if any(set(m) & set("wax+") for m in modes) or flags & {"O_WRONLY", "O_RDWR"}:
                lines.append(node.lineno)
    return lines


def test_only_system_writes_under_sys_proc_and_cgroupfs() -> None:
    """A function outside the system package that names /sys, /proc or a cgroup path must not write
    files or directories (reading them is fine: sysfs facts, /proc/PID/stat)."""
    offenders = []
    for path in _modules():
        if _rel(path) in STATE_MODULES or _rel(path).startswith(STATE_PACKAGE):
            continue
        tree = ast.parse(path.read_text())
        for func in ast.walk(tree):
            if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            state_paths = [s for s in _strings(func)
                           if s.startswith(_STATE_PATHS) or "cgroup" in s]
            if state_paths:
                offenders += [f"{_rel(path)}:{ln}: {func.name} writes near {state_paths[0]!r}"
                              for ln in _writes(func)]
    assert offenders == []


def test_the_scans_find_what_they_look_for(tmp_path: Path) -> None:
    """The scans themselves can fail: planted offenders are found."""
    planted = ast.parse(
        "import os\n"
        "def f():\n"
        "    os.kill(1, 9)\n"
        "def g():\n"
        "    open('/sys/block/sda/queue/scheduler', 'w').write('none')\n")
    funcs = [n for n in ast.walk(planted) if isinstance(n, ast.FunctionDef)]
    assert _writes(funcs[1]) == [5]
    assert any(c == "os.kill" for _, c in _calls(planted))


def test_every_kind_of_change_is_in_the_system_package_and_registered() -> None:
    """A `Change` defined elsewhere would be applied outside the one undo core, and one the
    package does not import would be unknown to `restore` after a crash."""
    from backburner import system

    outside, defined = [], set()
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and any(
                    isinstance(b, ast.Name) and (b.id == "Change" or b.id in defined)
                    for b in node.bases):
                defined.add(node.name)
                if not _rel(path).startswith(STATE_PACKAGE):
                    outside.append(f"{_rel(path)}: {node.name}")
    assert outside == []

    def subclasses(cls: type) -> list[type]:
        return [c for sub in cls.__subclasses__() for c in (sub, *subclasses(sub))]

    everything = subclasses(system.Change)
    assert {c.__name__ for c in everything} >= defined  # the package imports them all
    # every concrete kind is known to `restore` by its own name (an abstract base, like
    # the tc BPF filters', is not a kind)
    concrete = [c for c in everything if not inspect.isabstract(c)]
    unregistered = [c.__name__ for c in concrete
                    if system.Change.registry.get(c.__dict__.get("kind", "")) is not c]
    assert unregistered == []
    assert len(concrete) >= 17


def test_every_module_says_what_it_is_for() -> None:
    missing = [_rel(p) for p in _modules()
               if p.read_text().strip() and ast.get_docstring(ast.parse(p.read_text())) is None]
    assert missing == []


def test_no_module_is_longer_than_a_reader_can_hold() -> None:
    long = [f"{_rel(p)}: {n} lines" for p in _modules()
            if (n := len(p.read_text().splitlines())) > MAX_LINES]
    assert long == []


def _sentences(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, text) of every string that reads as words for a person: more than MAX_WORDS
    words, or a command-line option ("--timeout"). An f-string counts as a whole, each
    placeholder a word. Docstrings are for readers of the code, and the messages of
    exceptions raised for a caller's mistake (a NaN sample, a confidence of 2) for
    programmers: neither counts."""
    skip = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)
            and isinstance(n.value, ast.Constant)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise):
            skip |= {id(n) for n in ast.walk(node)}
        elif isinstance(node, ast.JoinedStr):
            skip |= {id(n) for n in node.values}
    found = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else " X "
                           for v in node.values)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        else:
            continue
        if "--" in text or len(text.split()) > MAX_WORDS:
            found.append((node.lineno, text))
    return found


def test_the_statistics_hold_no_words() -> None:
    """`stats` returns kinds, codes and numbers; the sentences (and the advice in them, which
    names command-line options) are `report.words`'s, so one place says each thing."""
    offenders = [f"{_rel(p)}:{line}: {text!r}" for p in _modules()
                 if _rel(p).startswith(WORDLESS_PACKAGE)
                 for line, text in _sentences(ast.parse(p.read_text()))]
    assert offenders == []


def test_the_word_scan_finds_sentences() -> None:
    planted = ast.parse(
        '''"""A docstring of many words is fine."""\n'''
        "def f(n):\n"
        '''    """So is this one, it says why."""\n'''
        "    if n < 0:\n"
        "        raise ValueError(f'n must be at least 0, got {n}')\n"
        "    code = 'too-few-trials'\n"
        "    advice = f'use --trials {n}'\n"
        "    return f'only {n} trials: too few', 'run more trials to decide', code\n")
    assert [line for line, _ in _sentences(planted)] == [7, 8, 8]


# --- the kernel layer: each kernel fact stated once ----------------------------------------

KERNEL_PACKAGE = "kernel/"
#: Text that names a kernel interface only the kernel layer reads, and the packages that
#: may name it too: `system` writes a group's members, spawn's pre-exec hook its child.
KERNEL_INTERFACES = {
    "/proc/self/mountinfo": (),
    "cgroup.controllers": (),
    "cgroup.procs": ("system/", "spawn/"),
    "/sys/block": (),
}
#: Modules that still name /sys/block. The block devices, their schedulers, a disk's class
#: and a file's whole disk are `kernel/block.py`'s; what is left here reads one device's own
#: files it was handed (a loop device's backing file and dio, a disk's stat or read-ahead
#: window) or names the path in advice to the user ("echo 1 > /sys/block/DEV/...", "udevadm
#: trigger /sys/block/DEV"), and each leaves this list as it asks `kernel/block` instead. No
#: module joins it without such a reason.
SYS_BLOCK_UNTIL_DISKS = {
    "apply/diskrules.py", "apply/status.py", "bench/devices.py", "doctor/facts.py",
    "policy/disks.py", "readahead/watched.py", "report/recommend.py", "slowdisk/device.py",
    "status/sources.py", "system/loops.py",
}


def _loads_libc(tree: ast.AST) -> list[int]:
    """Lines that load the C library itself: ctypes.CDLL(None) (another library, by its
    name, is not libc)."""
    return [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call)
            and (getattr(n.func, "attr", None) == "CDLL" or getattr(n.func, "id", None) == "CDLL")
            and n.args and isinstance(n.args[0], ast.Constant) and n.args[0].value is None]


def _kernel_offenders(rel: str, tree: ast.AST) -> list[str]:
    if rel.startswith(KERNEL_PACKAGE):
        return []
    found = [f"{rel}:{line}: loads libc (kernel.syscalls has the one handle)"
             for line in _loads_libc(tree)]
    for text in _strings(tree):
        for name, allowed in KERNEL_INTERFACES.items():
            if name not in text or rel.startswith(allowed):
                continue
            if name == "/sys/block" and rel in SYS_BLOCK_UNTIL_DISKS:
                continue
            found.append(f"{rel}: names {name} ({text[:40]!r})")
    return found


def test_only_the_kernel_layer_reads_the_kernels_interfaces() -> None:
    """Where cgroups are mounted, a group's members and controllers, the C library: each
    asked of `kernel/`, which says it once."""
    offenders = [o for p in _modules()
                 for o in _kernel_offenders(_rel(p), ast.parse(p.read_text()))]
    assert offenders == []


def test_the_sys_block_allowance_only_shrinks() -> None:
    """A module on the list that no longer names /sys/block leaves it."""
    naming = {rel for p in _modules() if (rel := _rel(p)) in SYS_BLOCK_UNTIL_DISKS
              and any("/sys/block" in s for s in _strings(ast.parse(p.read_text())))}
    assert naming == SYS_BLOCK_UNTIL_DISKS


def test_the_kernel_scan_finds_what_it_looks_for() -> None:
    planted = ast.parse(
        '"""Reads /proc/self/mountinfo: a docstring may say so."""\n'
        "import ctypes, os\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "fuse = ctypes.CDLL('libfuse3.so.3')\n"
        "def f(group):\n"
        "    return open(os.path.join(group, 'cgroup.procs')).read()\n"
        "def g():\n"
        "    return open('/proc/self/mountinfo').read(), open(f'/sys/block/{x}/queue')\n")
    assert _loads_libc(planted) == [3]
    found = _kernel_offenders("net/planted.py", planted)
    assert len(found) == 4 and any("cgroup.procs" in o for o in found)
    assert any("/sys/block" in o for o in found)
    assert [o for o in _kernel_offenders("system/planted.py", planted)
            if "cgroup.procs" in o] == []  # system may write a group's members
    assert _kernel_offenders("kernel/planted.py", planted) == []
