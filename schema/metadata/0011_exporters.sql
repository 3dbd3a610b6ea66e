-- Flow exporters -> switches (router/catalog/exporters.py; the collector, router/collector). An
-- exporter is known by its address as the collector sees it and, when one address exports for
-- several devices, by its observation domain (NetFlow v9 source id, IPFIX observation domain
-- id); a NULL domain maps every domain of the address that has no mapping of its own. Its flows
-- go to the switch key, of the tenant.

CREATE TABLE exporters (
    -- One host, one spelling: no prefix, and an IPv4 exporter as IPv4, never IPv4-mapped IPv6
    -- (what a dual-stack socket reports for it).
    address     inet NOT NULL
        CHECK (masklen(address) = CASE family(address) WHEN 4 THEN 32 ELSE 128 END)
        CHECK (NOT (family(address) = 6 AND address <<= '::ffff:0.0.0.0/96'::inet)),
    domain      bigint CHECK (domain BETWEEN 0 AND 4294967295),
    switch      text NOT NULL CHECK (char_length(switch) BETWEEN 1 AND 256),
    tenant      text NOT NULL REFERENCES tenants (name),
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE NULLS NOT DISTINCT (address, domain)
);
CREATE INDEX exporters_tenant_idx ON exporters (tenant);
CREATE INDEX exporters_switch_idx ON exporters (switch);

-- Every change bumps the catalog version and NOTIFYs shardlog_catalog, like the other catalog
-- tables: routers and the collector reload.
CREATE TRIGGER exporters_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON exporters
    FOR EACH STATEMENT EXECUTE FUNCTION bump_catalog_version();

-- Changed by the admin API and the CLI, read by the collector (0009_catalog_role.sql).
GRANT SELECT, INSERT, UPDATE, DELETE ON exporters TO shardlog_catalog;
