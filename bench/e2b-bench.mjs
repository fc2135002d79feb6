#!/usr/bin/env node
// bench/e2b-bench.mjs - the E2B side of `make bench` section 8c: abxd driven
// through the official e2b npm SDK (tests/e2b/node_modules, installed by
// scripts/deps.sh), the same four operations that `abx-bench e2b-baseline`
// times through libabx:
//
//   create     Sandbox.create() -> first commands.run('true') done (the
//              sandbox is then killed, untimed)
//   run        commands.run('true') round trip on one live sandbox
//   write      files.write of SIZE random bytes (default 1 MiB)
//   read       files.read of it, format 'bytes' (checked against what was written)
//
// and, as a control that separates the SDK and abxd's E2B surface from the
// cost of doing HTTP from Node at all, the last three again on abxd's own
// API (/v1/sandboxes/{id}/exec and .../files/...) with undici's fetch, the
// HTTP client the SDK itself uses, from the same node_modules:
//
//   native_run    POST .../exec {"argv": ["/bin/bash", "-l", "-c", "true"]}
//   native_write  PUT .../files/... of the same bytes
//   native_read   GET .../files/... into an ArrayBuffer
//
// Usage: node bench/e2b-bench.mjs --url URL --key KEY [-n N] [-w W]
//            [--create-n N] [--create-w W] [--size BYTES] [--wait-pool K] [--name NAME]
//
// With --wait-pool K each create round first waits (untimed, at most 10 s)
// until abxd's /metrics says K warm sandboxes are ready, as
// `abx-bench e2b-baseline --wait-pool K` does.
//
// URL and KEY default to $ABX_URL and $ABX_API_KEY (as for abx-bench); the
// key must have E2B's shape (e2b_ + 40 hex digits). Prints
// NAME.<op>.{n,min_us,p50_us,p90_us,p99_us,max_us,mean_us} lines on stdout,
// like bench/abx-bench.c (latencies in µs, nearest-rank percentiles), and
// progress and errors on stderr. Exits non-zero on the first failed call.
import { randomBytes } from 'node:crypto';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { performance } from 'node:perf_hooks';

const here = dirname(fileURLToPath(import.meta.url));
const MODULES = join(here, '..', 'tests', 'e2b', 'node_modules');
const E2B = join(MODULES, 'e2b', 'dist', 'index.mjs');
const UNDICI = join(MODULES, 'undici', 'index.js');

const { values: o } = parseArgs({
  options: {
    url: { type: 'string', default: process.env.ABX_URL },
    key: { type: 'string', default: process.env.ABX_API_KEY },
    n: { type: 'string', short: 'n', default: '200' },
    w: { type: 'string', short: 'w', default: '20' },
    'create-n': { type: 'string' },
    'create-w': { type: 'string' },
    size: { type: 'string', default: String(1024 * 1024) },
    'wait-pool': { type: 'string', default: '0' },
    name: { type: 'string', default: 'e2b' },
  },
});
if (!o.url || !o.key) {
  process.stderr.write('usage: e2b-bench.mjs --url URL --key KEY [-n N] [-w W] [--size BYTES]\n');
  process.exit(2);
}
const N = Number(o.n);
const W = Number(o.w);
const CN = Number(o['create-n'] ?? o.n);
const CW = Number(o['create-w'] ?? o.w);
const SIZE = Number(o.size);
const POOL = Number(o['wait-pool']);

// Exactly what a user sets; the SDK reads them when it is loaded and on each call.
process.env.E2B_API_URL = o.url;
process.env.E2B_SANDBOX_URL = o.url;
process.env.E2B_API_KEY = o.key;
const { Sandbox } = await import(pathToFileURL(E2B).href);
const undici = await import(pathToFileURL(UNDICI).href);

function report(op, s) {
  const v = [...s].sort((a, b) => a - b);
  const pct = (p) => v[Math.max(0, Math.ceil((p / 100) * v.length) - 1)];
  const out = (k, x) => process.stdout.write(`${o.name}.${op}.${k}=${x}\n`);
  out('n', v.length);
  if (!v.length) return;
  const f = (x) => x.toFixed(1);
  out('min_us', f(v[0]));
  out('p50_us', f(pct(50)));
  out('p90_us', f(pct(90)));
  out('p99_us', f(pct(99)));
  out('max_us', f(v[v.length - 1]));
  out('mean_us', f(v.reduce((a, b) => a + b, 0) / v.length));
}

