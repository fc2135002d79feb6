// Snapshots, fork and filesystem-only pause through the real E2B SDK 2.51:
// a snapshot keeps the writable files (home, /tmp, /root, ...) with modes,
// links and owners; new sandboxes made from it see exactly that; a hostile
// sandbox cannot make the copy read host files, follow links or hang.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { lstatSync, readdirSync, readlinkSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { setup } from './lib.mjs';

let d, Sandbox, E;
before(async () => {
  const s = await setup();
  d = s.d;
  E = s.sdk;
  Sandbox = s.sdk.Sandbox;
});
after(async () => d && (await d.stop()));

const T = { timeoutMs: 120_000 };

async function sh(sbx, cmd, opts = {}) {
  const r = await sbx.commands.run(cmd, opts);
  return r.stdout;
}

test('a snapshot keeps files, modes, links and owners; later changes are not in it', async () => {
  const a = await Sandbox.create('base', T);
  let b;
  try {
    await sh(a, [
      'set -e',
      'echo home > /home/user/h.txt && chmod 640 /home/user/h.txt',
      'mkdir -p /home/user/d/e && echo deep > /home/user/d/e/f && chmod 700 /home/user/d',
      'ln -s h.txt /home/user/link',
      'echo tmp > /tmp/t.txt',
      'mkfifo /tmp/fifo',
      'touch -d "2001-02-03 04:05:06" /home/user/old',
    ].join('\n'));
    await sh(a, 'set -e; echo rootfile > /root/r.txt; chmod 600 /root/r.txt; echo x > /tmp/rootowned; mkdir -p /opt/app && echo o > /opt/app/o', { user: 'root' });
    const snap = await a.createSnapshot({ name: 'snap-one' });
    assert.match(snap.snapshotId, /^snap-[a-z0-9]+$/);
    assert.deepEqual(snap.names, ['snap-one']);
    await sh(a, 'echo changed > /home/user/h.txt; echo new > /home/user/after.txt; rm /tmp/t.txt');

    b = await Sandbox.create(snap.snapshotId, T);
    assert.notEqual(b.sandboxId, a.sandboxId);
    assert.equal(await sh(b, 'cat /home/user/h.txt /home/user/d/e/f /tmp/t.txt'), 'home\ndeep\ntmp\n');
    assert.equal(await sh(b, 'stat -c "%a %U %G" /home/user/h.txt /home/user/d /tmp/rootowned'),
      '640 user user\n700 user user\n644 root root\n');
    assert.equal(await sh(b, 'readlink /home/user/link; test -L /home/user/link && echo link'), 'h.txt\nlink\n');
    assert.equal(await sh(b, 'test -p /tmp/fifo && echo fifo'), 'fifo\n');
    assert.equal(await sh(b, 'date -u -r /home/user/old +%Y'), '2001\n');
    assert.equal(await sh(b, 'test -e /home/user/after.txt || echo absent'), 'absent\n');
    assert.equal(await sh(b, 'cat /root/r.txt; stat -c "%a %U" /root/r.txt; cat /opt/app/o', { user: 'root' }),
      'rootfile\n600 root\no\n');
    // The original is unaffected and still runs.
    assert.equal(await sh(a, 'cat /home/user/h.txt'), 'changed\n');
    // Created by name too (the newest snapshot of that name).
    const c = await Sandbox.create('snap-one', T);
    assert.equal(await sh(c, 'cat /home/user/h.txt'), 'home\n');
    await c.kill();
  } finally {
    await a.kill();
    if (b) await b.kill();
  }
});

