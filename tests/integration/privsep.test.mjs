// privsep.test.mjs - abxd split in two (ABX_PRIVSEP=1, docs/security.md):
// the process that serves HTTP and parses every request is unprivileged and
// confined, the privileged parent does the jail operations, a killed
// network process is started again on the same port and nothing a client
// was told is stored goes missing.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { startAbxd, createSandbox, killSandbox, exec, sh, api, until, isRoot } from './lib.mjs';

const skip = !isRoot && 'needs root (namespaces, cgroups)';

// /proc/<pid>/status as {Field: value}.
function status(pid) {
  const out = {};
  for (const line of readFileSync(`/proc/${pid}/status`, 'utf8').split('\n')) {
    const i = line.indexOf(':');
    if (i > 0) out[line.slice(0, i)] = line.slice(i + 1).trim();
  }
  return out;
}

// The parent's child that runs the network role, or 0.
function netPid(parent) {
  for (const e of readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const stat = readFileSync(`/proc/${e}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      const argv = readFileSync(`/proc/${e}/cmdline`, 'utf8').split('\0');
      if (ppid === parent && argv[1] === '--role=net') return Number(e);
    } catch {
      // gone meanwhile
    }
  }
  return 0;
}

function split() {
  return startAbxd({ env: { ABX_PRIVSEP: '1' } });
}

test('the process that serves HTTP has no privilege; the parent keeps root', { skip }, async () => {
  const d = await split();
  try {
    const net = await until(() => netPid(d.proc.pid));
    assert.ok(net > 0, 'a network process runs');
    const s = status(net);
    const uid = s.Uid.split(/\s+/).map(Number);
    assert.ok(uid.every((u) => u !== 0), `uid ${s.Uid}`);
    assert.ok(s.Gid.split(/\s+/).every((g) => g !== '0'), `gid ${s.Gid}`);
    assert.equal(s.Groups, '');
    for (const k of ['CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb']) assert.equal(BigInt('0x' + s[k]), 0n, k);
    assert.equal(s.NoNewPrivs, '1');
    assert.equal(s.Seccomp, '2');
    // not dumpable: /proc/<pid>/ is root's then
    const p = status(d.proc.pid);
    assert.equal(p.Uid.split(/\s+/)[0], '0', 'the parent is root');
    // The HTTP socket is the network process's; the parent holds it only
    // to hand to the next one, and reads nothing from it.
    assert.match(d.log, /network process confined \(Landlock ABI \d+\)/);
  } finally {
    await d.stop();
  }
});

test('sandboxes work through the parent: exec, files as the sandbox user, info', { skip }, async () => {
  const d = await split();
  try {
    const sb = await createSandbox(d, { memory_mb: 128 });
    const r = await sh(d, sb.id, 'id -u; cat /proc/self/status | grep ^CapEff');
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /^1000\n/);
    const up = await api(d, 'PUT', `/v1/sandboxes/${sb.id}/files/a.txt`, 'split hello');
    assert.ok(up.status === 201 || up.status === 200, up.text);
    const down = await api(d, 'GET', `/v1/sandboxes/${sb.id}/files/a.txt`);
    assert.equal(down.text, 'split hello');
    // owned by the sandbox's user, whoever wrote it
    const ls = await sh(d, sb.id, 'stat -c %u /home/user/a.txt');
    assert.equal(ls.out, '1000\n');
    // a file only the sandbox's root may read, read as its user: refused
    await sh(d, sb.id, 'echo s > /home/user/x; chmod 600 /home/user/x', { user: 'root' });
    const no = await api(d, 'GET', `/v1/sandboxes/${sb.id}/files/x`);
    assert.ok(no.status === 403 || no.status === 404, `${no.status} ${no.text}`);
    const st = await api(d, 'GET', `/v1/sandboxes/${sb.id}`);
    assert.equal(st.status, 200);
    await killSandbox(d, sb.id);
  } finally {
    await d.stop();
  }
});

test('a killed network process comes back on the same port; sandboxes live, stored writes stay', { skip }, async () => {
  const d = await split();
  try {
    const ws = await api(d, 'POST', '/v1/workspaces', {});
    assert.equal(ws.status, 201, ws.text);
    const id = ws.json.id;
    const body = Buffer.alloc(1 << 20, 7);
    const put = await api(d, 'PUT', `/v1/workspaces/${id}/files/keep.bin`, body);
    assert.ok(put.status === 201 || put.status === 200, put.text);
    // mid-exec: a long command is running when the network process dies
    const sb = await createSandbox(d, { timeout_s: 600, metadata: { who: 'before' } });
    assert.equal((await sh(d, sb.id, 'echo kept > /home/user/k.txt')).code, 0);
    const before = (await api(d, 'GET', `/v1/sandboxes/${sb.id}`)).json;
    // and one made through the E2B API: its envd token must stay the same
    const e2bKey = { auth: false, headers: { 'X-API-Key': d.key } };
    const ex = await api(d, 'POST', '/sandboxes', { templateID: 'base', timeout: 600 }, e2bKey);
    assert.equal(ex.status, 201, ex.text);
    const longExec = api(d, 'POST', `/v1/sandboxes/${sb.id}/exec`, { argv: ['sleep', '30'] }).catch((e) => e);
    await until(async () => (await api(d, 'GET', `/v1/sandboxes/${sb.id}`)).json?.processes > 0);
    const net = netPid(d.proc.pid);
    process.kill(net, 'SIGKILL');
    const gone = await longExec;
    assert.ok(gone instanceof Error || gone.status !== 200 || !/exit_code/.test(gone.text), 'the stream ended');
    const next = await until(() => {
      const p = netPid(d.proc.pid);
      return p && p !== net ? p : 0;
    });
    assert.ok(next > 0, 'another network process runs');
    // same port, same key, serving
    const ok = await until(async () => {
      try {
        return (await api(d, 'GET', '/readyz')).status === 200;
      } catch {
        return false;
      }
    });
    assert.ok(ok, 'ready again');
    const back = await api(d, 'GET', `/v1/workspaces/${id}/files/keep.bin`);
    assert.equal(back.status, 200);
    assert.ok(back.buf.equals(body), 'what was acknowledged is there');
    assert.match(d.log, /network process was killed by signal 9/);
    assert.equal(d.proc.exitCode, null, 'the parent lives');
    // The sandbox lives on, taken over: the same record, its files, the
    // process the dead one had started still running in it.
    const after = await api(d, 'GET', `/v1/sandboxes/${sb.id}`);
    assert.equal(after.status, 200, after.text);
    assert.equal(after.json.created_at, before.created_at);
    assert.equal(after.json.end_at, before.end_at);
    assert.deepEqual(after.json.metadata, { who: 'before' });
    assert.match(d.log, new RegExp(`sandbox=${sb.id} taken over`));
    const k = await sh(d, sb.id, 'cat /home/user/k.txt; pgrep -x sleep >/dev/null && echo sleeping');
    assert.equal(k.out, 'kept\nsleeping\n');
    const ey = await api(d, 'GET', `/sandboxes/${ex.json.sandboxID}`, undefined, e2bKey);
    assert.equal(ey.status, 200, ey.text);
    assert.equal(ey.json.envdAccessToken, ex.json.envdAccessToken);
    assert.equal(ey.json.alias ?? ey.json.templateID, ex.json.alias ?? ex.json.templateID);
    const sb2 = await createSandbox(d);
    assert.equal((await exec(d, sb2.id, ['true'])).code, 0);
    assert.equal((await api(d, 'DELETE', `/v1/sandboxes/${sb.id}`)).status, 204);
  } finally {
    await d.stop();
  }
});

test('SIGTERM drains through the network process; the parent exits with it', { skip }, async () => {
  const d = await split();
  const sb = await createSandbox(d);
  await exec(d, sb.id, ['true']);
  const net = netPid(d.proc.pid);
  const res = await d.stop();
  assert.equal(res.code, 0, d.log);
  assert.match(d.log, /passing it to the network process/);
  assert.match(d.log, /SIGTERM: draining/);
  assert.throws(() => readFileSync(`/proc/${net}/status`), 'the network process is gone');
});
