/*-------------------------------------------------------------------------
 *
 * convert.c
 *	  idgen_convert_column(): an existing integer key made a Snowflake one.
 *
 * The checks and every change but the last are PL/pgSQL,
 * idgen_convert_column_steps() in the extension script: which tables it
 * alters, whose they are, what depends on the column's type, the old
 * default and its sequences.  This function runs them and then sets the
 * column's default to idgen_snowflake().  It is C so that nothing in the
 * conversion calls a function of idgen's by name.  A function of the
 * extension's schema, even called qualified with its exact argument types,
 * is ambiguous (42725) once the schema's owner creates one of the same name
 * with one more, defaulted, argument; with idgen in a schema a database
 * owner owns (public, by default), that owner could make the conversion
 * fail for every role, the superuser included.  So the first ID of the
 * statement's time is computed here and passed to the steps, which are
 * called by oid; and the default is stored as a call of idgen_snowflake()
 * by its oid (a cooked default, as CREATE TABLE ... LIKE copies one), so
 * that no insert resolves its name either.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/tablecmds.h"
#include "funcapi.h"
#include "nodes/makefuncs.h"
#include "utils/array.h"
#include "utils/lsyscache.h"
#include "utils/tuplestore.h"

#include "idgen.h"
#include "idgen_layout.h"
#include "idgen_sql.h"

PG_FUNCTION_INFO_V1(idgen_convert_column);

/* The elements of the array in attribute 'attnum' of 'tuple'. */
static void
steps_column(HeapTupleHeader tuple, int attnum, Oid elemtype, Datum **elems, int *n)
{
	bool		isnull;
	Datum		array = GetAttributeByNum(tuple, attnum, &isnull);
	int16		typlen;
	bool		typbyval;
	char		typalign;

	if (isnull)
		elog(ERROR, "idgen_convert_column_steps() returned a null array");
	get_typlenbyvalalign(elemtype, &typlen, &typbyval, &typalign);
	deconstruct_array(DatumGetArrayTypeP(array), elemtype, typlen, typbyval, typalign,
					  elems, NULL, n);
}

/*
 * idgen_convert_column(tbl regclass, col name)
 *		returns table (relation regclass, column_name name, change text)
 *		One row per change made, in the caller's transaction, with the
 *		caller's rights; the last sets the default.
 */
Datum
idgen_convert_column(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Oid			tbl = PG_GETARG_OID(0);
	Name		col = PG_GETARG_NAME(1);
	const Oid	steps_args[3] = {REGCLASSOID, NAMEOID, INT8OID};
	IdgenFunction self;
	Oid			steps;
	Oid			snowflake;
	Datum		first_id;
	HeapTupleHeader result;
	Datum	   *relations;
	Datum	   *columns;
	Datum	   *changes;
	int			n;
	int			ncolumns;
	int			nchanges;
	AttrNumber	attnum;
	AlterTableCmd *cmd;

	idgen_lookup_function(fcinfo, &self);
	steps = idgen_extension_function_args(self.nspid, IDGEN_SQL_NAME(idgen_convert_column_steps),
										  3, steps_args);
	snowflake = idgen_extension_function(self.nspid, IDGEN_SQL_NAME(idgen_snowflake));
	first_id = Int64GetDatum(idgen_snowflake_min_at(GetCurrentStatementStartTimestamp()));

	/* the checks and changes; an error leaves nothing changed */
	result = DatumGetHeapTupleHeader(OidFunctionCall3(steps, ObjectIdGetDatum(tbl),
													  NameGetDatum(col), first_id));
	steps_column(result, 1, REGCLASSOID, &relations, &n);
	steps_column(result, 2, NAMEOID, &columns, &ncolumns);
	steps_column(result, 3, TEXTOID, &changes, &nchanges);
	if (n == 0 || ncolumns != n || nchanges != n)
		elog(ERROR, "idgen_convert_column_steps() returned arrays of %d, %d and %d elements",
			 n, ncolumns, nchanges);

	/*
	 * The default, on the column the steps widened to bigint, under the
	 * ACCESS EXCLUSIVE lock they took.  ALTER TABLE checks again that the
	 * caller owns the table.
	 */
	CommandCounterIncrement();
	attnum = get_attnum(tbl, NameStr(*col));
	if (attnum == InvalidAttrNumber)
		elog(ERROR, "column \"%s\" of relation %u vanished during its conversion", NameStr(*col), tbl);
	cmd = makeNode(AlterTableCmd);
	cmd->subtype = AT_CookedColumnDefault;
	cmd->num = attnum;
	cmd->def = (Node *) makeFuncExpr(snowflake, INT8OID, NIL, InvalidOid, InvalidOid,
									 COERCE_EXPLICIT_CALL);
	AlterTableInternal(tbl, list_make1(cmd), false);
	CommandCounterIncrement();

	InitMaterializedSRF(fcinfo, 0);
	for (int i = 0; i < n; i++)
	{
		Datum		values[3] = {relations[i], columns[i], changes[i]};
		bool		nulls[3] = {false, false, false};

		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
