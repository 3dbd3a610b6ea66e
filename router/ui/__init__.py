"""The web console: static files served at /ui by router/api/console.py."""
