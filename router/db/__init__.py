"""Database plumbing: connection pools, DSN checks, migrations."""
