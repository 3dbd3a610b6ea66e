#!/usr/bin/env bash
# Run make targets one after another and end with how long each took (also after a failure, for
# the parts that ran): `make test` shows where its time goes in every CI log.
# Usage: services/timed-parts.sh TARGET...
set -uo pipefail

make=${MAKE:-make}
parts=()
seconds=()
status=0
for target in "$@"; do
    start=$SECONDS
    "$make" --no-print-directory "$target" || status=$?
    parts+=("$target")
    seconds+=($((SECONDS - start)))
    [ "$status" -ne 0 ] && break
done

total=0
echo
echo "time per part (m:ss)"
for i in "${!parts[@]}"; do
    printf '  %-14s %3d:%02d\n' "${parts[$i]}" $((seconds[i] / 60)) $((seconds[i] % 60))
    total=$((total + seconds[i]))
done
printf '  %-14s %3d:%02d\n' "total" $((total / 60)) $((total % 60))
[ "$status" -ne 0 ] && echo "stopped: make ${parts[-1]} failed (exit $status)"
exit "$status"
