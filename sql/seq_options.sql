--
-- Per-key sequences with PostgreSQL sequences' options and rules: start,
-- step (negative too), min_value, max_value, cycle; a limit that stops
-- (2200H) unless the key cycles; configure changes only what it is given;
-- CREATE/ALTER SEQUENCE's refusals (22023) and setval's (22003).  Every
-- story runs in both modes, transactional (cache 0) and cached (cache 5,
-- served from shared memory by this database's idgen sequencer, which
-- configuring a cached key asks for: wait for it first).
--
SELECT idgen_seq_configure('opt:wake', cache => 5);
\i test/wait_sequencer.sql

-- calls(key, n, count): n calls of idgen_seq_next(key, count), each shown
-- as its values or the SQLSTATE it failed with, then the key's current
-- value, for a transactional key or one that reached its limit (a cached
-- key's current value is the end of the range reserved, which the sequencer
-- moves ahead as it prefetches).
CREATE FUNCTION calls(key text, n int, count int DEFAULT 1) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    shown text[] := '{}';
    r text;
    failed boolean;
BEGIN
    FOR i IN 1 .. n LOOP
        BEGIN
            IF count = 1 THEN
                r := idgen_seq_next(key)::text;
            ELSE
                SELECT '{' || string_agg(v::text, ',') || '}' INTO r FROM idgen_seq_next(key, count) v;
            END IF;
            failed := false;
        EXCEPTION WHEN OTHERS THEN
            r := SQLSTATE;
            failed := true;
        END;
        shown := shown || r;
    END LOOP;
    IF failed OR (SELECT k.cache FROM idgen_seq_keys k WHERE k.key = calls.key) = 0 THEN
        shown := shown || ('| current ' || coalesce(idgen_seq_current(key)::text, 'NULL'));
    END IF;
    RETURN array_to_string(shown, ' ');
END $$;

-- configure(name, options): configure keys 'name:0' (transactional) and
-- 'name:5' (cached) with the options, an idgen_seq_configure argument list
-- after the key.  A statement of its own: a transaction that configured a
-- key holds its row, and is served from it.
CREATE FUNCTION configure(name text, options text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('SELECT idgen_seq_configure(%L, %s, cache => 0)', name || ':0', options);
    EXECUTE format('SELECT idgen_seq_configure(%L, %s, cache => 5)', name || ':5', options);
END $$;

-- story(name, n, count): the calls on both keys, one row per mode, and
-- whether shared memory served the cached one.  (Each story's calls run
-- in one statement, after the statement that configured the keys.)
CREATE FUNCTION story(name text, n int, count int DEFAULT 1)
RETURNS TABLE (cache int, from_shared_memory boolean, calls text)
LANGUAGE plpgsql AS $$
DECLARE
    c int;
BEGIN
    FOREACH c IN ARRAY ARRAY[0, 5] LOOP
        cache := c;
        calls := calls(name || ':' || c, n, count);
        from_shared_memory := coalesce((SELECT m.served > 0 FROM idgen_seq_cache m
                                        WHERE m.key = name || ':' || c), false);
        RETURN NEXT;
    END LOOP;
END $$;

-- The stories, each a key name, its options, and the calls made: n calls
-- of count values.
-- The stories, each a key name, its options, the calls made (n calls of
-- count values), and the CREATE SEQUENCE options of the same numbers.
CREATE TABLE stories (id serial, name text, options text, n int, count int, sequence text);
INSERT INTO stories (name, options, n, count, sequence) VALUES
    -- a limit stops: 1, 2, 3, then 2200H, three times, and the key stays at 3
    ('max3', 'max_value => 3', 6, 1, 'MAXVALUE 3'),
    -- cycle => true goes on from min_value (1 by default)
    ('cycle3', 'max_value => 3, cycle => true', 5, 1, 'MAXVALUE 3 CYCLE'),
    -- INCREMENT 5, but a key's first value is its step (5, 10, 15 ... as
    -- before) where a sequence's is its minimum; a cycle starts at min_value
    ('step5', 'step => 5, max_value => 12, cycle => true', 6, 1, 'INCREMENT 5 MAXVALUE 12 CYCLE START 5'),
    -- given a min_value, a key starts there (as CREATE SEQUENCE does)
    ('min10', 'min_value => 10, max_value => 12, cycle => true', 5, 1, 'MINVALUE 10 MAXVALUE 12 CYCLE'),
    -- start: the first value
    ('start', 'start => 1000, max_value => 1002', 4, 1, 'START 1000 MAXVALUE 1002'),
    -- a batch that would pass the limit fails whole and takes nothing
    ('batch', 'max_value => 5', 3, 2, NULL),
    -- a batch of a key that cycles wraps in its middle
    ('batchcycle', 'max_value => 4, cycle => true', 3, 3, NULL),
    -- a negative step counts down, by default from -1 (max_value -1,
    -- min_value the start of bigint) ...
    ('down', 'step => -1', 3, 1, 'INCREMENT -1'),
    -- ... given a max_value, from there, to min_value, then 2200H
    ('countdown', 'step => -1, max_value => 3, min_value => 1', 5, 1, 'INCREMENT -1 MAXVALUE 3 MINVALUE 1'),
    ('down5', 'step => -5, min_value => -12, max_value => 12, cycle => true', 7, 1,
     'INCREMENT -5 MINVALUE -12 MAXVALUE 12 CYCLE'),
    ('downbatch', 'step => -2, max_value => 10, min_value => 1', 3, 2, NULL),
    -- the ends of bigint: a key without a max_value stops there too, and
    -- one that cycles over the whole range goes on from its other end
    ('end', 'start => 9223372036854775806', 3, 1, 'START 9223372036854775806'),
    ('end_cycle', 'start => 9223372036854775806, min_value => -9223372036854775808, cycle => true', 3, 1,
     'START 9223372036854775806 MINVALUE -9223372036854775808 CYCLE'),
    ('bottom', 'step => -1, start => -9223372036854775807', 3, 1, 'INCREMENT -1 START -9223372036854775807'),
    ('bigstep', 'step => 9223372036854775807, min_value => -9223372036854775808, start => -1, cycle => true', 4, 1,
     'INCREMENT 9223372036854775807 MINVALUE -9223372036854775808 START -1 CYCLE');
