// limits.test.mjs - per-sandbox caps that are enforced, not only documented:
// running processes (1024, every surface that starts one), the descriptors
// abxd holds for a sandbox and for all of them (a low RLIMIT_NOFILE gives
// clear errors, never a crash, and everyone else is still served), output
// nobody reads (read at a bounded rate, so a flood costs abxd almost
// nothing), and E2B watches (inotify instances).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { readdirSync, readFileSync } from 'node:fs';
import { startAbxd, api, createSandbox, killSandbox, sh, sleep, isRoot } from './lib.mjs';

const skip = !isRoot && 'needs root';

const MAX_RUNNING = 1024; // SANDBOX_MAX_RUNNING
const LOG_MAX = 1024 * 1024; // PROC_LOG_MAX
const UNREAD_RATE = 256 * 1024; // PROC_UNREAD_RATE, bytes/s
const UNREAD_BURST = 64 * 1024; // PROC_UNREAD_BURST
const SANDBOX_UNREAD_RATE = 1024 * 1024; // SANDBOX_UNREAD_RATE
const SANDBOX_UNREAD_BURST = 256 * 1024;

const fdCount = (d) => readdirSync(`/proc/${d.proc.pid}/fd`).length;
// abxd's CPU time in seconds (utime + stime).
function cpuSeconds(d) {
  const f = readFileSync(`/proc/${d.proc.pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(f[11]) + Number(f[12])) / 100;
}

// One request on its own connection, closed after the answer: idle
// keep-alive sockets would blur abxd's descriptor count.
function once(d, method, path, body, headers = {}) {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : JSON.stringify(body);
    const req = http.request(
      {
        host: '127.0.0.1',
        port: d.port,
        method,
        path,
        agent: false,
        headers: {
          authorization: `Bearer ${d.key}`,
          ...(data ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) } : {}),
          ...headers,
        },
      },
      (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let json;
          try {
            json = JSON.parse(text);
          } catch {}
          resolve({ status: res.statusCode, text, json });
        });
      },
    );
    req.on('error', reject);
    req.setTimeout(60000, () => req.destroy(new Error('request timed out')));
    if (data) req.write(data);
    req.end();
  });
}

async function waitFor(what, cond, ms = 20000) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await cond();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

// An E2B sandbox (platform API), usable from the native API too.
async function e2bCreate(d) {
  const r = await fetch(`${d.url}/sandboxes`, {
    method: 'POST',
    headers: { 'X-API-KEY': d.key, 'content-type': 'application/json' },
    body: JSON.stringify({ templateID: 'base' }),
  });
  const j = await r.json();
  assert.equal(r.status, 201, JSON.stringify(j));
  return { id: j.sandboxID, token: j.envdAccessToken };
}

// A server-streaming envd RPC over Connect: its first envelope, and a
// close() that ends the stream from the client's side.
async function e2bStream(d, sbx, rpc, body) {
  const msg = Buffer.from(JSON.stringify(body));
  const env = Buffer.alloc(5 + msg.length);
  env.writeUInt32BE(msg.length, 1);
  msg.copy(env, 5);
  const ac = new AbortController();
  const r = await fetch(`${d.url}/${rpc}`, {
    method: 'POST',
    headers: {
      'E2b-Sandbox-Id': sbx.id,
      'X-Access-Token': sbx.token ?? '',
      'content-type': 'application/connect+json',
    },
    body: env,
    signal: ac.signal,
  });
  assert.equal(r.status, 200);
  const reader = r.body.getReader();
  let buf = Buffer.alloc(0);
  try {
    while (buf.length < 5 || buf.length < 5 + buf.readUInt32BE(1)) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`${rpc} ended without an envelope`);
      buf = Buffer.concat([buf, Buffer.from(value)]);
    }
  } catch (e) {
    ac.abort();
    throw e;
  }
  return { flags: buf[0], json: JSON.parse(buf.subarray(5, 5 + buf.readUInt32BE(1))), close: () => ac.abort() };
}

// envd's process.Start: the first envelope it answers with
// ({"event":{"start":...}} on success, an end-stream error otherwise).
async function e2bStart(d, sbx, cmd, args, extra = {}) {
  const r = await e2bStream(d, sbx, 'process.Process/Start', { process: { cmd, args }, ...extra });
  r.close();
  return r;
}

async function e2bUnary(d, sbx, rpc, body) {
  const r = await fetch(`${d.url}/${rpc}`, {
    method: 'POST',
    headers: { 'E2b-Sandbox-Id': sbx.id, 'X-Access-Token': sbx.token ?? '', 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: r.status, json: await r.json() };
}

async function running(d, id) {
  const r = await api(d, 'GET', `/v1/sandboxes/${id}/processes`);
  assert.equal(r.status, 200, r.text);
  return r.json.processes.filter((p) => p.state === 'running');
}

// The budget line abxd logs at start.
function fdPlan(d) {
  const m = d.log.match(
    /descriptors: (\d+) \(RLIMIT_NOFILE\), \d+ open, \d+ for HTTP connections, (\d+) for sandboxes and processes \((\d+) per sandbox\)/,
  );
  if (!m) return undefined; // an abxd without budgets
  return { nofile: Number(m[1]), budget: Number(m[2]), share: Number(m[3]), line: m[0] };
}

test('past 1024 running processes every start gets 429 / resource_exhausted', { skip, timeout: 300000 }, async (t) => {
  // 1,100 requests at once from one address: above the per-client
  // connection cap (item 14), which this test is not about.
  const d = await startAbxd({ env: { ABX_PIDS: '8192', ABX_POOL: '0', ABX_HTTP_MAX_CONNS_PER_IP: '1800' } });
  try {
    // The process cap must be what a sandbox meets first, not its
    // descriptor share (two per background process).
    const plan = fdPlan(d);
    if (plan && plan.share < 2 * MAX_RUNNING + 8) {
      t.skip(`RLIMIT_NOFILE's hard limit is too low for 1024 processes in one sandbox: ${plan.line}`);
      return;
    }
    const sbx = await e2bCreate(d);
    // Time for abxd's descriptors to settle after the create before the
    // baseline count (no event says when they have).
    await sleep(200);
    const fds0 = fdCount(d);
    // BUG: processes init had not yet reported as started were not
    // counted, so a burst of starts all passed the check: 1,100 and 1,500
    // concurrent processes were accepted against the documented 1,024.
    const N = MAX_RUNNING + 76;
    const rs = await Promise.all(
      Array.from({ length: N }, () =>
        once(d, 'POST', `/v1/sandboxes/${sbx.id}/exec`, { argv: ['sleep', '120'], background: true }),
      ),
    );
    const by = {};
    for (const r of rs) by[r.status] = (by[r.status] ?? 0) + 1;
    assert.deepEqual(by, { 201: MAX_RUNNING, 429: N - MAX_RUNNING }, JSON.stringify(by));
    const refused = rs.find((r) => r.status === 429);
    assert.equal(refused.json.error, 'too_many_requests');
    assert.match(refused.json.message, /already runs 1024 processes/);
    assert.equal((await running(d, sbx.id)).length, MAX_RUNNING);
    // abxd holds two pipes per process, nothing more for the refused ones
    // (once the answered connections are closed)
    const bound = fds0 + 2 * MAX_RUNNING + 16;
    await waitFor(`abxd to hold at most ${bound} descriptors`, () => fdCount(d) <= bound, 5000).catch(() => {
      assert.fail(`abxd holds ${fdCount(d)} descriptors (${fds0} before, at most ${bound})`);
    });

    // the same cap on the E2B surface: resource_exhausted, Connect's code
    // for a quota, in the end-stream frame
    const e = await e2bStart(d, sbx, 'sleep', ['1']);
    assert.equal(e.flags, 2, JSON.stringify(e.json));
    assert.equal(e.json.error.code, 'resource_exhausted');
    assert.match(e.json.error.message, /1024 processes/);
    // a terminal is a process too
    const t = await e2bStart(d, sbx, '/bin/sh', [], { pty: { size: { cols: 80, rows: 24 } } });
    assert.equal(t.json.error?.code, 'resource_exhausted', JSON.stringify(t.json));

    // one ends: exactly one start fits again
    const victim = (await running(d, sbx.id))[0];
    const k = await api(d, 'POST', `/v1/sandboxes/${sbx.id}/processes/${victim.pid}/signal`, { signal: 'KILL' });
    assert.equal(k.status, 204, k.text);
    await waitFor('the killed process to end', async () => (await running(d, sbx.id)).length < MAX_RUNNING);
    const ok = await e2bStart(d, sbx, 'sleep', ['120']);
    assert.ok(ok.json.event?.start, JSON.stringify(ok.json));
    const again = await once(d, 'POST', `/v1/sandboxes/${sbx.id}/exec`, { argv: ['true'] });
    assert.equal(again.status, 429, again.text);

    // killing the sandbox gives every descriptor back
    await killSandbox(d, sbx.id);
    await waitFor('abxd to close the processes\' descriptors', () => fdCount(d) <= fds0 + 8);
  } finally {
    await d.stop();
  }
});

