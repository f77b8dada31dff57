"""The words of `bench`'s options that are fixed choices (`--load-lifetime`,
`--probe-layout`): plain constants, here rather than in `config`, so that the command
line's parser offers them without importing the bench (every command builds the whole
parser: `backburner run` must not pay for `config`'s imports)."""

#: trial: the load starts and stops around every trial; cell: it runs through a block of
#: a cell's trials
LOAD_LIFETIMES = ("trial", "cell")
#: what a testbed holds of the probe's files, and how laid out
PROBE_LAYOUTS = ("touched", "directories", "aged")