test('list, paginate and delete snapshots; a deleted one cannot be used', async () => {
  const a = await Sandbox.create('base', T);
  try {
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push((await a.createSnapshot()).snapshotId);
    const mine = await a.listSnapshots().nextItems();
    assert.deepEqual(mine.map((s) => s.snapshotId).sort(), [...ids].sort());
    for (const s of mine) assert.deepEqual(s.names, []);
    const p = Sandbox.listSnapshots({ sandboxId: a.sandboxId, limit: 2 });
    const first = await p.nextItems();
    assert.equal(first.length, 2);
    assert.equal(p.hasNext, true);
    const second = await p.nextItems();
    assert.equal(second.length, 1);
    assert.equal(p.hasNext, false);
    assert.deepEqual([...first, ...second].map((s) => s.snapshotId).sort(), [...ids].sort());
    const all = await Sandbox.listSnapshots().nextItems();
    for (const id of ids) assert.ok(all.some((s) => s.snapshotId === id));
    assert.equal((await Sandbox.listSnapshots({ name: 'no-such-name' }).nextItems()).length, 0);

    assert.equal(await Sandbox.deleteSnapshot(ids[0]), true);
    assert.equal(await Sandbox.deleteSnapshot(ids[0]), false);
    assert.equal(await Sandbox.deleteSnapshot('snap-nosuchthing'), false);
    assert.equal(await Sandbox.deleteSnapshot('../../etc'), false);
    assert.equal((await a.listSnapshots().nextItems()).length, 2);
    await assert.rejects(Sandbox.create(ids[0], T), (e) => e instanceof E.SandboxError && /404|not found/.test(e.message));
    await assert.rejects(Sandbox.createSnapshot('nosuchsandbox'), E.SandboxNotFoundError);
  } finally {
    await a.kill();
  }
});

test('fork makes independent sandboxes with the files', async () => {
  const a = await Sandbox.create('base', T);
  const forks = [];
  try {
    await sh(a, 'echo forked > /home/user/f.txt; echo t > /tmp/t');
    const before = (await Sandbox.listSnapshots().nextItems()).length;
    const res = await Sandbox.fork(a.sandboxId, { count: 2, timeoutMs: 60_000 });
    assert.equal(res.length, 2);
    for (const f of res) {
      assert.ok(f instanceof Sandbox, String(f));
      forks.push(f);
    }
    assert.notEqual(forks[0].sandboxId, forks[1].sandboxId);
    for (const f of forks) {
      assert.notEqual(f.sandboxId, a.sandboxId);
      assert.equal(await sh(f, 'cat /home/user/f.txt /tmp/t'), 'forked\nt\n');
    }
    await sh(forks[0], 'echo only0 > /home/user/only');
    assert.equal(await sh(forks[1], 'test -e /home/user/only || echo absent'), 'absent\n');
    assert.equal(await sh(a, 'test -e /home/user/only || echo absent'), 'absent\n');
    // The fork's own snapshot is not listed and is gone afterwards.
    assert.equal((await Sandbox.listSnapshots().nextItems()).length, before);
    const one = await a.fork();
    assert.equal(one.length, 1);
    assert.ok(one[0] instanceof Sandbox);
    forks.push(one[0]);
    await assert.rejects(Sandbox.fork('nosuchsandbox'), E.SandboxNotFoundError);
    await assert.rejects(Sandbox.fork(a.sandboxId, { count: 11 }), /400/);
  } finally {
    await a.kill();
    for (const f of forks) await f.kill();
  }
});

