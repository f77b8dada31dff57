"""Policies: what a job's priorities and cgroup weights are to be (`grammar`), putting them
on live threads (`live`), the groups and files their weights need (`cgroup_plan`), and
what its levers do on the disks a job uses (`disks`).

Above the kernel layer (`kernel.priorities`, `kernel.cgroups` and `kernel.levers` say what
the kernel has), below `spawn` and `system`, which apply a policy to a child before exec
and to a running tree with an undo."""
