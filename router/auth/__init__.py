"""Tenants, API tokens and scopes: who may call /v1, for which tenant's keys, at what rate."""
