// disk.test.mjs - the bound on a sandbox's writable space (issue 10, item
// 13): a sandbox's home is a btrfs subvolume with a quota on a disk image
// abxd mounts at <state>/sandboxes, so writes past disk_mb fail inside the
// sandbox (EDQUOT) and through the API (507), other sandboxes and the state
// file system are untouched, --disk-mb sets the default, workspaces keep
// their disk_mb across restarts and are bounded cold too, the state file
// system's floor refuses uploads, a sandbox cannot escape its quota with a
// subvolume of its own, what a crash left is reclaimed, and a host that
// cannot bound disks says so on /readyz unless told --disk-mb 0.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { statfsSync, readdirSync, existsSync, rmSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import {
  startAbxd,
  api,
  createSandbox,
  killSandbox,
  sh,
  parseNdjson,
  isRoot,
  isMounted,
  sleep,
} from './lib.mjs';

const skip = !isRoot && 'needs root';
const BTRFS_MAGIC = 0x9123683e;
const MiB = 1 << 20;

// Bytes the state directory takes on its own file system (du -x: the
// disk image counts with its fixed allocation, the mount does not).
function stateBytes(d) {
  const r = spawnSync('du', ['-sxB1', d.stateDir], { encoding: 'utf8' });
  return Number(r.stdout.split(/\s/)[0]);
}

async function wsExec(d, ws, script) {
  const r = await api(d, 'POST', `/v1/workspaces/${ws}/exec`, { argv: ['/bin/sh', '-c', script] });
  if (r.status !== 200) return { status: r.status, json: r.json };
  const p = parseNdjson(r.text);
  return { status: 200, code: p.result?.exit_code, out: p.stdout.toString(), err: p.stderr.toString() };
}