SELECT count(configure(name, options)) AS configured FROM stories;
CREATE TABLE told AS
    SELECT s.id, r.* FROM stories s, story(s.name, s.n, s.count) r;
SELECT s.name, s.options, s.n || ' x ' || s.count AS calls_made, t.cache, t.from_shared_memory, t.calls
FROM stories s JOIN told t USING (id) ORDER BY s.id, t.cache;

-- A PostgreSQL sequence with the same options gives the same numbers and
-- the same 2200H, call for call (batches aside: nextval has none).
CREATE FUNCTION sequence_calls(name text, options text, n int) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    shown text[] := '{}';
    r text;
BEGIN
    EXECUTE format('CREATE SEQUENCE %I %s', 'seq_' || name, options);
    FOR i IN 1 .. n LOOP
        BEGIN
            r := nextval(('seq_' || name)::regclass)::text;
        EXCEPTION WHEN OTHERS THEN
            r := SQLSTATE;
        END;
        shown := shown || r;
    END LOOP;
    EXECUTE format('DROP SEQUENCE %I', 'seq_' || name);
    RETURN array_to_string(shown, ' ');
END $$;
SELECT s.name, s.sequence, q.calls AS sequence_gives,
       (SELECT bool_and(split_part(t.calls, ' | ', 1) = q.calls) FROM told t WHERE t.id = s.id) AS keys_gave_the_same
FROM stories s, LATERAL (SELECT sequence_calls(s.name, s.sequence, s.n) AS calls) q
WHERE s.sequence IS NOT NULL ORDER BY s.id;

-- The error names the key and the limit, in both modes; a batch's says so.
SELECT idgen_seq_next('max3:0');
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_seq_next('max3:5');
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_seq_next('countdown:0');
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_seq_next('batch:5', 2);
\echo :LAST_ERROR_SQLSTATE
-- The batch that failed left the values below the limit for calls that fit.
SELECT calls('batch:0', 2) AS transactional, calls('batch:5', 2) AS cached;

