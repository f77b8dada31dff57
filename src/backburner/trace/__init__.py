"""`trace`: what a program asked of the kernel, and what changed between two runs.

engines (strace, perf trace) -> profile (pure: the versioned JSON model) -> diff (pure: the
significance rule) -> render (terminal, Markdown, JSON, HTML). `counters` reads the kernel's
own counters for a window (interrupts, /proc/stat, PSI, per-thread schedstat) and `attribution`
attributes one block device's IO to the tasks that issued it; both are for `bench` too.
"""