test('a hostile sandbox cannot make a snapshot read host files, follow links or hang', async () => {
  const h = await Sandbox.create('base', T);
  let c;
  try {
    await sh(h, [
      'set -e',
      'cd /home/user',
      'ln -s loop1 loop2 && ln -s loop2 loop1',
      'ln -s /etc/shadow shadow',
      'ln -s / rootlink',
      'ln -s /proc/1/root procroot',
      'mkfifo fifo',
      'mkdir -p deep && cd deep && for i in $(seq 1 40); do mkdir d && cd d; done',
      'mkdir /tmp/huge && cd /tmp/huge && for i in $(seq 1 300); do mkdir d && cd d; done',
      'truncate -s 5G /tmp/holes', // all hole: costs the snapshot nothing
    ].join('\n'));
    const t0 = Date.now();
    await assert.rejects(h.createSnapshot(),
      (e) => e instanceof E.SandboxError && /507/.test(e.message) && /deeper than 256 levels/.test(e.message));
    assert.ok(Date.now() - t0 < 20_000);
    // Refused, and the sandbox was thawed: it runs on.
    assert.equal(await sh(h, 'rm -r /tmp/huge && echo ok'), 'ok\n');
    const s = await h.createSnapshot();
    const root = join(d.stateDir, 'snapshots', s.snapshotId, 'root', 'home', 'user');
    assert.equal(readlinkSync(join(root, 'shadow')), '/etc/shadow');
    assert.ok(lstatSync(join(root, 'shadow')).isSymbolicLink());
    assert.ok(lstatSync(join(root, 'rootlink')).isSymbolicLink());
    assert.ok(lstatSync(join(root, 'procroot')).isSymbolicLink());
    assert.ok(lstatSync(join(root, 'fifo')).isFIFO());
    // Owners are stored as in-sandbox ids (user = 1000).
    assert.equal(lstatSync(join(root, 'fifo')).uid, 1000);
    assert.ok(!existsSync(join(d.stateDir, 'snapshots', s.snapshotId, 'root', 'etc')));
    assert.ok(!readdirSync(join(d.stateDir, 'snapshots', s.snapshotId, 'root')).includes('proc'));
    c = await Sandbox.create(s.snapshotId, T);
    assert.equal(await sh(c, 'readlink /home/user/shadow /home/user/loop1; test -p /home/user/fifo && echo fifo'),
      '/etc/shadow\nloop2\nfifo\n');
  } finally {
    await h.kill();
    if (c) await c.kill();
  }
});

// A 10 GiB sparse file with a few data extents, in the home (host disk)
// and in /tmp (tmpfs): snapshot and restore keep its bytes and its holes.
test('a 10 GiB sparse file survives snapshot and restore, and stays sparse', async () => {
  const a = await Sandbox.create('base', T);
  let b;
  // Size, allocated bytes and a digest of every data extent (SEEK_DATA).
  const probe = (p) => `python3 -c "
import os, hashlib
fd = os.open('${p}', os.O_RDONLY); st = os.fstat(fd); off = 0; out = []
while True:
    try: d = os.lseek(fd, off, os.SEEK_DATA)
    except OSError: break
    h = os.lseek(fd, d, os.SEEK_HOLE)
    out.append('%d+%d:%s' % (d, h - d, hashlib.sha256(os.pread(fd, h - d, d)).hexdigest()[:16]))
    off = h
print(st.st_size, st.st_blocks * 512 < (4 << 20), ' '.join(out))"`;
  const make = (p) => `python3 -c "
import os
fd = os.open('${p}', os.O_WRONLY | os.O_CREAT, 0o640); os.ftruncate(fd, 10 << 30)
for i, off in enumerate([0, 3 << 30, 7 << 30, (10 << 30) - 65536]):
    os.pwrite(fd, bytes([65 + i]) * 65536, off)"`;
  try {
    await sh(a, `${make('/home/user/sparse.img')} && ${make('/tmp/sparse.img')}`);
    const want = await sh(a, `${probe('/home/user/sparse.img')} && ${probe('/tmp/sparse.img')}`);
    assert.match(want, /^10737418240 True 0\+65536:\S+ 3221225472\+65536:\S+ 7516192768\+65536:\S+ 10737352704\+65536:\S+\n/);
    const t0 = Date.now();
    const snap = await a.createSnapshot();
    assert.ok(Date.now() - t0 < 30_000, `snapshot took ${Date.now() - t0} ms`);
    // Sparse on the host too.
    const stored = lstatSync(join(d.stateDir, 'snapshots', snap.snapshotId, 'root', 'home', 'user', 'sparse.img'));
    assert.equal(stored.size, 10 * 2 ** 30);
    assert.ok(stored.blocks * 512 < 4 << 20, `${stored.blocks} blocks in the snapshot`);
    b = await Sandbox.create(snap.snapshotId, T);
    assert.equal(await sh(b, `${probe('/home/user/sparse.img')} && ${probe('/tmp/sparse.img')}`), want);
    assert.equal(await sh(b, 'stat -c "%a %U" /home/user/sparse.img'), '640 user\n');
  } finally {
    await a.kill();
    if (b) await b.kill();
  }
});

