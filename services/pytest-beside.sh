#!/usr/bin/env bash
# The test suite, with tests/ha and tests/bench run beside the rest: the HA fault tests wait on
# Patroni's clocks (a leader key's 20 s ttl, etcd stopped for 25 s, a primary's failover) far
# more than they compute, and bring their own cluster (its own ports, below the other tests'
# range, and its own basetemp); the benchmarks' tiny runs each start a cluster and routers of
# their own on free ports and write their results to a temporary directory. Neither needs
# anything of the other tests' session. Their output follows the rest's. With arguments, one
# pytest of exactly those (the quick loop: `make pytest PYTEST_ARGS=...`).
# Usage: services/pytest-beside.sh PYTEST [ARGS...]
set -uo pipefail

pytest=$1
shift
if [ "$#" -gt 0 ]; then
    exec "$pytest" --durations=25 "$@"
fi

scratch=$(mktemp -d /tmp/shardlog-ha-tests-XXXXXX)
"$pytest" --durations=10 -p no:cacheprovider --basetemp="$scratch/tmp" tests/ha tests/bench \
    >"$scratch/log" 2>&1 &
beside=$!
# Interrupted: the HA run ends too, through its fixtures' teardown (SIGINT is pytest's ^C).
trap 'kill -INT "$beside" 2>/dev/null; wait "$beside"; exit 130' INT TERM

"$pytest" --durations=25 --ignore=tests/ha --ignore=tests/bench
status=$?
wait "$beside"
beside_status=$?
trap - INT TERM

echo
echo "=============== tests/ha and tests/bench, run beside the rest (exit $beside_status) ==============="
cat "$scratch/log"
if [ "$beside_status" -eq 0 ]; then
    rm -rf "$scratch"
else
    echo "tests/ha or tests/bench failed: their servers' data and logs are kept in $scratch"
fi
[ "$status" -ne 0 ] && exit "$status"
exit "$beside_status"