-- setval(key, value, is_called): is_called false makes value the next one.
SELECT configure('setval', 'max_value => 100');
SELECT * FROM story('setval', 1);
SELECT idgen_seq_set('setval:0', 50, false), idgen_seq_set('setval:5', 50, false);
SELECT calls('setval:0', 2) AS transactional, calls('setval:5', 2) AS cached;
SELECT idgen_seq_set('setval:0', 99), idgen_seq_set('setval:5', 99);
SELECT calls('setval:0', 2) AS transactional, calls('setval:5', 2) AS cached;
-- restart => n: ALTER SEQUENCE ... RESTART WITH n, options kept.
SELECT idgen_seq_configure('setval:0', restart => 10), idgen_seq_configure('setval:5', restart => 10);
SELECT calls('setval:0', 2) AS transactional, calls('setval:5', 2) AS cached;
-- A key configured but not used yet has handed out nothing: current is
-- NULL, and the view's value too; a start given later moves its first value.
SELECT idgen_seq_configure('unused', max_value => 99999);
SELECT idgen_seq_current('unused') IS NULL AS current_null,
       (SELECT value IS NULL FROM idgen_seq_keys WHERE key = 'unused') AS view_null;
SELECT idgen_seq_configure('unused', start => 500);
SELECT idgen_seq_next('unused') AS starts_at_500;

-- Changing one option keeps the others (ALTER SEQUENCE ... CACHE 1000
-- changes only the cache), in both modes.
SELECT idgen_seq_configure('keep', step => 5, max_value => 999, ttl => '30 days');
SELECT idgen_seq_next('keep') AS first;
SELECT idgen_seq_configure('keep', cache => 1000);
SELECT key, value, start, step, min_value, max_value, cycle, ttl, cache FROM idgen_seq_keys WHERE key = 'keep';
SELECT idgen_seq_configure('keep', cycle => true);
SELECT idgen_seq_configure('keep', min_value => 5);
SELECT idgen_seq_configure('keep', cache => 0, ttl => '0');
SELECT key, value, start, step, min_value, max_value, cycle, ttl, cache FROM idgen_seq_keys WHERE key = 'keep';
SELECT idgen_seq_next('keep') AS goes_on;
-- Omitted arguments, and NULL ones, are kept: idgen_seq_configure(key)
-- changes nothing but creates the key if needed.
SELECT idgen_seq_configure('keep', NULL, NULL, NULL, NULL);
SELECT key, value, start, step, min_value, max_value, cycle, ttl, cache FROM idgen_seq_keys WHERE key = 'keep';

