"""Thin HTTP routes; the work happens in the services they call."""
