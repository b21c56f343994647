"""Reading the benchmark repo's files (master configs, runners.yaml, workflows, changelog)
and the bot's own `.github/sweepbot.yml`; the lowest flow package."""
