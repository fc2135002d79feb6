// store-faults.test.mjs - the store's own faults, through a real abxd:
//   - GC racing uploads of content that a crash left behind (blob files
//     without rows), with and without a kill -9 in the middle: every
//     acknowledged upload must read back and the store must check clean;
//   - damaged blobs (a flipped byte, a cut-off blob, on both backends): a
//     download must never complete, never hang, and is counted;
//   - the GC lease after a restart (clean, kill -9, a dead holder's lease
//     left behind): the new abxd collects at once;
//   - one store directory, two abxd: the second refuses to start.
//
// ABX_STORE_FAULT_ROUNDS sets the rounds of the GC race (default 4, half of
// them killed); ABX_STORE_FAULT_ORPHANS the orphans planted per round.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import {
  mkdtempSync,
  rmSync,
  readdirSync,
  mkdirSync,
  writeFileSync,
  utimesSync,
  chmodSync,
  openSync,
  readSync,
  writeSync,
  closeSync,
  truncateSync,
  readFileSync,
  statSync,
} from 'node:fs';
import { spawnSync } from 'node:child_process';
import { tmpdir, hostname } from 'node:os';
import { join } from 'node:path';
import { createHash, randomBytes } from 'node:crypto';
import { startAbxd, api, isRoot, sleep } from './lib.mjs';

const skip = !isRoot && 'needs root';
const sha = (b) => createHash('sha256').update(b).digest('hex');
const ROUNDS = Number(process.env.ABX_STORE_FAULT_ROUNDS ?? 4);
const ORPHANS = Number(process.env.ABX_STORE_FAULT_ORPHANS ?? 400);
const CLIENTS = 8;

const pgUrl = process.env.ABX_TEST_PG_URL;
const pgRequired = process.env.ABX_TEST_PG_REQUIRED === '1';

function psql(url, sql) {
  const r = spawnSync('psql', ['-v', 'ON_ERROR_STOP=1', '-qAt', url, '-c', sql], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`psql: ${r.stderr}`);
  return r.stdout;
}

function freshPgDatabase() {
  const name = 'abx_it_' + randomBytes(6).toString('hex');
  psql(pgUrl, `CREATE DATABASE ${name}`);
  return pgUrl.replace(/\/[^/?]*(\?|$)/, `/${name}$1`);
}

// One statement on a SQLite store's database behind abxd's back (Python's
// sqlite3 module: node 20 has none).
function sqlite(storeDir, sql, params = []) {
  const py =
    'import sqlite3, sys, json\n' +
    'db = sqlite3.connect(sys.argv[1], timeout=30)\n' +
    'db.execute(sys.argv[2], json.loads(sys.argv[3]))\n' +
    'db.commit()\n';
  const r = spawnSync('python3', ['-c', py, join(storeDir, 'store.db'), sql, JSON.stringify(params)], {
    encoding: 'utf8',
  });
  if (r.status !== 0) throw new Error(`sqlite: ${r.stderr}`);
}

async function mkws(d, id) {
  const r = await api(d, 'POST', '/v1/workspaces', { id });
  assert.equal(r.status, 201, r.text);
  return r.json.id;
}

// A counter from /metrics, or undefined when there is none.
async function metric(d, name) {
  const r = await api(d, 'GET', '/metrics');
  const m = r.text.match(new RegExp(`^abx_${name} (\\d+)$`, 'm'));
  return m ? Number(m[1]) : undefined;
}

async function gc(d) {
  const r = await api(d, 'POST', '/v1/store/gc', '');
  assert.equal(r.status, 200, r.text);
  return r.json;
}

async function checkClean(d, label) {
  const c = await api(d, 'GET', '/v1/store/check');
  assert.equal(c.status, 200, `${label}: ${c.text}`);
  assert.equal(c.json.ok, true, `${label}: ${c.text}`);
}

// PUT that resolves to the status, or 0 when the connection failed.
async function put(d, path, data) {
  try {
    const res = await fetch(d.url + path, {
      method: 'PUT',
      headers: { authorization: `Bearer ${d.key}` },
      body: data,
    });
    await res.arrayBuffer();
    return res.status;
  } catch {
    return 0;
  }
}

