"""The scheduler: the tick that releases queued jobs, dispatching, following runs (webhooks
and the repair poll), matrix jobs GitHub never expands, the runner controller, the canary budget."""
