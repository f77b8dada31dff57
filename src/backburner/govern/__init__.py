"""`backburner govern`: a daemon that puts known bulk work on the back burner, by itself.

proc_events (the kernel's, shared) -> procinfo (facts, lazily) -> rules (pure matching) ->
daemon (priorities, cgroups, pauses through one `system.LiveTransaction`), throttle (PSI
and the duty cycle), state (the status file), load (rule files), views (check, explain,
status as text). See docs/govern.md.
"""
