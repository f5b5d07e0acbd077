"""Every idgen function an application calls with parameters, through
psycopg 3 (Debian's python3-psycopg), which sends a Python int as the
narrowest integer type that holds it (smallint for 0, 4 or 7), a str as
an untyped parameter, None untyped, a datetime as timestamptz and a
timedelta as interval.  Each call must resolve (before idgen had one
signature per name and argument count and only bigint integer arguments,
idgen_snowflake(%s) with 0 was 42725 and idgen_snowflake_row(%s) with a
bigint 42883) and give its value."""

import datetime
import os
import time

import psycopg

from check import check, run


def body():
    conn = psycopg.connect(os.environ["DATABASE_URL"], autocommit=True)

    def call(query, params):
        try:
            return conn.execute(query, params).fetchone(), None
        except psycopg.Error as e:
            return None, "%s %s" % (e.sqlstate, e)

    def ok(what, query, params, test):
        row, err = call(query, params)
        check("psycopg 3: " + what, row is not None and test(row), err or row)
        return row

    now = datetime.datetime.now(datetime.timezone.utc)
    conn.execute("CREATE TABLE params_conv_py (id serial PRIMARY KEY)")
    (id_,) = ok("idgen_snowflake(%s) with a smallint", "SELECT idgen_snowflake(%s)", (0,),
                lambda r: r[0] > 0) or (0,)
    row, err = call("SELECT idgen_snowflake(%s)", (None,))
    check("psycopg 3: idgen_snowflake(%s) with None is 22004", (err or "").startswith("22004"), err)
    ok("idgen_snowflake_row(%s)", "SELECT gene FROM idgen_snowflake_row(%s)", (0,), lambda r: r[0] == 0)
    row, err = call("SELECT gene FROM idgen_snowflake_row(%s)", (2 ** 40,))
    check("psycopg 3: idgen_snowflake_row(%s) with a bigint beyond the range is 22003",
          (err or "").startswith("22003"), err or row)
    ok("idgen_gene(%s)", "SELECT idgen_gene(%s)", (id_,), lambda r: r[0] == 0)
    ok("idgen_gene(%s, %s)", "SELECT idgen_gene(%s, %s)", (12345, 4), lambda r: r[0] == 9)
    ok("idgen_snowflake(idgen_gene(%s, %s))", "SELECT idgen_snowflake(idgen_gene(%s, %s))", (id_, 0),
       lambda r: r[0] > id_)
    ok("idgen_snowflake_decode(%s)", "SELECT datacenter_id, worker_id FROM idgen_snowflake_decode(%s)",
       (id_,), lambda r: r == (1, 7))
    ok("idgen_snowflake_time(%s)", "SELECT idgen_snowflake_time(%s)", (id_,),
       lambda r: abs((r[0] - now).total_seconds()) < 60)
    ok("idgen_snowflake_min(%s)", "SELECT idgen_snowflake_min(%s)", (now,), lambda r: r[0] > 0)
    ok("idgen_snowflake_debug(%s)", "SELECT idgen_snowflake_debug(%s)", (id_,), lambda r: bool(r[0]))
    ok("idgen_snowflake_compose(%s, %s, %s, %s, %s)",
       "SELECT idgen_snowflake_compose(%s, %s, %s, %s, %s)", (now, 1, 7, 5, 0), lambda r: r[0] > 0)
    ok("idgen_convert_column(%s, %s)", "SELECT count(*) FROM idgen_convert_column(%s, %s)",
       ("params_conv_py", "id"), lambda r: r[0] > 0)
    ok("idgen_uuid7(%s), RFC 9562's example time as a str", "SELECT idgen_uuid7_time(idgen_uuid7(%s))",
       ("2022-02-22 19:22:22+00",),
       lambda r: r[0] == datetime.datetime(2022, 2, 22, 19, 22, 22, tzinfo=datetime.timezone.utc))
    ok("idgen_uuid7(%s) with a datetime", "SELECT idgen_uuid7_time(idgen_uuid7(%s))",
       (datetime.datetime(2020, 5, 1, 12, tzinfo=datetime.timezone.utc),),
       lambda r: r[0] == datetime.datetime(2020, 5, 1, 12, tzinfo=datetime.timezone.utc))
    (u,) = ok("idgen_uuid7_shifted(%s) with a timedelta", "SELECT idgen_uuid7_shifted(%s)",
              (datetime.timedelta(hours=-1),), lambda r: r[0] is not None) or (None,)
    ok("idgen_uuid7_shifted(%s) with a str", "SELECT idgen_uuid7_shifted(%s)", ("-1 hour",),
       lambda r: r[0] is not None)
    ok("idgen_uuid7_time(%s)", "SELECT idgen_uuid7_time(%s)", (u,),
       lambda r: (now - r[0]).total_seconds() > 3500)
    ok("idgen_uuid_version(%s)", "SELECT idgen_uuid_version(%s)", (u,), lambda r: r[0] == 7)
    ok("idgen_uuid7_min(%s)", "SELECT idgen_uuid7_min(%s)", (now,), lambda r: r[0] is not None)
    ok("idgen_expiry(%s, %s)", "SELECT idgen_expiry(%s, %s)", (now, datetime.timedelta(days=1)),
       lambda r: r[0] is not None)
    ok("idgen_seq_next(%s)", "SELECT idgen_seq_next(%s)", ("params:py",), lambda r: r[0] == 1)
    ok("idgen_seq_next(%s, %s)", "SELECT count(*) FROM idgen_seq_next(%s, %s)", ("params:py", 3),
       lambda r: r[0] == 3)
    ok("idgen_seq_current(%s)", "SELECT idgen_seq_current(%s)", ("params:py",), lambda r: r[0] == 4)
    ok("idgen_seq_set(%s, %s)", "SELECT idgen_seq_set(%s, %s)", ("params:py", 10), lambda r: True)
    ok("idgen_seq_set(%s, %s, %s)", "SELECT idgen_seq_set(%s, %s, %s)", ("params:py", 20, False),
       lambda r: True)
    ok("idgen_seq_set_if_absent(%s, %s)", "SELECT idgen_seq_set_if_absent(%s, %s)", ("params:py2", 5),
       lambda r: r[0] is True)
    ok("idgen_seq_configure(%s, cache => %s)", "SELECT idgen_seq_configure(%s, cache => %s)",
       ("params:py", 10), lambda r: True)
    ok("idgen_seq_configure with every option",
       "SELECT idgen_seq_configure(%s, %s, %s, %s, %s, %s, %s, %s, %s)",
       ("params:py3", 1, 1000, datetime.timedelta(days=1), 0, 1, 1, False, None), lambda r: True)
    ok("idgen_seq_drop(%s)", "SELECT idgen_seq_drop(%s)", ("params:py3",), lambda r: r[0] is True)
    lease = ok("idgen_worker_acquire(%s, %s, %s, %s)",
               "SELECT worker_id, datacenter_id, token FROM idgen_worker_acquire(%s, %s, %s, %s)",
               ("params-py", datetime.timedelta(seconds=1), 100, False), lambda r: r[0] >= 0)
    if lease:
        wid, dc, token = lease
        ok("idgen_worker_renew(%s, %s)", "SELECT idgen_worker_renew(%s, %s)", (wid, token),
           lambda r: r[0] is not None)
        ok("idgen_worker_release(%s, %s, %s)", "SELECT idgen_worker_release(%s, %s, %s)",
           (wid, token, None), lambda r: r[0] is True)
        # A released lease's horizon stays its holder's until its expiry.
        time.sleep(1.5)
        ok("idgen_worker_reset_horizon(%s, %s, %s)", "SELECT idgen_worker_reset_horizon(%s, %s, %s)",
           (dc, wid, None), lambda r: True)
    ok("idgen_server_lease(%s, %s, %s, %s, %s, %s)",
       "SELECT datacenter_id, worker_id FROM idgen_server_lease(%s, %s, %s, %s, %s, %s)",
       (54321, "params-py", datetime.timedelta(seconds=30), 21, 4, None), lambda r: r == (21, 4))
    (p,) = ok("idgen_public(%s)", "SELECT idgen_public(%s)", (id_,), lambda r: len(r[0]) == 15) or (None,)
    ok("idgen_private(%s)", "SELECT idgen_private(%s)", (p,), lambda r: r[0] == id_)
    (n,) = ok("idgen_public_bigint(%s)", "SELECT idgen_public_bigint(%s)", (id_,),
              lambda r: r[0] is not None) or (None,)
    ok("idgen_private_bigint(%s)", "SELECT idgen_private_bigint(%s)", (n,), lambda r: r[0] == id_)
    (v,) = conn.execute("SELECT max(version) FROM idgen_public_key WHERE retired_at IS NULL").fetchone()
    ok("idgen_private_bigint(%s, %s)", "SELECT idgen_private_bigint(%s, %s)", (n, v), lambda r: r[0] == id_)
    conn.execute("SELECT idgen_public_rotate()")
    ok("idgen_public_retire(%s)", "SELECT idgen_public_retire(%s)", (v,), lambda r: r[0] is True)
    ok("idgen_speck64(%s, %s)", "SELECT idgen_speck64(%s, %s)", (bytes(16), 0), lambda r: True)
    conn.close()


run("psycopg 3 parameters", body)
