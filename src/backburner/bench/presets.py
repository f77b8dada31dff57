"""Named bench configurations. `quick` is the README's demonstration: a few minutes, and the
classic result (BFQ and the idle IO class protect start-up from sequential readers)."""

from __future__ import annotations

import os
import shlex
import sys

from ..errors import UsageError
from .runner import BenchConfig

# A cold start of the Python interpreter running this tool, importing a few stdlib
# packages: a couple of hundred small files, read through the device under test.
PYTHON_PROBE = shlex.join([os.path.realpath(sys.executable), "-I", "-c",
                           "import json, email.parser, http.client, asyncio"])


def quick() -> BenchConfig:
    return BenchConfig(
        probe=PYTHON_PROBE,
        loads=["none", "readers:10:seq"],
        policies=["default", "background"],
        schedulers=["mq-deadline", "bfq"],
        device="testbed:4G",
        trials=8,
        settle_s=2.0,
        timeout_s=60.0,
        preset="quick",
    )


PRESETS = {"quick": quick}


def get(name: str) -> BenchConfig:
    try:
        return PRESETS[name]()
    except KeyError:
        raise UsageError(f"unknown preset {name!r}", f"presets: {', '.join(PRESETS)}") from None
