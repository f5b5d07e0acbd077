# idgen: PGXS build.
#
#   make && make install             build and install against the pg_config on PATH
#   make PG_CONFIG=/path/pg_config   ... or against a chosen installation
#   make installcheck                pg_regress and the isolation specs against the
#                                    running server PGHOST/PGPORT/PGUSER name,
#                                    preloaded as the README says (any identity)
#   make check-instance              pg_regress on a temporary instance of its own
#                                    settings (test/idgen.conf): the tests that
#                                    need a known identity or prepared transactions
#   make check-genes                 pg_regress on a temporary instance with gene bits
#   make prove-installcheck          TAP tests (test/t/*.pl), each starts its own clusters
#
# The version lives in idgen.control only; everything else reads it from there.

EXTENSION = idgen
EXTVERSION = $(shell sed -n "s/^default_version *= *'\(.*\)'/\1/p" $(EXTENSION).control)

MODULE_big = idgen
OBJS = \
	src/base/layout.o \
	src/base/shmem.o \
	src/base/stats.o \
	src/base/interval.o \
	src/base/bgworker.o \
	src/base/owner_sql.o \
	src/clock/clock.o \
	src/horizon/horizon.o \
	src/horizon/horizon_wal.o \
	src/horizon/keeper.o \
	src/active/active.o \
	src/active/active_gate.o \
	src/active/active_claim.o \
	src/identity/identity.o \
	src/identity/remote.o \
	src/identity/registry.o \
	src/generators/snowflake.o \
	src/generators/uuid7.o \
	src/generators/convert.o \
	src/sequences/seq_settings.o \
	src/sequences/seq_row.o \
	src/sequences/seq_node.o \
	src/sequences/seq_held.o \
	src/sequences/seq_slots.o \
	src/sequences/seq_quota.o \
	src/sequences/seq_cache.o \
	src/sequences/seq.o \
	src/sequences/seq_admin.o \
	src/sequences/sequencer.o \
	src/sequences/sequencer_launcher.o \
	src/leases/lease_fence.o \
	src/leases/lease.o \
	src/leases/lease_lock.o \
	src/leases/lease_acquire.o \
	src/leases/lease_renew.o \
	src/public/public.o \
	src/top/idgen.o \
	src/top/info.o

DATA = $(wildcard sql/$(EXTENSION)--*.sql)

# src/ holds a folder per layer (src/layers), the headers (src/include) and
# compat.h, every difference between PostgreSQL versions.
# The registry process (src/identity/registry.c) talks to the registry
# server with libpq (src/identity/remote.c).
PG_CPPFLAGS = -I$(srcdir)/src/include -I$(srcdir)/src -I$(libpq_srcdir)

# make IDGEN_ASSERTS=1: compile idgen's own Assert()s in, against a server
# built without assertions (Debian's), as test/run.sh does.  Sound: no
# struct idgen uses changes layout under USE_ASSERT_CHECKING, and idgen
# calls none of the functions only assert-enabled servers export (README,
# Development).  For testing only: a failed assertion aborts the process.
ifdef IDGEN_ASSERTS
PG_CPPFLAGS += -DUSE_ASSERT_CHECKING
endif
SHLIB_LINK_INTERNAL = $(libpq)

# make installcheck: against the running server, as PGXS means it and as
# pg_buildext installcheck runs it.  pg_regress makes its own databases
# (contrib_regression, isolation_regression) and --load-extension creates
# idgen there, as PGUSER, a superuser.  The server preloads idgen with
# nothing else set (README, Installation).  The tests assume nothing more of
# it: not its identity, not counters at zero; they make their roles under
# names of their own (regress_idgen_*, as PostgreSQL's tests name theirs) and
# drop them, so a second run, or a server with other databases, passes too.
# They reset idgen_stats and count exactly: not a server in use.
# seq_cache drops and creates the extension, so it runs after the others;
# end_sequencer (and end_sequencer_iso, of the specs) ends the database's
# idgen sequencer, a session in it for idgen.sequencer_idle after the last
# use of a cached key, so that the next run can drop the database.
REGRESS = last generate errors params convert public uuid7 uuid7_core seq seq_txn seq_limits seq_options seq_cache end_sequencer
REGRESS_OPTS = --load-extension=$(EXTENSION)

# Before any test: a server that does not preload idgen would fail every
# test on the same error; say so once instead.
REGRESS_PREP = installcheck-preloaded

# Isolation tests (specs/*.spec): races between sessions, against the same
# running server, in their own database.
ISOLATION = seq_race lease_race seq_cache_race seq_limit_race seq_role_limit_race public_race end_sequencer_iso
ISOLATION_OPTS = --load-extension=$(EXTENSION)

