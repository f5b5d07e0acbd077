--
-- UUIDv7 (RFC 9562).  Raw UUIDs are never shown for generated values: only
-- facts about them.
--

-- RFC 9562 Appendix A.6: the example UUIDv7 and its time.
SELECT idgen_uuid7_time('017f22e2-79b0-7cc3-98c4-dc0c0c07398f') = '2022-02-22 19:22:22+00' AS rfc_example;
-- Not version 7, or not the RFC variant: NULL.
SELECT idgen_uuid7_time('919108f7-52d1-4320-9bac-f847db4148a8') IS NULL AS v4_is_null,
       idgen_uuid7_time('017f22e2-79b0-7cc3-18c4-dc0c0c07398f') IS NULL AS wrong_variant_is_null,
       idgen_uuid7_time('00000000-0000-0000-0000-000000000000') IS NULL AS nil_is_null,
       idgen_uuid7_time(NULL) IS NULL AS null_is_null;

-- idgen_uuid7_min: the millisecond, version 7, variant 10, all else zero.
SELECT idgen_uuid7_min('2022-02-22 19:22:22+00') AS rfc_example_ms,
       idgen_uuid7_min('1970-01-01 00:00:00+00') AS unix_epoch,
       idgen_uuid7_min('2022-02-22 19:22:22.0009+00') AS truncated_to_ms;

SELECT idgen_stats_reset();

-- One million UUIDs from one backend: all version 7, variant 10, distinct,
-- strictly increasing in generation order, and never ahead of the clock
-- (read just after each) by more than idgen.max_drift.
CREATE TEMP TABLE u AS
    SELECT g, idgen_uuid7() AS id, clock_timestamp() AS after
    FROM generate_series(1, 1000000) g;
SELECT count(*) AS n,
       count(DISTINCT id) AS distinct_ids,
       count(*) FILTER (WHERE substr(id::text, 15, 1) <> '7') AS not_version_7,
       count(*) FILTER (WHERE substr(id::text, 20, 1) NOT IN ('8', '9', 'a', 'b')) AS not_variant_10,
       count(*) FILTER (WHERE idgen_uuid7_time(id) IS NULL) AS time_null,
       count(*) FILTER (WHERE idgen_uuid7_time(id) > date_trunc('milliseconds', after) + interval '100 ms') AS ahead_of_drift,
       count(*) FILTER (WHERE idgen_uuid7_time(id) < date_trunc('milliseconds', after) - interval '10 s') AS far_behind
FROM u;
SELECT count(*) FILTER (WHERE id <= prev) AS not_increasing
FROM (SELECT id, lag(id) OVER (ORDER BY g) AS prev FROM u) s;
-- Range bounds: min(time(u)) <= u < min(time(u) + 1 ms).
SELECT bool_and(id >= idgen_uuid7_min(idgen_uuid7_time(id))) AS lower_bound,
       bool_and(id <  idgen_uuid7_min(idgen_uuid7_time(id) + interval '1 ms')) AS upper_bound
FROM u;

-- The random tail: every one of the 62 rand_b bits is set in 50% of
-- 100 000 UUIDs within 0.02.  The standard deviation of such a fraction is
-- 0.0016, so 0.02 is over 12 deviations: a healthy source never fails, and a
-- constant or stuck bit (fraction 0 or 1) always does.  The two variant bits
-- are always 1 0.
CREATE TEMP TABLE tail AS
    SELECT decode(replace(id::text, '-', ''), 'hex') AS b FROM u WHERE g <= 100000;
SELECT count(*) AS rand_b_bits,
       count(*) FILTER (WHERE abs(frac - 0.5) > 0.02) AS biased_bits,
       min(frac) > 0.45 AND max(frac) < 0.55 AS all_near_half
FROM (SELECT k, avg(get_bit(b, k)) AS frac
      FROM tail, generate_series(64, 127) k
      WHERE k NOT IN (70, 71)          -- byte 8, bits 6 and 7: the variant
      GROUP BY k) s;
SELECT count(*) FILTER (WHERE get_bit(b, 71) = 1 AND get_bit(b, 70) = 0) AS variant_10
FROM tail;
-- No two tails are equal: the 62 bits are not a counter or a constant.
SELECT count(DISTINCT substr(b, 9, 8)) AS distinct_tails FROM tail;

-- Statistics.
SELECT kind, ids, errors FROM idgen_stats WHERE kind = 'uuid7';

-- A primary key default.
CREATE TABLE events (id uuid PRIMARY KEY DEFAULT idgen_uuid7(), what text);
INSERT INTO events (what) SELECT 'e' || g FROM generate_series(1, 1000) g;
SELECT count(*) AS recent
FROM events
WHERE id >= idgen_uuid7_min(now() - interval '1 minute')
  AND id <  idgen_uuid7_min(now() + interval '1 minute');
DROP TABLE events;

