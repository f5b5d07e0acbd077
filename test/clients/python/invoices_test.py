"""SQLAlchemy (README block python/invoices.py)."""

from sqlalchemy import event, select
from sqlalchemy.orm import Session

from check import check, check_id, run, sql

import invoices


def body():
    statements = []
    event.listen(invoices.engine, "before_cursor_execute",
                 lambda conn, cursor, statement, *args: statements.append(statement))
    invoices.Base.metadata.create_all(invoices.engine)
    col = sql("SELECT column_default, is_identity,"
              " pg_get_serial_sequence('invoices', 'id') IS NULL"
              " FROM information_schema.columns"
              " WHERE table_name = 'invoices' AND column_name = 'id'")
    check("create_all makes id DEFAULT idgen_snowflake(), no sequence or identity",
          col == [("idgen_snowflake()", "NO", True)], col)

    ids = [invoices.add_invoice(c) for c in ("ivy", "jo", "kai")]
    check("the ORM gives each object its ID", all(type(i) is int for i in ids), ids)
    for i in ids:
        check_id("SQLAlchemy", "invoices", i)
    check("three IDs, distinct and rising", ids[0] < ids[1] < ids[2], ids)
    inserts = [s for s in statements if s.lstrip().upper().startswith("INSERT INTO INVOICES")]
    check("the ORM read the IDs with INSERT ... RETURNING",
          len(inserts) == 3 and all("RETURNING invoices.id" in s for s in inserts), inserts)
    with Session(invoices.engine) as session:
        found = session.execute(select(invoices.Invoice).where(invoices.Invoice.id == ids[1]))
        found = found.scalar_one_or_none()
        check("a query by the ID finds the object",
              found is not None and found.customer == "jo", found)


run("SQLAlchemy", body)