# make check-instance: the tests that need settings of their own, on a
# temporary preloaded instance (pg_cron's idiom; PGXS refuses make check):
# a known identity other than the defaults (datacenter 3, worker 7), which
# layout, lease and registry check decoding, leasing and claims against,
# and max_prepared_transactions, which seq_2pc needs.
REGRESS_INSTANCE = layout lease registry seq_2pc
REGRESS_INSTANCE_OPTS = --temp-config=$(srcdir)/test/idgen.conf --temp-instance=./tmp_regress \
	--load-extension=$(EXTENSION) --dbname=contrib_regression

# make check-genes: a different layout (gene_bits > 0), which is fixed at
# server start, on another temporary instance.
REGRESS_GENES = genes
REGRESS_GENES_OPTS = --temp-config=$(srcdir)/test/idgen_genes.conf \
	--temp-instance=./tmp_regress_genes --load-extension=$(EXTENSION) \
	--dbname=contrib_regression

PROVE_TESTS = test/t/*.pl
EXTRA_CLEAN = tmp_regress tmp_regress_genes tmp_check results output_iso \
	regression.diffs regression.out

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# PGXS tracks no header dependencies.
$(OBJS): $(wildcard src/include/*.h) src/compat.h

# make clean also cleans the stress client, which PGXS does not know.
clean: clean-stress
clean-stress:
	$(MAKE) -C test/stress clean PG_CONFIG=$(PG_CONFIG)

# Makefile.global resets PROVE_FLAGS, so set it after the include.
PROVE_FLAGS = -I test --timer

.PHONY: installcheck-preloaded check-instance check-genes prove-installcheck stress clean-stress version
# idgen's settings exist in a session only where the library is loaded, and
# idgen.sequencer_idle is not one the README sets (set, it would be a
# placeholder even without the library).
installcheck-preloaded:
	@loaded=$$('$(bindir)/psql' -X -At -d postgres \
		-c "SELECT count(*) FROM pg_settings WHERE name = 'idgen.sequencer_idle'") || exit 1; \
	if [ "$$loaded" != 1 ]; then \
		echo "make installcheck: the server does not preload idgen" >&2; \
		echo "Add shared_preload_libraries = 'idgen' and idgen.worker_id = 1 to its configuration (README, Installation) and restart it;" >&2; \
		echo "pg_buildext: -o shared_preload_libraries=idgen -o idgen.worker_id=1 (docs/development.md)." >&2; \
		exit 1; \
	fi

check-instance:
	$(pg_regress_installcheck) $(REGRESS_INSTANCE_OPTS) $(REGRESS_INSTANCE)

check-genes:
	$(pg_regress_installcheck) $(REGRESS_GENES_OPTS) $(REGRESS_GENES)

# The TAP tests run the libpq stress client, so build it first.
prove-installcheck: stress
	$(prove_installcheck)

stress:
	$(MAKE) -C test/stress PG_CONFIG=$(PG_CONFIG)

version:
	@echo $(EXTVERSION)

# make dist: the PGXN archive idgen-VERSION.zip of the committed tree
# (HEAD; uncommitted changes are not in it), everything under
# idgen-VERSION/.  It holds what builds and tests idgen (src/, sql/,
# expected/, specs/, test/, which the Makefile's test targets read) and
# the documentation; not the CI's entry point (.ci/), Debian's packaging
# (debian/, built from the repository) or .gitignore.  test/pgxn.sh checks
# it against the PGXN Meta Spec and installs it with pgxnclient.
DIST = $(EXTENSION)-$(EXTVERSION).zip
.PHONY: dist
dist:
	git archive --format=zip --prefix=$(EXTENSION)-$(EXTVERSION)/ -o $(DIST) HEAD -- \
		. ':!.ci' ':!debian' ':!.gitignore'
EXTRA_CLEAN += $(DIST)

# Layout as PostgreSQL's own code (test/indent.sh, pg_bsd_indent): make
# indent rewrites src/, make indent-check only reports; make typedefs
# remakes src/typedefs.list from the built objects' debugging information.
.PHONY: indent indent-check typedefs
indent:
	bash test/indent.sh

indent-check:
	bash test/indent.sh --check

typedefs: $(OBJS)
	objdump --dwarf=info $(OBJS) | \
		awk '/DW_TAG_typedef/ { t = 1; next } t && /DW_AT_name/ { print $$NF; t = 0 }' | \
		LC_ALL=C sort -u > src/typedefs.list