describe('disk bound', { skip }, () => {
  let d;
  const made = [];
  before(async () => {
    d = await startAbxd({ env: { ABX_DISK_MB: '64' } });
  });
  after(async () => {
    for (const id of made) await killSandbox(d, id).catch(() => {}); // d.stop() kills the rest
    await d?.stop();
    if (d) rmSync(d.stateDir, { recursive: true, force: true });
  });

  test('the disk is a btrfs mounted over <state>/sandboxes', async () => {
    assert.match(d.log, /disk: btrfs image .*disk\.img \(512 MiB, \/dev\/loop\d+\); a sandbox may write 64 MiB/);
    assert.ok(isMounted(join(d.stateDir, 'sandboxes')));
    const r = await api(d, 'GET', '/readyz');
    assert.equal(r.status, 200, r.text);
  });

  test('a sandbox with disk_mb 20 cannot write 50 MB; others and the state disk are unaffected', async () => {
    const a = await createSandbox(d, { disk_mb: 20 });
    made.push(a.id);
    assert.equal(a.disk_mb, 20);
    const b = await createSandbox(d, {});
    made.push(b.id);
    const before = stateBytes(d);
    const r = await sh(d, a.id, 'dd if=/dev/zero of=f bs=1M count=50 2>&1; echo "rc=$?"; sync; ls -l f');
    assert.match(r.out, /Disk quota exceeded/);
    assert.match(r.out, /rc=1/);
    const size = Number(r.out.match(/ (\d+) [A-Z][a-z]{2} /)[1]);
    assert.ok(size <= 20 * MiB && size >= 15 * MiB, `wrote ${size}`);
    // The other sandbox (the default 64 MiB) writes while the first is full.
    const o = await sh(d, b.id, 'dd if=/dev/zero of=g bs=1M count=40 2>&1 && sync && echo ok');
    assert.match(o.out, /ok/);
    // Nothing of it landed on the state file system.
    const grown = stateBytes(d) - before;
    assert.ok(grown < 4 * MiB, `the state directory grew by ${grown} bytes`);
    // The usage as the quota counts it.
    let usage;
    for (let i = 0; i < 100; i++) {
      usage = (await api(d, 'GET', `/v1/sandboxes/${a.id}`)).json.usage?.disk_bytes;
      if (usage >= 15 * MiB) break;
      await sleep(100);
    }
    assert.ok(usage >= 15 * MiB && usage <= 21 * MiB, `usage ${usage}`);
  });

  test('an upload past the bound answers 507 and leaves nothing', async () => {
    const a = await createSandbox(d, { disk_mb: 20 });
    made.push(a.id);
    const big = Buffer.alloc(30 * MiB, 1);
    const r = await api(d, 'PUT', `/v1/sandboxes/${a.id}/files/big`, big);
    assert.equal(r.status, 507, r.text);
    assert.equal(r.json.error, 'insufficient_storage');
    assert.match(r.json.message, /disk bound \(disk_mb\)/);
    const l = await sh(d, a.id, 'ls -A; du -sk .');
    assert.doesNotMatch(l.out, /big/);
    const ok = await api(d, 'PUT', `/v1/sandboxes/${a.id}/files/small`, Buffer.alloc(MiB, 2));
    assert.equal(ok.status, 201, ok.text);
  });

  test('the default from --disk-mb applies, also to the warm pool', async () => {
    const a = await createSandbox(d, {});
    made.push(a.id);
    assert.equal(a.disk_mb, 64);
    assert.equal(a.timings.from_pool, true);
    const r = await sh(d, a.id, 'dd if=/dev/zero of=f bs=1M count=100 2>&1; echo "rc=$?"');
    assert.match(r.out, /Disk quota exceeded/);
    // A pool sandbox claimed with another bound gets that one.
    for (let i = 0; i < 100 && !/^abx_pool_ready 1$/m.test((await api(d, 'GET', '/metrics')).text); i++)
      await sleep(50);
    const c = await createSandbox(d, { disk_mb: 8 });
    made.push(c.id);
    const w = await sh(d, c.id, 'dd if=/dev/zero of=f bs=1M count=16 2>&1; echo "rc=$?"');
    assert.match(w.out, /rc=1/);
  });

  test('disk_mb is checked', async () => {
    const ok = await createSandbox(d, { disk_mb: 1 });
    made.push(ok.id);
    assert.equal(ok.disk_mb, 1);
    for (const v of [0, -1, 1.5, 'x', 2 ** 40]) {
      const r = await api(d, 'POST', '/v1/sandboxes', { disk_mb: v });
      assert.equal(r.status, 400, `${v}: ${r.text}`);
    }
  });

  test('a sandbox cannot make a subvolume outside its quota', async () => {
    const a = await createSandbox(d, { disk_mb: 20 });
    made.push(a.id);
    const r = await sh(d, a.id, 'btrfs subvolume create sub 2>&1; echo "rc=$?"; ' +
      'python3 -c "import fcntl,os; fd=os.open(\'.\',os.O_RDONLY); b=bytearray(4096); ' +
      'b[8:12]=b\'sub2\'; fcntl.ioctl(fd, 0x5000940e, b)" 2>&1; echo "rc=$?"');
    assert.match(r.out, /cannot create subvolume: Operation not permitted/);
    assert.match(r.out, /PermissionError: \[Errno 1\] Operation not permitted/);
    assert.doesNotMatch(r.out, /rc=0/);
    assert.equal((await sh(d, a.id, 'ls -A')).out, '');
  });

  test('workspaces: disk_mb kept across restarts, bounded warm and cold', async () => {
    const w = await api(d, 'POST', '/v1/workspaces', { disk_mb: 16 });
    assert.equal(w.status, 201, w.text);
    assert.equal(w.json.disk_mb, 16);
    const ws = w.json.id;
    const dflt = await api(d, 'POST', '/v1/workspaces', {});
    assert.equal(dflt.json.disk_mb, 64);
    assert.equal((await api(d, 'POST', '/v1/workspaces', { disk_mb: 0 })).status, 400);

    // Cold: the store refuses what would not fit at the next wake (files
    // under the sync size cap of 10 MB, so that they are restored).
    let r = await api(d, 'PUT', `/v1/workspaces/${ws}/files/a.bin`, Buffer.alloc(6 * MiB, 1));
    assert.equal(r.status, 201, r.text);
    r = await api(d, 'PUT', `/v1/workspaces/${ws}/files/b.bin`, Buffer.alloc(6 * MiB, 2));
    assert.equal(r.status, 201, r.text);
    r = await api(d, 'PUT', `/v1/workspaces/${ws}/files/c.bin`, Buffer.alloc(6 * MiB, 3));
    assert.equal(r.status, 507, r.text);
    assert.match(r.json.message, /disk bound \(disk_mb 16\)/);
    r = await api(d, 'PUT', `/v1/workspaces/${ws}/files/a.bin`, Buffer.alloc(8 * MiB, 4)); // a replacement
    assert.equal(r.status, 200, r.text);

    await d.stop({ keepState: true });
    d = await startAbxd({ stateDir: d.stateDir, key: d.key, env: { ABX_DISK_MB: '64' } });
    assert.match(d.log, /disk: btrfs image/);
    assert.equal((await api(d, 'GET', `/v1/workspaces/${ws}`)).json.disk_mb, 16);

    // Warm: the kernel bounds it (14 MiB are restored already).
    const x = await wsExec(d, ws, 'du -sm a.bin b.bin; dd if=/dev/zero of=c.bin bs=1M count=8 2>&1; echo "rc=$?"');
    assert.equal(x.status, 200, JSON.stringify(x));
    assert.match(x.out, /^8\s+a\.bin\n6\s+b\.bin\n/);
    assert.match(x.out, /Disk quota exceeded/);
    r = await api(d, 'POST', `/v1/workspaces/${ws}/close`);
    assert.ok(r.status === 200 || r.status === 204, r.text);
    await api(d, 'DELETE', `/v1/workspaces/${ws}`);
    await api(d, 'DELETE', `/v1/workspaces/${dflt.json.id}`);
  });
});

