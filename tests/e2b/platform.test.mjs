// The platform API through the real E2B SDK 2.51: create, info, list with
// filters and pages, timeouts that really expire, connect, pause and
// resume, metrics, kill, and the errors the SDK turns into its classes.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { setup, sleep, until } from './lib.mjs';

let d, Sandbox, E;
before(async () => {
  const s = await setup();
  d = s.d;
  E = s.sdk;
  Sandbox = s.sdk.Sandbox;
});
after(async () => d && (await d.stop()));

test('create answers once the sandbox runs processes; info describes it', async () => {
  const sbx = await Sandbox.create('base', { metadata: { who: 'me' }, timeoutMs: 120_000 });
  try {
    assert.match(sbx.sandboxId, /^[a-z0-9]+$/);
    const info = await sbx.getInfo();
    assert.equal(info.sandboxId, sbx.sandboxId);
    assert.equal(info.templateId, 'base');
    assert.equal(info.state, 'running');
    assert.deepEqual(info.metadata, { who: 'me' });
    assert.equal(info.envdVersion, '0.6.4');
    const life = info.endAt.getTime() - info.startedAt.getTime();
    assert.ok(Math.abs(life - 120_000) < 2000, String(life));
    const same = await Sandbox.getInfo(sbx.sandboxId);
    assert.equal(same.sandboxId, sbx.sandboxId);
    assert.equal(await sbx.isRunning(), true);
  } finally {
    await sbx.kill();
  }
  await assert.rejects(Sandbox.getInfo(sbx.sandboxId), E.SandboxNotFoundError);
  assert.equal(await Sandbox.kill(sbx.sandboxId), false);
  await assert.rejects(Sandbox.setTimeout(sbx.sandboxId, 1000), E.SandboxNotFoundError);
  await assert.rejects(Sandbox.connect(sbx.sandboxId), E.SandboxNotFoundError);
});

test('bad requests become the SDK error classes', async () => {
  await assert.rejects(Sandbox.create('no-such-template'), (e) => e instanceof E.SandboxError && /404|not found/.test(e.message));
  await assert.rejects(Sandbox.create({ apiKey: 'wrong' }), E.AuthenticationError);
  await assert.rejects(Sandbox.create({ timeoutMs: 1000 * 86400 * 400 }), (e) => e instanceof E.SandboxError && /400/.test(e.message));
  await assert.rejects(Sandbox.create({ network: { allowOut: ['203.0.113.1'] } }), /no outbound network/);
  await assert.rejects(Sandbox.create({ envs: { 'BAD=NAME': 'x' } }), /400/);
  // Hostile bodies straight at the API: JSON errors, nothing created.
  for (const body of ['{', '[]', '{"templateID":7}', '{}', '{"templateID":"base","timeout":-1}']) {
    const r = await fetch(d.url + '/v2/sandboxes', {
      method: 'POST',
      headers: { 'X-API-KEY': d.key, 'Content-Type': 'application/json' },
      body,
    });
    assert.equal(r.status, 400, body);
    assert.equal((await r.json()).code, 400);
  }
  const unauth = await fetch(d.url + '/v2/sandboxes');
  assert.equal(unauth.status, 401);
  assert.equal((await Sandbox.list().nextItems()).length, 0);
});

test('list: state, metadata, template filters, order and pages', async () => {
  const tag = 'run-' + Date.now();
  const boxes = [];
  for (let i = 0; i < 5; i++)
    boxes.push(await Sandbox.create({ metadata: { tag, n: String(i), 'odd key': 'a b&c=d%+41' } }));
  const other = await Sandbox.create({ metadata: { tag: 'other' } });
  try {
    const all = await Sandbox.list({ query: { metadata: { tag } } }).nextItems();
    assert.equal(all.length, 5);
    assert.deepEqual(
      all.map((s) => s.sandboxId),
      [...boxes].reverse().map((b) => b.sandboxId),
    ); // newest first
    const odd = await Sandbox.list({ query: { metadata: { 'odd key': 'a b&c=d%+41', n: '3' } } }).nextItems();
    assert.deepEqual(odd.map((s) => s.sandboxId), [boxes[3].sandboxId]);
    // Form-encoded once (no encodeURIComponent first): '%+4' is no escape.
    const form = new URLSearchParams({ 'odd key': 'a b&c=d%+41' }).toString();
    const plain = await fetch(`${d.url}/v2/sandboxes?metadata=${encodeURIComponent(form)}`, {
      headers: { 'X-API-KEY': d.key },
    });
    assert.equal((await plain.json()).length, 5);
    const pager = Sandbox.list({ query: { metadata: { tag }, state: ['running'] }, limit: 2 });
    const seen = [];
    while (pager.hasNext) seen.push(...(await pager.nextItems()));
    assert.deepEqual(seen.map((s) => s.sandboxId).sort(), boxes.map((b) => b.sandboxId).sort());
    assert.equal((await Sandbox.list({ query: { metadata: { tag }, state: ['paused'] } }).nextItems()).length, 0);
    assert.equal((await Sandbox.list({ query: { metadata: { tag: 'nobody' } } }).nextItems()).length, 0);
    const r = await fetch(`${d.url}/v2/sandboxes?template=base&order=asc&limit=100`, {
      headers: { 'X-API-KEY': d.key },
    });
    const asc = await r.json();
    assert.ok(asc.length >= 6);
    const times = asc.map((s) => Date.parse(s.startedAt));
    assert.deepEqual(times, [...times].sort((x, y) => x - y));
    const none = await fetch(`${d.url}/v2/sandboxes?template=unknown`, { headers: { 'X-API-KEY': d.key } });
    assert.deepEqual(await none.json(), []);
    const bad = await fetch(`${d.url}/v2/sandboxes?limit=0`, { headers: { 'X-API-KEY': d.key } });
    assert.equal(bad.status, 400);
    // A killed sandbox leaves the list at once.
    await boxes[0].kill();
    const after = await Sandbox.list({ query: { metadata: { tag } } }).nextItems();
    assert.equal(after.length, 4);
  } finally {
    await Promise.all([...boxes.slice(1), other].map((b) => b.kill()));
  }
});

