"""Deliveries after the request (store, claim, route, retry, reap), every capability's handlers
composed, redelivery of what GitHub failed to send, resync of a busy repo, history retention."""
