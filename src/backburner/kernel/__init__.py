"""The kernel layer: one module per kernel interface, each fact stated once.

What the kernel exposes (sysfs, procfs, cgroupfs, system calls) is read and named here, and
nowhere above: a command that needs to know which IO scheduler a disk runs, which whole
disk holds a file, or whether a group's IO weight does anything on that disk asks this
layer; nothing above reimplements it (tests/test_house_rules.py). The modules only read:
changing what they describe is `system`'s (the one writer of system state).

- `block`: block devices and their IO schedulers (names, what a disk offers, the one in
  force, the whole disk of a file, the class of a disk); `disk_names`: the names of the
  classes of disk and of whole disks, apart for the command line's parser.
- `levers`: what each lever of a policy (IO class, IO weight, cgroup v2's io files, the
  charge of buffered writeback) does on one disk, read from sysfs and cgroupfs.
- `procfs`: /proc read safely (a process's status, mountinfo, a file's mount).
- `proc_events`: the netlink process connector (exec and exit as they happen).
"""
