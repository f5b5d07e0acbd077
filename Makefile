# idgen: PGXS build.
#
#   make && make install             build and install against the pg_config on PATH
#   make PG_CONFIG=/path/pg_config   ... or against a chosen installation
#   make installcheck                pg_regress on a temporary preloaded instance
#   make installcheck-genes          pg_regress on a second instance with gene bits
#   make prove-installcheck          TAP tests (test/t/*.pl), each starts its own clusters
#
# The version lives in idgen.control only; everything else reads it from there.

EXTENSION = idgen
EXTVERSION = $(shell sed -n "s/^default_version *= *'\(.*\)'/\1/p" $(EXTENSION).control)

MODULE_big = idgen
OBJS = \
	src/active.o \
	src/bgworker.o \
	src/clock.o \
	src/horizon.o \
	src/horizon_wal.o \
	src/identity.o \
	src/idgen.o \
	src/info.o \
	src/interval.o \
	src/keeper.o \
	src/layout.o \
	src/lease.o \
	src/lease_acquire.o \
	src/lease_fence.o \
	src/lease_lock.o \
	src/lease_renew.o \
	src/owner_sql.o \
	src/public.o \
	src/registry.o \
	src/remote.o \
	src/seq.o \
	src/seq_admin.o \
	src/seq_cache.o \
	src/seq_held.o \
	src/seq_quota.o \
	src/seq_row.o \
	src/seq_settings.o \
	src/seq_slots.o \
	src/sequencer.o \
	src/sequencer_launcher.o \
	src/shmem.o \
	src/snowflake.o \
	src/stats.o \
	src/uuid7.o

DATA = $(wildcard sql/$(EXTENSION)--*.sql)

# The registry process (src/registry.c) talks to the registry server
# with libpq (src/remote.c).
PG_CPPFLAGS = -I$(libpq_srcdir)

# make IDGEN_ASSERTS=1: compile idgen's own Assert()s in, against a server
# built without assertions (Debian's), as test/run.sh does.  Sound: no
# struct idgen uses changes layout under USE_ASSERT_CHECKING, and idgen
# calls none of the functions only assert-enabled servers export (README,
# Development).  For testing only: a failed assertion aborts the process.
ifdef IDGEN_ASSERTS
PG_CPPFLAGS += -DUSE_ASSERT_CHECKING
endif
SHLIB_LINK_INTERNAL = $(libpq)

# Regression tests run on a temporary instance that preloads the library
# (pg_cron's idiom), so no hand-configured server is needed.
# seq_cache drops and creates the extension: leases after it would find the
# ids leased before it resting (lease_fence.c, "a dropped lease table"), so it
# runs last.
REGRESS = layout last generate errors params convert public uuid7 uuid7_core seq seq_txn seq_limits seq_options lease registry seq_cache
REGRESS_OPTS = --temp-config=test/idgen.conf --temp-instance=./tmp_regress \
	--inputdir=. --load-extension=$(EXTENSION)

# Isolation tests (specs/*.spec): races between sessions, on their own
# temporary preloaded instance.
ISOLATION = seq_race lease_race seq_cache_race seq_limit_race seq_role_limit_race public_race
ISOLATION_OPTS = --temp-config=test/idgen_isolation.conf --temp-instance=./tmp_isolation \
	--load-extension=$(EXTENSION)

# The gene tests need a different layout (gene_bits > 0), which is fixed at
# server start, so they run on a second temporary instance.
REGRESS_GENES = genes
REGRESS_GENES_OPTS = --temp-config=test/idgen_genes.conf \
	--temp-instance=./tmp_regress_genes --inputdir=. --load-extension=$(EXTENSION)

PROVE_TESTS = test/t/*.pl
EXTRA_CLEAN = tmp_regress tmp_regress_genes tmp_isolation tmp_check results output_iso \
	regression.diffs regression.out

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# PGXS tracks no header dependencies.
$(OBJS): $(wildcard src/*.h)

# make clean also cleans the stress client, which PGXS does not know.
clean: clean-stress
clean-stress:
	$(MAKE) -C test/stress clean PG_CONFIG=$(PG_CONFIG)

# Makefile.global resets PROVE_FLAGS, so set it after the include.
PROVE_FLAGS = -I test --timer

.PHONY: installcheck-genes prove-installcheck stress clean-stress version
installcheck-genes:
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
