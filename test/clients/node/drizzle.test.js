'use strict';
// Drizzle (README block node/drizzle.js), and why mode 'number' is wrong.

const { eq, inArray } = require('drizzle-orm');
const { bigint, pgTable, text } = require('drizzle-orm/pg-core');
const { check, run, sql, checkId, distinct } = require('./check');
const app = require('./drizzle');

run('drizzle', async () => {
  const id = await app.addPost('hello');
  check('insert ... returning gives a BigInt', typeof id === 'bigint', typeof id);
  await checkId('drizzle', 'posts', id);

  const [found] = await app.db.select().from(app.posts).where(eq(app.posts.id, id));
  check('a select by the BigInt finds the row',
    found !== undefined && found.id === id && found.title === 'hello', found && found.title);
  const more = await app.db.insert(app.posts).values([{ title: 'a' }, { title: 'b' }])
    .returning({ id: app.posts.id });
  const ids = [id, ...more.map((r) => r.id)];
  check('a multi-row insert returns a BigInt per row, all distinct',
    more.length === 2 && ids.every((v) => typeof v === 'bigint') && distinct(ids), ids.join(' '));

  // The same table read with mode 'number': the last ID and the two above
  // it (inserted explicitly) cannot all be told apart.
  const top = ids.reduce((a, b) => (a > b ? a : b));
  await sql("UPDATE posts SET title = 'top' WHERE id = $1", [String(top)]);
  await sql(`INSERT INTO posts (id, title)
    VALUES ($1::bigint + 1, 'top+1'), ($1::bigint + 2, 'top+2')`, [String(top)]);
  const postsAsNumbers = pgTable('posts', {
    id: bigint('id', { mode: 'number' }).primaryKey(),
    title: text('title').notNull(),
  });
  const wrong = await app.db.select().from(postsAsNumbers)
    .where(inArray(postsAsNumbers.title, ['top', 'top+1', 'top+2']));
  check("mode 'number' reads three different IDs as fewer than three numbers",
    wrong.length === 3 && new Set(wrong.map((r) => r.id)).size < 3,
    wrong.map((r) => r.id).join(' '));
  await app.db.$client.end();
});