test('setTimeout: the sandbox really ends at endAt; connect only extends', async () => {
  const sbx = await Sandbox.create({ timeoutMs: 60_000 });
  const before = (await sbx.getInfo()).endAt.getTime();
  const again = await Sandbox.connect(sbx.sandboxId, { timeoutMs: 10_000 });
  assert.equal(again.sandboxId, sbx.sandboxId);
  assert.equal((await again.commands.run('echo hi')).stdout, 'hi\n');
  assert.equal((await sbx.getInfo()).endAt.getTime(), before); // never shortened
  await sbx.setTimeout(2000);
  assert.equal(await sbx.isRunning(), true);
  // Ended within 3.5 s of a 2 s timeout.
  await until(async () => !(await sbx.isRunning()), 3500, 100);
  assert.equal(await sbx.isRunning(), false);
  await assert.rejects(sbx.getInfo(), E.SandboxNotFoundError);
});

test('pause freezes processes and keeps files; connect resumes with the same token', async () => {
  const sbx = await Sandbox.create();
  try {
    await sbx.commands.run('echo kept > /home/user/f.txt');
    const h = await sbx.commands.run('i=0; while true; do i=$((i+1)); echo $i > /tmp/count; sleep 0.05; done', {
      background: true,
      timeoutMs: 0,
    });
    // Until the counter runs.
    await until(async () => Number((await sbx.commands.run('cat /tmp/count 2>/dev/null || echo 0')).stdout) > 0, 20000, 50);
    assert.equal(await sbx.pause(), true);
    assert.equal(await sbx.isRunning(), false);
    assert.equal((await sbx.getInfo()).state, 'paused');
    assert.equal(await sbx.pause(), false); // already paused: 409 → false
    const listed = await Sandbox.list({ query: { state: ['paused'] } }).nextItems();
    assert.ok(listed.some((s) => s.sandboxId === sbx.sandboxId));
    const resumed = await Sandbox.connect(sbx.sandboxId);
    assert.equal(resumed.sandboxId, sbx.sandboxId);
    assert.equal(await sbx.isRunning(), true); // the old handle's token still works
    assert.equal((await sbx.commands.run('cat /home/user/f.txt')).stdout, 'kept\n');
    assert.ok((await sbx.commands.list()).some((p) => p.pid === h.pid));
    const a = Number((await sbx.commands.run('cat /tmp/count')).stdout);
    // Until the counter moves on.
    await until(async () => Number((await sbx.commands.run('cat /tmp/count')).stdout) > a, 20000, 50);
    const b = Number((await sbx.commands.run('cat /tmp/count')).stdout);
    assert.ok(b > a, `${a} ${b}`); // running again
  } finally {
    await sbx.kill();
  }
});

test('metrics come from the cgroup', async () => {
  const sbx = await Sandbox.create();
  try {
    await sbx.commands.run('head -c 20000000 /dev/urandom | sha256sum');
    const m = await sbx.getMetrics();
    assert.ok(m.length >= 1);
    const last = m[m.length - 1];
    assert.ok(last.memUsed > 0 && last.memTotal >= last.memUsed, JSON.stringify(last));
    assert.ok(last.cpuCount >= 1);
    assert.ok(last.cpuUsedPct >= 0 && last.cpuUsedPct <= 100);
    const old = await Sandbox.getMetrics(sbx.sandboxId, {
      start: new Date(Date.now() - 3600_000),
      end: new Date(Date.now() - 3000_000),
    });
    assert.deepEqual(old, []);
  } finally {
    await sbx.kill();
  }
});

test('what abx does not offer fails clearly', async () => {
  const sbx = await Sandbox.create();
  try {
    // Snapshots work now (snapshots.test.mjs); none were taken here.
    assert.deepEqual(await Sandbox.listSnapshots().nextItems(), []);
    assert.equal(await Sandbox.deleteSnapshot('nosuch'), false);
    await assert.rejects(Sandbox.create({ mcp: { foo: {} } }), /not supported/);
  } finally {
    await sbx.kill();
  }
});

test('a paused sandbox can be killed: it thaws and really ends', async () => {
  const sbx = await Sandbox.create();
  await sbx.commands.run('sleep 100', { background: true });
  assert.equal(await sbx.pause(), true);
  assert.equal(await sbx.kill(), true);
  const deadline = Date.now() + 10000;
  let left;
  do {
    const r = await fetch(d.url + '/v1/sandboxes', { headers: { Authorization: `Bearer ${d.key}` } });
    left = (await r.json()).sandboxes.filter((s) => s.id === sbx.sandboxId);
    if (left.length === 0) break;
    await sleep(100);
  } while (Date.now() < deadline);
  assert.deepEqual(left, []);
});
