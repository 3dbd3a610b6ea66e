"""The router's HTTP connections: deadlines for slow clients and a cap on open connections,
which uvicorn does not enforce by itself."""