test('pause without memory keeps files only; connect boots anew with the same id and token', async () => {
  const sbx = await Sandbox.create('base', { ...T, metadata: { cold: 'yes' } });
  try {
    const boot = await sh(sbx, 'cat /proc/sys/kernel/random/boot_id');
    assert.match(boot, /^[0-9a-f-]{36}\n$/);
    await sh(sbx, 'echo kept > /home/user/k.txt; echo t > /tmp/t');
    await sbx.commands.run('sleep 600', { background: true });
    assert.equal(await sbx.pause({ keepMemory: false }), true);
    assert.equal(await sbx.isRunning(), false);
    const info = await sbx.getInfo();
    assert.equal(info.state, 'paused');
    assert.equal(info.sandboxId, sbx.sandboxId);
    assert.deepEqual(info.metadata, { cold: 'yes' });
    assert.equal(await sbx.pause({ keepMemory: false }), false); // already paused: 409
    const paused = await Sandbox.list({ query: { state: ['paused'], metadata: { cold: 'yes' } } }).nextItems();
    assert.deepEqual(paused.map((s) => s.sandboxId), [sbx.sandboxId]);
    assert.equal((await Sandbox.list({ query: { state: ['running'], metadata: { cold: 'yes' } } }).nextItems()).length, 0);
    // Its snapshot is internal: not listed.
    assert.equal((await sbx.listSnapshots().nextItems()).length, 0);

    const back = await Sandbox.connect(sbx.sandboxId, { timeoutMs: 60_000 });
    assert.equal(back.sandboxId, sbx.sandboxId);
    assert.equal(back.envdAccessToken, sbx.envdAccessToken);
    assert.equal(await sbx.isRunning(), true);
    assert.equal(await sh(sbx, 'cat /home/user/k.txt /tmp/t'), 'kept\nt\n');
    assert.equal(await sh(sbx, 'pgrep -x sleep || echo none'), 'none\n');
    assert.notEqual(await sh(sbx, 'cat /proc/sys/kernel/random/boot_id'), boot);
    const again = await Sandbox.getInfo(sbx.sandboxId);
    assert.equal(again.state, 'running');
    assert.equal(again.startedAt.getTime(), info.startedAt.getTime());
    // A second round, then kill while paused.
    await sh(sbx, 'echo two > /home/user/k.txt');
    assert.equal(await sbx.pause({ keepMemory: false }), true);
    await sbx.connect();
    assert.equal(await sh(sbx, 'cat /home/user/k.txt'), 'two\n');
    assert.equal(await sbx.pause({ keepMemory: false }), true);
  } finally {
    assert.equal(await sbx.kill(), true);
  }
  await assert.rejects(Sandbox.getInfo(sbx.sandboxId), E.SandboxNotFoundError);
  await assert.rejects(Sandbox.connect(sbx.sandboxId), E.SandboxNotFoundError);
  assert.equal(await Sandbox.kill(sbx.sandboxId), false);
});

test('a resumed sandbox ends like any other', async () => {
  const sbx = await Sandbox.create('base', T);
  assert.equal(await sbx.pause({ keepMemory: false }), true);
  await sbx.connect();
  assert.equal(await sbx.isRunning(), true);
  assert.equal(await sbx.kill(), true);
  assert.equal(await sbx.isRunning(), false);
  await assert.rejects(Sandbox.getInfo(sbx.sandboxId), E.SandboxNotFoundError);
});
