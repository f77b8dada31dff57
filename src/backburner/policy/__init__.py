"""Policies as they meet the machine: what a policy's levers do on the disks a job uses."""
