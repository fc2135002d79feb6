// files.watchDir through the real E2B SDK 2.51: event types and names,
// recursive watches that pick up directories made later (and moved ones),
// includeEntry, the errors the SDK maps (missing → FileNotFoundError, a file
// → InvalidArgumentError), stop() freeing the watch in abxd, a killed
// sandbox ending the watch, the stream's deadline, and a raw look at the
// wire. Files are made with commands.run, as a process in the sandbox would.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readlinkSync } from 'node:fs';
import { setup, sleep, envd } from './lib.mjs';
import { servingPid } from '../integration/lib.mjs';

let d, Sandbox, E, sbx;
before(async () => {
  const s = await setup();
  d = s.d;
  E = s.sdk;
  Sandbox = s.sdk.Sandbox;
  sbx = await Sandbox.create();
});
after(async () => {
  if (sbx) await sbx.kill();
  if (d) await d.stop();
});

const has = (type, name) => (evs) => evs.some((e) => e.type === type && e.name === name);
const seen = (evs) => evs.map((e) => `${e.type} ${e.name}`);

// Resolves once pred(events) holds, or fails after ms with what arrived
// and how the watch ended, if it did (events.exit, set by watching()).
// Generous: a loaded CI machine running the ASan build is slow.
async function until(events, pred, ms = 20000) {
  const t0 = Date.now();
  while (!pred(events)) {
    if (Date.now() - t0 > ms)
      assert.fail(
        `timed out; the watch ${events.exit === undefined ? 'still runs' : `ended: ${events.exit}`}; ` +
          `events: ${JSON.stringify(seen(events))}`,
      );
    await sleep(20);
  }
}

// A watch of dir that collects its events (and how it ended) in an array.
// No deadline (timeoutMs 0): the SDK's default of 60 s would end a watch
// that a slow machine keeps open longer, and the test would wait in vain.
async function watching(dir, opts = {}) {
  const events = [];
  const h = await sbx.files.watchDir(dir, (e) => events.push(e), {
    timeoutMs: 0,
    ...opts,
    onExit: (e) => (events.exit = e ? `${e.name}: ${e.message}` : 'without error'),
  });
  return { events, h };
}


// inotify descriptors abxd holds open: one per live watch, nothing else.
function inotifyFds() {
  let n = 0;
  const pid = servingPid(d);
  for (const f of readdirSync(`/proc/${pid}/fd`)) {
    try {
      if (readlinkSync(`/proc/${pid}/fd/${f}`) === 'anon_inode:inotify') n++;
    } catch {}
  }
  return n;
}

// Waits for the count: a stopped watch goes once abxd writes to its
// socket again (at most the 2 s probe later).
async function fdsBecome(want) {
  const t0 = Date.now();
  while (inotifyFds() !== want && Date.now() - t0 < 10000) await sleep(20);
  assert.equal(inotifyFds(), want);
}

const frame = (obj) => {
  const j = Buffer.from(JSON.stringify(obj));
  const h = Buffer.alloc(5);
  h.writeUInt32BE(j.length, 1);
  return Buffer.concat([h, j]);
};
const call = (body, headers = {}) =>
  envd(d, sbx, 'POST', '/filesystem.Filesystem/WatchDir', {
    headers: { 'Content-Type': 'application/connect+json', ...headers },
    body: frame(body),
  });
// The envelopes of a whole response body.
async function frames(res) {
  const buf = Buffer.from(await res.arrayBuffer());
  const out = [];
  for (let o = 0; o + 5 <= buf.length; ) {
    const n = buf.readUInt32BE(o + 1);
    out.push({ flags: buf[o], msg: JSON.parse(buf.subarray(o + 5, o + 5 + n).toString()) });
    o += 5 + n;
  }
  return out;
}

async function run(cmd, opts) {
  const r = await sbx.commands.run(cmd, opts);
  assert.equal(r.exitCode, 0, r.stderr);
  return r;
}

