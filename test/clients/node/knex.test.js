'use strict';
// Knex (README block node/knex.js).

const { check, run, sql, checkId, distinct } = require('./check');
const app = require('./knex');

run('knex', async () => {
  await app.createOrders();
  const [col] = await sql(`SELECT column_default, is_identity,
      pg_get_serial_sequence('orders', 'id') AS seq
    FROM information_schema.columns WHERE table_name = 'orders' AND column_name = 'id'`);
  check('the migration makes id DEFAULT idgen_snowflake(), no sequence or identity',
    col !== undefined && col.column_default === 'idgen_snowflake()' && col.is_identity === 'NO' &&
      col.seq === null, JSON.stringify(col));

  const id = await app.addOrder('book');
  check('insert ... returning id gives a string of digits',
    typeof id === 'string' && /^[1-9][0-9]*$/.test(id), `${typeof id} ${id}`);
  await checkId('knex', 'orders', id);

  const rows = await app.knex('orders').insert([{ item: 'pen' }, { item: 'ink' }]).returning('id');
  const ids = [id, ...rows.map((r) => r.id)];
  check('a multi-row insert returns an ID per row, all distinct', rows.length === 2 &&
    distinct(ids), ids.join(' '));
  for (const r of rows) await checkId('knex multi-row', 'orders', r.id);
  const found = await app.knex('orders').where({ id }).first();
  check('a where() by the string finds the row', found !== undefined && found.item === 'book',
    JSON.stringify(found));
  await app.knex.destroy();
});
