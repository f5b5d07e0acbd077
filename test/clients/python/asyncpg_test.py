"""asyncpg (block python/users_asyncpg.py)."""

import asyncio
import json

from check import check, check_id, run

import users_asyncpg as users


async def main():
    conn = await users.connect()
    try:
        first = await users.add_user(conn, "jon")
        check("asyncpg: fetchval of INSERT ... RETURNING id gives an int", type(first) is int, type(first))
        check_id("asyncpg", "users", first)
        check("asyncpg: the ID is above 2^53", first > 2 ** 53, first)
        doc = json.loads(await users.user_json(conn, first))
        check("asyncpg: user_json finds the row and writes the ID as a string",
              doc == {"id": str(first), "name": "jon"}, doc)
        gene = await conn.fetchval("SELECT idgen_gene($1)", first)
        check("asyncpg: an idgen function takes the int as its parameter", gene == 0, gene)
    finally:
        await conn.close()


run("asyncpg", lambda: asyncio.run(main()))