// timed(W, N, fn): runs fn W + N times, returns the last N durations in µs.
async function timed(w, n, fn) {
  const s = [];
  for (let i = 0; i < w + n; i++) {
    const t0 = performance.now();
    await fn(i);
    const t = (performance.now() - t0) * 1000;
    if (i >= w) s.push(t);
  }
  return s;
}

async function runTrue(sbx) {
  const r = await sbx.commands.run('true');
  if (r.exitCode !== 0) throw new Error(`commands.run('true') exited ${r.exitCode}`);
}

// Until abxd holds k warm sandboxes (at most 10 s); returns false on a timeout.
let poolTimeouts = 0;
async function waitPool(k) {
  const until = Date.now() + 10000;
  for (;;) {
    const r = await undici.fetch(`${o.url}/metrics`, { headers: { Authorization: `Bearer ${o.key}` } });
    const m = /^abx_pool_ready (\d+)$/m.exec(await r.text());
    if (!m) throw new Error('no abx_pool_ready in /metrics');
    if (Number(m[1]) >= k) return;
    if (Date.now() > until) {
      poolTimeouts++;
      return;
    }
    await new Promise((res) => setTimeout(res, 2));
  }
}

// (a) create -> first commands.run('true') done; the kill is not timed.
{
  const s = [];
  for (let i = 0; i < CW + CN; i++) {
    if (POOL) await waitPool(POOL);
    const t0 = performance.now();
    const sbx = await Sandbox.create();
    await runTrue(sbx);
    const t = (performance.now() - t0) * 1000;
    await sbx.kill();
    if (i >= CW) s.push(t);
  }
  report('create_run', s);
}

// (b), (c), (d) on one sandbox.
const sbx = await Sandbox.create();
try {
  report('run', await timed(W, N, () => runTrue(sbx)));

  const data = new Uint8Array(randomBytes(SIZE));
  const path = '/home/user/e2b-bench.bin';
  report('write', await timed(W, N, () => sbx.files.write(path, data)));
  const back = await sbx.files.read(path, { format: 'bytes' });
  if (back.length !== SIZE || !Buffer.from(back).equals(Buffer.from(data)))
    throw new Error(`files.read gave ${back.length} bytes, not what was written`);
  report(
    'read',
    await timed(W, N, async () => {
      const b = await sbx.files.read(path, { format: 'bytes' });
      if (b.length !== SIZE) throw new Error(`files.read gave ${b.length} bytes, not ${SIZE}`);
    }),
  );

  // The control: the same on abxd's own API, through undici's fetch.
  const agent = new undici.Agent({ connections: 10 });
  const base = `${o.url}/v1/sandboxes/${sbx.sandboxId}`;
  const auth = { Authorization: `Bearer ${o.key}` };
  const call = async (method, path, body, headers = {}) => {
    const r = await undici.fetch(base + path, { method, body, headers: { ...auth, ...headers }, dispatcher: agent });
    const b = await r.arrayBuffer();
    if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${Buffer.from(b).toString()}`);
    return b;
  };
  const argv = JSON.stringify({ argv: ['/bin/bash', '-l', '-c', 'true'] });
  report(
    'native_run',
    await timed(W, N, async () => {
      const t = Buffer.from(await call('POST', '/exec', argv, { 'Content-Type': 'application/json' })).toString();
      const last = JSON.parse(t.trim().split('\n').pop());
      if (last.exit_code !== 0) throw new Error(`native exec: ${t}`);
    }),
  );
  const npath = '/files/e2b-bench-native.bin';
  report('native_write', await timed(W, N, () => call('PUT', npath, data)));
  report(
    'native_read',
    await timed(W, N, async () => {
      const b = await call('GET', npath);
      if (b.byteLength !== SIZE) throw new Error(`native GET gave ${b.byteLength} bytes, not ${SIZE}`);
    }),
  );
  await agent.close();
  process.stdout.write(`${o.name}.bytes=${SIZE}\n`);
  process.stdout.write(`${o.name}.pool_wait_timeouts=${poolTimeouts}\n`);
} finally {
  await sbx.kill();
}
