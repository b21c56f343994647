"""HTTP: the webhook route, the dashboard and the JSON API."""
