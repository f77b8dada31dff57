"""The words of `report`'s and `compare`'s options that are fixed choices: the export
formats (`--export-FORMAT`, `--format`) and what `compare --by` groups a database by.
Plain constants, apart from the modules that use them, so that the command line's parser
offers them without importing the reports (every command builds the whole parser:
`backburner run` must not load the store or numpy). The plot formats are `plot_formats`'.
"""

#: The export formats, in the order `--help` lists them; each module of `export/`
#: registers one of these.
EXPORT_FORMATS = ("csv", "json", "markdown", "hyperfine-json")
#: What `compare --by` compares the groups of one database by.
GROUPINGS = ("machine", "kernel", "run")
