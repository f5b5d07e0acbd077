"""test/clients/python/check.py: what the Python checks share.

Each check prints "ok: ..." or "not ok: ..."; finish() exits non-zero if
one failed.  The checks read the database through a connection of their
own, every value as text.
"""

import os
import sys
import traceback

import psycopg2

failures = 0


def check(what, cond, detail=None):
    global failures
    if cond:
        print("ok: " + what)
    else:
        failures += 1
        print("not ok: " + what + ("" if detail is None else " (got %r)" % (detail,)))
    sys.stdout.flush()


def sql(query, params=()):
    conn = psycopg2.connect(os.environ["DATABASE_URL"])
    try:
        with conn, conn.cursor() as cur:
            cur.execute(query, params)
            return cur.fetchall() if cur.description else []
    finally:
        conn.close()


def check_id(what, table, value):
    """The row with that id is in the table, the text of its id is the
    value's decimal text, and the id decodes to this cluster's datacenter
    and worker (1 and 7, test/clients.sh) and a time within a minute."""
    rows = sql("SELECT t.id::text, d.datacenter_id::text, d.worker_id::text,"
               " (abs(extract(epoch FROM d.ts - now())) < 60)::text"
               " FROM " + table + " t, idgen_snowflake_decode(t.id) d"
               " WHERE t.id = %s::text::bigint", (str(value),))
    check("%s: %s is a row's id, exactly" % (what, value),
          isinstance(value, int) and len(rows) == 1 and rows[0][0] == str(value), rows)
    check("%s: it decodes to datacenter 1, worker 7, now" % what,
          len(rows) == 1 and rows[0][1:] == ("1", "7", "true"), rows)


def run(name, body):
    global failures
    try:
        body()
    except Exception:
        failures += 1
        print("not ok: %s: %s" % (name, traceback.format_exc()))
    sys.exit(1 if failures else 0)
