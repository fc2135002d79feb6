// workspaces.test.mjs - durable workspaces over a real abxd and its real
// SQLite store: the lazy lifecycle (only exec wakes), restore with hash
// checks, mirror (pull only, ignore rules), If-Match, close, a sandbox that
// dies, SIGTERM, integrity failures, GC, and bad input.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, existsSync, writeFileSync, readFileSync, mkdtempSync, rmSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createHash, randomBytes } from 'node:crypto';
import { startAbxd, api, parseNdjson, rawHttp, isRoot, sleep } from './lib.mjs';

const skip = !isRoot && 'needs root';
const sha = (b) => createHash('sha256').update(b).digest('hex');

export async function wsExec(d, ws, script, opts = {}) {
  const r = await api(d, 'POST', `/v1/workspaces/${ws}/exec`, { argv: ['/bin/sh', '-c', script], ...opts });
  if (r.status !== 200) {
    const e = new Error(`exec failed: ${r.status} ${r.text}`);
    e.status = r.status;
    e.json = r.json;
    throw e;
  }
  const p = parseNdjson(r.text);
  return { code: p.result?.exit_code, out: p.stdout.toString('utf8'), err: p.stderr.toString('utf8') };
}

async function mkws(d, body = {}) {
  const r = await api(d, 'POST', '/v1/workspaces', body);
  assert.equal(r.status, 201, r.text);
  return r.json.id;
}

async function state(d, ws) {
  const r = await api(d, 'GET', `/v1/workspaces/${ws}`);
  assert.equal(r.status, 200, r.text);
  return r.json.state;
}

async function manifest(d, ws) {
  const r = await api(d, 'GET', `/v1/workspaces/${ws}/manifest`);
  assert.equal(r.status, 200, r.text);
  return Object.fromEntries(r.json.entries.map((e) => [e.path, e]));
}

function sandboxDirs(d) {
  const p = join(d.stateDir, 'sandboxes');
  return existsSync(p) ? readdirSync(p) : [];
}

// Host pids of abxd's direct children: the sandbox inits.
// abxd's children that are sandbox inits (not its file helpers).
function sandboxInits(d) {
  const out = spawnSync('ps', ['-o', 'pid=,args=', '--ppid', String(d.proc.pid)], { encoding: 'utf8' }).stdout;
  return out
    .split('\n')
    .map((l) => l.trim().split(/\s+/))
    .filter(([pid, cmd]) => pid && cmd === 'abx-init')
    .map(([pid]) => Number(pid));
}

// The PostgreSQL server scripts/test.sh starts; each abxd gets a database
// of its own.
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

const backends = [{ kind: 'sqlite' }];
if (pgUrl || pgRequired) backends.push({ kind: 'postgres' });

// Damages (or repairs) a blob behind the store's back.
function setBlob(d, hash, content) {
  if (d.storeUrl) {
    psql(d.storeUrl, `UPDATE blob_chunks SET data = convert_to('${content}', 'UTF8') WHERE hash = '${hash}'`);
    return;
  }
  const blob = join(d.stateDir, 'store', 'blobs', hash.slice(0, 2), hash);
  assert.ok(existsSync(blob), `no blob at ${blob}`);
  writeFileSync(blob, content);
}