-- Backfills: idgen_uuid7(ts) carries ts (to the ms) and its version and
-- variant; rand_a holds the sub-millisecond fraction, so it sorts after
-- min(ts) and before min(ts + 1 ms).
SELECT count(*) AS n,
       count(*) FILTER (WHERE idgen_uuid7_time(idgen_uuid7(t)) <> date_trunc('milliseconds', t)) AS wrong_time,
       count(*) FILTER (WHERE idgen_uuid7(t) < idgen_uuid7_min(t)
                         OR idgen_uuid7(t) >= idgen_uuid7_min(t + interval '1 ms')) AS out_of_its_ms
FROM (SELECT '1970-01-01 00:00:00+00'::timestamptz + random() * interval '200 years' AS t
      FROM generate_series(1, 10000)) s;
SELECT substr(idgen_uuid7(timestamptz '2022-02-22 19:22:22.5+00')::text, 1, 19) AS backfill_prefix;

-- Out of UUIDv7's range: errors.
SELECT idgen_uuid7(timestamptz '1969-12-31 23:59:59+00');
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_uuid7_min('infinity');
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_uuid7_min('-infinity');
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_uuid7_min('10890-01-01 00:00:00+00');
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_uuid7(NULL) IS NULL AS strict_null, idgen_uuid7_shifted(NULL) IS NULL AS shift_null,
       idgen_uuid7_min(NULL) IS NULL AS min_null, idgen_uuid_version(NULL) IS NULL AS version_null;

-- idgen_uuid7_shifted(shift), PostgreSQL 18's uuidv7(shift): the next UUIDv7 with
-- its time moved, here by an hour and by ten days back.
SELECT idgen_uuid7() AS before \gset
SELECT idgen_uuid7_shifted(interval '1 hour') AS later, idgen_uuid7_shifted(interval '-10 days') AS earlier \gset
SELECT idgen_uuid7_time(:'later') - idgen_uuid7_time(:'before')
         BETWEEN interval '1 hour' AND interval '1 hour 1 second' AS one_hour_on,
       idgen_uuid7_time(:'earlier') - idgen_uuid7_time(:'before')
         BETWEEN interval '-10 days' AND interval '-10 days 1 second' AS ten_days_back,
       idgen_uuid_version(:'later') AS version,
       idgen_uuid7_last() = :'earlier' AS last_is_the_shifted;
-- A shift of fixed length keeps the server's order: 10 000 made with one
-- shift, in the order made, are strictly increasing; and each is spent, so
-- the unshifted ones before and after still are.
SELECT count(*) FILTER (WHERE u <= prev) AS out_of_order,
       count(DISTINCT u) AS distinct_uuids
FROM (SELECT u, lag(u) OVER (ORDER BY g) AS prev
      FROM (SELECT g, idgen_uuid7_shifted(interval '-2 hours 0.5 ms') AS u
            FROM generate_series(1, 10000) g) s) t;
SELECT idgen_uuid7() AS after_ \gset
SELECT :'before'::uuid < :'after_'::uuid AS unshifted_still_increasing;
-- The time is truncated to the millisecond, as idgen_uuid7()'s.
SELECT bool_and(idgen_uuid7_time(u) = date_trunc('milliseconds', idgen_uuid7_time(u))) AS whole_ms
FROM (SELECT idgen_uuid7_shifted(interval '0.7 ms') AS u FROM generate_series(1, 100)) s;
-- Out of UUIDv7's range after the shift: the error of idgen_uuid7(ts),
-- whose message names the time (so only its SQLSTATE is shown here).
\set VERBOSITY sqlstate
SELECT idgen_uuid7_shifted(interval '-100 years');
SELECT idgen_uuid7_shifted(interval '9000 years');
\set VERBOSITY default
SELECT :'LAST_ERROR_MESSAGE' LIKE 'timestamp "11%" is out of range for idgen_uuid7_shifted()' AS message;
-- A string literal is the time of a backfill, and a shift for
-- idgen_uuid7_shifted: each name has one signature.
SELECT idgen_uuid7_time(idgen_uuid7('2020-05-01 12:00+00')) = '2020-05-01 12:00+00' AS literal_is_a_time,
       idgen_uuid7_time(idgen_uuid7_shifted('-1 hour')) < now() - interval '59 minutes' AS literal_is_a_shift;
-- A shift given to idgen_uuid7 is not a time.
\set VERBOSITY terse
SELECT idgen_uuid7('1 hour');
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY default

-- idgen_uuid_version, PostgreSQL 18's uuid_extract_version(): the version
-- nibble of RFC 9562 UUIDs, NULL for the other variants (nil, max, and
-- Microsoft's 110 variant).
SELECT idgen_uuid_version(idgen_uuid7()) AS idgen_v7,
       idgen_uuid_version(gen_random_uuid()) AS random_v4,
       idgen_uuid_version('f81d4fae-7dec-11d0-a765-00a0c91e6bf6') AS rfc_v1_example,
       idgen_uuid_version('00000000-0000-0000-0000-000000000000') IS NULL AS nil_null,
       idgen_uuid_version('ffffffff-ffff-ffff-ffff-ffffffffffff') IS NULL AS max_null,
       idgen_uuid_version('00000000-0000-4000-c000-000000000000') IS NULL AS microsoft_null;
