// privsep.test.mjs - abxd split in two (ABX_PRIVSEP=1, docs/security.md):
// the process that serves HTTP and parses every request is unprivileged and
// confined, the privileged parent does the jail operations, a killed
// network process is started again on the same port and nothing a client
// was told is stored goes missing.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  lstatSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, readlinkSync, realpathSync, rmSync, statSync,
  symlinkSync, writeFileSync,
} from 'node:fs';
import { spawnSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startAbxd, createSandbox, killSandbox, exec, sh, api, until, isRoot, parseNdjson } from './lib.mjs';

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
    // with only the capabilities the jail operations need, bounding set included
    const bit = (mask, n) => (BigInt('0x' + mask) >> BigInt(n)) & 1n;
    for (const [name, n] of [['SYS_ADMIN', 21], ['SETUID', 7], ['KILL', 5], ['NET_ADMIN', 12]])
      assert.equal(bit(p.CapEff, n), 1n, name);
    for (const [name, n] of [['SYS_MODULE', 16], ['SYS_RAWIO', 17], ['SYS_BOOT', 22], ['SYS_TIME', 25],
      ['MAC_ADMIN', 33], ['SYSLOG', 34], ['BPF', 39], ['PERFMON', 38], ['NET_BIND_SERVICE', 10]]) {
      assert.equal(bit(p.CapEff, n), 0n, `no ${name}`);
      assert.equal(bit(p.CapBnd, n), 0n, `no ${name} in the bounding set`);
    }
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

