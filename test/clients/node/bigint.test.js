'use strict';
// node-postgres with int8 parsed as BigInt (README block node/bigint.js).

const { check, run, checkId, distinct } = require('./check');
const app = require('./bigint');

run('node-postgres, ids as BigInt', async () => {
  const id = await app.addUser('dee');
  check('INSERT ... RETURNING id gives a BigInt', typeof id === 'bigint', typeof id);
  await checkId('node-postgres BigInt', 'users', id);

  const user = await app.getUser(id);
  check('a lookup by the BigInt finds the row',
    user !== undefined && user.id === id && user.name === 'dee', user && user.name);
  let threw = false;
  try {
    JSON.stringify(user);
  } catch (e) {
    threw = e instanceof TypeError;
  }
  check('JSON.stringify without the replacer throws a TypeError', threw);
  const json = app.toJSON(user);
  check('toJSON writes the ID as a string field', json === `{"id":"${id}","name":"dee"}`, json);
  check('BigInt of the JSON string is the ID', BigInt(JSON.parse(json).id) === id);

  const ids = [id, await app.addUser('eve'), await app.addUser('fay')];
  check('three IDs, distinct and rising', distinct(ids) && ids[0] < ids[1] && ids[1] < ids[2],
    ids.join(' '));
  await app.pool.end();
});
