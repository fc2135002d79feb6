// workspaces-faults.test.mjs - kill -9 of abxd at random points during
// streamed uploads, mirrors and GC, then a restart on the same state:
// every acknowledged write must be there and intact, the integrity check
// must pass, and no half-written file may be visible.
//
// ABX_FAULT_RUNS sets the number of kills: 10 by default (one file in the
// inner loop), 50 in `make test` and CI (scripts/test.sh sets it), many more
// for a soak. Every run prints its seed, so a failure can be replayed with
// ABX_FAULT_SEED.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createHash, randomBytes } from 'node:crypto';
import { startAbxd, api, parseNdjson, isRoot, sleep } from './lib.mjs';

const skip = !isRoot && 'needs root';
const RUNS = Number(process.env.ABX_FAULT_RUNS ?? 10);
const sha = (b) => createHash('sha256').update(b).digest('hex');

// A small deterministic PRNG so a seed replays a run.
function rng(seed) {
  let s = seed >>> 0 || 1;
  return (n) => {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    return s % n;
  };
}

async function wsExec(d, ws, script) {
  const r = await api(d, 'POST', `/v1/workspaces/${ws}/exec`, { argv: ['/bin/sh', '-c', script] });
  if (r.status !== 200) throw new Error(`exec: ${r.status} ${r.text}`);
  const p = parseNdjson(r.text);
  return { code: p.result?.exit_code, out: p.stdout.toString('utf8') };
}

// What the test knows about each path: every version sent, in order, and
// the latest acknowledged one. After a crash a path must hold the
// acknowledged version or one sent after it - never an older one, never
// bytes nobody sent.
class Ledger {
  constructor() {
    this.paths = new Map(); // path -> {versions: [hash], acked: index (-1 = none)}
    this.acks = 0; // acknowledgements so far
  }
  entry(p) {
    if (!this.paths.has(p)) this.paths.set(p, { versions: [], acked: -1 });
    return this.paths.get(p);
  }
  attempt(p, h) {
    this.entry(p).versions.push(h);
  }
  ack(p, h) {
    const e = this.entry(p);
    const i = e.versions.lastIndexOf(h);
    if (i > e.acked) e.acked = i;
    this.acks++;
  }
}

// Uploads that stream slowly enough for a kill to land inside them.
async function slowPut(d, path, data, signal) {
  const chunk = 64 * 1024;
  const body = new ReadableStream({
    async pull(ctrl) {
      if (this.off === undefined) this.off = 0;
      if (this.off >= data.length) return ctrl.close();
      ctrl.enqueue(data.subarray(this.off, this.off + chunk));
      this.off += chunk;
      await sleep(1);
    },
  });
  const res = await fetch(d.url + path, {
    method: 'PUT',
    headers: { authorization: `Bearer ${d.key}`, 'content-length': String(data.length) },
    body,
    duplex: 'half',
    signal,
  });
  await res.arrayBuffer();
  return res.status;
}

async function scenarioUpload(d, ws, L, r, run) {
  const jobs = [];
  for (let i = 0; i < 4; i++) {
    const path = `/up/r${run}-${i}.bin`;
    const size = [0, 100, 70000, 1 << 20, 3 << 20][r(5)];
    const data = randomBytes(size);
    const h = sha(data);
    L.attempt(path, h);
    jobs.push(
      slowPut(d, `/v1/workspaces/${ws}/files${path}`, data)
        .then((st) => {
          if (st === 200 || st === 201) L.ack(path, h);
        })
        .catch(() => {}),
    );
  }
  // An overwrite of one stable path: old or new, never a mix.
  const data = randomBytes(200000 + r(500000));
  L.attempt('/stable.bin', sha(data));
  jobs.push(
    slowPut(d, `/v1/workspaces/${ws}/files/stable.bin`, data)
      .then((st) => {
        if (st === 200 || st === 201) L.ack('/stable.bin', sha(data));
      })
      .catch(() => {}),
  );
  return jobs;
}

async function scenarioMirror(d, ws, L, r, run) {
  // Files made inside the sandbox; their hashes computed there.
  const n = 1 + r(40);
  const script =
    `mkdir -p m; i=0; while [ $i -lt ${n} ]; do ` +
    `head -c $(( (i * 7919 + ${run}) % 200000 )) /dev/urandom > m/f$i; i=$((i+1)); done; ` +
    `echo run${run} > m/stable.txt; cd m && sha256sum *`;
  const x = await wsExec(d, ws, script);
  const hashes = new Map();
  for (const line of x.out.trim().split('\n')) {
    const [h, name] = line.split(/\s+/);
    hashes.set(`/m/${name}`, h);
    L.attempt(`/m/${name}`, h);
  }
  return [
    api(d, 'POST', `/v1/workspaces/${ws}/flush`, '')
      .then((res) => {
        if (res.status === 200) for (const [p, h] of hashes) L.ack(p, h);
      })
      .catch(() => {}),
  ];
}

