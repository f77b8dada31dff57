"""`readahead` and `layout`: cold starts on slow media, read in one sweep.

record (listener: fanotify and fork events on the watched filesystems; resident: the page
cache, as pack entries) -> pack (pure format) -> replay (FIEMAP order + readahead) or
layout (hot files first: sort files for mksquashfs/xorriso, a check; ext4image: a
two-pass ext4 build).
"""