test('a warm workspace is taken over by the next network process: what it wrote unflushed is saved', { skip }, async () => {
  const d = await split();
  try {
    const id = (await api(d, 'POST', '/v1/workspaces', {})).json.id;
    const wx = async (script) => {
      const r = await api(d, 'POST', `/v1/workspaces/${id}/exec`, { argv: ['/bin/sh', '-c', script] });
      assert.equal(r.status, 200, r.text);
      return r.text;
    };
    await wx('echo a > a.txt; echo gone > gone.txt; mkdir -p d && echo in > d/in.txt');
    assert.equal((await api(d, 'POST', `/v1/workspaces/${id}/flush`, '')).status, 200);
    // changed, made and deleted after the last mirror, then the crash
    await wx('echo a2 > a.txt; echo new > new.txt; rm gone.txt; sleep 300 >/dev/null 2>&1 &');
    const net = netPid(d.proc.pid);
    process.kill(net, 'SIGKILL');
    const ok = await until(async () => {
      const p = netPid(d.proc.pid);
      if (!p || p === net) return false;
      try {
        return (await api(d, 'GET', '/readyz')).status === 200;
      } catch {
        return false;
      }
    });
    assert.ok(ok, 'ready again');
    assert.match(d.log, new RegExp(`workspace=${id}: its sandbox taken over`));
    const f = await api(d, 'POST', `/v1/workspaces/${id}/flush`, '');
    assert.equal(f.status, 200, f.text);
    const m = await api(d, 'GET', `/v1/workspaces/${id}/manifest`);
    const files = new Set(m.json.entries.filter((e) => e.type === 'file').map((e) => e.path));
    assert.ok(files.has('/a.txt') && files.has('/new.txt') && files.has('/d/in.txt'), [...files].join());
    assert.ok(!files.has('/gone.txt'), 'what it deleted is gone from the store too');
    // warm with the same sandbox: its process still runs
    const info = await api(d, 'GET', `/v1/workspaces/${id}`);
    assert.equal(info.json.state, 'warm');
    const out = parseNdjson(await wx('cat a.txt new.txt; pgrep -x sleep >/dev/null && echo sleeping'));
    assert.equal(out.stdout.toString(), 'a2\nnew\nsleeping\n');
    assert.equal((await api(d, 'POST', `/v1/workspaces/${id}/close`, '')).status, 200);
    const cold = await api(d, 'GET', `/v1/workspaces/${id}/files/a.txt`);
    assert.equal(cold.text, 'a2\n');
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

// POST /v1/templates with the tar of a directory holding yaml: its NDJSON.
async function build(d, yaml) {
  const dir = mkdtempSync(join(tmpdir(), 'abx-ps-tpl-'));
  writeFileSync(join(dir, 'sandbox-template.yaml'), yaml);
  const tar = spawnSync('tar', ['-C', dir, '-cf', '-', '.']).stdout;
  rmSync(dir, { recursive: true, force: true });
  const r = await api(d, 'POST', '/v1/templates', tar, { headers: { 'content-type': 'application/x-tar' } });
  assert.equal(r.status, 200, r.text);
  const lines = r.text.split('\n').filter(Boolean).map((l) => JSON.parse(l));
  return lines[lines.length - 1];
}

test('templates build and stack through the parent: layers are root\'s, named, collected; ones made in place before move', { skip }, async () => {
  const state = mkdtempSync(join(tmpdir(), 'abx-it-'));
  // a layer as abxd made them before its layers directory: fs/ in place
  const old = join(state, 'templates', 'old', 'layer-1700000000000');
  for (const p of ['usr/local/share', 'etc']) mkdirSync(join(old, 'fs', p), { recursive: true });
  writeFileSync(join(old, 'fs/usr/local/share/old.txt'), 'from-old\n');
  // a top that is a link: never followed to the host when mounted
  const secret = mkdtempSync(join(tmpdir(), 'abx-ps-host-'));
  writeFileSync(join(secret, 'marker'), 'host\n');
  symlinkSync(secret, join(old, 'fs/opt'));
  mkdirSync(join(old, 'template'));
  writeFileSync(join(old, 'template/sandbox-template.yaml'), 'name: old\ndescription: built in place\n');
  writeFileSync(join(old, 'lowers'), '');
  writeFileSync(join(old, 'digest'), '0'.repeat(64));
  symlinkSync('layer-1700000000000', join(state, 'templates/old/current'));
  let d = await startAbxd({ stateDir: state, env: { ABX_PRIVSEP: '1' } });
  try {
    const layers = join(realpathSync(state), 'layers');
    assert.ok(lstatSync(join(old, 'fs')).isSymbolicLink(), 'moved');
    assert.ok(readlinkSync(join(old, 'fs')).startsWith(layers + '/'));
    assert.equal(statSync(join(old, 'fs')).uid, 0);
    assert.equal(statSync(layers).mode & 0o777, 0o755);
    const a = await createSandbox(d, { template: 'old' });
    assert.equal((await sh(d, a.id, 'cat /usr/local/share/old.txt')).out, 'from-old\n');
    assert.equal((await sh(d, a.id, 'test -e /opt/marker && echo leaked || echo kept', { user: 'root' })).out, 'kept\n');

    // a build: the network process writes the description, the parent the layer
    const yaml = (v) => `name: fresh\nsteps:\n  - run: mkdir -p /opt/fresh && echo ${v} > /opt/fresh/f && chmod u+s /opt/fresh/f\n`;
    assert.equal((await build(d, yaml('one'))).done, true);
    const l1 = realpathSync(join(state, 'templates/fresh/current/fs'));
    assert.ok(l1.startsWith(layers + '/'), l1);
    const f = statSync(join(l1, 'opt/fresh/f'));
    assert.equal(f.uid, 0, 'the sandbox\'s root is root in the layer');
    assert.equal(f.mode & 0o4000, 0, 'no set-id bit survives');
    const net = netPid(d.proc.pid);
    const nuid = Number(status(net).Uid.split(/\s+/)[0]);
    assert.equal(statSync(join(state, 'templates/fresh')).uid, nuid);
    assert.equal(statSync(l1).uid, 0);
    const b = await createSandbox(d, { template: 'fresh' });
    assert.equal((await sh(d, b.id, 'cat /opt/fresh/f')).out, 'one\n');
    // the sandbox's writes stay its own
    assert.equal((await sh(d, b.id, 'echo mine > /opt/fresh/f && cat /opt/fresh/f', { user: 'root' })).out, 'mine\n');
    assert.equal(readFileSync(join(l1, 'opt/fresh/f'), 'utf8'), 'one\n');

    // a network process killed and started again builds and stacks the same
    process.kill(net, 'SIGKILL');
    const next = await until(() => {
      const p = netPid(d.proc.pid);
      return p && p !== net ? p : 0;
    });
    assert.ok(next > 0);
    await until(async () => {
      try {
        return (await api(d, 'GET', '/readyz')).status === 200;
      } catch {
        return false;
      }
    });
    assert.equal((await build(d, yaml('two'))).done, true);
    const l2 = realpathSync(join(state, 'templates/fresh/current/fs'));
    assert.notEqual(l2, l1);
    const c = await createSandbox(d, { template: 'fresh' });
    assert.equal((await sh(d, c.id, 'cat /opt/fresh/f')).out, 'two\n');
    assert.equal((await sh(d, b.id, 'cat /usr/local/share/x 2>/dev/null; cat /etc/hostname >/dev/null && echo alive')).out, 'alive\n');

    // a start collects the layer no template names any more: the network
    // process drops the replaced layer's description as it loads the
    // templates, the parent the layer itself at the next start
    for (let i = 0; i < 2; i++) {
      await d.stop({ keepState: true });
      d = await startAbxd({ stateDir: state, env: { ABX_PRIVSEP: '1' } });
    }
    const left = readdirSync(layers);
    assert.ok(left.includes(l2.slice(layers.length + 1)), left.join(' '));
    assert.ok(!left.includes(l1.slice(layers.length + 1)), left.join(' '));
    const e = await createSandbox(d, { template: 'old' });
    assert.equal((await sh(d, e.id, 'cat /usr/local/share/old.txt')).out, 'from-old\n');
  } finally {
    await d.stop();
    rmSync(state, { recursive: true, force: true });
    rmSync(secret, { recursive: true, force: true });
  }
});
