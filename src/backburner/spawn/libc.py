"""libc for what a child does to itself with prctl(2) (its death signal, its name), loaded
once at import: a pre-exec hook runs between fork and exec, where loading a library (a
dlopen, with its locks) is not safe."""

from __future__ import annotations

import ctypes

PR_SET_PDEATHSIG = 1
PR_SET_NAME = 15
PR_SET_CHILD_SUBREAPER = 36
CLONE_NEWNET = 0x40000000
libc = ctypes.CDLL(None, use_errno=True)
