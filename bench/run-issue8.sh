#!/bin/sh
# Issue 8 benchmark cases at full size: floe of this checkout against DuckDB
# on the same files, one case at a time (each its own floe-bench process).
#
#   bench/run-issue8.sh [OUTDIR]          (CASES="keys1m filter" to pick)
#
# FLOE_BENCH_ARGS is appended to every floe-bench command line (later flags
# win), e.g. "--rows 200000 --files 20 --growing-rows 200000" for a smoke test.
#
# Data sets are generated once under $FLOE_BENCH_DATA (default /tmp/fb-data)
# and reused. Each case writes OUTDIR/<case>.md (the tables) and
# OUTDIR/<case>.log (every run).
set -u
cd "$(dirname "$0")" || exit 2
out=${1:-/tmp/fb-results-$(date -u +%Y%m%dT%H%M)}
data=${FLOE_BENCH_DATA:-/tmp/fb-data}
mkdir -p "$out" || exit 2
go build -o "$out/floe-bench" ./cmd/floe-bench || exit 2
echo "commit $(git rev-parse --short HEAD), nproc $(nproc), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)" > "$out/machine.txt"
status=0
for k in ${CASES:-keys1m growing sliding filter tumbling}; do
	echo "== $k $(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/progress.log"
	"$out/floe-bench" --data "$data" --rows 10000000 --files 100 --users 10000 --users-large 1000000 \
		--growing-rows 2000000 --growing-users 200000 --growing-files-per-epoch 4 \
		--filter-files-per-epoch 10,50,100 --runs 3 --cases "$k" ${FLOE_BENCH_ARGS:-} \
		>"$out/$k.md" 2>"$out/$k.log"
	rc=$?
	echo "   $k exit $rc $(date -u +%H:%M:%S)" | tee -a "$out/progress.log"
	[ $rc -ne 0 ] && status=$rc
done
cat "$out"/*.md
exit $status
