'use strict';
// postgres.js (block node/postgresjs.js): bigint as a string by default,
// exact, back into a query as it is, and into JSON as a string.

const { check, run, checkId, numberLosesIt } = require('./check');
const app = require('./postgresjs');

run('postgres.js', async () => {
  const id = await app.addUser('rae');
  check('postgres.js: INSERT ... RETURNING id gives a string of digits',
    typeof id === 'string' && /^[1-9][0-9]*$/.test(id), `${typeof id} ${id}`);
  await checkId('postgres.js RETURNING', 'users', id);
  check('postgres.js: the ID is above 2^53', numberLosesIt(id), id);
  const user = await app.getUser(id);
  check('postgres.js: a lookup by the string finds the row',
    user !== undefined && user.id === id && user.name === 'rae', JSON.stringify(user));
  const json = JSON.stringify(user);
  check('postgres.js: JSON.stringify writes the ID as a string field',
    json === `{"id":"${id}","name":"rae"}`, json);
  const [g] = await app.sql`SELECT idgen_gene(${id}) AS gene`;
  check('postgres.js: an idgen function takes the string as its parameter',
    g !== undefined && Number(g.gene) === 0, JSON.stringify(g));
  await app.sql.end();
});