for (const backend of backends)
describe(`workspaces (${backend.kind})`, { skip }, () => {
  let d;
  before(async () => {
    if (backend.kind === 'postgres') assert.ok(pgUrl, 'ABX_TEST_PG_REQUIRED=1 but no ABX_TEST_PG_URL');
    const storeUrl = backend.kind === 'postgres' ? freshPgDatabase() : undefined;
    // No warm pool: any sandbox directory that appears is a wake.
    const env = { ABX_POOL: '0', ABX_MAX_FILE_MB: '4', ABX_SYNC_MAX_FILE_MB: '1' };
    if (storeUrl) env.ABX_STORE = storeUrl;
    d = await startAbxd({ env });
    d.storeUrl = storeUrl;
    const c = await api(d, 'GET', '/v1/store/check');
    assert.equal(c.json.store, backend.kind);
  });
  after(async () => {
    await d?.stop();
  });

  test('create, list, info, delete', async () => {
    const id = await mkws(d, { id: 'proj-1', cpu: 0.5, memory_mb: 256, pids: 64 });
    assert.equal(id, 'proj-1');
    const dup = await api(d, 'POST', '/v1/workspaces', { id: 'proj-1' });
    assert.equal(dup.status, 409);
    const gen = await mkws(d);
    assert.match(gen, /^[a-z0-9]{20}$/);
    const list = await api(d, 'GET', '/v1/workspaces');
    const ids = list.json.workspaces.map((w) => w.id);
    assert.ok(ids.includes('proj-1') && ids.includes(gen));
    const info = await api(d, 'GET', '/v1/workspaces/proj-1');
    assert.equal(info.json.state, 'cold');
    assert.deepEqual(info.json.usage, { bytes: 0, files: 0, dirs: 0 });
    assert.equal((await api(d, 'DELETE', `/v1/workspaces/${gen}`)).status, 204);
    assert.equal((await api(d, 'GET', `/v1/workspaces/${gen}`)).status, 404);
    assert.equal((await api(d, 'DELETE', `/v1/workspaces/${gen}`)).status, 404);
  });

  test('bad create bodies and unknown workspaces get clear errors', async () => {
    for (const body of [
      { id: 'Upper' },
      { id: 'a/b' },
      { id: 'x'.repeat(65) },
      { id: 7 },
      { idd: 'typo' },
      { cpu: -1 },
      { memory_mb: 1 },
      { pids: 1 },
    ]) {
      const r = await api(d, 'POST', '/v1/workspaces', body);
      assert.equal(r.status, 400, `${JSON.stringify(body)} -> ${r.status} ${r.text}`);
      assert.ok(r.json.message.length > 0);
    }
    assert.equal((await api(d, 'POST', '/v1/workspaces', { template: 'nope' })).status, 404);
    assert.equal((await api(d, 'POST', '/v1/workspaces', '{"id":')).status, 400);
    for (const [m, p, b] of [
      ['GET', '/v1/workspaces/nope'],
      ['GET', '/v1/workspaces/nope/files/a'],
      ['PUT', '/v1/workspaces/nope/files/a', 'x'],
      ['GET', '/v1/workspaces/nope/walk'],
      ['GET', '/v1/workspaces/nope/manifest'],
      ['POST', '/v1/workspaces/nope/flush', ''],
      ['POST', '/v1/workspaces/nope/close', ''],
      ['POST', '/v1/workspaces/nope/mkdir', { path: '/a' }],
      ['POST', '/v1/workspaces/nope/exec', { argv: ['true'] }],
      ['GET', '/v1/workspaces/NOPE'],
    ]) {
      const r = await api(d, m, p, b);
      assert.equal(r.status, 404, `${m} ${p} -> ${r.status} ${r.text}`);
    }
    assert.equal(sandboxDirs(d).length, 0, 'an unknown workspace must not create a sandbox');
    const r = await api(d, 'PATCH', '/v1/workspaces/proj-1');
    assert.equal(r.status, 405);
  });

  test('cold file operations go to the store and never wake the workspace', async () => {
    const ws = await mkws(d);
    let r = await api(d, 'PUT', `/v1/workspaces/${ws}/files/src/main.py`, 'print(1)\n');
    assert.equal(r.status, 201, r.text);
    assert.equal(r.json.hash, sha('print(1)\n'));
    assert.equal(r.json.version, r.json.hash);
    r = await api(d, 'PUT', `/v1/workspaces/${ws}/files/src/main.py`, 'print(2)\n');
    assert.equal(r.status, 200);
    r = await api(d, 'GET', `/v1/workspaces/${ws}/files/src/main.py`);
    assert.equal(r.text, 'print(2)\n');
    assert.equal(r.headers.get('x-abx-state'), 'cold');
    assert.equal(r.headers.get('etag'), `"${sha('print(2)\n')}"`);
    r = await api(d, 'HEAD', `/v1/workspaces/${ws}/files/src`);
    assert.equal(r.headers.get('x-abx-type'), 'dir');
    assert.equal((await api(d, 'POST', `/v1/workspaces/${ws}/mkdir`, { path: '/empty/deep' })).status, 201);
    assert.equal((await api(d, 'POST', `/v1/workspaces/${ws}/mkdir`, { path: '/empty/deep' })).status, 200);
    r = await api(d, 'POST', `/v1/workspaces/${ws}/rename`, { from: '/src/main.py', to: '/lib/app.py' });
    assert.equal(r.status, 200, r.text);
    assert.equal((await api(d, 'GET', `/v1/workspaces/${ws}/files/src/main.py`)).status, 404);
    // Deleting a file keeps its parent; rmdir removes a subtree.
    await api(d, 'PUT', `/v1/workspaces/${ws}/files/tmp/x`, 'x');
    assert.equal((await api(d, 'DELETE', `/v1/workspaces/${ws}/files/tmp/x`)).status, 204);
    assert.equal((await api(d, 'HEAD', `/v1/workspaces/${ws}/files/tmp`)).headers.get('x-abx-type'), 'dir');
    assert.equal((await api(d, 'POST', `/v1/workspaces/${ws}/rmdir`, { path: '/tmp' })).status, 204);
    assert.equal((await api(d, 'HEAD', `/v1/workspaces/${ws}/files/tmp`)).status, 404);
    r = await api(d, 'GET', `/v1/workspaces/${ws}/walk`);
    assert.equal(r.json.state, 'cold');
    assert.deepEqual(
      r.json.entries.map((e) => `${e.type} ${e.path}`),
      ['dir /empty', 'dir /empty/deep', 'dir /lib', 'file /lib/app.py', 'dir /src'],
    );
    const info = await api(d, 'GET', `/v1/workspaces/${ws}`);
    assert.equal(info.json.state, 'cold');
    assert.deepEqual(info.json.usage, { bytes: 9, files: 1, dirs: 4 });
    assert.equal((await api(d, 'POST', `/v1/workspaces/${ws}/flush`, '')).json.files, 0);
    assert.equal(await state(d, ws), 'cold');
    assert.equal(sandboxDirs(d).length, 0, 'a cold file operation created a sandbox');
  });

  test('exec wakes the workspace, restores every file and directory, and mirror pulls changes', async () => {
    const ws = await mkws(d);
    const big = Buffer.alloc(300000, 7);
    await api(d, 'PUT', `/v1/workspaces/${ws}/files/a/one.txt`, 'one');
    await api(d, 'PUT', `/v1/workspaces/${ws}/files/a/big.bin`, big);
    await api(d, 'POST', `/v1/workspaces/${ws}/mkdir`, { path: '/empty' });
    let x = await wsExec(d, ws, 'pwd; cat a/one.txt; wc -c < a/big.bin; test -d empty && echo E; id -un');
    assert.equal(x.code, 0, x.err);
    assert.equal(x.out, '/home/user\none300000\nE\nuser\n');
    assert.equal(await state(d, ws), 'warm');
    // Changes inside: new, modified, deleted files and directories.
    x = await wsExec(d, ws, 'echo new > n.txt && echo changed > a/one.txt && rm a/big.bin && rmdir empty && mkdir -p d/e');
    assert.equal(x.code, 0, x.err);
    // Not yet mirrored: the store still has the old snapshot.
    let m = await manifest(d, ws);
    assert.ok(m['/a/big.bin'] && m['/empty'] && !m['/n.txt']);
    const rep = (await api(d, 'POST', `/v1/workspaces/${ws}/flush`, '')).json;
    assert.equal(rep.files, 2, JSON.stringify(rep));
    assert.ok(rep.deleted >= 2, JSON.stringify(rep));
    m = await manifest(d, ws);
    assert.equal(m['/n.txt'].hash, sha('new\n'));
    assert.equal(m['/a/one.txt'].hash, sha('changed\n'));
    assert.ok(!m['/a/big.bin'] && !m['/empty']);
    assert.equal(m['/d/e'].type, 'dir');
    // A second flush finds nothing to do.
    const again = (await api(d, 'POST', `/v1/workspaces/${ws}/flush`, '')).json;
    assert.equal(again.files + again.deleted + again.dirs, 0, JSON.stringify(again));
    // Warm file routes go to the sandbox.
    let r = await api(d, 'PUT', `/v1/workspaces/${ws}/files/put-warm.txt`, 'hot');
    assert.equal(r.status, 201, r.text);
    assert.equal(r.json.hash, sha('hot'));
    assert.equal((await wsExec(d, ws, 'cat put-warm.txt')).out, 'hot');
    r = await api(d, 'GET', `/v1/workspaces/${ws}/files/n.txt`);
    assert.equal(r.headers.get('x-abx-state'), 'warm');
    assert.equal(r.text, 'new\n');
    assert.equal((await api(d, 'GET', `/v1/workspaces/${ws}/walk`)).json.state, 'warm');
    // Close mirrors and ends the sandbox; the next exec restores it all.
    const closed = await api(d, 'POST', `/v1/workspaces/${ws}/close`, '');
    assert.equal(closed.status, 200, closed.text);
    assert.equal(await state(d, ws), 'cold');
    assert.equal((await manifest(d, ws))['/put-warm.txt'].hash, sha('hot'));
    x = await wsExec(d, ws, 'cat n.txt a/one.txt put-warm.txt; test -d d/e && echo DE; test -e a/big.bin || echo gone');
    assert.equal(x.out, 'new\nchanged\nhotDE\ngone\n');
    await api(d, 'POST', `/v1/workspaces/${ws}/close`, '');
  });

  test('ignore rules: never mirrored, never restored, never deleted from the store', async () => {
    const ws = await mkws(d);
    // A file the store has under an ignored directory (put while cold).
    await api(d, 'PUT', `/v1/workspaces/${ws}/files/node_modules/keep.txt`, 'kept');
    const x = await wsExec(
      d,
      ws,
      'test -e node_modules/keep.txt && echo RESTORED; mkdir -p .venv/lib __pycache__ .git; ' +
        'echo v > .venv/lib/x.py; echo c > __pycache__/m.cpython.pyc; echo g > .git/HEAD; echo p > mod.pyc; ' +
        'head -c 1100000 /dev/zero > huge.bin; echo ok > ok.txt',
    );
    assert.equal(x.code, 0, x.err);
    assert.ok(!x.out.includes('RESTORED'), 'an ignored path was restored');
    const rep = (await api(d, 'POST', `/v1/workspaces/${ws}/flush`, '')).json;
    assert.ok(rep.ignored >= 5, JSON.stringify(rep));
    const m = await manifest(d, ws);
    assert.ok(m['/ok.txt']);
    for (const p of ['/.venv', '/.venv/lib/x.py', '/__pycache__', '/.git/HEAD', '/mod.pyc', '/huge.bin'])
      assert.ok(!m[p], `${p} was mirrored`);
    assert.equal(m['/node_modules/keep.txt']?.hash, sha('kept'), 'mirror deleted an ignored path from the store');
    await api(d, 'POST', `/v1/workspaces/${ws}/close`, '');
  });

  test('If-Match is a content compare-and-swap, cold and warm', async () => {
    const ws = await mkws(d);
    const v1 = (await api(d, 'PUT', `/v1/workspaces/${ws}/files/f`, 'v1')).json.hash;
    let r = await api(d, 'PUT', `/v1/workspaces/${ws}/files/f`, 'v2', { headers: { 'if-match': sha('nope') } });
    assert.equal(r.status, 412, r.text);
    assert.equal(r.json.error, 'precondition_failed');
    r = await api(d, 'PUT', `/v1/workspaces/${ws}/files/f`, 'v2', { headers: { 'if-match': `"${v1}"` } });
    assert.equal(r.status, 200, r.text);
    const v2 = r.json.hash;
    r = await api(d, 'PUT', `/v1/workspaces/${ws}/files/f`, 'v3', { headers: { 'if-match': v1 } });
    assert.equal(r.status, 412, 'a stale version must not overwrite');
    r = await api(d, 'PUT', `/v1/workspaces/${ws}/files/f`, 'v3', { headers: { 'if-match': '""' } });
    assert.equal(r.status, 412, 'If-Match "" means only if absent');
    r = await api(d, 'PUT', `/v1/workspaces/${ws}/files/new`, 'n', { headers: { 'if-match': '""' } });
    assert.equal(r.status, 201, r.text);
    r = await api(d, 'DELETE', `/v1/workspaces/${ws}/files/f`, undefined, { headers: { 'if-match': v1 } });
    assert.equal(r.status, 412);
    assert.equal((await api(d, 'GET', `/v1/workspaces/${ws}/files/f`)).text, 'v2');
    // Warm: the content hash still works as a version, and so does the sandbox's own stamp.
    await wsExec(d, ws, 'true');
    r = await api(d, 'PUT', `/v1/workspaces/${ws}/files/f`, 'v3', { headers: { 'if-match': v2 } });
    assert.equal(r.status, 200, r.text);
    const stamp = r.json.version;
    await wsExec(d, ws, 'echo sneaky > f');
    r = await api(d, 'PUT', `/v1/workspaces/${ws}/files/f`, 'v4', { headers: { 'if-match': stamp } });
    assert.equal(r.status, 412, 'a change made inside the sandbox must fail the precondition');
    r = await api(d, 'PUT', `/v1/workspaces/${ws}/files/f`, 'v4', { headers: { 'if-match': sha('sneaky\n') } });
    assert.equal(r.status, 200, r.text);
    r = await api(d, 'DELETE', `/v1/workspaces/${ws}/files/f`, undefined, { headers: { 'if-match': sha('v3') } });
    assert.equal(r.status, 412);
    assert.equal((await wsExec(d, ws, 'cat f')).out, 'v4');
    await api(d, 'POST', `/v1/workspaces/${ws}/close`, '');
  });

  test('background processes of a warm workspace: list, output, signal', async () => {
    const ws = await mkws(d, { cpu: 0.5 });
    let r = await api(d, 'GET', `/v1/workspaces/${ws}/processes`);
    assert.equal(r.status, 404, 'a cold workspace has no processes');
    assert.equal(await state(d, ws), 'cold', 'listing processes must not wake');
    r = await api(d, 'POST', `/v1/workspaces/${ws}/exec`, {
      argv: ['/bin/sh', '-c', 'echo started; exec sleep 60'],
      background: true,
    });
    assert.equal(r.status, 201, r.text);
    const pid = r.json.pid;
    r = await api(d, 'GET', `/v1/workspaces/${ws}/processes`);
    assert.ok(r.json.processes.some((p) => p.pid === pid && p.running !== false), r.text);
    for (let i = 0; i < 50; i++) {
      r = await api(d, 'GET', `/v1/workspaces/${ws}/processes/${pid}/output`);
      if (parseNdjson(r.text).stdout.toString() === 'started\n') break;
      await sleep(20);
    }
    assert.equal(parseNdjson(r.text).stdout.toString(), 'started\n');
    r = await api(d, 'POST', `/v1/workspaces/${ws}/processes/${pid}/signal`, { signal: 'KILL' });
    assert.equal(r.status, 204, r.text);
    r = await api(d, 'GET', `/v1/workspaces/${ws}/processes/${pid}/output?follow=1`);
    assert.equal(parseNdjson(r.text).result.signal, 9);
    const info = (await api(d, 'GET', `/v1/workspaces/${ws}`)).json;
    assert.equal(info.cpu, 0.5);
    assert.ok(info.memory_mb > 0 && info.pids > 0);
    await api(d, 'POST', `/v1/workspaces/${ws}/close`, '');
  });

  test('a sandbox that dies leaves the workspace cold at its last mirror', async () => {
    const ws = await mkws(d);
    await wsExec(d, ws, 'echo saved > s.txt');
    await api(d, 'POST', `/v1/workspaces/${ws}/flush`, '');
    await wsExec(d, ws, 'echo lost > l.txt');
    const inits = sandboxInits(d);
    assert.equal(inits.length, 1, `expected one sandbox init, got ${inits}`);
    process.kill(inits[0], 'SIGKILL');
    for (let i = 0; i < 200 && (await state(d, ws)) !== 'cold'; i++) await sleep(20);
    assert.equal(await state(d, ws), 'cold');
    // l.txt is gone: a flush or close must not say it was saved.
    for (const op of ['flush', 'close']) {
      const f = await api(d, 'POST', `/v1/workspaces/${ws}/${op}`, '');
      assert.equal(f.status, 409, `${op} after the loss: ${f.text}`);
      assert.equal(f.json.error, 'changes_lost');
      assert.match(f.json.message, /lost its sandbox before its changes were saved/);
    }
    // Cold reads see the last mirror; exec restores it.
    assert.equal((await api(d, 'GET', `/v1/workspaces/${ws}/files/s.txt`)).text, 'saved\n');
    const x = await wsExec(d, ws, 'cat s.txt; test -e l.txt && echo L || echo no-l');
    assert.equal(x.out, 'saved\nno-l\n');
    // Woken again, its flushes answer for the new sandbox.
    assert.equal((await api(d, 'POST', `/v1/workspaces/${ws}/flush`, '')).status, 200);
    assert.equal((await api(d, 'POST', `/v1/workspaces/${ws}/close`, '')).status, 200);
    assert.equal((await api(d, 'POST', `/v1/workspaces/${ws}/flush`, '')).status, 200);
  });

  test('a restore that finds a corrupt or missing blob fails loudly and stays cold', async () => {
    const ws = await mkws(d);
    const good = (await api(d, 'PUT', `/v1/workspaces/${ws}/files/good.txt`, 'good')).json.hash;
    const bad = (await api(d, 'PUT', `/v1/workspaces/${ws}/files/dir/bad.txt`, 'precious data')).json.hash;
    setBlob(d, bad, 'tampered data');
    const r = await api(d, 'POST', `/v1/workspaces/${ws}/exec`, { argv: ['true'] });
    assert.equal(r.status, 500, r.text);
    assert.equal(r.json.error, 'integrity_error');
    assert.match(r.json.message, /\/dir\/bad\.txt/);
    assert.equal(await state(d, ws), 'cold');
    let c = await api(d, 'GET', '/v1/store/check');
    assert.equal(c.json.ok, false);
    assert.equal(c.json.corrupt_blobs, 1);
    // A fixed blob lets the wake through.
    setBlob(d, bad, 'precious data');
    const x = await wsExec(d, ws, 'cat good.txt dir/bad.txt');
    assert.equal(x.out, 'goodprecious data');
    await api(d, 'POST', `/v1/workspaces/${ws}/close`, '');
    c = await api(d, 'GET', '/v1/store/check');
    assert.equal(c.json.ok, true, c.text);
    assert.ok(good);
  });

  test('gc deletes unreferenced blobs only', async () => {
    const ws = await mkws(d);
    await api(d, 'PUT', `/v1/workspaces/${ws}/files/g`, 'gc-old-content');
    await api(d, 'PUT', `/v1/workspaces/${ws}/files/g`, 'gc-new-content');
    await api(d, 'PUT', `/v1/workspaces/${ws}/files/h`, 'gc-new-content'); // shared blob
    const r = await api(d, 'POST', '/v1/store/gc', '');
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.held_lease, true);
    assert.ok(r.json.blobs_deleted >= 1, r.text);
    assert.equal((await api(d, 'GET', `/v1/workspaces/${ws}/files/g`)).text, 'gc-new-content');
    assert.equal((await api(d, 'GET', `/v1/workspaces/${ws}/files/h`)).text, 'gc-new-content');
    assert.equal((await api(d, 'GET', '/v1/store/check')).json.ok, true);
  });

  test('hostile paths and sizes are refused and harm nothing', async () => {
    const ws = await mkws(d);
    await api(d, 'PUT', `/v1/workspaces/${ws}/files/file`, 'f');
    const cases = [
      ['PUT', `/v1/workspaces/${ws}/files/a%00b`, 'x', 400],
      ['PUT', `/v1/workspaces/${ws}/files/file/under`, 'x', 400],
      ['PUT', `/v1/workspaces/${ws}/files/`, 'x', 409],
      ['POST', `/v1/workspaces/${ws}/mkdir`, { path: '../x' }, 400],
      ['POST', `/v1/workspaces/${ws}/mkdir`, { path: '/file' }, 409],
      ['POST', `/v1/workspaces/${ws}/mkdir`, { path: '/file/sub' }, 400],
      ['POST', `/v1/workspaces/${ws}/rmdir`, { path: '/' }, 400],
      ['POST', `/v1/workspaces/${ws}/rename`, { from: '/file', to: '/' }, 400],
      ['POST', `/v1/workspaces/${ws}/mkdir`, { path: 'a', extra: 1 }, 400],
      ['POST', `/v1/workspaces/${ws}/mkdir`, '[', 400],
      ['DELETE', `/v1/workspaces/${ws}/files/`, undefined, 409],
      ['PUT', `/v1/workspaces/${ws}/files/big`, Buffer.alloc(5 << 20), 413],
    ];
    for (const [m, p, b, want] of cases) {
      const r = await api(d, m, p, b);
      assert.equal(r.status, want, `${m} ${p} -> ${r.status} ${r.text}`);
    }
    // fetch resolves '..' itself: send those literally.
    for (const p of ['a/../../etc/passwd', 'a/%2e%2e/%2e%2e/x', '..%2f..%2fx']) {
      const raw = await rawHttp(
        d,
        `PUT /v1/workspaces/${ws}/files/${p} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${d.key}\r\n` +
          'Content-Length: 1\r\nConnection: close\r\n\r\nx',
      );
      assert.match(raw, /^HTTP\/1\.1 400/, `${p}: ${raw}`);
    }
    // Nothing of it landed; the one good file is intact.
    const walk = await api(d, 'GET', `/v1/workspaces/${ws}/walk`);
    assert.deepEqual(walk.json.entries.map((e) => e.path), ['/file']);
    assert.equal((await api(d, 'GET', '/v1/store/check')).json.ok, true);
    assert.equal(await state(d, ws), 'cold');
  });

  test('warm: sockets and fifos answer 400 naming the type; a 1,500-deep tree is removed', async () => {
    const ws = await mkws(d);
    const x = await wsExec(d, ws, `mkdir odd && mkfifo odd/fifo && python3 -c "
import os, socket
socket.socket(socket.AF_UNIX).bind('odd/sock')
os.mkdir('deep'); os.chdir('deep')
for i in range(1500):
    os.mkdir('d'); os.chdir('d')
"`);
    assert.equal(x.code, 0, x.err);
    for (const [name, type] of [['sock', 'unix socket'], ['fifo', 'fifo']]) {
      const r = await api(d, 'GET', `/v1/workspaces/${ws}/files/odd/${name}`);
      assert.equal(r.status, 400, `${name}: ${r.status} ${r.text}`);
      assert.match(r.json.message, new RegExp(`is a ${type}, not a regular file`));
    }
    const rm = await api(d, 'POST', `/v1/workspaces/${ws}/rmdir`, { path: '/deep' });
    assert.equal(rm.status, 204, rm.text);
    assert.equal((await wsExec(d, ws, 'test -e deep || echo gone')).out, 'gone\n');
    await api(d, 'DELETE', `/v1/workspaces/${ws}`);
  });

  test('delete kills a warm workspace without mirroring and removes its files', async () => {
    const ws = await mkws(d);
    await wsExec(d, ws, 'echo x > x');
    assert.equal(await state(d, ws), 'warm');
    assert.equal((await api(d, 'DELETE', `/v1/workspaces/${ws}`)).status, 204);
    assert.equal((await api(d, 'GET', `/v1/workspaces/${ws}`)).status, 404);
    assert.equal((await api(d, 'GET', `/v1/workspaces/${ws}/files/x`)).status, 404);
    for (let i = 0; i < 100 && sandboxInits(d).length; i++) await sleep(20);
    assert.deepEqual(sandboxInits(d), []);
  });
});

