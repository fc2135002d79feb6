// No API reads, lists, writes or stats a sandbox's content with more rights
// than the acting sandbox user has inside it (issue 10, item 7).
//
// abxd runs as host root. Files that only host root may read are planted in
// every directory a sandbox sees from the host: its workspace (/home/user),
// the generated /etc, the host's /usr (a 0600 file, and the host's own
// 0700 /usr/share/polkit-1/rules.d), and the tool bundles at /.tools. Then
// every surface tries: the native file routes, a warm workspace's routes,
// E2B's /files and filesystem RPCs as "user" and as "root", WatchDir, a
// snapshot (and a fork made from it), directly and through symlinks the
// sandbox plants. Each must fail the way the sandbox's own processes fail,
// and nothing secret may come back. Root is needed (skipped otherwise).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, writeFileSync, chmodSync, rmSync, readdirSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { setup } from './lib.mjs';

const SECRET = 'host-root-only-' + randomBytes(8).toString('hex');
const isRoot = process.getuid && process.getuid() === 0;
const usrSecret = `/usr/local/share/abx-deputy-${randomBytes(6).toString('hex')}`;
const polkit = '/usr/share/polkit-1/rules.d';

let d, E, Sandbox, sbx, tools;

function plant(path) {
  writeFileSync(path, SECRET + '\n', { mode: 0o600 });
  chmodSync(path, 0o600);
}

// The host directory of sandbox sbx's workspace (abxd's state layout).
async function homeOf(s) {
  const marker = 'marker-' + randomBytes(6).toString('hex');
  await s.commands.run(`touch ${marker}`);
  for (const j of readdirSync(join(d.stateDir, 'sandboxes'))) {
    const h = join(d.stateDir, 'sandboxes', j, 'home');
    if (existsSync(join(h, marker))) return h;
  }
  throw new Error('no home found');
}

async function native(method, path) {
  return fetch(d.url + path, { method, headers: { Authorization: `Bearer ${d.key}` } });
}

before(async () => {
  if (!isRoot) return;
  // a tool bundle (launch, commands.json, schemas/, build stamp) holding a
  // file only host root may read
  tools = mkdtempSync(join(tmpdir(), 'abx-deputy-tools-'));
  chmodSync(tools, 0o755);
  const b = join(tools, 'secretive');
  mkdirSync(join(b, 'schemas'), { recursive: true });
  writeFileSync(join(b, 'launch'), '#!/bin/sh\necho "[]"\n', { mode: 0o755 });
  writeFileSync(join(b, 'commands.json'), '[]');
  writeFileSync(join(b, 'build-stamp.json'), JSON.stringify({ format: 1, name: 'secretive', kind: 'cli', description: 'x' }));
  plant(join(b, 'key'));
  const s = await setup({ args: ['--tools-dir', tools] });
  d = s.d;
  E = s.sdk;
  Sandbox = s.sdk.Sandbox;
  sbx = await Sandbox.create();
  plant(join(await homeOf(sbx), 'secret'));
  plant(join(d.stateDir, 'etc', 'abx-secret'));
  plant(usrSecret);
  // links the sandbox plants to each secret
  await sbx.commands.run(
    `ln -s /etc/abx-secret l-etc && ln -s ${usrSecret} l-usr && ln -s /home/user/secret l-home && ln -s ${polkit} l-polkit`,
  );
});

after(async () => {
  rmSync(usrSecret, { force: true });
  if (sbx) await sbx.kill().catch(() => {});
  if (d) await d.stop();
  if (tools) rmSync(tools, { recursive: true, force: true });
});

const opts = { skip: isRoot ? false : 'needs root' };

test('the sandbox itself cannot read them (the rule the API must follow)', opts, async () => {
  for (const p of ['/home/user/secret', '/etc/abx-secret', usrSecret]) {
    for (const user of ['user', 'root']) {
      const r = await sbx.commands.run(`cat ${p}`, { user }).catch((e) => e);
      assert.notEqual(r.exitCode, 0, `${user} read ${p}`);
      assert.ok(!String(r.stdout ?? '').includes(SECRET));
    }
  }
  const r = await sbx.commands.run(`ls ${polkit}`, { user: 'root' }).catch((e) => e);
  assert.notEqual(r.exitCode, 0);
});

