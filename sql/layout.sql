--
-- The default layout (41/5/5/12/0) and the functions that read IDs.
-- This instance runs with idgen.datacenter_id = 3, idgen.worker_id = 7
-- (make check-instance, test/idgen.conf): an identity other than the
-- defaults, so that a field read or written in the wrong place shows.
--
SELECT preloaded, layout_valid, layout_error, timestamp_bits, datacenter_bits,
       worker_bits, sequence_bits, gene_bits, datacenter_id, worker_id,
       epoch = '2024-01-01 00:00:00+00' AS default_epoch, genes,
       ids_per_second_per_gene, ids_per_second,
       timestamp_end = '2024-01-01 00:00:00+00'::timestamptz + 2199023255552 * interval '1 ms' AS end_is_epoch_plus_2_41_ms,
       years_left > 60 AS decades_left,
       shmem_bytes < 1024 * 1024 AS shmem_under_1mib
FROM idgen_info();
-- Generated IDs carry that identity (generate.sql checks many, against
-- whatever identity the server has).
SELECT datacenter_id, worker_id, gene FROM idgen_snowflake_decode(idgen_snowflake());

-- Seed 004's published example (layout 41/5/5/12, its own epoch): server
-- (datacenter) 1, worker 2, sequence 1, 326570168 ms after the epoch.
SELECT datacenter_id, worker_id, sequence, gene,
       ts - '2024-01-01 00:00:00+00' AS since_epoch
FROM idgen_snowflake_decode(1369734562062337);
SELECT idgen_snowflake_time(1369734562062337) - '2024-01-01 00:00:00+00' AS since_epoch;
SELECT idgen_snowflake_debug(1369734562062337);
SELECT idgen_snowflake_debug(0);
SELECT idgen_snowflake_debug(9223372036854775807);

-- The largest ID decodes to every field at its maximum.
SELECT datacenter_id, worker_id, sequence, gene,
       ts = (SELECT timestamp_end FROM idgen_info()) - interval '1 ms' AS last_ms
FROM idgen_snowflake_decode(9223372036854775807);

-- idgen_snowflake_min: the time field shifted into place, all else zero.
SELECT idgen_snowflake_min('2024-01-01 00:00:00+00') AS at_epoch,
       idgen_snowflake_min('2024-01-01 00:00:00.001+00') AS one_ms,
       idgen_snowflake_min('2024-01-01 00:00:00.0019+00') AS truncated_to_ms,
       idgen_snowflake_min('2023-06-01 00:00:00+00') AS before_epoch,
       idgen_snowflake_min('-infinity') AS minus_infinity;
SELECT idgen_snowflake_min(idgen_snowflake_time(1369734562062337))
       = 1369734562062337 & ~((1::bigint << 22) - 1) AS min_clears_low_fields;

-- Round trip: decode then rebuild gives the same ID, for random 63-bit IDs
-- (PostgreSQL's << and | share one precedence level: parenthesise).
SELECT bool_and(((extract(epoch FROM d.ts - '2024-01-01 00:00:00+00') * 1000)::bigint << 22)
                 | (d.datacenter_id::bigint << 17) | (d.worker_id::bigint << 12)
                 | d.sequence::bigint = x.id) AS decode_round_trip,
       count(DISTINCT d.datacenter_id) AS datacenters_seen,
       count(DISTINCT d.worker_id) AS workers_seen
FROM (SELECT ((random() * 2147483647)::bigint << 32) | (random() * 4294967295)::bigint AS id
      FROM generate_series(1, 10000)) x,
     LATERAL idgen_snowflake_decode(x.id) d;
SELECT bool_and(idgen_snowflake_time(idgen_snowflake_min(t)) = date_trunc('milliseconds', t))
       AS min_time_round_trip
FROM (SELECT '2024-01-01 00:00:00+00'::timestamptz + random() * interval '60 years' AS t
      FROM generate_series(1, 10000)) x;

-- idgen_snowflake_compose is decode's inverse: every field in place, the
-- time truncated to the millisecond; and it gives back random IDs whole.
SELECT idgen_snowflake_compose('2024-01-01 00:00:00.0019+00', 0, 0) AS one_ms_defaults,
       idgen_snowflake_compose('2024-01-01 00:00:00+00', 31, 0) AS top_datacenter,
       idgen_snowflake_compose('2024-01-01 00:00:00+00', 0, 31) AS top_worker,
       idgen_snowflake_compose('2024-01-01 00:00:00+00', 0, 0, 4095) AS top_sequence,
       idgen_snowflake_compose('2024-01-01 00:00:00.001+00', 3, 7, 5) = (1::bigint << 22) | (3 << 17) | (7 << 12) | 5
         AS fields_in_place;
SELECT bool_and(idgen_snowflake_compose(d.ts, d.datacenter_id, d.worker_id, d.sequence, d.gene) = x.id)
         AS compose_inverts_decode
FROM (SELECT ((random() * 2147483647)::bigint << 32) | (random() * 4294967295)::bigint AS id
      FROM generate_series(1, 10000)) x,
     LATERAL idgen_snowflake_decode(x.id) d;
SELECT idgen_snowflake_decode(idgen_snowflake_compose('2026-11-26 12:34:56.789+00', 2, 9, 77)) AS decoded;

-- idgen_gene reads low bits of any value.
SELECT idgen_gene(191, 4) AS g191, idgen_gene(189, 4) AS g189,
       idgen_gene(191, 3) AS g191_3bits, idgen_gene(-1, 4) AS minus_one,
       idgen_gene(191, 0) AS zero_bits, idgen_gene(191) AS default_bits,
       idgen_gene(9223372036854775807, 31) AS bits31;
