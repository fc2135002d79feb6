// lifecycle.test.mjs - abxd's own life: API key, state lock, readiness,
// SIGTERM drain, a crash taking every sandbox with it and the next start
// reclaiming what was left, and the weaker isolation modes.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, statSync, readFileSync, existsSync, chmodSync, rmSync, readlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startAbxd, createSandbox, killSandbox, exec, sh, api, hostPids, until, isRoot, abxdBin } from './lib.mjs';

const skip = !isRoot && 'needs root';

// The groups in abxd's own instance cgroups: the abx-* directories its open
// descriptors point at (other abxd run by tests at the same time have theirs).
function instanceDirs(d) {
  const dirs = new Set();
  for (const fd of readdirSync(`/proc/${d.proc.pid}/fd`)) {
    let t;
    try {
      t = readlinkSync(`/proc/${d.proc.pid}/fd/${fd}`);
    } catch {
      continue;
    }
    const m = t.match(/^(\/sys\/fs\/cgroup\/.*\/abx-[0-9a-f]{12})$/);
    if (m) dirs.add(m[1]);
  }
  return [...dirs];
}

function instanceCgroups(dirs) {
  const out = [];
  for (const p of dirs) {
    if (!existsSync(p)) continue;
    for (const g of readdirSync(p)) if (statSync(join(p, g)).isDirectory()) out.push(join(p, g));
  }
  return out;
}

// The host pids among `pids` that still run (not zombies).
function stillRunning(pids) {
  return pids.filter((pid) => {
    try {
      return !/^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, 'utf8'));
    } catch {
      return false;
    }
  });
}

// Live processes (zombies waiting for whoever adopted them are not running).
function procsOfUidRange(lo) {
  return hostPids()
    .split('\n')
    .map((l) => l.trim().split(/\s+/))
    .filter((f) => f.length >= 2 && Number(f[1]) >= lo && Number(f[1]) < lo + 65536 && !f.includes('<defunct>'));
}

// How many of them are the `sleep` a test started (it waits for them).
function sleepsOfUidRange(lo) {
  return procsOfUidRange(lo).filter((f) => f[2] === 'sleep').length;
}

async function sandboxRootUid(d, id) {
  const name = `.uidprobe-${id}`;
  await sh(d, id, `touch /home/user/${name}`, { user: 'root' });
  for (const j of readdirSync(join(d.stateDir, 'sandboxes'))) {
    const p = join(d.stateDir, 'sandboxes', j, 'home', name);
    if (existsSync(p)) return { uid: statSync(p).uid, jail: j };
  }
  throw new Error('probe not found');
}

