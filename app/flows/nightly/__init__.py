"""The nightly regression watch: canaries of new nightlies, change points, bisection, issues."""
