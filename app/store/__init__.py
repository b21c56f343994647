"""Queries over the database, one aggregate per module."""
