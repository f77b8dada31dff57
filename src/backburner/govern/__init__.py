"""`backburner govern`: a daemon that puts known bulk work on the back burner, by itself.

daemon (the loop: `proc_events` from the kernel, execwatch's filtered execs, PSI triggers)
-> governor (decisions; priorities and cgroups through one `system.LiveTransaction`), which
asks procinfo (facts, lazily) and rules (pure matching), and makes a rule's groups
(groups); throttle (PSI and the duty cycle), state (the status file). Rule files: load
(finding them) -> rulefile (parsing) -> broad (refusing rules that match too much); views
(check, explain, status as text). See docs/guide/govern.md.
"""
