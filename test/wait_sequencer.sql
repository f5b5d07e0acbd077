-- Wait (up to 30 s) for this database's idgen sequencer, which serves
-- cached keys: configuring a cached key asks the idgen sequencer launcher for it.
-- Included by the regression tests of cached keys (\i, from the tree's root).
DO $$
BEGIN
    FOR i IN 1 .. 300 LOOP
        EXIT WHEN EXISTS (SELECT FROM pg_stat_activity
                          WHERE backend_type = 'idgen sequencer' AND datname = current_database());
        PERFORM pg_sleep(0.1);
        PERFORM pg_stat_clear_snapshot();
    END LOOP;
END $$;