test('create, write, chmod, rename, remove in a watched directory', async () => {
  await run('mkdir -p w1');
  const { events, h } = await watching('w1');
  try {
    await run('echo hi > w1/a.txt');
    await until(events, has('write', 'a.txt'));
    await run('chmod 600 w1/a.txt && mv w1/a.txt w1/b.txt && rm w1/b.txt');
    await until(events, has('remove', 'b.txt'));
    const got = seen(events);
    const want = ['create a.txt', 'write a.txt', 'chmod a.txt', 'rename a.txt', 'create b.txt', 'remove b.txt'];
    // In this order (a write may repeat).
    let i = 0;
    for (const g of got) if (g === want[i]) i++;
    assert.equal(i, want.length, JSON.stringify(got));
    assert.ok(events.every((e) => e.entry === undefined));
    // Not recursive: a subdirectory reports itself, not what is inside it.
    await run('mkdir w1/sub && touch w1/sub/x && touch w1/done');
    await until(events, has('create', 'done'));
    assert.ok(has('create', 'sub')(events));
    assert.ok(!events.some((e) => e.name.startsWith('sub/')), JSON.stringify(seen(events)));
    // The watched directory itself is ".".
    await run('chmod 700 w1');
    await until(events, has('chmod', '.'));
  } finally {
    await h.stop();
  }
});

test('recursive: directories made (and moved) after the start are watched', async () => {
  await run('mkdir -p rw/pre/deep && mkdir -p /tmp/outside && ln -s /tmp/outside rw/link');
  const { events, h } = await watching('rw', { recursive: true });
  try {
    // Existing subdirectories are watched from the start.
    await run('echo x > rw/pre/deep/f');
    await until(events, has('write', 'pre/deep/f'));
    // As the SDK's own test: the directory, then a file written in it.
    await run('mkdir rw/nested');
    await until(events, has('create', 'nested'));
    await run('echo content > rw/nested/file.txt');
    await until(events, has('write', 'nested/file.txt'));
    // mkdir -p and a file at once: the new levels are scanned as they are watched.
    await run('mkdir -p rw/a/b/c && echo z > rw/a/b/c/f');
    for (const n of ['a', 'a/b', 'a/b/c', 'a/b/c/f']) await until(events, has('create', n));
    // A directory renamed inside the tree reports under its new name.
    await run('mv rw/nested rw/moved');
    await until(events, has('create', 'moved'));
    await run('echo again > rw/moved/file.txt');
    await until(events, has('write', 'moved/file.txt'));
    // Moved in from outside: watched, its contents reported as created.
    await run('mkdir -p /tmp/in/sub && touch /tmp/in/sub/g && mv /tmp/in rw/in');
    await until(events, has('create', 'in/sub/g'));
    await run('touch rw/in/sub/h');
    await until(events, has('create', 'in/sub/h'));
    // A symlinked directory is not followed.
    await run('touch /tmp/outside/x && touch rw/mark');
    await until(events, has('create', 'mark'));
    assert.ok(!events.some((e) => e.name.startsWith('link/')), JSON.stringify(seen(events)));
    // Removing a tree.
    await run('rm -rf rw/a');
    await until(events, has('remove', 'a'));
    assert.ok(has('remove', 'a/b/c/f')(events), JSON.stringify(seen(events)));
  } finally {
    await h.stop();
  }
});

test('includeEntry: CREATE, WRITE and CHMOD carry the entry, REMOVE does not', async () => {
  await run('mkdir -p ie');
  const { events, h } = await watching('ie', { includeEntry: true });
  const last = (type, name) => events.findLast((e) => e.type === type && e.name === name);
  try {
    await run('printf 12345 > ie/f.txt');
    await until(events, has('write', 'f.txt'));
    const create = last('create', 'f.txt');
    assert.ok(create.entry, JSON.stringify(create));
    assert.equal(create.entry.name, 'f.txt');
    assert.equal(create.entry.path, '/home/user/ie/f.txt');
    assert.equal(create.entry.type, 'file');
    assert.equal(create.entry.owner, 'user');
    assert.equal(create.entry.permissions, '-rw-r--r--');
    await until(events, (evs) => last('write', 'f.txt')?.entry?.size === 5);
    await run('chmod 640 ie/f.txt');
    await until(events, has('chmod', 'f.txt'));
    assert.equal(last('chmod', 'f.txt').entry.mode, 0o640);
    await run('mkdir ie/dir');
    await until(events, has('create', 'dir'));
    assert.equal(last('create', 'dir').entry.type, 'dir');
    assert.equal(last('create', 'dir').entry.path, '/home/user/ie/dir');
    await run('rm ie/f.txt');
    await until(events, has('remove', 'f.txt'));
    assert.equal(last('remove', 'f.txt').entry, undefined);
    // Gone before the event is handled: no entry, and the watch goes on.
    await run('for i in 1 2 3 4 5; do touch ie/t$i; rm ie/t$i; done; touch ie/end');
    await until(events, has('create', 'end'));
    assert.ok(last('create', 'end').entry);
  } finally {
    await h.stop();
  }
});