// A GET that must neither complete with damaged content nor hang: what
// happened, as 'ok' (200 and the whole body), 'error <status> <code>' (a
// clean error answer) or 'cut' (the connection ended before the body did).
async function download(d, path, want) {
  const res = await fetch(d.url + path, {
    headers: { authorization: `Bearer ${d.key}` },
    signal: AbortSignal.timeout(15000),
  });
  let body;
  try {
    body = Buffer.from(await res.arrayBuffer());
  } catch (e) {
    if (e.name === 'TimeoutError') throw new Error(`GET ${path} hung`);
    return 'cut';
  }
  if (res.status !== 200) return `error ${res.status} ${JSON.parse(body.toString()).error}`;
  assert.equal(sha(body), want, `GET ${path} answered 200 with bytes that are not the file's`);
  return 'ok';
}

// The names in a directory in the order readdir() gives them: the order
// the orphan sweep walks them.
function sweepOrder(blobs) {
  const out = [];
  for (const sub of readdirSync(blobs)) {
    if (!/^[0-9a-f]{2}$/.test(sub)) continue;
    for (const name of readdirSync(join(blobs, sub))) if (/^[0-9a-f]{64}$/.test(name)) out.push(name);
  }
  return out;
}

describe('store: GC racing identical content (SQLite)', { skip }, () => {
  test(`${ROUNDS} rounds of ${ORPHANS} orphans re-uploaded while GC runs lose nothing acknowledged`, { timeout: 15 * 60 * 1000 }, async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'abx-store-faults-'));
    const env = { ABX_POOL: '0' };
    const seed = Number(process.env.ABX_FAULT_SEED ?? Date.now() % 1e9);
    let s = seed >>> 0 || 1;
    const rnd = (n) => {
      s ^= s << 13;
      s >>>= 0;
      s ^= s >>> 17;
      s ^= s << 5;
      s >>>= 0;
      return s % n;
    };
    let d = await startAbxd({ stateDir, env });
    const ws = await mkws(d, 'race');
    const acked = new Map(); // path -> hash, of every round
    let stats = { uploads: 0, acked: 0, gcRuns: 0, kills: 0 };
    try {
      for (let round = 0; round < ROUNDS; round++) {
        const label = `round ${round} (seed ${seed})`;
        await d.stop({ keepState: true });
        // What kill -9 between placing a blob and committing its row leaves,
        // an hour and more ago: files under their hash, no rows.
        const blobs = join(stateDir, 'store', 'blobs');
        const contents = new Map();
        for (let i = 0; i < ORPHANS; i++) {
          const data = Buffer.from(`orphan ${round} ${i} ${seed}\n`);
          const h = sha(data);
          contents.set(h, data);
          mkdirSync(join(blobs, h.slice(0, 2)), { recursive: true });
          const p = join(blobs, h.slice(0, 2), h);
          writeFileSync(p, data, { mode: 0o444 });
          const t = Date.now() / 1000 - 2 * 3600;
          utimesSync(p, t, t);
        }
        const order = sweepOrder(blobs).filter((h) => contents.has(h));
        assert.equal(order.length, ORPHANS);
        d = await startAbxd({ stateDir, env });
        const kill = round % 2 === 1;
        let done = 0;
        let stop = false;
        // Each client uploads a slice in the sweep's order: the sweep, which
        // deletes every orphan it passes, meets each client's front once.
        const slice = Math.ceil(order.length / CLIENTS);
        const client = async (c) => {
          for (let i = c * slice; i < Math.min(order.length, (c + 1) * slice) && !stop; i++) {
            const path = `/r${round}/${order[i]}`;
            stats.uploads++;
            const st = await put(d, `/v1/workspaces/${ws}/files${path}`, contents.get(order[i]));
            if (st === 201 || st === 200) {
              acked.set(path, order[i]);
              stats.acked++;
            }
            done++;
          }
        };
        const clients = [];
        for (let c = 0; c < CLIENTS; c++) clients.push(client(c));
        // GC over and over while the uploads run, from when they are under way.
        const collector = (async () => {
          while (done < order.length / 8 && !stop) await sleep(5);
          while (done < order.length && !stop) {
            const r = await api(d, 'POST', '/v1/store/gc', '').catch(() => null);
            if (r?.status === 200) stats.gcRuns++;
          }
        })();
        if (kill) {
          const at = order.length / 4 + rnd(order.length / 2);
          while (done < at) await sleep(5);
          d.proc.kill('SIGKILL');
          await d.exited;
          stop = true;
          stats.kills++;
        }
        await Promise.all([...clients, collector]);
        if (kill) d = await startAbxd({ stateDir, env });
        else assert.equal((await gc(d)).held_lease, true, label);
        await checkClean(d, label);
        // Every acknowledged upload so far is listed with its hash (the
        // check above hashed every blob); this round's read back too.
        const m = await api(d, 'GET', `/v1/workspaces/${ws}/manifest`);
        const seen = new Map(m.json.entries.map((e) => [e.path, e.hash]));
        for (const [path, h] of acked) {
          assert.equal(seen.get(path), h, `${label}: acknowledged ${path} is gone from the manifest`);
          if (!path.startsWith(`/r${round}/`)) continue;
          const g = await api(d, 'GET', `/v1/workspaces/${ws}/files${path}`);
          assert.equal(g.status, 200, `${label}: acknowledged ${path} is lost: ${g.text}`);
          assert.equal(sha(g.buf), h, `${label}: ${path} reads back other bytes`);
        }
      }
    } finally {
      await d.stop({ keepState: true }).catch(() => {});
      rmSync(stateDir, { recursive: true, force: true });
    }
    assert.ok(stats.gcRuns > ROUNDS, `GC hardly ran: ${JSON.stringify(stats)}`);
    console.log(`store faults: ${JSON.stringify(stats)}, seed ${seed}`);
  });
});

