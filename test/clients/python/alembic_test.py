"""Alembic (block python/alembic_env.py): autogenerate proposes dropping
idgen's tables, with include_schemas=True or without, and with the
include_name filter proposes nothing about them."""

import os

import psycopg2
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine

from check import check, run

import alembic_env
import invoices


def idgen_drops(opts, database=None):
    url = invoices.engine.url
    engine = create_engine(url if database is None else url.set(database=database))
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn, opts=opts), invoices.Base.metadata)
    engine.dispose()
    flat = []
    for d in diff:
        flat.extend(d if isinstance(d, list) else [d])
    return sorted(d[1].name for d in flat
                  if d[0] == "remove_table" and d[1].name.startswith("idgen_"))


def admin(query, dbname=None):
    """A statement as the superuser, outside a transaction block."""
    conn = psycopg2.connect(os.environ["DATABASE_URL"]) if dbname is None else \
        psycopg2.connect(os.environ["DATABASE_URL"], dbname=dbname)
    conn.autocommit = True
    try:
        conn.cursor().execute(query)
    finally:
        conn.close()


def body():
    invoices.Base.metadata.create_all(invoices.engine)
    drops = idgen_drops({})
    check("Alembic: without the filter autogenerate proposes dropping idgen's tables (public)",
          "idgen_public_key" in drops and "idgen_seq" in drops, drops)
    drops = idgen_drops({"include_name": alembic_env.include_name})
    check("Alembic: with include_name it proposes no change to them", drops == [], drops)

    # idgen in a schema of its own: seen with include_schemas=True.
    admin("CREATE DATABASE alembic_own_schema")
    admin("CREATE SCHEMA idgen", "alembic_own_schema")
    admin("CREATE EXTENSION idgen SCHEMA idgen", "alembic_own_schema")
    drops = idgen_drops({}, "alembic_own_schema")
    check("Alembic: idgen in a schema of its own, without include_schemas: not seen",
          drops == [], drops)
    drops = idgen_drops({"include_schemas": True}, "alembic_own_schema")
    check("Alembic: with include_schemas=True it proposes dropping idgen's tables",
          "idgen_public_key" in drops and "idgen_seq" in drops, drops)
    drops = idgen_drops({"include_schemas": True, "include_name": alembic_env.include_name},
                        "alembic_own_schema")
    check("Alembic: with include_schemas=True and include_name, no change to them",
          drops == [], drops)


run("Alembic", body)
