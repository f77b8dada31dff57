"""The kernel layer: one module per kernel interface, each fact about the kernel stated
once (where cgroups are mounted, what a disk's scheduler honours, a syscall's number, how
a netlink message is framed). Everything above asks here; nothing above reads /sys/block,
/proc/self/mountinfo or cgroup.procs, or loads libc, itself (tests/test_house_rules.py)."""