const backends = [{ kind: 'sqlite' }];
if (pgUrl || pgRequired) backends.push({ kind: 'postgres' });

for (const backend of backends)
  describe(`store: damaged blobs (${backend.kind})`, { skip }, () => {
    test('a damaged blob is never served whole, never hangs, and is counted', { timeout: 120000 }, async () => {
      if (backend.kind === 'postgres') assert.ok(pgUrl, 'ABX_TEST_PG_REQUIRED=1 but no ABX_TEST_PG_URL');
      const storeUrl = backend.kind === 'postgres' ? freshPgDatabase() : undefined;
      const env = { ABX_POOL: '0' };
      if (storeUrl) env.ABX_STORE = storeUrl;
      const d = await startAbxd({ env });
      try {
        const ws = await mkws(d, 'rot');
        const files = {
          small: Buffer.from('a small file\n'),
          big: randomBytes(3 * 1024 * 1024 + 77), // several HTTP pieces, several chunks
          cut: randomBytes(200000),
        };
        const hash = {};
        for (const [name, data] of Object.entries(files)) {
          const r = await api(d, 'PUT', `/v1/workspaces/${ws}/files/${name}`, data);
          assert.equal(r.status, 201, r.text);
          hash[name] = r.json.hash;
          assert.equal(await download(d, `/v1/workspaces/${ws}/files/${name}`, hash[name]), 'ok');
        }
        const blob = (h) => join(d.stateDir, 'store', 'blobs', h.slice(0, 2), h);
        const flip = (h, off) => {
          if (storeUrl) {
            const seq = Math.floor(off / (1 << 20));
            const at = off % (1 << 20);
            psql(storeUrl, `UPDATE blob_chunks SET data = set_byte(data, ${at}, 255 - get_byte(data, ${at})) WHERE hash = '${h}' AND seq = ${seq}`);
            return;
          }
          chmodSync(blob(h), 0o644);
          const fd = openSync(blob(h), 'r+');
          const b = Buffer.alloc(1);
          readSync(fd, b, 0, 1, off);
          b[0] = 255 - b[0];
          writeSync(fd, b, 0, 1, off);
          closeSync(fd);
        };
        const before = await metric(d, 'store_damaged_reads_total');
        // A flipped byte in the middle of a large file, and in a small one.
        flip(hash.big, 2 * 1024 * 1024 + 5);
        flip(hash.small, 3);
        // A blob cut short.
        if (storeUrl)
          psql(storeUrl, `UPDATE blob_chunks SET data = substring(data FROM 1 FOR 1000) WHERE hash = '${hash.cut}'`);
        else truncateSync(blob(hash.cut), 1000);
        const outcome = {};
        for (const name of Object.keys(files))
          outcome[name] = await download(d, `/v1/workspaces/${ws}/files/${name}`, hash[name]);
        // SQLite streams the blob file and can only cut the connection when
        // the hash fails at the end; PostgreSQL copies (and checks) first.
        const flipped = storeUrl ? 'error 500 integrity_error' : 'cut';
        assert.deepEqual(outcome, { small: flipped, big: flipped, cut: 'error 500 integrity_error' });
        assert.notEqual(before, undefined, 'no abx_store_damaged_reads_total in /metrics');
        assert.equal(await metric(d, 'store_damaged_reads_total'), before + 3);
        assert.match(d.log, /is damaged/);
        const c = await api(d, 'GET', '/v1/store/check');
        assert.equal(c.json.ok, false);
        assert.equal(c.json.corrupt_blobs, 3, c.text);
        // The server is fine afterwards, and a repaired blob is served.
        flip(hash.small, 3);
        assert.equal(await download(d, `/v1/workspaces/${ws}/files/small`, hash.small), 'ok');
      } finally {
        await d.stop();
        if (storeUrl) psql(pgUrl, `DROP DATABASE ${new URL(storeUrl).pathname.slice(1)} WITH (FORCE)`);
      }
    });
  });

