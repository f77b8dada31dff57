"""`backburner extents` on real filesystems and its pure core."""