test('a low RLIMIT_NOFILE: budgets answer 429 and 503, and everyone else is served', { skip, timeout: 180000 }, async () => {
  const NOFILE = 512;
  const d = await startAbxd({ wrap: ['prlimit', `--nofile=${NOFILE}`], env: { ABX_PIDS: '4096', ABX_POOL: '0' } });
  try {
    // (an abxd without budgets: what one would be given here)
    const { nofile, budget, share, line } = fdPlan(d) ?? { nofile: NOFILE, budget: 200, share: 50, line: '' };
    assert.equal(nofile, NOFILE);
    assert.ok(share >= 8 && share <= budget / 4, line);
    const fds0 = fdCount(d);

    // One sandbox starts far more than its share allows: the excess gets
    // 429 with the reason, before abxd runs short of anything.
    const a = await createSandbox(d, {});
    const rs = [];
    for (let i = 0; i < 3 * share; i++)
      rs.push(await once(d, 'POST', `/v1/sandboxes/${a.id}/exec`, { argv: ['sleep', '120'], background: true }));
    const okA = rs.filter((r) => r.status === 201).length;
    assert.equal(okA, Math.floor(share / 2), rs.map((r) => r.status).join(','));
    const over = rs.filter((r) => r.status !== 201);
    assert.ok(over.every((r) => r.status === 429 && r.json.error === 'too_many_requests'), over[0]?.text);
    assert.match(over[0].json.message, /descriptors in abxd/);
    assert.ok(fdCount(d) < NOFILE - 128, `abxd holds ${fdCount(d)} of ${NOFILE} descriptors`);

    // the others: health, a new sandbox, its processes and files
    assert.equal((await once(d, 'GET', '/healthz')).status, 200);
    const b = await createSandbox(d, {});
    const hi = await sh(d, b.id, 'echo hi');
    assert.equal(hi.out, 'hi\n');
    const put = await api(d, 'PUT', `/v1/sandboxes/${b.id}/files/x.txt`, 'data');
    assert.equal(put.status, 201, put.text);

    // Sandboxes that all fill their share run into the host's budget:
    // 503 "unavailable" (abxd is short, not the client), on the native
    // and the E2B surface, and abxd still has descriptors to answer with.
    const e2b = await e2bCreate(d);
    const boxes = [];
    let refusedHost;
    for (let i = 0; i < 12 && !refusedHost; i++) {
      const c = await once(d, 'POST', '/v1/sandboxes', {});
      if (c.status !== 201) {
        refusedHost = c;
        break;
      }
      boxes.push(c.json.id);
      for (let j = 0; j < share && !refusedHost; j++) {
        const r = await once(d, 'POST', `/v1/sandboxes/${c.json.id}/exec`, { argv: ['sleep', '120'], background: true });
        if (r.status === 503) refusedHost = r;
        else if (r.status !== 201) assert.equal(r.status, 429, r.text);
        if (r.status === 429) break;
      }
    }
    assert.ok(refusedHost, 'the host budget was never reached');
    assert.equal(refusedHost.status, 503, refusedHost.text);
    assert.equal(refusedHost.json.error, 'unavailable');
    assert.match(refusedHost.json.message, /no descriptors left/);
    const e = await e2bStart(d, e2b, 'sleep', ['1']);
    assert.equal(e.json.error?.code, 'unavailable', JSON.stringify(e.json));
    assert.ok(fdCount(d) < NOFILE - 64, `abxd holds ${fdCount(d)} of ${NOFILE} descriptors`);
    assert.equal((await once(d, 'GET', '/healthz')).status, 200);
    assert.equal((await once(d, 'GET', `/v1/sandboxes/${b.id}/files/x.txt`)).text, 'data');
    assert.equal(d.proc.exitCode, null);

    // everything given back
    for (const id of [a.id, b.id, e2b.id, ...boxes]) await killSandbox(d, id);
    await waitFor('abxd to give the descriptors back', () => fdCount(d) <= fds0 + 8);
    const c = await createSandbox(d, {});
    assert.equal((await sh(d, c.id, 'echo back')).out, 'back\n');
    await killSandbox(d, c.id);
  } finally {
    await d.stop();
  }
});

