"""The edges to the outside world: the GitHub gateway, container registries, the broker."""
