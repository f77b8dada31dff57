"""Files backburner reads for the user, writes for the user, or creates as root: `infile`
(regular files with a size bound, never a FIFO or a device), `outfile` (whole or not at
all, never over a device), `safepath` (no path another user could have planted), and
`logtail` (the end of a helper's log)."""
