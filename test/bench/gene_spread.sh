#!/usr/bin/env bash
#
# test/bench/gene_spread.sh: how genes spread over the shards of a table
# distributed by a gene column with hash distribution (Citus's), for each
# gene width and shard count, and what each width leaves of the sequence
# field.
#
#   bash test/bench/gene_spread.sh
#
# These are COMPUTATIONS on a real server, not tests.  Citus places a row by
# the hash of its distribution column, with the column type's hash function
# (hashint4 for an int gene), in one of N equal ranges of the 32-bit hash
# space: shard floor((hash + 2^31) / (2^32 / N)).  A throwaway cluster (as
# the other benchmarks make, test/bench/lib.sh) computes that for every
# gene of each width; idgen_snowflake() and idgen_snowflake_row() spread
# root rows evenly over the genes (round-robin; sql/genes.sql checks it),
# so a shard's share of rows is its share of genes.  Reported for each
# width and shard count: the fewest and most genes on a shard, their ratio
# (the most loaded shard over the least), and how many shards get none.
# Then, for the default layout (41 timestamp, 5 datacenter, 5 worker, 12
# sequence bits), the widths taken from the sequence field: IDs per
# millisecond per gene, per second per gene, and per second in all.
#
# Environment
#   PG_CONFIG          default /usr/lib/postgresql/15/bin/pg_config
#   GENE_BITS          the widths (default "4 6 8 10 12")
#   SHARD_COUNTS       the shard counts (default "8 16 32 64 128")
#   BENCH_INSTALL      1: run `make install` first when root (default 1)
#   BENCH_PORT         the socket's port number (default: a free one)
#
set -euo pipefail

PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
WIDTHS=${GENE_BITS:-4 6 8 10 12}
COUNTS=${SHARD_COUNTS:-8 16 32 64 128}
INSTALL=${BENCH_INSTALL:-1}
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PROG=gene_spread.sh
# shellcheck source=test/bench/args.sh
. "$SRC/test/bench/args.sh"

for b in $WIDTHS; do
	if ! [[ $b =~ ^[0-9]+$ ]] || [ "$b" -lt 1 ] || [ "$b" -gt 12 ]; then
		die "GENE_BITS must hold widths from 1 to 12 (the default layout's sequence field), not '$b'"
	fi
done
for n in $COUNTS; do
	positive SHARD_COUNTS "$n"
done

# shellcheck source=test/bench/lib.sh
. "$SRC/test/bench/lib.sh"

print_machine
init_cluster ""
start_cluster

section "genes over shards, by hash of the gene (hashint4, equal hash ranges)"
printf '%-10s %7s %7s %16s %10s %14s\n' "gene bits" genes shards "genes per shard" "max/min" "empty shards"
for b in $WIDTHS; do
	for n in $COUNTS; do
		sql "WITH placed AS (
				SELECT ((pg_catalog.hashint4(g)::bigint + 2147483648) / (4294967296 / $n)) AS shard
				FROM generate_series(0, (1 << $b) - 1) g),
			per_shard AS (
				SELECT s, (SELECT count(*) FROM placed p WHERE p.shard = s) AS genes
				FROM generate_series(0, $n - 1) s)
			SELECT min(genes), max(genes),
			       CASE WHEN min(genes) = 0 THEN 'none' ELSE round(max(genes)::numeric / min(genes), 2)::text END,
			       count(*) FILTER (WHERE genes = 0)
			FROM per_shard" |
		while IFS='|' read -r lo hi ratio empty; do
			printf '%-10s %7s %7s %16s %10s %14s\n' "$b" "$((1 << b))" "$n" "$lo to $hi" "$ratio" "$empty"
		done
	done
done

section "the default layout, gene bits taken from the 12-bit sequence field"
printf '%-10s %14s %16s %16s\n' "gene bits" "per ms, gene" "per s, gene" "per s, all genes"
for b in $WIDTHS; do
	per_ms=$((1 << (12 - b)))
	printf '%-10s %14s %16s %16s\n' "$b" "$per_ms" "$(fmt_int $((per_ms * 1000)))" \
		"$(fmt_int $((per_ms * 1000 * (1 << b))))"
done
echo
echo "(idgen_info() reports ids_per_second_per_gene and ids_per_second for the layout a server runs.)"