test('errors: a missing directory, a file, an absent user', async () => {
  await assert.rejects(sbx.files.watchDir('no_such_dir', () => {}), (e) => {
    assert.ok(e instanceof E.FileNotFoundError, `${e.constructor.name}: ${e.message}`);
    assert.match(e.message, /\/home\/user\/no_such_dir/);
    return true;
  });
  await run('echo f > plain.txt');
  await assert.rejects(sbx.files.watchDir('plain.txt', () => {}), (e) => {
    assert.ok(e instanceof E.InvalidArgumentError, `${e.constructor.name}: ${e.message}`);
    assert.match(e.message, /not a directory/);
    return true;
  });
  await assert.rejects(sbx.files.watchDir('/tmp', () => {}, { user: 'mallory' }), E.AuthenticationError);
});

test('/tmp and the root user', async () => {
  await run('mkdir -p /tmp/w && chmod 777 /tmp/w');
  const { events, h } = await watching('/tmp/w');
  const { events: r, h: hr } = await watching('~', { user: 'root' });
  try {
    await run('touch /tmp/w/a');
    await until(events, has('create', 'a'));
    await run('touch /root/mine', { user: 'root' });
    await until(r, has('create', 'mine'));
  } finally {
    await h.stop();
    await hr.stop();
  }
});

test('stop() frees the watch in abxd; many watches come and go', async () => {
  await run('mkdir -p st');
  await fdsBecome(0); // the watches of the tests before
  for (let i = 0; i < 2; i++) {
    const hs = await Promise.all(
      [0, 1, 2].map(() => sbx.files.watchDir('st', () => {}, { recursive: true, includeEntry: true })),
    );
    assert.equal(inotifyFds(), 3);
    await run('touch st/x' + i);
    await Promise.all(hs.map((h) => h.stop()));
    await fdsBecome(0);
  }
  assert.doesNotMatch(d.log, /watch.*(error|fail)/i);
});

test('the deadline ends the watch; timeoutMs 0 means none', async () => {
  await run('mkdir -p dl');
  let exit;
  const exited = new Promise((r) => (exit = r));
  const t0 = Date.now();
  await sbx.files.watchDir('dl', () => {}, { timeoutMs: 1000, onExit: (e) => exit(e ?? null) });
  const err = await exited;
  assert.ok(Date.now() - t0 >= 900 && Date.now() - t0 < 10000);
  assert.ok(err instanceof E.TimeoutError, String(err));
  // No deadline: still delivering after the default's worth of keepalives would matter.
  const events = [];
  const h = await sbx.files.watchDir('dl', (e) => events.push(e), { timeoutMs: 0 });
  try {
    await sleep(1200);
    await run('touch dl/late');
    await until(events, has('create', 'late'));
  } finally {
    await h.stop();
  }
});

test('the wire: start first, keepalives, end-stream errors with HTTP 200', async () => {
  await run('mkdir -p wire');
  let res = await call({ path: 'nope' });
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type'), /application\/connect\+json/);
  let fr = await frames(res);
  assert.equal(fr.length, 1);
  assert.equal(fr[0].flags, 2);
  assert.equal(fr[0].msg.error.code, 'not_found');

  // Deadline 1.5 s, keepalive every second: start, a keepalive, the end.
  res = await call({ path: 'wire' }, { 'Connect-Timeout-Ms': '1500', 'Keepalive-Ping-Interval': '1' });
  assert.equal(res.status, 200);
  fr = await frames(res);
  assert.deepEqual(fr[0], { flags: 0, msg: { start: {} } });
  assert.ok(fr.some((f) => f.flags === 0 && f.msg.keepalive), JSON.stringify(fr));
  assert.equal(fr.at(-1).flags, 2);
  assert.equal(fr.at(-1).msg.error.code, 'deadline_exceeded');
});