async function scenarioGc(d, ws, L, r, run) {
  // Garbage: overwritten versions; GC must leave every live blob.
  const jobs = [];
  for (let i = 0; i < 3; i++) {
    const path = `/gc/g${i}.txt`;
    const data = Buffer.from(`gc ${run} ${i} ${r(1e9)}`);
    L.attempt(path, sha(data));
    const res = await api(d, 'PUT', `/v1/workspaces/${ws}/files${path}`, data);
    if (res.status === 200 || res.status === 201) L.ack(path, sha(data));
  }
  jobs.push(api(d, 'POST', '/v1/store/gc', '').catch(() => {}));
  const data = randomBytes(50000);
  L.attempt('/gc/during.bin', sha(data));
  jobs.push(
    slowPut(d, `/v1/workspaces/${ws}/files/gc/during.bin`, data)
      .then((st) => {
        if (st === 200 || st === 201) L.ack('/gc/during.bin', sha(data));
      })
      .catch(() => {}),
  );
  return jobs;
}

async function verify(d, ws, L, label) {
  const c = await api(d, 'GET', '/v1/store/check');
  assert.equal(c.status, 200, `${label}: check ${c.text}`);
  assert.equal(c.json.ok, true, `${label}: integrity check failed: ${c.text}`);
  const m = await api(d, 'GET', `/v1/workspaces/${ws}/manifest`);
  assert.equal(m.status, 200, `${label}: manifest ${m.text}`);
  const seen = new Map(m.json.entries.filter((e) => e.type === 'file').map((e) => [e.path, e.hash]));
  for (const [p, e] of L.paths) {
    const h = seen.get(p);
    if (e.acked >= 0) assert.ok(h, `${label}: acknowledged ${p} is missing`);
    if (!h) continue;
    assert.ok(e.versions.includes(h), `${label}: ${p} has content nobody wrote (${h})`);
    assert.ok(
      e.versions.lastIndexOf(h) >= e.acked,
      `${label}: ${p} went back to a version older than the acknowledged one`,
    );
  }
  for (const [p, h] of seen) {
    if (!L.paths.has(p)) continue;
    const g = await api(d, 'GET', `/v1/workspaces/${ws}/files${p}`);
    assert.equal(g.status, 200, `${label}: GET ${p}`);
    assert.equal(sha(g.buf), h, `${label}: ${p} reads back different bytes than its hash`);
  }
}

describe('workspace faults: kill -9 of abxd', { skip }, () => {
  test(`${RUNS} kills during uploads, mirrors and GC lose nothing acknowledged`, { timeout: 60 * 60 * 1000 }, async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'abx-faults-'));
    const seed = Number(process.env.ABX_FAULT_SEED ?? Date.now() % 1e9);
    const r = rng(seed);
    const L = new Ledger();
    const env = { ABX_POOL: '0' };
    let d = await startAbxd({ stateDir, env });
    const ws = (await api(d, 'POST', '/v1/workspaces', { id: 'faults' })).json.id;
    assert.equal(ws, 'faults');
    const counts = { upload: 0, mirror: 0, gc: 0 };
    try {
      for (let run = 0; run < RUNS; run++) {
        const label = `run ${run} (seed ${seed})`;
        const kind = ['upload', 'mirror', 'gc'][run % 3];
        counts[kind]++;
        let jobs;
        if (kind === 'mirror') jobs = await scenarioMirror(d, ws, L, r, run);
        else if (kind === 'gc') jobs = await scenarioGc(d, ws, L, r, run);
        else jobs = await scenarioUpload(d, ws, L, r, run);
        const acks = L.acks;
        await sleep(r(kind === 'upload' ? 120 : 25)); // on purpose: the kill lands at a random point
        // An upload run kills only once one of its writes is acknowledged
        // (the others still stream): on a slow machine no upload would ever
        // finish within the random wait, and the kills would test nothing.
        for (const t0 = Date.now(); kind === 'upload' && L.acks === acks && Date.now() - t0 < 20000; )
          await sleep(5);
        d.proc.kill('SIGKILL');
        await d.exited;
        await Promise.allSettled(jobs);
        d = await startAbxd({ stateDir, env });
        await verify(d, ws, L, label);
      }
    } finally {
      await d.stop({ keepState: true }).catch(() => {});
      rmSync(stateDir, { recursive: true, force: true });
    }
    const acked = [...L.paths.values()].filter((e) => e.acked >= 0).length;
    assert.ok(acked > RUNS / 2, `too few acknowledged writes (${acked}) to mean anything`);
    console.log(`faults: ${RUNS} kills (${JSON.stringify(counts)}), ${acked} acknowledged paths verified, seed ${seed}`);
  });
});
