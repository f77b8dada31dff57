"""slowdisk: a FUSE-served image with seek-aware timing of a spinning disk, DVD or SD card.

``model`` is the pure timing model of a ``drive`` (its profile), ``profiles`` the built-in
ones, ``fs`` the FUSE file system (``image`` its backing file, ``hostqueue`` the queue of a
drive that takes one command at a time), ``daemon`` the process that mounts it (``python -m
backburner.slowdisk.daemon``), ``device`` the loop device on it, ``requests`` the commands
its drive served, ``describe`` its words and the profiles' table. Importing this package
does not load libfuse.
"""

from .drive import FlatProfile, Profile
from .model import Breakdown, Counters, Disk
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
