"""The Patroni configuration every launcher renders (make up HA=1, Ansible, docker-compose)."""

from __future__ import annotations

from typing import Any

import yaml

from services.templates import render


def patroni_config(**overrides: Any) -> dict[str, Any]:
    variables: dict[str, Any] = {
        "scope": "shard01",
        "node_name": "shard01-a",
        "host": "127.0.0.1",
        "port": 25433,
        "rest_port": 25532,
        "etcd_hosts": "127.0.0.1:25632",
        "data_dir": "/var/lib/shardlog/patroni/shard01-a/data",
        "bin_dir": "/usr/lib/postgresql/15/bin",
        "home": "/var/lib/shardlog/patroni/shard01-a",
        "custom_conf": "/var/lib/shardlog/patroni/shard01-a/postgresql.base.conf",
        **overrides,
    }
    config: dict[str, Any] = yaml.safe_load(render("patroni.yml.j2", **variables))
    return config


def test_replicas_clone_with_a_fast_checkpoint() -> None:
    """Without it pg_basebackup waits for a spread checkpoint (checkpoint_completion_target x
    checkpoint_timeout) and a new replica takes many minutes to appear."""
    assert {"checkpoint": "fast"} in patroni_config()["postgresql"]["basebackup"]


def test_failover_settings() -> None:
    config = patroni_config()
    dcs = config["bootstrap"]["dcs"]
    assert dcs["ttl"] >= 20  # Patroni's floor
    assert dcs["loop_wait"] + 2 * dcs["retry_timeout"] <= dcs["ttl"]
    assert dcs["synchronous_mode"] is True
    assert dcs["failsafe_mode"] is True
    assert config["etcd"]["hosts"] == "127.0.0.1:25632"  # the v2 API section (etcd 3.4)


def test_passwords_only_when_given() -> None:
    auth = patroni_config()["postgresql"]["authentication"]
    assert "password" not in auth["superuser"]
    given = patroni_config(superuser_password="s3cret")["postgresql"]["authentication"]
    assert given["superuser"]["password"] == "s3cret"


def test_tls_required_means_hostssl_and_verified_replication() -> None:
    plain = patroni_config()["postgresql"]
    assert all(not line.startswith("hostssl") for line in plain["pg_hba"])
    assert "sslmode" not in plain["authentication"]["replication"]
    tls = patroni_config(ssl_required=True, ssl_ca_file="/tls/ca.crt")["postgresql"]
    tcp_lines = [line for line in tls["pg_hba"] if not line.startswith("local")]
    assert tcp_lines and all(line.startswith("hostssl ") for line in tcp_lines)
    for user in ("replication", "rewind"):
        assert tls["authentication"][user]["sslmode"] == "verify-full"
        assert tls["authentication"][user]["sslrootcert"] == "/tls/ca.crt"


def test_the_shared_templates_turn_tls_on() -> None:
    conf = render("postgresql.conf.j2", port=5432)
    assert "ssl = on" not in conf
    conf = render(
        "postgresql.conf.j2", port=5432, ssl=True, ssl_cert_file="/c.crt", ssl_key_file="/c.key"
    )
    assert "ssl = on" in conf and "ssl_cert_file = '/c.crt'" in conf
    assert "ssl_min_protocol_version = 'TLSv1.2'" in conf
    hba = render("pg_hba.conf.j2", ssl_required=True).splitlines()
    tcp = [line for line in hba if line.startswith("host")]
    assert tcp and all(line.startswith("hostssl ") for line in tcp)
    assert not any(line.startswith("hostssl") for line in render("pg_hba.conf.j2").splitlines())