-- Refusals: each changes nothing, on a transactional key or a cached one,
-- and gives the SQLSTATE that ALTER SEQUENCE or setval() gives the same
-- request of a sequence in the same state (at 10 of 1 .. 100, step 2):
-- 22023, or 22003 for a value out of bounds.  outcome(statement) is
-- 'ok', or the SQLSTATE, message, detail and hint of its error.
CREATE FUNCTION outcome(statement text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    detail text;
    hint text;
BEGIN
    EXECUTE statement;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL, hint = PG_EXCEPTION_HINT;
    RETURN SQLSTATE || ': ' || SQLERRM
        || CASE WHEN detail <> '' THEN ' DETAIL: ' || detail ELSE '' END
        || CASE WHEN hint <> '' THEN ' HINT: ' || hint ELSE '' END;
END $$;
SELECT configure('refused', 'step => 2, max_value => 100, start => 10');
SELECT calls('refused:0', 1) AS transactional, calls('refused:5', 1) AS cached;
CREATE SEQUENCE seq_refused INCREMENT 2 MAXVALUE 100 START 10;
SELECT nextval('seq_refused');
-- (The cached key's messages are the transactional key's, but for its
-- value, which is the end of its reserved range: its SQLSTATE is shown.)
SELECT refusal, outcome(format(key_call, 'refused:0')) AS transactional_key,
       left(outcome(format(key_call, 'refused:5')), 5) AS cached_key,
       outcome(sequence_statement) AS sequence
FROM (VALUES
    ('step 0', $$SELECT idgen_seq_configure(%L, step => 0)$$,
     $$ALTER SEQUENCE seq_refused INCREMENT 0$$),
    ('min > max', $$SELECT idgen_seq_configure(%L, min_value => 5, max_value => 3)$$,
     $$ALTER SEQUENCE seq_refused MINVALUE 5 MAXVALUE 3$$),
    ('min = max', $$SELECT idgen_seq_configure(%L, min_value => 100)$$,
     $$ALTER SEQUENCE seq_refused MINVALUE 100$$),
    ('max 0, once "no maximum"', $$SELECT idgen_seq_configure(%L, max_value => 0)$$,
     $$ALTER SEQUENCE seq_refused MAXVALUE 0$$),
    ('start > max', $$SELECT idgen_seq_configure(%L, start => 101)$$,
     $$ALTER SEQUENCE seq_refused START 101$$),
    ('start < min', $$SELECT idgen_seq_configure(%L, start => 0)$$,
     $$ALTER SEQUENCE seq_refused START 0$$),
    ('min above the start', $$SELECT idgen_seq_configure(%L, min_value => 11)$$,
     $$ALTER SEQUENCE seq_refused MINVALUE 11$$),
    ('value > new max', $$SELECT idgen_seq_configure(%L, max_value => 9, start => 1)$$,
     $$ALTER SEQUENCE seq_refused MAXVALUE 9 START 1$$),
    ('restart > max', $$SELECT idgen_seq_configure(%L, restart => 101)$$,
     $$ALTER SEQUENCE seq_refused RESTART 101$$),
    ('setval > max', $$SELECT idgen_seq_set(%L, 101)$$,
     $$SELECT setval('seq_refused', 101)$$),
    ('setval < min, is_called false', $$SELECT idgen_seq_set(%L, 0, false)$$,
     $$SELECT setval('seq_refused', 0, false)$$)
) r(refusal, key_call, sequence_statement);
-- Neither the keys nor the sequence moved.
SELECT key, start, step, min_value, max_value, cycle, ttl, cache FROM idgen_seq_keys
WHERE key IN ('refused:0', 'refused:5') ORDER BY key;
SELECT calls('refused:0', 1) AS transactional, calls('refused:5', 1) AS cached,
       nextval('seq_refused') AS sequence;
DROP SEQUENCE seq_refused;
-- A new key's defaults: its start is its step (a sequence's is its
-- minimum), which must lie within its bounds; a descending key's max_value
-- is -1, as a sequence's.  And is_called is not NULL.
SELECT idgen_seq_configure('refused:new', step => 5, max_value => 3);
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_seq_configure('refused:new', step => -1, min_value => 1);
\echo :LAST_ERROR_SQLSTATE
SELECT idgen_seq_current('refused:new') IS NULL AS not_created,
       (SELECT count(*) FROM idgen_seq_keys WHERE key = 'refused:new') AS listed;
SELECT idgen_seq_set('refused:0', 50, NULL);
\echo :LAST_ERROR_SQLSTATE
DROP FUNCTION outcome(text);

-- Moving a key to bounds that exclude its value: restart in the same call.
SELECT idgen_seq_configure('refused:0', min_value => 1000, max_value => 2000, start => 1000, restart => 1000);
SELECT idgen_seq_next('refused:0') AS moved;

SELECT count(*) > 0 AS dropped FROM (SELECT idgen_seq_drop(key) FROM idgen_seq_keys
    WHERE key LIKE ANY (ARRAY['opt:%', 'max3:%', 'cycle3:%', 'step5:%', 'min10:%', 'start:%', 'batch:%',
                              'batchcycle:%', 'down%', 'countdown:%', 'end%', 'bottom:%', 'bigstep:%',
                              'setval:%', 'unused', 'keep', 'refused%'])) d;
DROP FUNCTION sequence_calls(text, text, int);
DROP TABLE told, stories;
DROP FUNCTION story(text, int, int);
DROP FUNCTION configure(text, text);
DROP FUNCTION calls(text, int, int);
