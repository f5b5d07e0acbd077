"""Alembic (block python/alembic_env.py): autogenerate with
include_schemas=True proposes dropping idgen's tables, and with the
include_name filter proposes nothing about them."""

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine

from check import check, run

import alembic_env
import invoices


def idgen_drops(opts):
    engine = create_engine(invoices.engine.url)
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn, opts=opts), invoices.Base.metadata)
    engine.dispose()
    flat = []
    for d in diff:
        flat.extend(d if isinstance(d, list) else [d])
    return sorted(d[1].name for d in flat
                  if d[0] == "remove_table" and d[1].name.startswith("idgen_"))


def body():
    invoices.Base.metadata.create_all(invoices.engine)
    drops = idgen_drops({"include_schemas": True})
    check("Alembic: without the filter autogenerate proposes dropping idgen's tables",
          "idgen_public_key" in drops and "idgen_seq" in drops, drops)
    drops = idgen_drops({"include_schemas": True, "include_name": alembic_env.include_name})
    check("Alembic: with include_name it proposes no change to them", drops == [], drops)


run("Alembic", body)