// A one-file ustar archive (what POST /v1/templates takes).
function tarOne(name, data) {
  const h = Buffer.alloc(512);
  const d = Buffer.from(data);
  h.write(name, 0, 'utf8');
  h.write('0000644\0', 100);
  h.write('0000000\0', 108);
  h.write('0000000\0', 116);
  h.write(d.length.toString(8).padStart(11, '0') + '\0', 124);
  h.write('00000000000\0', 136);
  h.write('0', 156);
  h.write('ustar\0' + '00', 257, 'latin1');
  h.fill(' ', 148, 156);
  let sum = 0;
  for (const b of h) sum += b;
  h.write(sum.toString(8).padStart(6, '0') + '\0 ', 148, 'latin1');
  const pad = Buffer.alloc((512 - (d.length % 512)) % 512);
  return Buffer.concat([h, d, pad, Buffer.alloc(1024)]);
}

async function buildTemplate(d, yaml) {
  const r = await api(d, 'POST', '/v1/templates', tarOne('sandbox-template.yaml', yaml), {
    headers: { 'content-type': 'application/x-tar' },
  });
  assert.equal(r.status, 200, r.text);
  const lines = r.text.split('\n').filter(Boolean).map((l) => JSON.parse(l));
  return { lines, last: lines[lines.length - 1] };
}

describe('disk bound: template builds', { skip }, () => {
  let d;
  before(async () => {
    d = await startAbxd();
  });
  after(async () => {
    await d?.stop();
  });

  test("a build's writable layer is bounded by disk_mb, off the state file system, and copied out", async () => {
    const before = stateBytes(d);
    let r = await buildTemplate(d, 'name: fat\nresources: {disk_mb: 20}\nsteps:\n' +
      '  - run: dd if=/dev/zero of=/usr/big bs=1M count=50\n');
    assert.ok(r.lines.some((l) => /Disk quota exceeded/.test(l.line ?? '')), JSON.stringify(r.lines));
    assert.match(r.last.error, /step 1 .*exited with 1/);
    assert.ok(stateBytes(d) - before < 4 * MiB, 'the state directory grew');
    assert.equal((await api(d, 'GET', '/v1/templates/fat')).status, 404);
    for (let i = 0; i < 50 && readdirSync(join(d.stateDir, 'sandboxes')).some((n) => n.startsWith('build-')); i++)
      await sleep(100);
    assert.deepEqual(readdirSync(join(d.stateDir, 'sandboxes')).filter((n) => n.startsWith('build-')), []);

    // Within its bound: copied out of the area into its layer.
    r = await buildTemplate(d, 'name: slim\nresources: {disk_mb: 40}\nsteps:\n' +
      '  - run: mkdir -p /opt/s && dd if=/dev/urandom of=/opt/s/f bs=1M count=8 2>/dev/null && ' +
      'ln /opt/s/f /opt/s/g && mkfifo /opt/s/p && rm -rf /etc/X11 && echo done\n');
    assert.equal(r.last.done, true, JSON.stringify(r.last));
    const fs = join(d.stateDir, 'templates', 'slim', 'current', 'fs');
    const st = spawnSync('stat', ['-c', '%h %F %t:%T', join(fs, 'opt/s/f'), join(fs, 'opt/s/p')], { encoding: 'utf8' });
    assert.match(st.stdout, /^2 regular file/m);
    assert.match(st.stdout, /fifo/);
    assert.deepEqual(readdirSync(join(d.stateDir, 'sandboxes')).filter((n) => n.startsWith('build-')), []);
    const s = await createSandbox(d, { template: 'slim' });
    const x = await sh(d, s.id, 'ls /opt/s; test -e /etc/X11 && echo there || echo gone; du -sm /opt/s/f');
    assert.match(x.out, /^f\ng\np\ngone\n8\s/);
    await killSandbox(d, s.id);
  });
});