test('output nobody reads is read at a bounded rate', { skip, timeout: 120000 }, async () => {
  const d = await startAbxd({});
  try {
    const sb = await createSandbox(d, {});
    const start = async (cmd) => {
      const r = await api(d, 'POST', `/v1/sandboxes/${sb.id}/exec`, { argv: ['/bin/sh', '-c', cmd], background: true });
      assert.equal(r.status, 201, r.text);
      return r.json.pid;
    };
    const outputEnd = async (pid) => (await api(d, 'GET', `/v1/sandboxes/${sb.id}/processes/${pid}`)).json.output_end;

    // BUG: a `yes` nobody reads was read as fast as it wrote, only for
    // the oldest output to be dropped: 6 s of abxd's CPU per 10 s.
    const t0 = Date.now();
    const pid = await start('yes');
    // Sleeps on purpose: past the start, then a 3 s window of abxd's CPU
    // with nobody reading is what the test measures.
    await sleep(500);
    const c0 = cpuSeconds(d);
    const w0 = Date.now();
    await sleep(3000);
    const cpu = cpuSeconds(d) - c0;
    const wall = (Date.now() - w0) / 1000;
    const read = await outputEnd(pid);
    const secs = (Date.now() - t0) / 1000;
    const bound = LOG_MAX + UNREAD_BURST + UNREAD_RATE * (secs + 0.5) + 128 * 1024;
    assert.ok(read <= bound, `abxd read ${read} bytes of unread output in ${secs} s (at most ${bound})`);
    assert.ok(read > LOG_MAX, 'the writer is slowed, not stopped');
    // measured: 50% of a core before, 0-1% after (the bound is generous)
    assert.ok(cpu / wall < 0.2, `abxd used ${(100 * cpu / wall).toFixed(1)}% of a core on a flood nobody reads`);
    console.log(`flood: abxd CPU ${(100 * cpu / wall).toFixed(1)}% of a core, ${read} bytes read in ${secs.toFixed(1)} s`);

    // someone follows: read at the reader's pace again
    const from = await outputEnd(pid);
    const ac = new AbortController();
    const res = await fetch(`${d.url}/v1/sandboxes/${sb.id}/processes/${pid}/output?offset=${from}&follow=1`, {
      headers: { authorization: `Bearer ${d.key}` },
      signal: ac.signal,
    });
    const rd = res.body.getReader();
    let got = 0;
    const until = Date.now() + 10000;
    while (got < 8 * LOG_MAX && Date.now() < until) got += (await rd.read()).value?.length ?? 0;
    ac.abort();
    assert.ok(got >= 8 * LOG_MAX, `a follower got only ${got} bytes in 10 s`);

    // several floods in one sandbox share one bound
    const pids = [];
    for (let i = 0; i < 6; i++) pids.push(await start('cat /dev/zero'));
    const s0 = Date.now();
    const e0 = await Promise.all(pids.map(outputEnd));
    await sleep(3000); // on purpose: the window the shared bound is measured over
    const e1 = await Promise.all(pids.map(outputEnd));
    const dt = (Date.now() - s0) / 1000;
    // each one's log fills first (LOG_MAX at full speed), what comes after
    // is charged to the sandbox
    const past = e1.reduce((s, v) => s + Math.max(0, v - LOG_MAX), 0) - e0.reduce((s, v) => s + Math.max(0, v - LOG_MAX), 0);
    const sbound = SANDBOX_UNREAD_RATE * (dt + 0.5) + SANDBOX_UNREAD_BURST + 6 * UNREAD_BURST + 256 * 1024;
    assert.ok(past <= sbound, `6 floods read ${past} bytes past their logs in ${dt} s (at most ${sbound})`);

    // A background job that logs a few MB and nobody reads does not hang:
    // it is slowed past its log and finishes, the newest output kept.
    const job = await start('head -c 1500000 /dev/zero | tr "\\0" x; echo; echo done');
    for (const p of [pid, ...pids])
      await api(d, 'POST', `/v1/sandboxes/${sb.id}/processes/${p}/signal`, { signal: 'KILL' });
    await waitFor(
      'the logger to finish',
      async () => (await api(d, 'GET', `/v1/sandboxes/${sb.id}/processes/${job}`)).json.state === 'exited',
      30000,
    );
    const out = await api(d, 'GET', `/v1/sandboxes/${sb.id}/processes/${job}/output?offset=0`);
    const lines = out.text.trim().split('\n').map((l) => JSON.parse(l));
    assert.ok(lines[0].dropped > 0, out.text.slice(0, 200));
    const tail = Buffer.from(lines.filter((l) => l.stdout).at(-1).stdout, 'base64').toString();
    assert.match(tail, /done\n$/);
    await killSandbox(d, sb.id);
  } finally {
    await d.stop();
  }
});

