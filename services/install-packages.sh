#!/usr/bin/env bash
# Install the Debian packages shardlog runs on, only those missing. Safe to repeat.
# Usage: services/install-packages.sh PACKAGE...
set -euo pipefail

missing=()
for package in "$@"; do
    if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$package")
    fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        sudo="sudo"
    else
        echo "shardlog: missing packages: ${missing[*]}; install them as root" >&2
        exit 1
    fi
fi

# The Debian server package would create and start a system cluster on port 5432; shardlog
# runs its own instances, so ask postgresql-common not to (only if nobody configured it yet).
if [[ " ${missing[*]} " == *" postgresql-15 "* ]] && [ ! -e /etc/postgresql-common/createcluster.conf ]; then
    $sudo mkdir -p /etc/postgresql-common
    echo "create_main_cluster = false" | $sudo tee /etc/postgresql-common/createcluster.conf >/dev/null
fi

# etcd-server and haproxy would start system-wide daemons on install (etcd on 2379, haproxy
# with the stock config); shardlog starts its own. A policy-rc.d answering 101 ("action
# forbidden") keeps invoke-rc.d from starting anything, and goes away again afterwards.
policy=/usr/sbin/policy-rc.d
own_policy=""
if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null
    $sudo chmod 755 "$policy"
    own_policy=1
fi
trap '[ -n "$own_policy" ] && $sudo rm -f "$policy"' EXIT

echo "shardlog: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
