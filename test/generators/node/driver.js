// The Node.js generator of examples/node under test/generators/check.py's
// control: one command a line on stdin, one reply a line on stdout.
//
//   (at start)     lease DATACENTER WORKER TOKEN HOLDER
//   gen N FILE     done | error MESSAGE    N IDs written to FILE, one a line
//                                          (on an error, those made before it)
//   try GENE       ok ID | error MESSAGE   one ID
//   clock MS       clock MS                the wall clock MS ms behind from now on
//   close          closed true|false       then the process ends by itself
//
// At the end of its input it closes the generator too.
'use strict';
const fs = require('fs');
const readline = require('readline');
const { Snowflake } = require(process.env.GENERATOR_JS);

const realNow = Date.now;
let behind = 0;
Date.now = () => realNow() - behind;
const say = (line) => process.stdout.write(line + '\n');

(async () => {
  let gen;
  try {
    gen = await Snowflake.start({ connection: process.env.APP_URL, name: process.env.GEN_NAME,
      ttlMs: Number(process.env.GEN_TTL) * 1000,
      maxWorkers: process.env.GEN_MAX_WORKERS && Number(process.env.GEN_MAX_WORKERS),
      maxBackwardMs: process.env.GEN_MAX_BACKWARD && Number(process.env.GEN_MAX_BACKWARD) * 1000 });
  } catch (e) {
    say(`error ${e.message}`);
    process.exitCode = 1;
    return;
  }
  say(`lease ${gen.datacenterId} ${gen.workerId} ${gen.token} ${gen.holder}`);
  const rl = readline.createInterface({ input: process.stdin });
  for await (const line of rl) {
    const [cmd, a, b] = line.split(' ');
    try {
      if (cmd === 'gen') {
        // The IDs made before an error are written too.
        const ids = [];
        let error = null;
        try {
          for (let i = 0; i < Number(a); i++) ids.push(gen.next());
        } catch (e) {
          error = e;
        }
        fs.writeFileSync(b, ids.map((id) => `${id}\n`).join(''));
        say(error ? `error ${error.message}` : 'done');
      } else if (cmd === 'try') {
        say(`ok ${gen.next(Number(a))}`);
      } else if (cmd === 'clock') {
        behind = Number(a);
        say(`clock ${a}`);
      } else if (cmd === 'close') {
        say(`closed ${await gen.close()}`);
        rl.close();
        process.stdin.destroy();
        return;
      }
    } catch (e) {
      say(`error ${e.message}`);
    }
  }
  await gen.close();     // no more commands: release the lease and end
})();
