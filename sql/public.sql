--
-- Public IDs: idgen_public / idgen_private (text) and idgen_public_bigint /
-- idgen_private_bigint (numbers), a keyed permutation (Speck64/128) of the
-- IDs.  Keys are random: only facts about the forms are shown.
--

-- The cipher against the published test vector of Speck64/128 (key
-- 1b1a1918 13121110 0b0a0908 03020100, plaintext 3b726574 7475432d,
-- ciphertext 8c6fa548 454e028b; the key's words little-endian, low word
-- first).
SELECT idgen_speck64('\x0001020308090a0b1011121318191a1b', x'3b7265747475432d'::bigint)
       = x'8c6fa548454e028b'::bigint AS speck64_128_test_vector;

-- CREATE EXTENSION makes no key (a key made at install would meet the one
-- a restore or a subscription brings): the forms wait for the first one.
SELECT count(*) AS keys, idgen_public_key_export() AS export FROM idgen_public_key;
SELECT idgen_public(1);
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_public_rotate() AS first_version;
SELECT version, length(key) AS key_bytes, retired_at IS NULL AS live FROM idgen_public_key;
SELECT length(idgen_public(1)) AS length, left(idgen_public(1), 1) AS version,
       idgen_public(1) ~ '^[0-9A-HJKMNP-TV-Z]{15}$' AS crockford_base32;

-- Round trips: 1 000 000 consecutive Snowflake IDs, all forms distinct;
-- the edge values of both forms (the text form takes every bigint, the
-- number form the non-negative ones).
CREATE TEMP TABLE ids AS SELECT idgen_snowflake() AS id FROM generate_series(1, 1000000);
SELECT count(*) AS ids,
       count(*) FILTER (WHERE idgen_private(idgen_public(id)) <> id) AS text_mismatch,
       count(DISTINCT idgen_public(id)) AS distinct_text_forms,
       count(*) FILTER (WHERE idgen_private_bigint(idgen_public_bigint(id)) <> id) AS number_mismatch,
       count(DISTINCT idgen_public_bigint(id)) AS distinct_number_forms,
       count(*) FILTER (WHERE idgen_public_bigint(id) < 0) AS negative_numbers
FROM ids;
SELECT v, idgen_private(idgen_public(v)) = v AS text_round_trip,
       CASE WHEN v >= 0 THEN idgen_private_bigint(idgen_public_bigint(v)) = v END AS number_round_trip
FROM unnest(ARRAY[0, 1, 4611686018427387904, 9223372036854775807, -1, -9223372036854775808]::bigint[]) v;
-- Lower case, and O for 0, I and L for 1, read as Crockford's decoder does.
SELECT idgen_private(lower(idgen_public(id))) = id AS lower_case,
       idgen_private(translate(idgen_public(id), '01', 'OL')) = id AS ambiguous_letters
FROM (SELECT min(id) AS id FROM ids) s;

