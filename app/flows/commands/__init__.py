"""What people ask of the bot: PR comment commands (and the PR heads ``/sweep approve`` binds
to), and the dashboard's actions and GitHub status."""
