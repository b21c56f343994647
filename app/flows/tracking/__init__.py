"""Upstream dependency tracking: watches of recipe PRs, one watch's evaluation, tags and
containment, the bump and its PR, the status comment, and the gateway Protocols they use."""