// Fields of /proc/<pid>/stat after the command name; [19] is the start time.
function startTime(pid) {
  const st = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return st.slice(st.lastIndexOf(')') + 2).split(' ')[19];
}

function holderOf(pid) {
  const boot = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim().replace(/-/g, '');
  return `abxd-${hostname()}-${pid}-${startTime(pid)}-${boot}`;
}

for (const backend of backends)
  describe(`store: the GC lease after a restart (${backend.kind})`, { skip }, () => {
    test('a restarted abxd collects at once: clean stop, kill -9, a dead holder left behind', { timeout: 180000 }, async () => {
      if (backend.kind === 'postgres') assert.ok(pgUrl, 'ABX_TEST_PG_REQUIRED=1 but no ABX_TEST_PG_URL');
      const storeUrl = backend.kind === 'postgres' ? freshPgDatabase() : undefined;
      const stateDir = mkdtempSync(join(tmpdir(), 'abx-lease-'));
      const env = { ABX_POOL: '0' };
      if (storeUrl) env.ABX_STORE = storeUrl;
      const setLease = (holder, expiresMs) => {
        if (storeUrl)
          psql(storeUrl, `UPDATE gc_lease SET holder = '${holder}', expires_ms = ${expiresMs} WHERE id = 1`);
        else
          sqlite(join(stateDir, 'store'), 'INSERT OR REPLACE INTO gc_lease (id, holder, expires_ms) VALUES (1, ?, ?)', [
            holder,
            expiresMs,
          ]);
      };
      let d = await startAbxd({ stateDir, env });
      try {
        assert.equal((await gc(d)).held_lease, true, 'first run');
        await d.stop({ keepState: true });
        d = await startAbxd({ stateDir, env });
        assert.equal((await gc(d)).held_lease, true, 'after a clean restart');
        d.proc.kill('SIGKILL');
        await d.exited;
        d = await startAbxd({ stateDir, env });
        assert.equal((await gc(d)).held_lease, true, 'after kill -9');
        // A live holder on this host keeps its lease ...
        setLease(holderOf(process.pid), Date.now() + 10 * 60 * 1000);
        assert.equal((await gc(d)).held_lease, false, 'a live holder lost its lease');
        // ... one that died holding it (kill -9 during a GC) does not.
        const pid = d.proc.pid;
        const dead = holderOf(pid);
        d.proc.kill('SIGKILL');
        await d.exited;
        setLease(dead, Date.now() + 10 * 60 * 1000);
        d = await startAbxd({ stateDir, env });
        assert.equal((await gc(d)).held_lease, true, `after kill -9 of holder ${dead}`);
        assert.equal((await gc(d)).held_lease, true, 'the lease is given back after each run');
      } finally {
        await d.stop({ keepState: true }).catch(() => {});
        rmSync(stateDir, { recursive: true, force: true });
        if (storeUrl) psql(pgUrl, `DROP DATABASE ${new URL(storeUrl).pathname.slice(1)} WITH (FORCE)`);
      }
    });
  });

describe('store: one SQLite store, one abxd', { skip }, () => {
  test('a second abxd with another state directory on the same store refuses to start', { timeout: 120000 }, async () => {
    const store = mkdtempSync(join(tmpdir(), 'abx-shared-store-'));
    const env = { ABX_POOL: '0', ABX_STORE: store };
    const d1 = await startAbxd({ env });
    let d2;
    try {
      let log = '';
      try {
        d2 = await startAbxd({ env });
      } catch (e) {
        log = e.message;
      }
      assert.equal(d2, undefined, 'the second abxd started on a store in use');
      assert.ok(
        log.includes(`store directory '${store}' is in use by another process (pid ${d1.proc.pid})`),
        `unclear refusal:\n${log}`,
      );
      // The first one is unharmed.
      await mkws(d1, 'still-fine');
      await checkClean(d1, 'first abxd');
      assert.ok(statSync(join(store, 'lock')).isFile());
    } finally {
      await d2?.stop().catch(() => {});
      await d1.stop();
      rmSync(store, { recursive: true, force: true });
    }
  });
});
