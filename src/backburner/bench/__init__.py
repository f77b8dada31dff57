"""The benchmark: start-up latency of a probe under background load, across a matrix."""
