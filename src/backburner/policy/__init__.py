"""Policies: what a job's priorities and cgroup weights are to be (`grammar`), putting them
on live threads (`live`), and the groups and files their weights need (`cgroup_plan`).

Above the kernel layer (`kernel.priorities`, `kernel.cgroups` say what the kernel has),
below `spawn` and `system`, which apply a policy to a child before exec and to a running
tree with an undo."""
