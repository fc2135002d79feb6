// fulldisk.test.mjs - abxd on a full state file system.
//
// The state directory lives on a 48 MiB tmpfs this test mounts (and
// unmounts). abxd keeps a reserve there (ABX_RESERVE_MB); with the file
// system filled to the last byte it must still start (writing nothing that
// a previous start left correct, giving up the reserve), answer its probes,
// and free space through the API: delete a workspace, run the store's GC.
// When space comes back the reserve is re-created. A second case restarts
// abxd on an ordinary directory and checks that nothing it wrote at the
// first start (abx-sudo, the generated /etc) is written again. Needs root.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  mkdtempSync,
  rmSync,
  statSync,
  statfsSync,
  openSync,
  writeSync,
  closeSync,
  unlinkSync,
  existsSync,
  readdirSync,
} from 'node:fs';
import { spawnSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startAbxd, api, isRoot, sleep, abxdBin } from './lib.mjs';

const skip = !isRoot && 'needs root';
const MiB = 1024 * 1024;
const RESERVE_MB = 8;

// Writes a filler file until the file system has not one byte left.
function fill(dir) {
  const path = join(dir, 'filler');
  const fd = openSync(path, 'w');
  for (const size of [MiB, 4096, 1]) {
    const chunk = Buffer.alloc(size);
    for (;;) {
      try {
        writeSync(fd, chunk);
      } catch (e) {
        if (e.code !== 'ENOSPC') throw e;
        break;
      }
    }
  }
  closeSync(fd);
  return path;
}

async function waitFor(what, fn, ms = 15000) {
  const end = Date.now() + ms;
  for (;;) {
    if (await fn()) return;
    if (Date.now() > end) assert.fail(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

describe('full state file system', { skip }, () => {
  let mnt;
  let d = null;
  before(() => {
    mnt = mkdtempSync(join(tmpdir(), 'abx-it-fulldisk-'));
    // 0711: searchable by abxd's network process when split (ABX_PRIVSEP=1)
    const m = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=48m,mode=0711', 'tmpfs', mnt], { encoding: 'utf8' });
    assert.equal(m.status, 0, `cannot mount a tmpfs: ${m.stderr}`);
  });
  after(async () => {
    if (d) await d.stop({ keepState: true });
    if (spawnSync('umount', [mnt]).status !== 0) spawnSync('umount', ['-l', mnt]);
    rmSync(mnt, { recursive: true, force: true });
  });

  test('starts with 0 bytes free, deletes a workspace, runs GC, re-creates its reserve', async () => {
    const stateDir = join(mnt, 'state');
    // The state directory is a 48 MiB tmpfs: no room for the sandboxes'
    // disk image (item 13) nor for its 512 MiB floor; this test is about
    // the reserve, so both are off.
    const env = {
      ABX_RESERVE_MB: String(RESERVE_MB),
      ABX_POOL: '0',
      ABX_MIRROR_WINDOW_S: '2',
      ABX_DISK_MB: '0',
      ABX_DISK_FLOOR_MB: '0',
    };
    d = await startAbxd({ stateDir, env });
    let r = await api(d, 'POST', '/v1/workspaces', { id: 'full-1' });
    assert.equal(r.status, 201, r.text);
    const body = Buffer.alloc(2 * MiB, 'a');
    r = await api(d, 'PUT', '/v1/workspaces/full-1/files/data.bin', body);
    assert.equal(r.status, 201, r.text);
    await d.stop({ keepState: true });
    d = null;

    const filler = fill(mnt);
    assert.equal(statfsSync(mnt).bfree, 0, 'the file system is full');

    d = await startAbxd({ stateDir, env });
    assert.match(d.log, new RegExp(`released the ${RESERVE_MB} MiB reserve`));
    assert.ok(!existsSync(join(stateDir, 'reserve')));
    assert.equal((await api(d, 'GET', '/healthz', undefined, { auth: false })).status, 200);
    r = await api(d, 'GET', '/readyz', undefined, { auth: false });
    assert.equal(r.status, 200, r.text);
    r = await api(d, 'GET', '/v1/workspaces/full-1/files/data.bin');
    assert.equal(r.status, 200, r.text);
    assert.equal(r.buf.length, body.length);

    r = await api(d, 'DELETE', '/v1/workspaces/full-1');
    assert.equal(r.status, 204, r.text);
    r = await api(d, 'POST', '/v1/store/gc');
    assert.equal(r.status, 200, r.text);
    if (r.json.held_lease) assert.ok(r.json.bytes_freed >= body.length, r.text);
    assert.equal((await api(d, 'GET', '/v1/workspaces/full-1')).status, 404);

    // Space comes back: the reserve does too, whole, and says so.
    unlinkSync(filler);
    await waitFor('the reserve', () => existsSync(join(stateDir, 'reserve')));
    const st = statSync(join(stateDir, 'reserve'));
    assert.equal(st.size, RESERVE_MB * MiB);
    assert.ok(st.blocks * 512 >= RESERVE_MB * MiB, 'allocated, not sparse');
    await waitFor('the log line', () => /re-created the 8 MiB reserve/.test(d.log));
    await d.stop({ keepState: true });
    d = null;
  });

  test('a restart writes nothing a previous start left correct', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'abx-it-restart-'));
    try {
      const env = { ABX_POOL: '0', ABX_RESERVE_MB: '1', ABX_DISK_MB: '0', ABX_DISK_FLOOR_MB: '0' };
      let a = await startAbxd({ stateDir, env });
      await a.stop({ keepState: true });
      const names = ['abx-sudo', 'etc', 'etc/passwd', 'etc/profile.d/zz-abx-tools.sh', 'reserve'].filter((n) =>
        existsSync(join(stateDir, n)),
      );
      const before = Object.fromEntries(names.map((n) => [n, statSync(join(stateDir, n))]));
      const etcNames = readdirSync(join(stateDir, 'etc')).sort();
      a = await startAbxd({ stateDir, env });
      try {
        for (const n of names) {
          const s = statSync(join(stateDir, n));
          assert.equal(s.ino, before[n].ino, `${n} was replaced`);
          assert.equal(s.mtimeMs, before[n].mtimeMs, `${n} was rewritten`);
        }
        assert.deepEqual(readdirSync(join(stateDir, 'etc')).sort(), etcNames);
        assert.ok(names.includes('reserve'), 'the first start made a reserve');
        assert.equal((await api(a, 'GET', '/readyz', undefined, { auth: false })).status, 200);
      } finally {
        await a.stop({ keepState: true });
      }
    } finally {
      rmSync(stateDir, { recursive: true, force: true });
    }
  });

  test('a bad ABX_RESERVE_MB is refused with a clear message', async () => {
    for (const v of ['abc', '-1', '2000000']) {
      const r = spawnSync(abxdBin, ['--listen', '127.0.0.1:0'], {
        env: { PATH: process.env.PATH, ABX_RESERVE_MB: v, ABX_STATE_DIR: '/proc/abx-never' },
        encoding: 'utf8',
        timeout: 10000,
      });
      assert.equal(r.status, 2, r.stderr);
      assert.match(r.stderr, /ABX_RESERVE_MB must be an integer from 0 to 1048576/);
    }
  });
});
