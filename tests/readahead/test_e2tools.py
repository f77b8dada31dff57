"""e2tools: which line of a failing e2fsprogs tool's output says what went wrong."""

from __future__ import annotations

import pytest

from backburner import spawn
from backburner.base.errors import SystemStateError
from backburner.readahead.e2tools import complaint, must

USAGE = ("The resize maximum must be greater than the filesystem size.\n\n"
         "Bad option(s) specified: \n\nExtended options are separated by commas, and may "
         "take an argument which\n\tis set off by an equals ('=') sign.\n\n"
         "Valid extended options are:\n\tmmp_update_interval=<interval>\n"
         "\tassume_storage_prezeroed=<0 to disable, 1 to enable>\n")
POPULATE = ("__populate_fs: Ext2 file already exists while populating file system\n"
            "mke2fs: Ext2 file already exists while populating file system\n")


def test_the_complaint_not_the_usage_text() -> None:
    assert complaint(USAGE, "mke2fs") == ("The resize maximum must be greater than the "
                                          "filesystem size.")
    assert complaint(POPULATE, "mke2fs") == ("mke2fs: Ext2 file already exists while "
                                             "populating file system")
    assert complaint("resize2fs 1.47.0\nPlease run 'e2fsck -f x.img' first.\n\n",
                     "resize2fs") == "Please run 'e2fsck -f x.img' first."
    assert complaint("", "mke2fs") == ""


def test_must_says_what_failed_in_one_line() -> None:
    must(spawn.ToolResult(0, "", USAGE), "mke2fs -d")
    with pytest.raises(SystemStateError) as err:
        must(spawn.ToolResult(1, "", POPULATE), "mke2fs -d (the first pass)")
    assert err.value.message == ("mke2fs -d (the first pass) failed: mke2fs: Ext2 file already "
                                 "exists while populating file system")
    with pytest.raises(SystemStateError) as err:
        must(spawn.ToolResult(None, "", ""), "resize2fs")
    assert err.value.message == "resize2fs failed: timed out"
