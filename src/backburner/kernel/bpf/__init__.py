"""eBPF: the instructions (`asm`), the bpf(2) system call (`calls`: load, maps, ids, attach,
pins), and backburner's programs: on cgroups (`cgroup_programs`: the network policy's
packet and socket priorities, window clamp and congestion control) and on tc
(`tc_programs`: the classifiers, and their netlink attach).

The programs are a few instructions each, assembled here: nothing to install (no clang,
libbpf or bpftool on the machines this runs on or on the test guest), and no compiled
object to load with the BTF-aware loader a C program would need."""
