--
-- The last test of make installcheck: it ends this database's idgen
-- sequencer.  The process stays a session in its database for
-- idgen.sequencer_idle (60 s by default) after the last use of a cached key
-- there, and DROP DATABASE fails while it does (sequencer.c), so the next
-- run's pg_regress could not drop the database it starts by dropping.
-- pg_terminate_backend waits (up to 60 s) until the process has ended.
--
SELECT bool_and(pg_terminate_backend(pid, 60000)) IS NOT FALSE AS ended
FROM pg_stat_activity
WHERE backend_type = 'idgen sequencer' AND datname = current_database();
