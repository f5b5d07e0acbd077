// snowflake.js: a Snowflake generator for one application instance, with
// its worker id leased from idgen. Plain JavaScript, BigInt IDs, no
// dependency but pg.
//
//   const { Snowflake } = require('./snowflake');
//   const gen = await Snowflake.start({ connection: process.env.DATABASE_URL });
//   const id = gen.next();     // a BigInt; gen.next(gene) when gene_bits > 0
//   await gen.close();         // releases the lease (so do SIGTERM and SIGINT)
//
// It reads the layout from idgen_info() once, acquires a lease (holder
// "name@host:pid"), renews it every ttl/3 on its own connection, and makes
// IDs locally. It stops for good, and next() throws, as soon as a renewal
// fails or the deadline (send time of the last successful acquire or
// renew, plus the ttl) passes: build a new generator then. The rules are
// in docs/leases.md, "A generator of your own".
'use strict';

const os = require('os');
const { Client } = require('pg');

const wallMs = () => Date.now();                                     // may step
const monoMs = () => Number(process.hrtime.bigint() / 1000000n);     // never steps

class Snowflake {
  // options: connection (a pg connection string or config), name (the
  // holder's prefix), ttlMs (30 s), maxBackwardMs (how long next() waits
  // for a clock stepped back, 1 s), maxWorkers (lease among the first
  // maxWorkers ids only; the whole space by default), handleSignals (true).
  static async start(options = {}) {
    const client = new Client(options.connection);
    await client.connect();
    const gen = new Snowflake(client, options);
    try {
      await gen._init();
    } catch (e) {
      await client.end().catch(() => {});
      throw e;
    }
    return gen;
  }

  constructor(client, options) {
    this._client = client;
    this._ttlMs = options.ttlMs ?? 30000;
    this._maxBackwardMs = options.maxBackwardMs ?? 1000;
    this._maxWorkers = options.maxWorkers ?? null;
    this.holder = `${options.name ?? 'snowflake'}@${os.hostname()}:${process.pid}`;
    this._handleSignals = options.handleSignals ?? true;
    this._stopped = null;       // why it stopped generating, once it has
    this._lastMs = -1;          // the millisecond of the last ID (never decreases)
    this._seq = 0;              // the sequence of the last ID in it
    // A lost connection would otherwise crash the process: stop instead.
    client.on('error', (e) => this._stop(`connection lost: ${e.message}`));
  }

  async _init() {
    const { rows: [l] } = await this._client.query(
      `SELECT layout_valid, layout_error, timestamp_bits, datacenter_bits, worker_bits,
              sequence_bits, gene_bits, (extract(epoch FROM epoch) * 1000)::bigint AS epoch_ms,
              (extract(epoch FROM current_setting('idgen.worker_quarantine')::interval)
               * 1000)::bigint AS quarantine_ms
         FROM idgen_info()`);
    if (!l.layout_valid) throw new Error(`snowflake: the server's layout is not valid: ${l.layout_error}`);
    if (l.datacenter_bits + l.worker_bits === 0)
      throw new Error('snowflake: the layout has no datacenter or worker bits to lease');
    // A clock found stepped back by d was d ahead when it made the last
    // IDs; the quarantine keeps the id's next holder above a lead smaller
    // than itself only, so only such steps are waited out.
    if (this._maxBackwardMs >= Number(l.quarantine_ms))
      throw new Error(`snowflake: maxBackwardMs must be below idgen.worker_quarantine (${l.quarantine_ms} ms)`);
    this._epochMs = Number(l.epoch_ms);
    this._maxMs = 2 ** l.timestamp_bits;                   // first millisecond out of the field
    this._seqMax = 2 ** l.sequence_bits - 1;
    this._genes = 2 ** l.gene_bits;
    this._geneBits = BigInt(l.gene_bits);
    this._seqShift = BigInt(l.gene_bits);
    this._tsShift = BigInt(l.datacenter_bits + l.worker_bits + l.sequence_bits + l.gene_bits);

    const sent = monoMs();
    const { rows: [a] } = await this._client.query(
      `SELECT worker_id, datacenter_id, token::text AS token, expires_at
         FROM idgen_worker_acquire($1, make_interval(secs => $2), $3)`,
      [this.holder, this._ttlMs / 1000, this._maxWorkers]);
    this.workerId = a.worker_id;
    this.datacenterId = a.datacenter_id;
    this.token = a.token;                                  // a string: tokens pass 2^53
    this._deadline = sent + this._ttlMs;
    // The datacenter and worker fields, shifted into place once.
    this._node = ((BigInt(a.datacenter_id) << BigInt(l.worker_bits)) | BigInt(a.worker_id))
      << BigInt(l.sequence_bits + l.gene_bits);
    this._timer = setTimeout(() => this._renew(), this._ttlMs / 3);
    if (this._handleSignals) {
      this._onSignal = (sig) => this._closeAndExit(sig);
      process.once('SIGTERM', this._onSignal);
      process.once('SIGINT', this._onSignal);
    }
  }

