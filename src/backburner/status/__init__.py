"""`backburner status`: one view of everything on the back burner now, whoever put it there
(`run`, `run --pid`, `govern`, `apply`), with what the kernel has in force beside what was
set. records (the one record `run` leaves for it) -> sources (each source's state, read)
-> inforce (what the kernel reports, and where it differs) -> view (text and JSON).

Nothing is imported here: `job` writes its record through `status.records`, and the
readers import `job`.
"""
