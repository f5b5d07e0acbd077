'use strict';
// node-postgres with its default parser: ids as strings (README block
// node/strings.js).

const { check, run, sql, checkId, numberLosesIt, distinct } = require('./check');
const app = require('./strings');

run('node-postgres, ids as strings', async () => {
  check('the README example: Number() does not give back the ID',
    String(Number('383157892515106816')) !== '383157892515106816' &&
      !Number.isSafeInteger(Number('383157892515106816')));

  const id = await app.addUser('ann');
  check('INSERT ... RETURNING id gives a string of digits',
    typeof id === 'string' && /^[1-9][0-9]*$/.test(id), `${typeof id} ${id}`);
  await checkId('node-postgres RETURNING', 'users', id);
  check('the ID is above 2^53, where Number() cannot tell it from its neighbours',
    numberLosesIt(id), id);
  check('JSON.parse of the ID as a JSON number is not safe',
    !Number.isSafeInteger(JSON.parse(`{"id":${id}}`).id));

  const user = await app.getUser(id);
  check('a lookup by the string finds the row', user !== undefined && user.id === id &&
    user.name === 'ann', JSON.stringify(user));
  const json = JSON.stringify(user);
  check('JSON.stringify writes the ID as a string field',
    json === `{"id":"${id}","name":"ann"}`, json);
  check('JSON.parse gives the same string back', JSON.parse(json).id === id);

  const second = await app.addUser('bob');
  const third = await app.addUserThenAsk('cy');
  const [cy] = await sql("SELECT id::text AS id FROM users WHERE name = 'cy'");
  check('idgen_snowflake_last() on the INSERT\'s connection gives its ID',
    cy !== undefined && third === cy.id, `${third} ${JSON.stringify(cy)}`);
  await checkId('idgen_snowflake_last()', 'users', third);
  check('three INSERTs, three IDs, rising', distinct([id, second, third]) &&
    BigInt(id) < BigInt(second) && BigInt(second) < BigInt(third), `${id} ${second} ${third}`);
  await app.pool.end();
});
