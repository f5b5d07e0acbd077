"""psycopg 3 (block python/users_psycopg3.py)."""

import json

from check import check, check_id, run

import users_psycopg3 as users


def body():
    first = users.add_user("ida")
    check("psycopg 3: INSERT ... RETURNING id gives an int", type(first) is int, type(first))
    check_id("psycopg 3", "users", first)
    check("psycopg 3: the ID is above 2^53", first > 2 ** 53, first)
    doc = json.loads(users.user_json(first))
    check("psycopg 3: user_json finds the row by the int and writes the ID as a string",
          doc == {"id": str(first), "name": "ida"}, doc)


run("psycopg 3", body)