describe('workspaces across restarts', { skip }, () => {
  test('SIGTERM mirrors every warm workspace; the next abxd restores it', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'abx-ws-term-'));
    try {
      let d = await startAbxd({ stateDir, env: { ABX_POOL: '0' } });
      const ws = await mkws(d);
      await wsExec(d, ws, 'mkdir -p out && echo unflushed > out/result.txt');
      await d.stop({ keepState: true });
      assert.match(d.log, /mirror|workspace/i);
      d = await startAbxd({ stateDir, env: { ABX_POOL: '0' } });
      assert.equal(await state(d, ws), 'cold');
      assert.equal((await api(d, 'GET', `/v1/workspaces/${ws}/files/out/result.txt`)).text, 'unflushed\n');
      assert.equal((await wsExec(d, ws, 'cat out/result.txt')).out, 'unflushed\n');
      await d.stop({ keepState: true });
    } finally {
      rmSync(stateDir, { recursive: true, force: true });
    }
  });

  test('the mirror window saves changes without any flush', async () => {
    const d = await startAbxd({ env: { ABX_POOL: '0', ABX_MIRROR_WINDOW_S: '1' } });
    try {
      const ws = await mkws(d);
      await wsExec(d, ws, 'echo periodic > p.txt');
      let m;
      for (let i = 0; i < 100; i++) {
        m = await manifest(d, ws);
        if (m['/p.txt']) break;
        await sleep(100);
      }
      assert.equal(m['/p.txt']?.hash, sha('periodic\n'), 'no mirror within 10 s of a 1 s window');
      assert.equal(await state(d, ws), 'warm');
    } finally {
      await d.stop();
    }
  });

  test('an idle workspace is mirrored and put to sleep', async () => {
    const d = await startAbxd({ env: { ABX_POOL: '0', ABX_WS_IDLE_S: '1' } });
    try {
      const ws = await mkws(d);
      await wsExec(d, ws, 'echo idle > i.txt');
      for (let i = 0; i < 100 && (await state(d, ws)) !== 'cold'; i++) await sleep(100);
      assert.equal(await state(d, ws), 'cold');
      assert.equal((await manifest(d, ws))['/i.txt']?.hash, sha('idle\n'));
    } finally {
      await d.stop();
    }
  });

  test('a full disk: the store says so and stays consistent', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'abx-ws-full-'));
    const mnt = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=6m', 'tmpfs', dir]);
    assert.equal(mnt.status, 0, String(mnt.stderr));
    try {
      // The store's own ENOSPC: no floor, and no disk image on 6 MiB.
      const env = { ABX_POOL: '0', ABX_DISK_FLOOR_MB: '0', ABX_DISK_MB: '0' };
      const d = await startAbxd({ stateDir: join(dir, 'state'), env });
      try {
        const ws = await mkws(d);
        assert.equal((await api(d, 'PUT', `/v1/workspaces/${ws}/files/keep`, 'keep me')).status, 201);
        const r = await api(d, 'PUT', `/v1/workspaces/${ws}/files/keep`, Buffer.alloc(8 << 20, 1));
        assert.equal(r.status, 507, r.text);
        assert.equal(r.json.error, 'insufficient_storage');
        assert.equal((await api(d, 'GET', `/v1/workspaces/${ws}/files/keep`)).text, 'keep me');
        const c = await api(d, 'GET', '/v1/store/check');
        assert.equal(c.json.ok, true, c.text);
        // Space comes back once the failed write is gone.
        assert.equal((await api(d, 'PUT', `/v1/workspaces/${ws}/files/small`, 'ok')).status, 201);
      } finally {
        await d.stop();
      }
    } finally {
      spawnSync('umount', ['-l', dir]);
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
