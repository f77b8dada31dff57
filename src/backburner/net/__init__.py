"""Downloads on the back burner: a testbed with real packets over a slow link (network
namespaces, veth pairs, a router holding the link's rate and its deep buffer), the
measures of a page fetch while bulk downloads run, and the policy that keeps the bulk job's
traffic behind everything else, attributed by its cgroup."""
