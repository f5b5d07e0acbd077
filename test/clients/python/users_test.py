"""psycopg2 (README block python/users.py)."""

import json

import psycopg2

from check import check, check_id, run, sql

import users


def last_id(conn):
    with conn, conn.cursor() as cur:
        cur.execute("SELECT idgen_snowflake_last()")
        return cur.fetchone()[0]


def body():
    first = users.add_user("gus")
    check("INSERT ... RETURNING id gives an int", type(first) is int, type(first))
    check_id("psycopg2", "users", first)
    check("the ID is above 2^53", first > 2 ** 53, first)
    doc = json.loads(users.user_json(first))
    check("user_json writes the ID as a string field",
          doc == {"id": str(first), "name": "gus"}, doc)
    second = users.add_user("hal")
    check("two IDs, rising", first < second, (first, second))
    check("idgen_snowflake_last() on the connection is the last ID",
          last_id(users.conn) == second, last_id(users.conn))
    try:
        sql("SELECT idgen_snowflake_last()")
        code = None
    except psycopg2.Error as e:
        code = e.pgcode
    check("idgen_snowflake_last() before a session's first ID is an error (55000)",
          code == "55000", code)


run("psycopg2", body)