test('killing the sandbox ends its watches: onExit gets the error', async () => {
  const s2 = await Sandbox.create();
  await s2.commands.run('mkdir -p k');
  let exit;
  const exited = new Promise((r) => (exit = r));
  await s2.files.watchDir('k', () => {}, { recursive: true, onExit: (e) => exit(e ?? null) });
  await fdsBecome(1); // this one only
  assert.equal(await Sandbox.kill(s2.sandboxId), true);
  const err = await exited;
  assert.ok(err instanceof E.TimeoutError, String(err));
  assert.match(err.message, /killed or reached its end of life/);
  await fdsBecome(0);
});

test('a client that does not read: events queue up to a bound, then resource_exhausted', async () => {
  await run('mkdir -p slow');
  const res = await call({ path: 'slow' }, { 'Keepalive-Ping-Interval': '1' });
  assert.equal(res.status, 200);
  // 40000 creates of ~290-byte envelopes: far more than the queue, the
  // stream's buffer and the sockets hold while nobody reads.
  const long = 'x'.repeat(200);
  await run(`cd slow && for i in $(seq 40000); do : > ${long}$i; done`, { timeoutMs: 120000 });
  const fr = await frames(res);
  assert.deepEqual(fr[0], { flags: 0, msg: { start: {} } });
  assert.ok(fr.length > 100);
  for (const f of fr.slice(1, -1)) assert.ok(f.msg.filesystem || f.msg.keepalive, JSON.stringify(f));
  assert.equal(fr.at(-1).flags, 2);
  assert.equal(fr.at(-1).msg.error.code, 'resource_exhausted', JSON.stringify(fr.at(-1)));
  await run('rm -rf slow');
});

// --- envd's polled watchers: CreateWatcher / GetWatcherEvents / RemoveWatcher (unary) ---

async function unary(s, method, body) {
  const res = await envd(d, s, 'POST', `/filesystem.Filesystem/${method}`, {
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
  });
  assert.match(res.headers.get('content-type') ?? '', /application\/json/);
  return { status: res.status, body: await res.json() };
}
async function createWatcher(s, body) {
  const r = await unary(s, 'CreateWatcher', body);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.match(r.body.watcherId, /^w[a-z0-9]{20}$/);
  return r.body.watcherId;
}
async function getEvents(s, watcherId) {
  const r = await unary(s, 'GetWatcherEvents', { watcherId });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body.events ?? [];
}
// Polls into acc until pred(acc) holds; returns what the polls brought.
async function pollUntil(s, id, pred, acc = []) {
  const t0 = Date.now();
  while (!pred(acc)) {
    if (Date.now() - t0 > 5000) assert.fail(`timed out; events: ${JSON.stringify(acc, null, 1)}`);
    acc.push(...(await getEvents(s, id)));
    if (!pred(acc)) await sleep(20);
  }
  return acc;
}
const hasRaw = (type, name) => (evs) => evs.some((e) => e.type === `EVENT_TYPE_${type}` && e.name === name);
const notFound = (r) => {
  assert.equal(r.status, 404, JSON.stringify(r.body));
  assert.equal(r.body.code, 'not_found');
};

test('polled watcher: events since the last call, includeEntry, remove', async () => {
  await run('mkdir -p pw');
  await fdsBecome(0);
  const id = await createWatcher(sbx, { path: 'pw', includeEntry: true });
  assert.equal(inotifyFds(), 1);
  // Nothing yet: an empty list is omitted (proto3).
  assert.deepEqual((await unary(sbx, 'GetWatcherEvents', { watcherId: id })).body, {});
  await run('echo hi > pw/a.txt');
  const first = await pollUntil(sbx, id, hasRaw('WRITE', 'a.txt'));
  assert.ok(hasRaw('CREATE', 'a.txt')(first), JSON.stringify(first));
  const create = first.find((e) => e.type === 'EVENT_TYPE_CREATE');
  assert.equal(create.entry.name, 'a.txt');
  assert.equal(create.entry.path, '/home/user/pw/a.txt');
  assert.equal(create.entry.type, 'FILE_TYPE_FILE');
  assert.equal(first.find((e) => e.type === 'EVENT_TYPE_WRITE').entry.size, '3');
  // Only what happened since.
  await run('rm pw/a.txt');
  const second = await pollUntil(sbx, id, hasRaw('REMOVE', 'a.txt'));
  assert.deepEqual(second, [{ name: 'a.txt', type: 'EVENT_TYPE_REMOVE' }]);
  assert.deepEqual(await getEvents(sbx, id), []);
  // Remove: gone, and its inotify descriptor with it.
  assert.deepEqual(await unary(sbx, 'RemoveWatcher', { watcherId: id }), { status: 200, body: {} });
  assert.equal(inotifyFds(), 0);
  notFound(await unary(sbx, 'GetWatcherEvents', { watcherId: id }));
  notFound(await unary(sbx, 'RemoveWatcher', { watcherId: id }));
});

