// uidpool.test.mjs - two abxd on one host never give sandboxes overlapping
// host uid ranges, even when their ABX_UID_BASE differ by half a range.
//
// Both daemons share a lock file of this test's own (ABX_UID_LOCK), so other
// abxd on the machine neither disturb nor are disturbed by it, and a base far
// above the default pool. Each daemon creates sandboxes in turn until both
// are full; every sandbox's range is read on the host (the owner of a file
// its root creates) and in the sandbox (/proc/self/uid_map), and no two may
// share a uid. Needs root.
import { test, describe, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, readdirSync, existsSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes, randomInt } from 'node:crypto';
import { startAbxd, api, sh, isRoot } from './lib.mjs';

const skip = !isRoot && 'needs root';
const RANGE = 65536;
const SLOTS = 3;

// The host uid of sandbox root: the owner, on the host, of a file it made.
async function hostRootUid(d, id) {
  const name = 'uidprobe-' + randomBytes(6).toString('hex');
  const r = await sh(d, id, `touch /home/user/${name}`, { user: 'root' });
  assert.equal(r.code, 0, r.err);
  const base = join(d.stateDir, 'sandboxes');
  for (const j of readdirSync(base)) {
    const p = join(base, j, 'home', name);
    if (existsSync(p)) return statSync(p).uid;
  }
  assert.fail('probe file not found on the host');
}

// The map the kernel applies, as the sandbox sees it: "0 <first> <count>".
async function uidMap(d, id) {
  const r = await sh(d, id, 'cat /proc/self/uid_map');
  assert.equal(r.code, 0, r.err);
  const f = r.out.trim().split(/\s+/).map(Number);
  assert.equal(f.length, 3, r.out);
  return { inside: f[0], first: f[1], count: f[2] };
}

describe('uid pool across daemons', { skip }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'abx-it-uidpool-'));
  const daemons = [];
  after(async () => {
    for (const d of daemons) await d.stop(); // kills their sandboxes
    rmSync(dir, { recursive: true, force: true });
  });

  test('bases half a range apart: ranges never overlap', async () => {
    // Far from the default pool (0x40000000..) other daemons use; random so
    // that two runs of this test side by side do not meet either.
    const base = 0xc0000000 + randomInt(512) * 16 * RANGE;
    const lock = join(dir, 'uid-pool.lock');
    for (const b of [base, base + RANGE / 2]) {
      daemons.push(
        await startAbxd({
          env: {
            ABX_UID_LOCK: lock,
            ABX_UID_BASE: String(b),
            ABX_UID_SLOTS: String(SLOTS),
            ABX_POOL: '0',
            ABX_TMP_MB: '8',
            ABX_ROOTFS_MB: '8',
          },
        }),
      );
    }
    const got = [];
    const full = [false, false];
    for (let round = 0; round < 2 * SLOTS + 2 && !(full[0] && full[1]); round++) {
      // The shifted daemon first: its slot i then sits under the other's
      // slot i+1, which locks by slot index did not see.
      const k = (round + 1) % 2;
      if (full[k]) continue;
      const d = daemons[k];
      const r = await api(d, 'POST', '/v1/sandboxes', { memory_mb: 64, pids: 32 });
      if (r.status === 429) {
        full[k] = true;
        continue;
      }
      assert.equal(r.status, 201, r.text);
      const id = r.json.id;
      const first = await hostRootUid(d, id);
      const map = await uidMap(d, id);
      assert.deepEqual(map, { inside: 0, first, count: RANGE });
      got.push({ daemon: k, id, first });
    }
    assert.ok(full[0] && full[1], 'both daemons ran out of free ranges');
    assert.ok(got.some((g) => g.daemon === 0) && got.some((g) => g.daemon === 1), JSON.stringify(got));
    for (let i = 0; i < got.length; i++)
      for (let j = i + 1; j < got.length; j++) {
        const a = got[i].first, b = got[j].first;
        assert.ok(
          a + RANGE <= b || b + RANGE <= a,
          `sandboxes ${got[i].id} (abxd ${got[i].daemon}, uids ${a}..) and ` +
            `${got[j].id} (abxd ${got[j].daemon}, uids ${b}..) share host uids`,
        );
      }

    // A range one daemon frees, the other can take.
    const mine = got.find((g) => g.daemon === 0);
    const del = await api(daemons[0], 'DELETE', `/v1/sandboxes/${mine.id}`);
    assert.equal(del.status, 204, del.text);
    let taken = null;
    for (let i = 0; i < 100 && !taken; i++) {
      const r = await api(daemons[1], 'POST', '/v1/sandboxes', { memory_mb: 64, pids: 32 });
      if (r.status === 201) taken = r.json.id;
      else {
        assert.equal(r.status, 429, r.text);
        await new Promise((res) => setTimeout(res, 50)); // teardown frees the range last
      }
    }
    assert.ok(taken, 'the freed range became available to the other daemon');
    const first = await hostRootUid(daemons[1], taken);
    for (const g of got)
      if (g.id !== mine.id) assert.ok(first + RANGE <= g.first || g.first + RANGE <= first);
  });
});