test('a sandbox holds at most 16 inotify watches (streams and watchers)', { skip, timeout: 60000 }, async () => {
  const WATCHES = 16; // WATCHES_PER_SANDBOX
  const d = await startAbxd({ env: { ABX_POOL: '0' } });
  const open = [];
  try {
    const sbx = await e2bCreate(d);
    const other = await e2bCreate(d);
    // BUG: every WatchDir stream and watcher holds an inotify instance,
    // which the kernel counts per user (128 for root by default) for abxd
    // and the host's own services alike, and nothing bounded them.
    for (let i = 0; i < WATCHES; i++) {
      const w = await e2bStream(d, sbx, 'filesystem.Filesystem/WatchDir', { path: '/home/user' });
      open.push(w);
      assert.ok(w.json.start, JSON.stringify(w.json));
    }
    const over = await e2bStream(d, sbx, 'filesystem.Filesystem/WatchDir', { path: '/home/user' });
    over.close();
    assert.equal(over.flags, 2, JSON.stringify(over.json));
    assert.equal(over.json.error.code, 'resource_exhausted');
    assert.match(over.json.error.message, /16 watches/);
    const pw = await e2bUnary(d, sbx, 'filesystem.Filesystem/CreateWatcher', { path: '/home/user' });
    assert.equal(pw.status, 429, JSON.stringify(pw.json));
    assert.equal(pw.json.code, 'resource_exhausted');
    // another sandbox is not affected
    const ok = await e2bUnary(d, other, 'filesystem.Filesystem/CreateWatcher', { path: '/home/user' });
    assert.equal(ok.status, 200, JSON.stringify(ok.json));
    // one ends: a watch fits again (abxd notices that the client left when
    // it next writes to the stream: an event)
    open.pop().close();
    let n = 0;
    await waitFor(
      'a watch to fit again',
      async () => {
        await api(d, 'PUT', `/v1/sandboxes/${sbx.id}/files/poke-${n++}`, 'x');
        return (await e2bUnary(d, sbx, 'filesystem.Filesystem/CreateWatcher', { path: '/home/user' })).status === 200;
      },
      10000,
    );
    for (const w of open.splice(0)) w.close();
    for (const x of [sbx, other]) await api(d, 'DELETE', `/v1/sandboxes/${x.id}`);
  } finally {
    for (const w of open) w.close();
    await d.stop();
  }
});
