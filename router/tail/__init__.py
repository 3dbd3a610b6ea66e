"""Live tail: subscriptions to the rows committed from now on (router/tail/hub.py)."""
