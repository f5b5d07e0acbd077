'use strict';
// test/clients/node/check.js: what the Node.js checks share.  Each check
// prints "ok: ..." or "not ok: ..."; a program exits non-zero if one
// failed or if it threw.

const pg = require('pg');

let failures = 0;

function check(what, cond, detail) {
  if (cond) {
    console.log(`ok: ${what}`);
  } else {
    failures += 1;
    console.log(`not ok: ${what}${detail === undefined ? '' : ` (got ${detail})`}`);
  }
}

async function run(name, body) {
  try {
    await body();
  } catch (e) {
    failures += 1;
    console.log(`not ok: ${name}: ${e && e.stack ? e.stack : e}`);
  }
  process.exitCode = failures === 0 ? 0 : 1;
}

// A connection of the checks' own, every value read as text: what the
// database holds, to compare with what the code under test was given.
async function sql(text, params) {
  const client = new pg.Client({ types: { getTypeParser: () => (v) => v } });
  await client.connect();
  try {
    return (await client.query(text, params)).rows;
  } finally {
    await client.end();
  }
}

// The row with that id is in the table, the text of its id is the
// value's decimal text, and the id decodes to this cluster's datacenter
// and worker (1 and 7, test/clients.sh) and a time within a minute.
async function checkId(what, table, id) {
  const rows = await sql(
    `SELECT t.id::text AS id, d.datacenter_id, d.worker_id,
            abs(extract(epoch FROM d.ts - now())) < 60 AS recent
       FROM ${table} t, idgen_snowflake_decode(t.id) d
      WHERE t.id = $1::text::bigint`, [String(id)]);
  check(`${what}: ${id} is a row's id, exactly`, rows.length === 1 && rows[0].id === String(id),
    JSON.stringify(rows));
  check(`${what}: it decodes to datacenter 1, worker 7, now`,
    rows.length === 1 && rows[0].datacenter_id === '1' && rows[0].worker_id === '7' &&
      rows[0].recent === 't', JSON.stringify(rows));
}

// Above 2^53 doubles are at least 2 apart: of three consecutive integers,
// two become the same Number.  False below 2^53.
function numberLosesIt(id) {
  const x = BigInt(id);
  return x > 2n ** 53n &&
    new Set([x - 1n, x, x + 1n].map((v) => Number(v.toString()))).size < 3;
}

function distinct(ids) {
  return new Set(ids.map(String)).size === ids.length;
}

module.exports = { check, run, sql, checkId, numberLosesIt, distinct };