  // One renewal; the next is scheduled only if this one succeeded in time.
  async _renew() {
    this._timer = null;
    const sent = monoMs();
    this._renewing = this._client.query('SELECT idgen_worker_renew($1, $2, make_interval(secs => $3))',
      [this.workerId, this.token, this._ttlMs / 1000]);
    try {
      await this._renewing;
    } catch (e) {
      // Lost (55000), or the database is unreachable: the lease may be
      // someone else's already. Stop at once.
      this._stop(`the renewal of the lease failed: ${e.message}`);
      return;
    } finally {
      this._renewing = null;
    }
    if (this._stopped || this._expired()) return;
    this._deadline = sent + this._ttlMs;
    this._timer = setTimeout(() => this._renew(), this._ttlMs / 3);
  }

  _expired() {
    if (monoMs() < this._deadline) return false;
    this._stop('the lease deadline passed without a renewal');
    return true;
  }

  _stop(why) {
    if (!this._stopped) this._stopped = why;
    if (this._timer) clearTimeout(this._timer);
    this._timer = null;
  }

  // The next ID, a BigInt; gene (0 by default) goes into the low bits.
  next(gene = 0) {
    if (!this._stopped) this._expired();
    if (this._stopped) throw new Error(`snowflake: stopped generating: ${this._stopped}`);
    if (!Number.isInteger(gene) || gene < 0 || gene >= this._genes)
      throw new RangeError(`snowflake: gene ${gene} is out of range 0 .. ${this._genes - 1}`);
    let ms = wallMs() - this._epochMs;
    if (ms < this._lastMs) {
      // The clock was stepped back: wait for it to come back to the last
      // ID's millisecond, a bounded time, rather than reuse (ms, sequence).
      const giveUp = monoMs() + this._maxBackwardMs;
      while ((ms = wallMs() - this._epochMs) < this._lastMs)
        if (monoMs() > giveUp)
          throw new Error(`snowflake: the clock is ${this._lastMs - ms} ms behind the last ID`);
    }
    if (ms === this._lastMs) {
      if (this._seq === this._seqMax) {
        // The millisecond's sequence is used up: wait for the next one.
        while ((ms = wallMs() - this._epochMs) <= this._lastMs);
        this._seq = 0;
      } else {
        this._seq++;
      }
    } else {
      this._seq = 0;
    }
    if (ms < 0 || ms >= this._maxMs)
      throw new Error('snowflake: the clock is outside the layout\'s timestamp field');
    this._lastMs = ms;
    return (BigInt(ms) << this._tsShift) | this._node | (BigInt(this._seq) << this._seqShift) | BigInt(gene);
  }

  // Stop generating and release the lease: true if this released it,
  // false if it had ended already (released, or ended and its row purged
  // once its quarantine passed). An application's lease reports no
  // horizon (only a server's lease does): its IDs carry its clock's
  // reading, never a millisecond ahead, and the id's next holder starts at
  // least the quarantine after the lease's expiry (the release does not
  // bring it forward), when this generator has stopped anyway.
  async close() {
    this._stop('closed');
    if (this._onSignal) {
      process.removeListener('SIGTERM', this._onSignal);
      process.removeListener('SIGINT', this._onSignal);
      this._onSignal = null;
    }
    if (this._closing) return this._closing;
    this._closing = (async () => {
      await (this._renewing ?? Promise.resolve()).catch(() => {});
      try {
        const { rows: [r] } = await this._client.query(
          'SELECT idgen_worker_release($1, $2) AS released', [this.workerId, this.token]);
        return r.released;
      } catch (e) {
        // No lease has this token any more (55000): it ended, and the
        // purge deleted its row once its quarantine passed.
        if (e.code === '55000') return false;
        throw e;
      } finally {
        await this._client.end().catch(() => {});
      }
    })();
    return this._closing;
  }

  // SIGTERM or SIGINT: release, then die of the signal as if not caught.
  async _closeAndExit(sig) {
    try {
      await this.close();
    } catch (e) {
      process.stderr.write(`snowflake: releasing the lease failed: ${e.message}\n`);
    }
    process.kill(process.pid, sig);
  }
}

module.exports = { Snowflake };
