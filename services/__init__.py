"""Process controllers for the services shardlog runs on: PostgreSQL instances and the router."""
