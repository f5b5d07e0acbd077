'use strict';
// Prisma ORM 7 with its pg driver adapter (blocks node/prisma/schema.prisma
// and node/prisma.js): a BigInt key the database fills, read back exactly,
// JSON.stringify throwing on it and the replacer writing a string.
//
// `prisma generate` checks that the schema engine binary is there, which
// it downloads on first use from a host the test machines cannot reach;
// generating the client does not run it, so PRISMA_SCHEMA_ENGINE_BINARY
// points at /bin/true.  Nothing here needs the schema engine (it is
// `prisma migrate`'s and `prisma db`'s).

const { execFileSync } = require('child_process');
const { check, run, checkId, numberLosesIt, distinct } = require('./check');

run('Prisma', async () => {
  execFileSync('node_modules/.bin/prisma', ['generate'], {
    env: { ...process.env, PRISMA_SCHEMA_ENGINE_BINARY: '/bin/true', CHECKPOINT_DISABLE: '1' },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const app = require('./prisma');
  const id = await app.addUser('sam');
  check('Prisma: create gives the key as a BigInt', typeof id === 'bigint', typeof id);
  await checkId('Prisma create', 'users', id.toString());
  check('Prisma: the ID is above 2^53', numberLosesIt(id), id);
  const user = await app.getUser(id.toString());
  check('Prisma: findUnique by the ID finds the row',
    user !== null && user.id === id && user.name === 'sam', user && user.name);
  let thrown = null;
  try {
    JSON.stringify(user);
  } catch (e) {
    thrown = e.message;
  }
  check('Prisma: JSON.stringify throws on the BigInt',
    thrown !== null && /BigInt/.test(thrown), thrown);
  const json = app.toJSON(user);
  check('Prisma: the replacer writes the ID as a string',
    json === `{"id":"${id}","name":"sam"}`, json);
  const more = await Promise.all(['tom', 'una'].map(app.addUser));
  check('Prisma: three creates, three distinct IDs', distinct([id, ...more]), more.join(' '));
  await app.prisma.$disconnect();
});
