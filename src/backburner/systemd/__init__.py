"""systemd as the owner of the cgroup tree and of units: facts about it (pure), and its
D-Bus API (`bus`)."""

from .facts import (
    BOOTED_DIR,
    DEFAULT_SLICE,
    EXPAND_ENVIRONMENT_SINCE,
    SYSTEMD_RUN,
    Facts,
    check_command,
    check_unit_name,
    manages_cgroups,
    parse_version,
    read_facts,
    scope_argv,
    scope_properties,
    scope_unit_name,
    service_properties,
    slice_properties,
    tool_version,
)

__all__ = ["BOOTED_DIR", "DEFAULT_SLICE", "EXPAND_ENVIRONMENT_SINCE", "SYSTEMD_RUN", "Facts",
           "check_command", "check_unit_name", "manages_cgroups", "parse_version",
           "read_facts", "scope_argv", "scope_properties", "scope_unit_name",
           "service_properties", "slice_properties", "tool_version"]