-- Diffusion: adjacent IDs (id, id + 1) differ in one or two bits; their
-- forms in about half of the bits (mean over 100 000 pairs: 32 of 64 for
-- the cipher, 31.5 of 63 for the number form; an XOR or a linear scheme
-- stays near 1).
SELECT round(avg(bit_count((idgen_speck64('\x00112233445566778899aabbccddeeff', id)
                            # idgen_speck64('\x00112233445566778899aabbccddeeff', id + 1))::bit(64))), 1)
         BETWEEN 31.5 AND 32.5 AS cipher_half_the_bits,
       round(avg(bit_count((idgen_public_bigint(id) # idgen_public_bigint(id + 1))::bit(64))), 1)
         BETWEEN 31.0 AND 32.0 AS number_half_the_bits
FROM (SELECT id FROM ids LIMIT 100000) s;
-- Order: the forms, sorted, tell nothing of the IDs' order (Spearman's
-- rank correlation over 100 000 IDs near 0; the IDs against themselves: 1).
SELECT abs(corr(r_id, r_text)) < 0.02 AS text_order_hidden,
       abs(corr(r_id, r_number)) < 0.02 AS number_order_hidden,
       corr(r_id, r_id) AS ids_own_order
FROM (SELECT rank() OVER (ORDER BY id) AS r_id,
             rank() OVER (ORDER BY idgen_public(id) COLLATE "C") AS r_text,
             rank() OVER (ORDER BY idgen_public_bigint(id)) AS r_number
      FROM (SELECT id FROM ids LIMIT 100000) s) t;

-- Every single mistyped character of a form is refused (22P02), at every
-- position, by every other character.
DO $$
DECLARE
    form text := idgen_public(123456789);
    alphabet text := '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
    typo text;
    refused int := 0;
    decoded int := 0;
BEGIN
    FOR pos IN 1 .. 15 LOOP
        FOR c IN 1 .. 32 LOOP
            CONTINUE WHEN substr(alphabet, c, 1) = substr(form, pos, 1);
            typo := overlay(form PLACING substr(alphabet, c, 1) FROM pos FOR 1);
            BEGIN
                PERFORM idgen_private(typo);
                decoded := decoded + 1;
            EXCEPTION WHEN invalid_text_representation THEN
                refused := refused + 1;
            END;
        END LOOP;
    END LOOP;
    RAISE NOTICE 'single mistyped characters: % refused, % decoded', refused, decoded;
END
$$;

-- Errors (22P02 for a malformed form; nothing of the key in them); NULL in,
-- NULL out.
SELECT idgen_private('ABC');
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_private('1DGJ9NDXAZ8MP0U');
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_private('1ZGJ9NDXAZ8MP0P');
\echo :LAST_ERROR_SQLSTATE
-- (A form made here is random: its errors show their SQLSTATE only.)
\set VERBOSITY sqlstate
SELECT idgen_private(overlay(idgen_public(7) PLACING '9' FROM 1 FOR 1));
\set VERBOSITY default
SELECT :'LAST_ERROR_MESSAGE' LIKE 'invalid input syntax for a public ID: "9%"' AS message;
SELECT idgen_public_bigint(-1);
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_private_bigint(-5);
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_private_bigint(5, 9);
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_public(NULL) IS NULL AS a, idgen_private(NULL) IS NULL AS b,
       idgen_public_bigint(NULL) IS NULL AS c, idgen_private_bigint(NULL) IS NULL AS d;

-- Rotation: a new current key; forms of version 1 still decode; numbers
-- decode with the version named.  A rotation rolled back leaves nothing.
SELECT idgen_public(42) AS form_v1, idgen_public_bigint(42) AS number_v1 \gset
BEGIN;
SELECT idgen_public_rotate() AS rolled_back_version;
SELECT left(idgen_public(42), 1) AS version_inside;
ROLLBACK;
SELECT left(idgen_public(42), 1) AS version_after_rollback, count(*) AS keys FROM idgen_public_key;
SELECT idgen_public_rotate() AS new_version;
SELECT left(idgen_public(42), 1) AS current_version,
       idgen_public(42) <> :'form_v1' AS form_differs,
       idgen_private(:'form_v1') AS v1_form_decodes,
       idgen_private(idgen_public(42)) AS v2_form_decodes,
       idgen_private_bigint(:number_v1, 1) AS v1_number_decodes,
       idgen_public_bigint(42) <> :number_v1 AS number_differs;
-- Retired: version 1's forms are refused; the last live key cannot go.
SELECT idgen_public_retire(1) AS retired, idgen_public_retire(1) AS again;
\set VERBOSITY sqlstate
SELECT idgen_private(:'form_v1');
\set VERBOSITY default
SELECT :'LAST_ERROR_MESSAGE' = 'invalid input syntax for a public ID: "' || :'form_v1' || '"' AS message;
SELECT idgen_public_retire(2);
\echo :LAST_ERROR_SQLSTATE


-- Spellings: the canonical form is what idgen_public returns (upper case,
-- no I, L, O or U); idgen_private also reads either case, O or o as 0, and
-- I, i, L or l as 1 (Crockford's decoding).  Nothing else: no U, no hyphen,
-- no space.
SELECT idgen_public(123456789) AS canon \gset
SELECT idgen_private(lower(:'canon')) = 123456789 AS lower_case,
       idgen_private(translate(:'canon', '01', 'oi')) = 123456789 AS o_and_i,
       idgen_private(translate(:'canon', '01', 'Ol')) = 123456789 AS o_and_l,
       idgen_public(idgen_private(lower(translate(:'canon', '01', 'OI')))) = :'canon' AS canonical_again;
\set VERBOSITY sqlstate
SELECT idgen_private(left(:'canon', 7) || '-' || substr(:'canon', 8, 7));
SELECT idgen_private(' ' || left(:'canon', 14));
SELECT idgen_private(overlay(:'canon' PLACING 'U' FROM 3 FOR 1));
\set VERBOSITY default

-- An error quotes at most the first 32 characters of its input, and says
-- how long it was.
SELECT idgen_private(repeat('x', 20000000));
SELECT length(:'LAST_ERROR_MESSAGE') < 100 AS short_message;
SELECT idgen_private(repeat('Z', 40));

-- The keys are kept out of pg_statistic: ANALYZE gathers no statistics on
-- the key column.
ANALYZE idgen_public_key;
SELECT a.attname, count(s.starelid) AS statistics_rows
FROM pg_attribute a
LEFT JOIN pg_statistic s ON s.starelid = a.attrelid AND s.staattnum = a.attnum
WHERE a.attrelid = 'idgen_public_key'::regclass AND a.attname IN ('version', 'key')
GROUP BY a.attname ORDER BY a.attname;

-- Versions are never made twice: TRUNCATE and DELETE are refused (a
-- retired version stays, key and all), and the next rotation makes a
-- version above every one ever made.
SELECT max(version) AS made_before FROM idgen_public_key \gset
TRUNCATE idgen_public_key;
DELETE FROM idgen_public_key WHERE version = 1;
SELECT idgen_public_rotate() > :made_before AS above_every_version_made;
-- A version keeps its number and its key; a retired one stays retired.
\set VERBOSITY sqlstate
UPDATE idgen_public_key SET version = 9 WHERE version = 1;
UPDATE idgen_public_key SET key = '\x00000000000000000000000000000000' WHERE version = 2;
\set VERBOSITY default
SELECT :'LAST_ERROR_MESSAGE' AS message;
UPDATE idgen_public_key SET retired_at = NULL WHERE version = 1;
SELECT version, retired_at IS NULL AS live FROM idgen_public_key ORDER BY version;

-- As logical replication's workers apply rows (session_replication_role
-- 'replica'): another key for a version here retires that version, with a
-- warning, instead of failing; a delete is skipped.
SET session_replication_role = replica;
UPDATE idgen_public_key SET key = '\x00000000000000000000000000000000', retired_at = NULL WHERE version = 2;
INSERT INTO idgen_public_key VALUES (3, '\x00000000000000000000000000000000', now(), NULL);
DELETE FROM idgen_public_key WHERE version = 3;
RESET session_replication_role;
SELECT version, key <> '\x00000000000000000000000000000000' AS own_key, retired_at IS NULL AS live
FROM idgen_public_key ORDER BY version;
SELECT idgen_public_rotate() AS version_after;

-- Sharing keys: idgen_public_key_export() gives every version with its
-- key; idgen_public_key_import() adds the versions not here, merges those
-- here with the same key, and refuses the whole import if one is here
-- with another key (nothing of the key in the message).
SELECT jsonb_array_length(idgen_public_key_export()) AS versions,
       (SELECT bool_and(e ->> 'key' ~ '^[0-9a-f]{32}$') FROM jsonb_array_elements(idgen_public_key_export()) e) AS hex_keys;
SELECT idgen_public_key_import(idgen_public_key_export()) AS added_from_own_export;
SELECT idgen_public_key_import(jsonb_build_array(
    jsonb_build_object('version', 30, 'key', '000102030405060708090a0b0c0d0e0f',
                       'created_at', now(), 'retired_at', NULL),
    jsonb_build_object('version', 1, 'key', 'ffffffffffffffffffffffffffffffff',
                       'created_at', now(), 'retired_at', NULL)));
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FILTER (WHERE version = 30) AS version_30_added FROM idgen_public_key;
SELECT idgen_public_key_import(jsonb_build_array(
    jsonb_build_object('version', 30, 'key', '000102030405060708090a0b0c0d0e0f',
                       'created_at', now(), 'retired_at', NULL))) AS added;
SELECT idgen_private(idgen_public(5)) AS decodes_with_30, left(idgen_public(5), 1) AS current_version;
SELECT idgen_public_key_import('{"version": 31}');
SELECT idgen_public_key_import('[{"version": 32, "key": "000102030405060708090a0b0c0d0e0f", "created_at": "2026-01-01", "retired_at": null}]');
SELECT idgen_public_key_import('[{"version": 31, "key": "000102030405060708090a0b0c0d0e", "created_at": "2026-01-01", "retired_at": null}]');
-- An element without a version, or with a created_at that is not a
-- timestamp, is refused as invalid too, quoting neither the key nor the
-- value.
SELECT idgen_public_key_import('[{"key": "000102030405060708090a0b0c0d0e0f", "created_at": "2026-01-01", "retired_at": null}]');
SELECT idgen_public_key_import('[{"version": 31, "key": "000102030405060708090a0b0c0d0e0f", "created_at": "not a time 000102030405060708090a0b0c0d0e0f", "retired_at": null}]');
-- The last version, then none left.
SELECT idgen_public_rotate() AS last_version;
SELECT idgen_public_rotate();
-- Privileges: any role encodes and decodes; only the owner reads keys,
-- and only those granted the functions rotate and retire.
CREATE ROLE regress_idgen_public_stranger;
SET ROLE regress_idgen_public_stranger;
SELECT idgen_private(idgen_public(99)) AS stranger_round_trip;
SELECT * FROM idgen_public_key;
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_public_rotate();
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_public_retire(2);
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_public_key_export();
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_public_key_import('[]');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
-- Granted the functions, a role still reads and writes the keys with its
-- own rights only.
GRANT EXECUTE ON FUNCTION idgen_public_key_export(), idgen_public_key_import(jsonb) TO regress_idgen_public_stranger;
SET ROLE regress_idgen_public_stranger;
SELECT idgen_public_key_export();
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_public_key_import('[]');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
REVOKE EXECUTE ON FUNCTION idgen_public_key_export(), idgen_public_key_import(jsonb) FROM regress_idgen_public_stranger;
DROP ROLE regress_idgen_public_stranger;
DROP TABLE ids;