test('E2B files.read as user and as root: refused, directly and through links', opts, async () => {
  const paths = ['/home/user/secret', '/etc/abx-secret', usrSecret, '/.tools/secretive/key',
    '/home/user/l-etc', '/home/user/l-usr', '/home/user/l-home'];
  for (const p of paths) {
    for (const user of ['user', 'root']) {
      const r = await sbx.files.read(p, { user }).then((v) => v, (e) => e);
      assert.ok(r instanceof Error, `${user} read ${p}: ${String(r).slice(0, 80)}`);
      assert.ok(!String(r.message).includes(SECRET));
    }
  }
});

test('E2B list, stat and watch of a 0700 host directory: refused', opts, async () => {
  for (const user of ['user', 'root']) {
    await assert.rejects(sbx.files.list(polkit, { user }), `${user} listed ${polkit}`);
    await assert.rejects(sbx.files.list('/home/user/l-polkit', { user }));
    await assert.rejects(sbx.files.watchDir(polkit, () => {}, { user }));
  }
  // what the sandbox may see stays visible: the name of a secret, not its bytes
  const names = (await sbx.files.list('/etc')).map((e) => e.name);
  assert.ok(names.includes('abx-secret'));
});

test('E2B writes over a host-root file: refused, the file unchanged', opts, async () => {
  for (const user of ['user', 'root']) {
    await assert.rejects(sbx.files.write('/etc/abx-secret', 'overwritten', { user }));
    await assert.rejects(sbx.files.write(usrSecret, 'overwritten', { user }));
    await assert.rejects(sbx.files.remove('/etc/abx-secret', { user }));
  }
  const { readFileSync } = await import('node:fs');
  assert.equal(readFileSync(join(d.stateDir, 'etc', 'abx-secret'), 'utf8'), SECRET + '\n');
  assert.equal(readFileSync(usrSecret, 'utf8'), SECRET + '\n');
});

test('native file routes: refused with 403, never the content', opts, async () => {
  for (const p of ['secret', 'l-home', 'l-etc', 'l-usr']) {
    const r = await native('GET', `/v1/sandboxes/${sbx.sandboxId}/files/${p}`);
    assert.ok(r.status >= 400, `GET ${p}: ${r.status}`);
    const body = await r.text();
    assert.ok(!body.includes(SECRET));
  }
  const r = await native('GET', `/v1/sandboxes/${sbx.sandboxId}/files/secret`);
  assert.equal(r.status, 403);
});

test('a snapshot does not carry what sandbox root cannot read; nor does a fork', opts, async () => {
  const snap = await sbx.createSnapshot();
  const fork = await Sandbox.create(snap.snapshotId);
  try {
    const r = await fork.files.read('/home/user/secret', { user: 'root' }).then((v) => v, (e) => e);
    assert.ok(r instanceof Error || !String(r).includes(SECRET));
    // and in the fork too, the host's secrets stay the host's
    await assert.rejects(fork.files.read('/etc/abx-secret', { user: 'root' }));
    await assert.rejects(fork.files.read(usrSecret, { user: 'root' }));
    // the rest came through
    assert.equal((await fork.commands.run('readlink l-etc')).stdout, '/etc/abx-secret\n');
  } finally {
    await fork.kill();
  }
});

test('a warm workspace: its file routes act as the user', opts, async () => {
  const ws = await (await fetch(d.url + '/v1/workspaces', {
    method: 'POST',
    headers: { Authorization: `Bearer ${d.key}`, 'Content-Type': 'application/json' },
    body: '{}',
  })).json();
  try {
    const ex = await fetch(d.url + `/v1/workspaces/${ws.id}/exec`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${d.key}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ argv: ['sh', '-c', 'ln -s /etc/abx-secret l && echo ok > mine'] }),
    });
    assert.equal(ex.status, 200);
    await ex.text();
    let r = await native('GET', `/v1/workspaces/${ws.id}/files/mine`);
    assert.equal(r.status, 200);
    assert.equal(await r.text(), 'ok\n');
    r = await native('GET', `/v1/workspaces/${ws.id}/files/l`);
    assert.ok(r.status >= 400);
    assert.ok(!(await r.text()).includes(SECRET));
  } finally {
    await native('DELETE', `/v1/workspaces/${ws.id}`);
  }
});
