"""slowdisk: a FUSE-served image with seek-aware timing of a spinning disk, DVD or SD card.

``model`` is the pure timing model, ``profiles`` the built-in device profiles, ``fs`` the
FUSE file system (``image`` its backing file, ``hostqueue`` the queue of a drive that takes
one command at a time), ``daemon`` the process that mounts it (``python -m
backburner.slowdisk.daemon``), ``device`` the loop device on it. Importing this package does
not load libfuse.
"""

from .model import Breakdown, Counters, Disk, FlatProfile, Profile
from .profiles import get_profile, list_profiles, profile_names

__all__ = [
    "Breakdown",
    "Counters",
    "Disk",
    "FlatProfile",
    "Profile",
    "get_profile",
    "list_profiles",
    "profile_names",
]