describe('lifecycle', { skip }, () => {
  test('an API key is generated once, stored 0600 and reused', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'abx-key-'));
    try {
      const d = await startAbxd({ stateDir, noKey: true });
      const keyFile = join(stateDir, 'api-key');
      assert.equal(statSync(keyFile).mode & 0o777, 0o600);
      const key = readFileSync(keyFile, 'utf8').trim();
      assert.match(key, /^e2b_[0-9a-f]{40}$/); // E2B SDKs check this shape
      assert.match(d.log, new RegExp(`stored it in ${stateDir}/api-key`));
      assert.equal((await api(d, 'GET', '/v1/sandboxes', undefined, { key })).status, 200);
      await d.stop({ keepState: true });
      const d2 = await startAbxd({ stateDir, noKey: true });
      assert.equal((await api(d2, 'GET', '/v1/sandboxes', undefined, { key })).status, 200);
      assert.match(d2.log, /API key read from/);
      await d2.stop({ keepState: true });
    } finally {
      rmSync(stateDir, { recursive: true, force: true });
    }
  });

  test('one state directory, one abxd', async () => {
    const d = await startAbxd();
    try {
      const r = spawnSync(abxdBin, ['--listen', '127.0.0.1:0', '--state-dir', d.stateDir], { env: { ABX_API_KEY: 'x'.repeat(20) }, encoding: 'utf8', timeout: 10000 });
      assert.notEqual(r.status, 0);
      assert.match(r.stderr, /in use by another abxd/);
    } finally {
      await d.stop();
    }
  });

  test('bad configuration is refused with a message', () => {
    for (const [env, re] of [
      [{ ABX_ISOLATION: 'chroot' }, /ABX_ISOLATION/],
      [{ ABX_MEMORY_MB: 'lots' }, /ABX_MEMORY_MB/],
      [{ ABX_LISTEN: 'nowhere' }, /listen address/],
      [{ ABX_CGROUP: 'v3' }, /ABX_CGROUP/],
    ]) {
      const r = spawnSync(abxdBin, ['--state-dir', '/tmp/abx-never'], { env: { ...env, ABX_API_KEY: 'x'.repeat(20) }, encoding: 'utf8', timeout: 10000 });
      assert.equal(r.status, 2, JSON.stringify(env));
      assert.match(r.stderr, re);
    }
    const h = spawnSync(abxdBin, ['--help'], { encoding: 'utf8' });
    assert.equal(h.status, 0);
    assert.match(h.stdout, /--state-dir/);
  });

  test('readiness fails and names what is missing', async () => {
    const d = await startAbxd({ env: { ABX_CGROUP: 'v2' } });
    try {
      const r = await api(d, 'GET', '/readyz', undefined, { auth: false });
      if (existsSync('/sys/fs/cgroup/cgroup.controllers') && /memory/.test(readFileSync('/sys/fs/cgroup/cgroup.controllers', 'utf8'))) {
        assert.equal(r.status, 200, 'a pure v2 host has what v2 needs');
        return;
      }
      assert.equal(r.status, 503);
      assert.equal(r.json.ready, false);
      assert.ok(r.json.missing.some((m) => /cgroup v2/.test(m)), JSON.stringify(r.json.missing));
      const c = await api(d, 'POST', '/v1/sandboxes', {});
      assert.equal(c.status, 503);
      assert.match(c.json.message, /isolation is not available/);
    } finally {
      await d.stop();
    }
  });

  test('without root, the default isolation is not ready and says why', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'abx-nonroot-'));
    chmodSync(stateDir, 0o777);
    const r = spawnSync('setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', abxdBin, '--listen', '127.0.0.1:0', '--state-dir', join(stateDir, 'nb')], {
      env: { ABX_API_KEY: 'y'.repeat(20), PATH: process.env.PATH },
      encoding: 'utf8',
      timeout: 3000,
      killSignal: 'SIGTERM',
    });
    rmSync(stateDir, { recursive: true, force: true });
    assert.match(r.stderr, /root privileges \(abxd runs as uid 65534\)/);
    assert.match(r.stderr, /NOT READY/);
  });

  test('SIGTERM drains and kills every sandbox, leaving nothing', async () => {
    const d = await startAbxd({ env: { ABX_POOL: '0' } });
    const id = (await createSandbox(d)).id;
    const { uid } = await sandboxRootUid(d, id);
    await api(d, 'POST', `/v1/sandboxes/${id}/exec`, { argv: ['sleep', '300'], background: true });
    await until(() => sleepsOfUidRange(uid) >= 1);
    // Other abxd on this host may get the same uid range once it is free
    // again, so follow these very processes, not the range.
    const pids = procsOfUidRange(uid).map((f) => Number(f[0]));
    assert.ok(pids.length >= 1);
    const inst = instanceDirs(d);
    const before = instanceCgroups(inst).length;
    assert.ok(before > 0, 'the sandbox has no group in its instance cgroup');
    const res = await d.stop({ keepState: true });
    assert.equal(res.code, 0);
    assert.match(d.log, /SIGTERM: draining \(0 warm workspaces, 1 sandboxes\)/);
    assert.match(d.log, /killing 1 sandboxes/);
    assert.match(d.log, /all sandboxes are gone; exiting/);
    assert.deepEqual(stillRunning(pids), []);
    assert.deepEqual(readdirSync(join(d.stateDir, 'sandboxes')), []);
    assert.ok(instanceCgroups(inst).length < before);
    rmSync(d.stateDir, { recursive: true, force: true });
  });

  test('if abxd dies its sandboxes die with it, and the next start reclaims the rest', async () => {
    const d = await startAbxd({ env: { ABX_POOL: '0' } });
    const ids = [(await createSandbox(d)).id, (await createSandbox(d)).id];
    const inst = instanceDirs(d);
    const uids = [];
    const jails = [];
    for (const id of ids) {
      const p = await sandboxRootUid(d, id);
      uids.push(p.uid);
      jails.push(p.jail);
      await api(d, 'POST', `/v1/sandboxes/${id}/exec`, { argv: ['sh', '-c', 'sleep 300 & sleep 300 & wait'], background: true });
    }
    await until(() => uids.every((u) => sleepsOfUidRange(u) >= 2));
    const pids = [];
    for (const u of uids) {
      const mine = procsOfUidRange(u).map((f) => Number(f[0]));
      assert.ok(mine.length >= 3, 'init and two sleeps');
      pids.push(...mine);
    }
    d.proc.kill('SIGKILL');
    await d.exited;
    // Dead within 500 ms of abxd.
    await until(() => stillRunning(pids).length === 0, 500);
    assert.deepEqual(stillRunning(pids), [], 'every sandbox process died with abxd');
    assert.deepEqual(readdirSync(join(d.stateDir, 'sandboxes')).sort(), [...jails].sort(), 'directories are left on disk');
    const d2 = await startAbxd({ stateDir: d.stateDir, env: { ABX_POOL: '0' } });
    try {
      assert.match(d2.log, /reclaimed \d+ sandbox\(es\) left by an earlier run/);
      assert.deepEqual(readdirSync(join(d.stateDir, 'sandboxes')), []);
      const leftover = instanceCgroups(inst).filter((p) => jails.some((j) => p.endsWith('/' + j)));
      assert.deepEqual(leftover, []);
      const again = await createSandbox(d2);
      assert.equal((await exec(d2, again.id, ['true'])).code, 0);
    } finally {
      await d2.stop();
    }
  });

  test("'uid' isolation: pooled uid and cgroup, no namespaces", async () => {
    const d = await startAbxd({ env: { ABX_ISOLATION: 'uid', ABX_POOL: '0' } });
    try {
      assert.match(d.log, /isolation mode 'uid' was asked for/);
      const sb = await createSandbox(d, { pids: 16 });
      const r = await sh(d, sb.id, 'id -u; echo $HOME; pwd; grep -E "^(NoNewPrivs|Seccomp)" /proc/self/status');
      const [uid, home, cwd] = r.out.split('\n');
      assert.ok(Number(uid) >= 0x40000000 + 1000, uid);
      assert.equal(home, cwd);
      assert.match(r.out, /NoNewPrivs:\s+1/);
      assert.match(r.out, /Seccomp:\s+2/);
      const put = await api(d, 'PUT', `/v1/sandboxes/${sb.id}/files/f.txt`, 'hello');
      assert.equal(put.status, 201);
      assert.equal((await exec(d, sb.id, ['cat', 'f.txt'])).out, 'hello');
      const w = await sh(d, sb.id, 'cat /etc/shadow 2>&1; touch /usr/x 2>&1; echo done');
      assert.match(w.out, /Permission denied[\s\S]*Permission denied/);
      await api(d, 'POST', `/v1/sandboxes/${sb.id}/exec`, { argv: ['sleep', '300'], background: true });
      await until(() => sleepsOfUidRange(Number(uid) - 1000) >= 1);
      const pids = procsOfUidRange(Number(uid) - 1000).map((f) => Number(f[0]));
      assert.ok(pids.length >= 1);
      await killSandbox(d, sb.id);
      assert.deepEqual(stillRunning(pids), []);
      assert.deepEqual(readdirSync(join(d.stateDir, 'sandboxes')), []);
    } finally {
      await d.stop();
    }
  });

  test("'none' isolation runs processes as abxd's own user", async () => {
    const d = await startAbxd({ env: { ABX_ISOLATION: 'none', ABX_POOL: '0' } });
    try {
      const sb = await createSandbox(d);
      const r = await exec(d, sb.id, ['id', '-u']);
      assert.equal(r.out, '0\n');
      await api(d, 'POST', `/v1/sandboxes/${sb.id}/exec`, { argv: ['sh', '-c', 'sleep 3071 & sleep 3071 & wait'], background: true });
      await until(() => /sleep 3071/.test(hostPids()));
      assert.match(hostPids(), /sleep 3071/);
      await killSandbox(d, sb.id);
      // Gone within 200 ms of the kill.
      await until(() => !/sleep 3071/.test(hostPids()), 200);
      assert.doesNotMatch(hostPids(), /sleep 3071/, 'its process groups were killed');
      assert.deepEqual(readdirSync(join(d.stateDir, 'sandboxes')), []);
    } finally {
      await d.stop();
    }
  });
});
