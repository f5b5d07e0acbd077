"""SQLAlchemy's asyncio mode with asyncpg (block python/invoices_async.py):
the IDs and business numbers with eager_defaults, and MissingGreenlet
without it."""

import asyncio

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import declarative_base

from check import check, check_id, run, sql

import invoices_async as invoices


async def main():
    statements = []
    event.listen(invoices.engine.sync_engine, "before_cursor_execute",
                 lambda conn, cursor, statement, *args: statements.append(statement))
    async with invoices.engine.begin() as conn:
        await conn.run_sync(invoices.Base.metadata.create_all)
    got = [await invoices.add_receipt(c) for c in ("lea", "max")]
    for i, number in got:
        check_id("SQLAlchemy asyncio", "receipts", i)
    check("SQLAlchemy asyncio: the business numbers are read back with the IDs",
          [n for _, n in got] == [1, 2], got)
    inserts = [s for s in statements if s.lstrip().upper().startswith("INSERT INTO RECEIPTS")]
    check("SQLAlchemy asyncio: one INSERT ... RETURNING each, with the number",
          len(inserts) == 2 and all("RETURNING receipts.id, receipts.number" in s for s in inserts),
          inserts)

    # The same mapping without eager_defaults.
    Plain = type("Plain", (declarative_base(),), {
        "__table__": invoices.Receipt.__table__.to_metadata(
            invoices.Base.metadata.__class__(), name="receipts")})
    async with AsyncSession(invoices.engine) as session, session.begin():
        receipt = Plain(customer="ned")
        session.add(receipt)
        await session.flush()
        try:
            receipt.number
            error = None
        except Exception as e:  # sqlalchemy.exc.MissingGreenlet
            error = type(e).__name__
    check("SQLAlchemy asyncio: without eager_defaults, reading the number raises MissingGreenlet",
          error == "MissingGreenlet", error)
    await invoices.engine.dispose()
    check("SQLAlchemy asyncio: three receipts in the table",
          sql("SELECT count(*) FROM receipts") == [(3,)])


run("SQLAlchemy asyncio", lambda: asyncio.run(main()))
