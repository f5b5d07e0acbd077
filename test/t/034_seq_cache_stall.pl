# Scenario: a caller of a cached key is stopped (gdb holds it at a
# breakpoint) at the compare-and-swap with which it claims values without
# a lock, while another session uses up 8 192 segments of the key, so that
# the key's cursor word comes back to the very value the stopped caller
# read: the 13-bit epoch has gone round once and the offset is where it
# was.  Then the caller is let go.  Every value handed out, by either
# session, must be distinct.
#
#  - Stopped before its compare-and-swap, with the segment it copied: the
#    swap succeeds on the cursor that came back, and the caller must not
#    serve the values of the segment it copied, which the other session
#    took long ago.
#  - Stopped just after its compare-and-swap: what it claimed is too old
#    to be proved its own, and is given up (a gap); it is served anew.
#
# The key has the smallest cache (1): its segments grow to 1 024 values,
# so 8 192 of them are about 8 million values.  A debugger is a real
# stopped process, as a VM pause, a swap storm or SIGSTOP would make one.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes;
use IdgenTest;

my $node = idgen_node(
	'seq_cache_stall',
	'idgen.seq_cache_keys' => 16,
	# Each of the 8 192 segments is reserved while the session waits for
	# it; give a slow machine time.
	'idgen.seq_cache_wait' => 60000,
	# The database's idgen sequencer must stay for the whole test: one that
	# ended while no key was used (gdb attaching, session A stopped before
	# session B begins) would have the next one retire the key's entry, and
	# the cursor would not come back to the value session A read.
	'idgen.sequencer_idle' => "'1h'");
my $tmp = PostgreSQL::Test::Utils::tempdir();
my $long = 10 * $PostgreSQL::Test::Utils::timeout_default;

my $gdb = gdb_or_skip($node);

# This database's idgen sequencer serves the cached keys.
$node->safe_psql('postgres', q{SELECT idgen_seq_configure('wake', cache => 10)});
$node->poll_query_until('postgres', q{
	SELECT count(*) = 1 FROM pg_stat_activity
	WHERE backend_type = 'idgen sequencer' AND datname = current_database()})
  or die 'no idgen sequencer in this database';

# handed: each batch of values a session got (one segment's values, so a
# range with step 1), checked whole: n values, d of them distinct, lo..hi.
# cursor_of: where the key's cursor is, from what idgen_seq_cache shows
# under the entry's lock: 'era' counts the segments that became current
# (each published segment does, but the one waiting as next), so the
# cursor's epoch is era modulo 8 192; 'off' is the offset in the current
# segment.
$node->safe_psql('postgres', q{
	CREATE TABLE handed (key text, who text, lo bigint, hi bigint, n bigint, d bigint);
	CREATE FUNCTION take(k text, n bigint, who text) RETURNS void LANGUAGE sql AS $$
		INSERT INTO handed SELECT k, who, min(v), max(v), count(*), count(DISTINCT v)
		FROM idgen_seq_next(k, n::int) v
	$$;
	CREATE FUNCTION cursor_of(k text, OUT era bigint, OUT off bigint, OUT seg_left bigint)
	LANGUAGE sql AS $$
		SELECT fetches - next_ready::int, segment_last - segment_first + 1 - segment_left, segment_left
		FROM idgen_seq_cache WHERE key = k
	$$;
});

