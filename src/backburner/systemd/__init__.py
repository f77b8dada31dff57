"""systemd as the owner of the cgroup tree and of units: facts about it (pure), and its
D-Bus API (`bus`)."""

from .facts import (
    BOOTED_DIR,
    DEFAULT_SLICE,
    Facts,
    check_slice_name,
    check_unit_name,
    manages_cgroups,
    read_facts,
    scope_properties,
    scope_unit_name,
    service_properties,
    slice_properties,
)

__all__ = ["BOOTED_DIR", "DEFAULT_SLICE", "Facts", "check_slice_name", "check_unit_name",
           "manages_cgroups", "read_facts", "scope_properties", "scope_unit_name",
           "service_properties", "slice_properties"]
