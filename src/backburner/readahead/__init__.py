"""`readahead` and `layout`: cold starts on slow media, read in one sweep.

record (fanotify + mincore) -> pack (pure format) -> replay (FIEMAP order + readahead) or
layout (hot files first: sort files for mksquashfs/xorriso, a two-pass ext4 build, a check).
"""
