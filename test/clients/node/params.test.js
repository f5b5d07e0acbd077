'use strict';
// Every idgen function an application calls with parameters, through
// node-postgres: it sends every parameter untyped (type 0, the server
// infers it), as pgx, asyncpg, postgres.js and Prisma do.  Each call must
// resolve (before idgen had one signature per name and argument count,
// idgen_snowflake($1) and idgen_uuid7($1) were 42725) and give its value.

const pg = require('pg');
const { check, run } = require('./check');

run('node-postgres parameters', async () => {
  const client = new pg.Client();
  await client.connect();
  const q = async (text, params) => (await client.query(text, params)).rows[0];
  // What a call gives, or its error's SQLSTATE and message.
  const call = async (text, params) => {
    try {
      return { row: await q(text, params) };
    } catch (e) {
      return { error: `${e.code} ${e.message}` };
    }
  };
  const ok = async (what, text, params, test) => {
    const r = await call(text, params);
    check(`node-postgres: ${what}`, r.row !== undefined && test(r.row), r.error || JSON.stringify(r.row));
    return r.row;
  };
  try {
    await client.query('CREATE TABLE params_conv (id serial PRIMARY KEY)');
    // (After a failed call, the next ones go on with a stand-in value.)
    const { id } = (await ok('idgen_snowflake($1)', 'SELECT idgen_snowflake($1) AS id', [0],
      (r) => BigInt(r.id) > 0n)) || { id: '0' };
    const nul = await call('SELECT idgen_snowflake($1)', [null]);
    check('node-postgres: idgen_snowflake($1) with null is 22004', /^22004 /.test(nul.error || ''),
      nul.error);
    await ok('idgen_snowflake_row($1)', 'SELECT * FROM idgen_snowflake_row($1)', [0], (r) => r.gene === 0);
    await ok('idgen_gene($1)', 'SELECT idgen_gene($1) AS g', [id], (r) => r.g === 0);
    await ok('idgen_gene($1, $2)', 'SELECT idgen_gene($1, $2) AS g', ['12345', 4], (r) => r.g === 9);
    await ok('idgen_snowflake(idgen_gene($1, $2))', 'SELECT idgen_snowflake(idgen_gene($1, $2)) AS id',
      [id, 0], (r) => BigInt(r.id) > BigInt(id));
    await ok('idgen_snowflake_decode($1)', 'SELECT * FROM idgen_snowflake_decode($1)', [id],
      (r) => r.datacenter_id === 1 && r.worker_id === 7);
    await ok('idgen_snowflake_time($1)', 'SELECT idgen_snowflake_time($1) AS t', [id],
      (r) => Math.abs(r.t - Date.now()) < 60000);
    await ok('idgen_snowflake_min($1)', 'SELECT idgen_snowflake_min($1) AS m', [new Date()],
      (r) => BigInt(r.m) > 0n);
    await ok('idgen_snowflake_debug($1)', 'SELECT idgen_snowflake_debug($1) AS d', [id],
      (r) => typeof r.d === 'string');
    await ok('idgen_snowflake_compose($1, $2, $3, $4, $5)',
      'SELECT idgen_snowflake_compose($1, $2, $3, $4, $5) AS id', ['2025-01-01 00:00:00+00', 1, 7, 5, 0],
      (r) => BigInt(r.id) > 0n);
    await ok('idgen_convert_column($1, $2)', 'SELECT count(*)::int AS n FROM idgen_convert_column($1, $2)',
      ['params_conv', 'id'], (r) => r.n > 0);
    await ok("idgen_uuid7($1), RFC 9562's example time", 'SELECT idgen_uuid7_time(idgen_uuid7($1)) AS t',
      ['2022-02-22 19:22:22+00'], (r) => r.t.getTime() === Date.UTC(2022, 1, 22, 19, 22, 22));
    await ok('idgen_uuid7($1) with a Date', 'SELECT idgen_uuid7_time(idgen_uuid7($1)) AS t',
      [new Date(Date.UTC(2020, 4, 1, 12))], (r) => r.t.getTime() === Date.UTC(2020, 4, 1, 12));
    const { u } = (await ok('idgen_uuid7_shifted($1)', 'SELECT idgen_uuid7_shifted($1) AS u', ['-1 hour'],
      (r) => typeof r.u === 'string')) || { u: null };
    await ok('idgen_uuid7_time($1)', 'SELECT idgen_uuid7_time($1) AS t', [u],
      (r) => r.t.getTime() < Date.now() - 3500000);
    await ok('idgen_uuid_version($1)', 'SELECT idgen_uuid_version($1) AS v', [u], (r) => r.v === 7);
    await ok('idgen_uuid7_min($1)', 'SELECT idgen_uuid7_min($1) AS u', [new Date()], (r) => !!r.u);
    await ok('idgen_expiry($1, $2)', 'SELECT idgen_expiry($1, $2) AS e', [new Date(), '1 day'], (r) => !!r.e);
    await ok('idgen_seq_next($1)', 'SELECT idgen_seq_next($1) AS v', ['params:node'], (r) => r.v === '1');
    await ok('idgen_seq_next($1, $2)', 'SELECT count(*)::int AS n FROM idgen_seq_next($1, $2)',
      ['params:node', 3], (r) => r.n === 3);
    await ok('idgen_seq_current($1)', 'SELECT idgen_seq_current($1) AS v', ['params:node'], (r) => r.v === '4');
    await ok('idgen_seq_set($1, $2)', 'SELECT idgen_seq_set($1, $2) AS v', ['params:node', 10], () => true);
    await ok('idgen_seq_set($1, $2, $3)', 'SELECT idgen_seq_set($1, $2, $3) AS v', ['params:node', 20, false],
      () => true);
    await ok('idgen_seq_set_if_absent($1, $2)', 'SELECT idgen_seq_set_if_absent($1, $2) AS b',
      ['params:node2', 5], (r) => r.b === true);
    await ok('idgen_seq_configure($1, cache => $2)', 'SELECT idgen_seq_configure($1, cache => $2)',
      ['params:node', 10], () => true);
    await ok('idgen_seq_configure with every option',
      'SELECT idgen_seq_configure($1, $2, $3, $4, $5, $6, $7, $8, $9)',
      ['params:node3', 1, 1000, '1 day', 0, 1, 1, false, null], () => true);
    await ok('idgen_seq_drop($1)', 'SELECT idgen_seq_drop($1) AS b', ['params:node3'], (r) => r.b === true);
    const lease = await ok('idgen_worker_acquire($1, $2, $3, $4)',
      'SELECT * FROM idgen_worker_acquire($1, $2, $3, $4)', ['params-node', '1 s', 100, false],
      (r) => r.worker_id >= 0);
    if (lease) {
      await ok('idgen_worker_renew($1, $2)', 'SELECT idgen_worker_renew($1, $2) AS e',
        [lease.worker_id, lease.token], (r) => !!r.e);
      await ok('idgen_worker_release($1, $2, $3)', 'SELECT idgen_worker_release($1, $2, $3) AS b',
        [lease.worker_id, lease.token, null], (r) => r.b === true);
      // A released lease's horizon stays its holder's until its expiry.
      await new Promise((resolve) => setTimeout(resolve, 1500));
      await ok('idgen_worker_reset_horizon($1, $2, $3)', 'SELECT idgen_worker_reset_horizon($1, $2, $3) AS h',
        [lease.datacenter_id, lease.worker_id, null], () => true);
    }
    await ok('idgen_server_lease($1, $2, $3, $4, $5, $6)',
      'SELECT * FROM idgen_server_lease($1, $2, $3, $4, $5, $6)', ['12345', 'params-node', '30 s', 20, 3, null],
      (r) => r.datacenter_id === 20 && r.worker_id === 3);
    const { p } = (await ok('idgen_public($1)', 'SELECT idgen_public($1) AS p', [id],
      (r) => r.p.length === 15)) || { p: null };
    await ok('idgen_private($1)', 'SELECT idgen_private($1) AS id', [p], (r) => r.id === id);
    const { n } = (await ok('idgen_public_bigint($1)', 'SELECT idgen_public_bigint($1) AS n', [id],
      (r) => !!r.n)) || { n: null };
    await ok('idgen_private_bigint($1)', 'SELECT idgen_private_bigint($1) AS id', [n], (r) => r.id === id);
    const { v } = await q('SELECT max(version) AS v FROM idgen_public_key WHERE retired_at IS NULL');
    await ok('idgen_private_bigint($1, $2)', 'SELECT idgen_private_bigint($1, $2) AS id', [n, v],
      (r) => r.id === id);
    await q('SELECT idgen_public_rotate()');
    await ok('idgen_public_retire($1)', 'SELECT idgen_public_retire($1) AS b', [v], (r) => r.b === true);
    await ok('idgen_speck64($1, $2)', 'SELECT idgen_speck64($1, $2) AS c',
      [Buffer.alloc(16), '0'], (r) => typeof r.c === 'string');
  } finally {
    await client.end();
  }
});
