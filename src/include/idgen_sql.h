/*-------------------------------------------------------------------------
 *
 * idgen_sql.h
 *	  SQL on the extension's tables, as the extension's owner (owner_sql.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDGEN_SQL_H
#define IDGEN_SQL_H

#include "idgen.h"
#include "executor/spi.h"

/* owner_sql.c: see there */
#define IDGEN_MAX_SQL_ARGS			13

typedef struct IdgenFunction
{
	Oid			owner;
	Oid			nspid;
} IdgenFunction;

typedef struct IdgenStatement
{
	const char *sql;			/* %1$s stands for the quoted schema */
	int			nargs;
	Oid			argtypes[IDGEN_MAX_SQL_ARGS];
	int			cursor_options; /* CURSOR_OPT_GENERIC_PLAN, or 0 */
} IdgenStatement;

typedef struct IdgenStatements
{
	const IdgenStatement *statements;
	int			count;
	SPIPlanPtr *plans;			/* count entries, each prepared on first use
								 * and kept for the backend's life */
	Oid			nspid;			/* the schema they were prepared for */
	char		nspname[NAMEDATALEN];	/* and its name then */
} IdgenStatements;

typedef struct IdgenSqlContext
{
	IdgenStatements *statements;	/* those idgen_sql_run() runs */
	Oid			nspid;			/* the extension's schema */
	Oid			save_userid;
	int			save_sec_context;
} IdgenSqlContext;

/*
 * Parameter 'position' of a statement, in its text: "$" IDGEN_SQL_PARAM(P)
 * with P a macro that names the position, and args[P - 1] where it is
 * bound, and argtypes' [P - 1] (a designated initializer).
 */
#define IDGEN_SQL_PARAM(position)	"$" CppAsString2(position)

/*
 * The name of one of the extension's SQL functions that C code calls (by
 * its oid, idgen_extension_function(), or in a statement): written so,
 * test/layers.sh checks that the function's C code is in the caller's layer
 * or a lower one, as it checks the symbols a file uses.
 */
#define IDGEN_SQL_NAME(name)		#name

extern void idgen_lookup_function(FunctionCallInfo fcinfo, IdgenFunction *fn);
extern bool idgen_lookup_extension(IdgenFunction *fn);
extern void idgen_sql_begin(const IdgenFunction *fn, IdgenStatements *st, IdgenSqlContext *cx);
extern void idgen_sql_end(IdgenSqlContext *cx);
extern IdgenStatements *idgen_sql_use(IdgenSqlContext *cx, IdgenStatements *st);
extern uint64 idgen_sql_run(IdgenSqlContext *cx, int q, Datum *values, const char *nulls);
extern uint64 idgen_sql_run_latest(IdgenSqlContext *cx, int q, Datum *values, const char *nulls);
extern uint64 idgen_sql_run_in(IdgenSqlContext *cx, int q, Datum *values, const char *nulls,
							   Snapshot snapshot);
extern Portal idgen_sql_open(IdgenSqlContext *cx, int q, Datum *values, const char *nulls,
							 bool latest);
extern Oid	idgen_extension_function(Oid nspid, const char *name);
extern Oid	idgen_extension_function_args(Oid nspid, const char *name, int nargs,
										  const Oid *argtypes);
extern Oid	idgen_extension_table(const IdgenFunction *fn, const char *name, bool missing_ok);
extern ErrorData *idgen_sql_try(void (*step) (void *arg), void *arg);

/*
 * A SQL function's argument 'n', named 'name' in the message, must not be
 * NULL (for functions that are not STRICT because some argument may be).
 */
static inline void
idgen_arg_not_null(FunctionCallInfo fcinfo, int n, const char *name)
{
	if (PG_ARGISNULL(n))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", name)));
}

#endif							/* IDGEN_SQL_H */