test('polled watcher: recursive, without entries', async () => {
  await run('mkdir -p pr/pre');
  const id = await createWatcher(sbx, { path: 'pr', recursive: true });
  try {
    await run('echo x > pr/pre/f && mkdir pr/nested');
    const evs = await pollUntil(sbx, id, hasRaw('CREATE', 'nested'));
    assert.ok(hasRaw('WRITE', 'pre/f')(evs), JSON.stringify(evs));
    await run('echo content > pr/nested/file.txt');
    await pollUntil(sbx, id, hasRaw('WRITE', 'nested/file.txt'), evs);
    assert.ok(evs.every((e) => e.entry === undefined));
  } finally {
    await unary(sbx, 'RemoveWatcher', { watcherId: id });
  }
});

test('polled watcher errors: missing, a file, unknown ids, the bound on watchers', async () => {
  const miss = await unary(sbx, 'CreateWatcher', { path: 'no_such_dir' });
  notFound(miss);
  assert.match(miss.body.message, /\/home\/user\/no_such_dir/);
  await run('echo f > pwfile.txt');
  const file = await unary(sbx, 'CreateWatcher', { path: 'pwfile.txt' });
  assert.equal(file.status, 400);
  assert.equal(file.body.code, 'invalid_argument');
  notFound(await unary(sbx, 'GetWatcherEvents', { watcherId: 'wnosuchwatcher0000000' }));
  notFound(await unary(sbx, 'GetWatcherEvents', {}));
  notFound(await unary(sbx, 'RemoveWatcher', { watcherId: 'nope' }));
  // At most 16 watches (streams and polled watchers) per sandbox: each
  // holds an inotify instance, of which the kernel allows few per user.
  const ids = [];
  try {
    for (let i = 0; i < 16; i++) ids.push(await createWatcher(sbx, { path: '/tmp' }));
    assert.equal(new Set(ids).size, 16);
    const over = await unary(sbx, 'CreateWatcher', { path: '/tmp' });
    assert.equal(over.status, 429);
    assert.equal(over.body.code, 'resource_exhausted');
  } finally {
    for (const id of ids) await unary(sbx, 'RemoveWatcher', { watcherId: id });
  }
  await fdsBecome(0);
});

test("polled watchers belong to their sandbox; killing it frees them", async () => {
  const s2 = await Sandbox.create();
  await s2.commands.run('mkdir -p k2');
  await fdsBecome(0);
  const id = await createWatcher(s2, { path: 'k2', recursive: true });
  const id2 = await createWatcher(s2, { path: '/tmp' });
  assert.equal(inotifyFds(), 2);
  // Another sandbox's id names nothing here.
  notFound(await unary(sbx, 'GetWatcherEvents', { watcherId: id }));
  notFound(await unary(sbx, 'RemoveWatcher', { watcherId: id2 }));
  await s2.commands.run('touch k2/x');
  await pollUntil(s2, id, hasRaw('CREATE', 'x'));
  assert.equal(await Sandbox.kill(s2.sandboxId), true);
  await fdsBecome(0);
  assert.doesNotMatch(d.log, /watch.*(error|fail)/i);
});

test('polled watcher: past 10000 events not taken, resource_exhausted until removed', async () => {
  await run('mkdir -p pq');
  const id = await createWatcher(sbx, { path: 'pq' });
  await run('cd pq && for i in $(seq 10050); do : > f$i; done', { timeoutMs: 120000 });
  await run('rm -rf pq');
  for (let i = 0; i < 2; i++) {
    const r = await unary(sbx, 'GetWatcherEvents', { watcherId: id });
    assert.equal(r.status, 429, JSON.stringify(r.body).slice(0, 300));
    assert.equal(r.body.code, 'resource_exhausted');
  }
  await fdsBecome(0); // it stopped watching
  assert.equal((await unary(sbx, 'RemoveWatcher', { watcherId: id })).status, 200);
  notFound(await unary(sbx, 'GetWatcherEvents', { watcherId: id }));
});
