"""slowdisk: a FUSE-served image with seek-aware timing of a spinning disk, DVD or SD card.

``model`` is the pure timing model, ``profiles`` the built-in device profiles, ``daemon`` the
FUSE file system (``python -m backburner.slowdisk.daemon``). Importing this package does not
load libfuse.
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