sub stall
{
	my ($where) = @_;
	my $key = "stall:$where";

	$node->safe_psql('postgres', "SELECT idgen_seq_configure('$key', cache => 1)");
	my $a = $node->background_psql('postgres');
	$a->query_safe("SELECT take('$key', 1, 'stopped')");	# its entry, in this backend too
	my $apid = $a->query_safe('SELECT pg_backend_pid()');

	# Into a segment of at least 4 values, partly used.
	$node->safe_psql('postgres', qq{
		DO \$\$
		DECLARE
			c record;
		BEGIN
			LOOP
				PERFORM take('$key', 1, 'other');
				SELECT * INTO c FROM cursor_of('$key');
				EXIT WHEN c.off >= 1 AND c.seg_left >= 1 AND c.off + c.seg_left >= 4;
			END LOOP;
		END \$\$});

	# gdb stops the backend of session A at idgen_seq_cache_claim, the
	# compare-and-swap that claims values: at its call, or at its return.
	my $g = gdb_hold($gdb, $apid, "$tmp/$where", 'idgen_seq_cache_claim', $where eq 'after' ? ('finish') : ());
	$a->query_until(qr/sent/, "\\echo sent\nSELECT take('$key', 1, 'stopped');\n");
	gdb_wait_stop($g);

	# Session B: 8 192 segment switches, then the same offset.
	my ($era, $off) = split /\|/, $node->safe_psql('postgres', "SELECT era, off FROM cursor_of('$key')");
	my $target = $era + 8192;
	my $t0 = Time::HiRes::time();
	$node->safe_psql('postgres', qq{
		DO \$\$
		DECLARE
			c record;
		BEGIN
			LOOP
				SELECT * INTO c FROM cursor_of('$key');
				IF c.era = $target THEN
					IF c.off > $off THEN
						RAISE EXCEPTION 'the cursor passed offset $off';
					END IF;
					PERFORM take('$key', $off - c.off, 'other') WHERE c.off < $off;
					EXIT;
				ELSIF c.era > $target THEN
					RAISE EXCEPTION 'the cursor passed era $target';
				ELSIF c.era = $target - 1 AND c.seg_left = 0 THEN
					PERFORM take('$key', $off, 'other');	-- switches, and takes $off
				ELSIF c.seg_left > 0 THEN
					PERFORM take('$key', c.seg_left, 'other');
				ELSE
					PERFORM take('$key', 1, 'other');	-- switches
				END IF;
			END LOOP;
		END \$\$}, timeout => $long);
	is($node->safe_psql('postgres', "SELECT era - $era, off FROM cursor_of('$key')"), "8192|$off",
		sprintf("$where: session B made 8 192 segments current and the cursor came back (%.0f s)",
			Time::HiRes::time() - $t0));

	# Let A go; its call completes.
	my ($gout, $gerr) = gdb_release($g);
	# ('finish' says "Run till exit" on stderr, and the value returned when
	# the library has debugging information.)
	ok($gout =~ /Breakpoint 1, .*idgen_seq_cache_claim/
		  && ($where eq 'before' || "$gout$gerr" =~ /Run till exit|Value returned/),
		"$where: session A was stopped $where its compare-and-swap")
	  or diag("gdb:\n$gout$gerr");
	my ($out, $ret) = $a->query("SELECT 'done'");
	is($ret, 0, "$where: session A's call completed") or diag($a->{stderr});
	$a->quit;

	is($node->safe_psql('postgres', qq{
		SELECT count(*) FILTER (WHERE n <> d OR hi - lo + 1 <> n) || ',' ||
		       count(*) FILTER (WHERE who = 'stopped')
		FROM handed WHERE key = '$key'}), '0,2', "$where: A's two calls and B's batches recorded");
	my $overlaps = $node->safe_psql('postgres', qq{
		SELECT coalesce(string_agg(format('%s got %s..%s, which %s got too', who, lo, hi, prev_who), '; '), '')
		FROM (SELECT who, lo, hi, lag(who) OVER w AS prev_who, lag(hi) OVER w AS prev_hi
		      FROM handed WHERE key = '$key' WINDOW w AS (ORDER BY lo, hi)) s
		WHERE lo <= prev_hi});
	is($overlaps, '', "$where: no value handed out twice");
	if ($where eq 'after')
	{
		# Its claim was made 8 192 segments ago: given up, served anew.
		is($node->safe_psql('postgres', qq{
			SELECT (SELECT max(lo) FROM handed WHERE key = '$key' AND who = 'stopped')
			     > (SELECT max(hi) FROM handed WHERE key = '$key' AND who = 'other')}),
			't', "$where: session A's old claim was given up, and it was served after B");
	}
}

stall('before');
stall('after');
no_crash_logged($node, 'no crash');

done_testing();
