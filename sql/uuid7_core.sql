--
-- idgen's UUIDv7 next to PostgreSQL's own (uuidv7(), uuid_extract_timestamp()
-- and uuid_extract_version(), PostgreSQL 18 and later): the same version and
-- variant bits, the same time read back by either side, and one column may
-- hold both, ordered by time.  Before 18 there is nothing to compare with:
-- expected/uuid7_core_1.out is this file's output there.
--
SELECT current_setting('server_version_num')::int >= 180000 AS core_has_uuidv7 \gset
\if :core_has_uuidv7
\else
SELECT 'no uuidv7() before PostgreSQL 18: nothing to compare' AS core_uuidv7;
\quit
\endif

-- Version 7 and the RFC variant (10), both kinds; PostgreSQL's uuidv7()
-- and idgen_uuid7() read back the same millisecond, each the other's.
CREATE TEMP TABLE both_kinds AS
    SELECT 'idgen' AS kind, idgen_uuid7() AS u FROM generate_series(1, 1000)
    UNION ALL
    SELECT 'core', uuidv7() FROM generate_series(1, 1000);
SELECT kind,
       count(*) AS n,
       count(*) FILTER (WHERE uuid_extract_version(u) = 7) AS core_says_version_7,
       count(*) FILTER (WHERE get_byte(uuid_send(u), 6) >> 4 = 7) AS version_bits_7,
       count(*) FILTER (WHERE get_byte(uuid_send(u), 8) >> 6 = 2) AS variant_bits_10,
       count(*) FILTER (WHERE idgen_uuid7_time(u) = uuid_extract_timestamp(u)) AS same_time,
       count(*) FILTER (WHERE uuid_extract_timestamp(u)
                        BETWEEN now() - interval '1 min'
                            AND clock_timestamp() + interval '100 ms') AS time_is_now
FROM both_kinds GROUP BY kind ORDER BY kind;

-- uuidv7(interval) shifts the time; idgen reads the shifted time, and its
-- range bound brackets it as for its own UUIDs.
SELECT idgen_uuid7_time(u) = uuid_extract_timestamp(u) AS same_time,
       uuid_extract_timestamp(u) < now() - interval '9 days' AS shifted,
       u >= idgen_uuid7_min(idgen_uuid7_time(u))
       AND u < idgen_uuid7_min(idgen_uuid7_time(u) + interval '1 ms') AS within_its_ms
FROM (SELECT uuidv7(interval '-10 days') AS u) s;

-- idgen's bound of a millisecond is itself a version-7 UUID of that
-- millisecond for PostgreSQL.
SELECT uuid_extract_version(m) AS version,
       uuid_extract_timestamp(m) = '2022-02-22 19:22:22+00' AS same_ms
FROM (SELECT idgen_uuid7_min('2022-02-22 19:22:22+00') AS m) s;

-- One column, both defaults: rows made a few milliseconds apart, each
-- kind in turn, sort by the key in the order they were made.
CREATE TEMP TABLE events (id uuid PRIMARY KEY DEFAULT idgen_uuid7(), n int);
DO $$
BEGIN
    FOR i IN 1..20 LOOP
        IF i % 2 = 0 THEN
            INSERT INTO events (n) VALUES (i);
        ELSE
            INSERT INTO events (id, n) VALUES (uuidv7(), i);
        END IF;
        PERFORM pg_sleep(0.003);
    END LOOP;
END
$$;
SELECT count(*) AS n,
       count(*) FILTER (WHERE n <> rank) AS out_of_order,
       count(*) FILTER (WHERE uuid_extract_version(id) = 7) AS all_version_7
FROM (SELECT n, row_number() OVER (ORDER BY id) AS rank, id FROM events) s;

-- idgen_uuid_version() is uuid_extract_version(): the same answer for
-- every variant and version.
SELECT count(*) AS n,
       count(*) FILTER (WHERE idgen_uuid_version(u) IS NOT DISTINCT FROM uuid_extract_version(u)) AS same_version
FROM (VALUES (idgen_uuid7()), (uuidv7()), (gen_random_uuid()),
             ('f81d4fae-7dec-11d0-a765-00a0c91e6bf6'::uuid),
             ('00000000-0000-0000-0000-000000000000'), ('ffffffff-ffff-ffff-ffff-ffffffffffff'),
             ('00000000-0000-4000-c000-000000000000'), ('017f22e2-79b0-7cc3-18c4-dc0c0c07398f')) v(u);

-- idgen_uuid7_shifted(shift) and uuidv7(shift) move the time alike.
SELECT abs(extract(epoch FROM idgen_uuid7_time(idgen_uuid7_shifted(interval '-10 days 3 hours'))
                            - uuid_extract_timestamp(uuidv7(interval '-10 days 3 hours')))) < 1
         AS same_shift,
       uuid_extract_version(idgen_uuid7_shifted(interval '1 year')) AS version;
