-- Syslog senders -> tenants (router/catalog/syslog_senders.py; the listener, router/syslogd). A
-- sender is a network its messages come from (a host is a /32 or /128) or the subject common
-- name of the client certificate it shows on the TLS port when the listener asks for one
-- (SHARDLOG_SYSLOG__TLS_CLIENT_CA_FILE). The listener writes a sender's messages as the tenant
-- of its certificate's mapping, else of the longest network holding its address; a sender with
-- neither is refused (or, when SHARDLOG_SYSLOG__QUARANTINE_TENANT is set, written as that).

CREATE TABLE syslog_senders (
    -- An IPv4 network as IPv4, never IPv4-mapped IPv6 (what a dual-stack socket reports).
    network      cidr UNIQUE
        CHECK (NOT (family(network) = 6 AND network <<= '::ffff:0.0.0.0/96'::cidr)),
    certificate  text UNIQUE CHECK (char_length(certificate) BETWEEN 1 AND 255),
    tenant       text NOT NULL REFERENCES tenants (name),
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    CHECK ((network IS NULL) <> (certificate IS NULL))
);
CREATE INDEX syslog_senders_tenant_idx ON syslog_senders (tenant);

-- Every change bumps the catalog version and NOTIFYs shardlog_catalog: listeners reload.
CREATE TRIGGER syslog_senders_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON syslog_senders
    FOR EACH STATEMENT EXECUTE FUNCTION bump_catalog_version();

-- Changed by the admin API and the CLI, read by the listener (0009_catalog_role.sql).
GRANT SELECT, INSERT, UPDATE, DELETE ON syslog_senders TO shardlog_catalog;