describe('disk bound: the state file system floor', { skip }, () => {
  test('uploads are refused once the state file system is down to its floor', async () => {
    let d = await startAbxd();
    const ws = (await api(d, 'POST', '/v1/workspaces', {})).json.id;
    await d.stop({ keepState: true });
    // The image exists already; the floor is now more than the disk has.
    d = await startAbxd({ stateDir: d.stateDir, key: d.key, env: { ABX_DISK_FLOOR_MB: String(2 ** 30) } });
    try {
      assert.equal((await api(d, 'GET', '/readyz')).status, 200);
      const r = await api(d, 'PUT', `/v1/workspaces/${ws}/files/x`, Buffer.alloc(1000, 1));
      assert.equal(r.status, 507, r.text);
      assert.match(r.json.message, /reserve/);
      // Reading and deleting still work.
      assert.equal((await api(d, 'GET', `/v1/workspaces/${ws}`)).status, 200);
      assert.equal((await api(d, 'DELETE', `/v1/workspaces/${ws}`)).status, 204);
    } finally {
      await d.stop();
      rmSync(d.stateDir, { recursive: true, force: true });
    }
  });
});

describe('disk bound: readiness and --disk-mb 0', { skip }, () => {
  test('a disk that cannot be made is a missing part of readiness', async () => {
    // An image larger than the state file system cannot be allocated.
    const d = await startAbxd({ env: { ABX_DISK_POOL_MB: String(2 ** 30) } });
    try {
      const r = await api(d, 'GET', '/readyz');
      assert.equal(r.status, 503, r.text);
      assert.match(r.text, /a disk bound for sandboxes \(.*--disk-mb 0 runs without one\)/);
      const c = await api(d, 'POST', '/v1/sandboxes', {});
      assert.equal(c.status, 503, c.text);
      assert.ok(!isMounted(join(d.stateDir, 'sandboxes')));
      assert.ok(!existsSync(join(d.stateDir, 'disk.img')));
    } finally {
      await d.stop();
    }
  });

  test('--disk-mb 0 runs unbounded, and says so', async () => {
    const d = await startAbxd({ args: ['--disk-mb', '0'] });
    try {
      assert.match(d.log, /--disk-mb 0 was asked for: sandboxes' writable space is not bounded/);
      assert.equal((await api(d, 'GET', '/readyz')).status, 200);
      assert.ok(!isMounted(join(d.stateDir, 'sandboxes')));
      const a = await createSandbox(d, {});
      assert.equal(a.disk_mb, null);
      const r = await api(d, 'POST', '/v1/sandboxes', { disk_mb: 10 });
      assert.equal(r.status, 400, r.text);
      assert.match(r.json.message, /--disk-mb 0/);
      const w = await sh(d, a.id, 'dd if=/dev/zero of=f bs=1M count=30 2>&1; echo "rc=$?"');
      assert.match(w.out, /rc=0/);
      await killSandbox(d, a.id);
    } finally {
      await d.stop();
    }
  });
});

describe('disk bound: crash and reclaim', { skip }, () => {
  test('a killed abxd leaves its disk mounted; the next start reuses and empties it', async () => {
    let d = await startAbxd({ env: { ABX_POOL: '0' } });
    const a = await createSandbox(d, { disk_mb: 30 });
    await sh(d, a.id, 'dd if=/dev/zero of=f bs=1M count=10 2>/dev/null; sync');
    const base = join(d.stateDir, 'sandboxes');
    assert.ok(readdirSync(base).length >= 1);
    assert.equal(statfsSync(join(base, readdirSync(base)[0])).type, BTRFS_MAGIC);
    d.proc.kill('SIGKILL');
    await d.exited;
    assert.ok(isMounted(base), 'the mount stays after a crash');
    d = await startAbxd({ stateDir: d.stateDir, key: d.key, env: { ABX_POOL: '0' } });
    try {
      assert.match(d.log, /mounted by an earlier run/);
      assert.match(d.log, /reclaimed \d+ sandbox/);
      assert.deepEqual(readdirSync(base), []);
      const b = await createSandbox(d, { disk_mb: 30 });
      const r = await sh(d, b.id, 'dd if=/dev/zero of=f bs=1M count=25 2>&1; echo "rc=$?"');
      assert.match(r.out, /rc=0/, 'the old sandbox\'s space is free again');
      await killSandbox(d, b.id);
    } finally {
      await d.stop({ keepState: true });
    }
    assert.ok(!isMounted(base), 'a clean exit unmounts');
    rmSync(d.stateDir, { recursive: true, force: true });
  });
});
