// wire.test.mjs - the native wire as documented in docs/api.md, driven over
// real HTTP against a real abxd.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { startAbxd, createSandbox, killSandbox, exec, sh, api, parseNdjson, sleep, until, isRoot } from './lib.mjs';

const skip = !isRoot && 'needs root';

function rssKb(pid) {
  const m = readFileSync(`/proc/${pid}/status`, 'utf8').match(/VmRSS:\s+(\d+)/);
  return Number(m[1]);
}

describe('sandboxes', { skip }, () => {
  let d;
  before(async () => {
    d = await startAbxd();
  });
  after(async () => d && (await d.stop()));

  test('create reflects what was asked, with timings', async () => {
    const sb = await createSandbox(d, { cpu: 0.5, memory_mb: 200, pids: 100, timeout_s: 600, metadata: { owner: 'test' } });
    try {
      assert.match(sb.id, /^[a-z0-9]{20}$/);
      assert.equal(sb.cpu, 0.5);
      assert.equal(sb.memory_mb, 200);
      assert.equal(sb.pids, 100);
      assert.equal(sb.state, 'running');
      assert.deepEqual(sb.metadata, { owner: 'test' });
      assert.equal(sb.timeout_s, 600);
      const endAt = Date.parse(sb.end_at);
      assert.ok(Math.abs(endAt - Date.parse(sb.created_at) - 600000) < 2000);
      assert.equal(typeof sb.timings.total_ms, 'number');
      const info = await api(d, 'GET', `/v1/sandboxes/${sb.id}`);
      assert.equal(info.status, 200);
      assert.ok(info.json.usage.memory_bytes > 0);
      const list = await api(d, 'GET', '/v1/sandboxes');
      assert.ok(list.json.sandboxes.some((s) => s.id === sb.id));
    } finally {
      await killSandbox(d, sb.id);
    }
  });

  test('a cold create reports each stage', async () => {
    const d2 = await startAbxd({ env: { ABX_POOL: '0' } });
    try {
      const sb = await createSandbox(d2);
      assert.equal(sb.timings.from_pool, false);
      for (const k of ['prepare_ms', 'clone_ms', 'init_ms']) assert.equal(typeof sb.timings[k], 'number', k);
      const r = await exec(d2, sb.id, ['true']);
      assert.equal(r.code, 0);
    } finally {
      await d2.stop();
    }
  });

  test('PATCH resizes limits and resets the deadline from now', async () => {
    const sb = await createSandbox(d, { memory_mb: 128 });
    try {
      const p = await api(d, 'PATCH', `/v1/sandboxes/${sb.id}`, { memory_mb: 256, pids: 64, cpu: 0.25, timeout_s: 100 });
      assert.equal(p.status, 200, p.text);
      assert.equal(p.json.memory_mb, 256);
      assert.equal(p.json.pids, 64);
      assert.equal(p.json.cpu, 0.25);
      assert.ok(Math.abs(Date.parse(p.json.end_at) - Date.now() - 100000) < 3000);
      const cg = await sh(d, sb.id, 'echo ok');
      assert.equal(cg.code, 0);
      const bad = await api(d, 'PATCH', `/v1/sandboxes/${sb.id}`, { memory_mb: 'lots' });
      assert.equal(bad.status, 400);
    } finally {
      await killSandbox(d, sb.id);
    }
  });

  test('a sandbox ends at its timeout', async () => {
    const sb = await createSandbox(d, { timeout_s: 1 });
    // Gone within 1.8 s of a 1 s timeout (the bound the test allows).
    await until(async () => (await api(d, 'GET', `/v1/sandboxes/${sb.id}`)).status === 404, 1800);
    const g = await api(d, 'GET', `/v1/sandboxes/${sb.id}`);
    assert.equal(g.status, 404);
  });

  test('the idle backstop kills untouched sandboxes', async () => {
    const d2 = await startAbxd({ env: { ABX_IDLE_TIMEOUT_S: '1', ABX_POOL: '0' } });
    try {
      const sb = await createSandbox(d2);
      // Killed within 2.5 s of a 1 s idle timeout. Polls the log, not the
      // sandbox: a GET of the sandbox is activity and would keep it alive.
      await until(() => /idle for \d+ s, killing it/.test(d2.log), 2500);
      const g = await api(d2, 'GET', `/v1/sandboxes/${sb.id}`);
      assert.equal(g.status, 404);
      assert.match(d2.log, /idle for \d+ s, killing it/);
    } finally {
      await d2.stop();
    }
  });

  test('delete answers 204 and then 404', async () => {
    const sb = await createSandbox(d);
    const r = await api(d, 'DELETE', `/v1/sandboxes/${sb.id}`);
    assert.equal(r.status, 204);
    const again = await api(d, 'DELETE', `/v1/sandboxes/${sb.id}`);
    assert.equal(again.status, 404);
    assert.equal(again.json.error, 'not_found');
  });
});

describe('exec', { skip }, () => {
  let d, id;
  before(async () => {
    d = await startAbxd();
    id = (await createSandbox(d, { env: { FROM_SANDBOX: 'sb', OVERRIDE: 'sandbox' } })).id;
  });
  after(async () => d && (await d.stop()));

  test('env merges defaults, the sandbox env and the request env', async () => {
    const r = await sh(d, id, 'echo "$PATH|$HOME|$USER|$LANG|$FROM_SANDBOX|$OVERRIDE|$EXTRA"', { env: { OVERRIDE: 'request', EXTRA: 'x' } });
    assert.equal(r.out, '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin|/home/user|user|C.UTF-8|sb|request|x\n');
    const root = await sh(d, id, 'echo "$HOME|$USER"; id -u; pwd', { user: 'root' });
    assert.equal(root.out, '/root|root\n0\n/root\n');
  });

  test('cwd: default home, relative to home, absolute', async () => {
    await sh(d, id, 'mkdir -p /home/user/sub/dir');
    assert.equal((await exec(d, id, ['pwd'])).out, '/home/user\n');
    assert.equal((await exec(d, id, ['pwd'], { cwd: 'sub/dir' })).out, '/home/user/sub/dir\n');
    assert.equal((await exec(d, id, ['pwd'], { cwd: '/tmp' })).out, '/tmp\n');
    const bad = await api(d, 'POST', `/v1/sandboxes/${id}/exec`, { argv: ['pwd'], cwd: '/nope' });
    assert.equal(bad.status, 400);
    assert.match(bad.json.message, /chdir/);
  });

  test('exit codes: 0, N, 124, 126, 127, 128+N', async () => {
    assert.equal((await exec(d, id, ['true'])).code, 0);
    assert.equal((await sh(d, id, 'exit 42')).code, 42);
    const t = await exec(d, id, ['sleep', '10'], { timeout_s: 0.3 });
    assert.equal(t.code, 124);
    assert.equal(t.result.timed_out, true);
    const idle = await sh(d, id, 'echo start; sleep 10', { idle_timeout_s: 0.4 });
    assert.equal(idle.code, 124);
    assert.equal(idle.out, 'start\n');
    await sh(d, id, 'printf "#!/bin/sh\\necho hi\\n" > /home/user/noexec.sh; chmod 644 /home/user/noexec.sh');
    const ne = await exec(d, id, ['/home/user/noexec.sh']);
    assert.equal(ne.code, 126);
    const nf = await exec(d, id, ['no-such-program']);
    assert.equal(nf.code, 127);
    assert.match(nf.err, /command not found/);
    const sig = await sh(d, id, 'kill -9 $$');
    assert.equal(sig.code, 137);
    assert.equal(sig.result.signal, 9);
  });

  test('the deadline kills the whole process group', async () => {
    const r = await sh(d, id, 'sleep 100 & sleep 100 & echo started; wait', { timeout_s: 0.5 });
    assert.equal(r.code, 124);
    // Every sleep gone within 200 ms of the answer.
    const sleeps = async () => (await sh(d, id, 'ps -e -o comm= | grep -c "^sleep$" || true')).out.trim() === '0';
    await until(sleeps, 200);
    const ps = await sh(d, id, 'ps -e -o comm= | grep -c "^sleep$" || true');
    assert.equal(ps.out.trim(), '0');
  });

  test('stdin: given up front, and streamed with /stdin then closed', async () => {
    const r = await exec(d, id, ['cat'], { stdin: Buffer.from('piped in\n').toString('base64') });
    assert.equal(r.out, 'piped in\n');
    const bg = await api(d, 'POST', `/v1/sandboxes/${id}/exec`, { argv: ['cat'], background: true, stdin_open: true });
    assert.equal(bg.status, 201);
    assert.equal(bg.json.stdin_open, true);
    const pid = bg.json.pid;
    for (const part of ['one ', 'two ', 'three']) {
      const w = await api(d, 'POST', `/v1/sandboxes/${id}/processes/${pid}/stdin`, { data: Buffer.from(part).toString('base64') });
      assert.equal(w.status, 204, w.text);
    }
    assert.equal((await api(d, 'POST', `/v1/sandboxes/${id}/processes/${pid}/close-stdin`)).status, 204);
    const out = await api(d, 'GET', `/v1/sandboxes/${id}/processes/${pid}/output?offset=0&follow=1`);
    const p = parseNdjson(out.text);
    assert.equal(p.stdout.toString(), 'one two three');
    assert.equal(p.result.exit_code, 0);
    const late = await api(d, 'POST', `/v1/sandboxes/${id}/processes/${pid}/stdin`, { data: 'eA==' });
    assert.equal(late.status, 409);
  });

  test('output streams as it is produced', async () => {
    const res = await fetch(`${d.url}/v1/sandboxes/${id}/exec`, {
      method: 'POST',
      headers: { authorization: `Bearer ${d.key}` },
      body: JSON.stringify({ argv: ['sh', '-c', 'echo first; sleep 1; echo second'] }),
    });
    const reader = res.body.getReader();
    const t0 = Date.now();
    let text = '';
    let firstAt;
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      text += Buffer.from(value).toString();
      if (firstAt === undefined && text.includes('"stdout"')) firstAt = Date.now() - t0;
    }
    const total = Date.now() - t0;
    const p = parseNdjson(text);
    assert.equal(p.stdout.toString(), 'first\nsecond\n');
    assert.ok(firstAt < total - 500, `first line after ${firstAt} ms, end after ${total} ms`);
    assert.deepEqual(Object.keys(p.lines[0]), ['pid']);
  });

  test('stdout and stderr keep their order and offsets', async () => {
    const r = await sh(d, id, 'echo a; echo b >&2; echo c');
    const chunks = r.lines.filter((l) => l.stdout || l.stderr);
    let off = 0;
    for (const c of chunks) {
      assert.equal(c.offset, off);
      off += Buffer.from(c.stdout ?? c.stderr, 'base64').length;
    }
    assert.equal(r.result.output_end, off);
    assert.equal(r.out, 'a\nc\n');
    assert.equal(r.err, 'b\n');
  });

  test('a process outlives a dropped connection and can be reattached', async () => {
    const ac = new AbortController();
    const res = await fetch(`${d.url}/v1/sandboxes/${id}/exec`, {
      method: 'POST',
      headers: { authorization: `Bearer ${d.key}` },
      body: JSON.stringify({ argv: ['sh', '-c', 'for i in 1 2 3 4 5; do echo line$i; sleep 0.2; done; exit 7'] }),
      signal: ac.signal,
    });
    const reader = res.body.getReader();
    const { value } = await reader.read();
    const pid = JSON.parse(Buffer.from(value).toString().split('\n')[0]).pid;
    ac.abort();
    // A sleep on purpose: abxd must see the connection drop before we look
    // at the process it must not take along (nothing says when it has).
    await sleep(100);
    const st = await api(d, 'GET', `/v1/sandboxes/${id}/processes/${pid}`);
    assert.equal(st.json.state, 'running');
    const out = await api(d, 'GET', `/v1/sandboxes/${id}/processes/${pid}/output?offset=0&follow=1`);
    const p = parseNdjson(out.text);
    assert.equal(p.stdout.toString(), 'line1\nline2\nline3\nline4\nline5\n');
    assert.equal(p.result.exit_code, 7);
    // From the middle, and without follow after the end.
    const mid = await api(d, 'GET', `/v1/sandboxes/${id}/processes/${pid}/output?offset=6`);
    assert.equal(parseNdjson(mid.text).stdout.toString(), 'line2\nline3\nline4\nline5\n');
    const done = await api(d, 'GET', `/v1/sandboxes/${id}/processes/${pid}`);
    assert.equal(done.json.exit_code, 7);
    assert.equal(done.json.state, 'exited');
  });

  test('background processes: list, signal the group, status kept', async () => {
    const bg = await api(d, 'POST', `/v1/sandboxes/${id}/exec`, { argv: ['sh', '-c', 'trap "echo got-term; exit 5" TERM; sleep 100 & wait'], background: true });
    assert.equal(bg.status, 201);
    const pid = bg.json.pid;
    const list = await api(d, 'GET', `/v1/sandboxes/${id}/processes`);
    assert.ok(list.json.processes.some((p) => p.pid === pid && p.state === 'running'));
    // Time for the shell to set its trap (nothing outside shows when it has).
    await sleep(200);
    const s = await api(d, 'POST', `/v1/sandboxes/${id}/processes/${pid}/signal`, { signal: 'SIGTERM' });
    assert.equal(s.status, 204);
    const out = await api(d, 'GET', `/v1/sandboxes/${id}/processes/${pid}/output?follow=1`);
    const p = parseNdjson(out.text);
    assert.equal(p.result.exit_code, 5);
    assert.match(p.stdout.toString(), /got-term/);
    const again = await api(d, 'POST', `/v1/sandboxes/${id}/processes/${pid}/signal`, { signal: 15 });
    assert.equal(again.status, 409);
    const bad = await api(d, 'POST', `/v1/sandboxes/${id}/processes/${pid}/signal`, { signal: 'NOPE' });
    assert.equal(bad.status, 400);
    const missing = await api(d, 'GET', `/v1/sandboxes/${id}/processes/99999`);
    assert.equal(missing.status, 404);
  });

  test('many clients exec at once, quick and slow processes mixed', async () => {
    // Quick processes are answered whole, slower ones streamed; the two
    // paths race with each other here (a use-after-free once hid there).
    const other = (await createSandbox(d)).id;
    const runs = await Promise.all(
      Array.from({ length: 16 }, async (_, c) => {
        const sb = c % 2 ? id : other;
        const codes = [];
        for (let i = 0; i < 15; i++) {
          const argv = i % 3 === 0 ? ['sh', '-c', `sleep 0.0${i % 9}; echo ${c}-${i}`] : ['true'];
          const r = await exec(d, sb, argv);
          codes.push(r.code);
          if (i % 3 === 0) assert.equal(r.out, `${c}-${i}\n`);
        }
        return codes;
      }),
    );
    assert.ok(runs.flat().every((x) => x === 0));
    await killSandbox(d, other);
  });

  test('a reader that keeps up gets all of a large output', async () => {
    const r = await sh(d, id, 'head -c 6000000 /dev/zero | tr "\\0" "x"');
    assert.equal(r.stdout.length, 6000000);
    assert.equal(r.code, 0);
  });

  test('a foreground exec never loses the start of a fast output', async () => {
    // Output written between the exec and abxd hearing of it used to reach
    // the log before the stream's reader was attached, and was dropped.
    const noise = await api(d, 'POST', `/v1/sandboxes/${id}/exec`, { argv: ['sh', '-c', 'cat /dev/zero > /dev/null'], background: true, timeout_s: 60 });
    try {
      for (let i = 0; i < 6; i++) {
        const r = await exec(d, id, ['head', '-c', '8000000', '/dev/zero']);
        assert.ok(!r.lines.some((l) => l.dropped !== undefined), JSON.stringify(r.lines.find((l) => l.dropped !== undefined)));
        assert.equal(r.stdout.length, 8000000);
      }
    } finally {
      await api(d, 'POST', `/v1/sandboxes/${id}/processes/${noise.json.pid}/signal`, { signal: 'KILL' });
    }
  });

  test('without a reader the log keeps the last 1 MiB and says what was dropped', async () => {
    const bg = await api(d, 'POST', `/v1/sandboxes/${id}/exec`, { argv: ['sh', '-c', 'head -c 3000000 /dev/zero | tr "\\0" "y"'], background: true });
    // A sleep on purpose: 1.5 s with nobody reading is what the test is about.
    await sleep(1500);
    const out = await api(d, 'GET', `/v1/sandboxes/${id}/processes/${bg.json.pid}/output?offset=0&follow=1`);
    const p = parseNdjson(out.text);
    // Past the log, output nobody reads is read at a bounded rate (256
    // KiB/s), so how much is gone depends on how long nobody read.
    assert.ok(p.lines[0].dropped > 0, JSON.stringify(p.lines[0]));
    assert.equal(p.lines[0].offset, p.lines[0].dropped);
    assert.equal(p.lines[0].offset + p.stdout.length, 3000000);
    assert.equal(p.result.exit_code, 0);
  });
});

describe('files', { skip }, () => {
  let d, id;
  before(async () => {
    d = await startAbxd();
    id = (await createSandbox(d)).id;
  });
  after(async () => d && (await d.stop()));

  test('put creates parents, then replaces; get returns the bytes', async () => {
    const a = await api(d, 'PUT', `/v1/sandboxes/${id}/files/deep/er/file.bin`, Buffer.from([0, 1, 2, 255]));
    assert.equal(a.status, 201);
    assert.equal(a.json.path, '/deep/er/file.bin');
    assert.equal(a.json.size, 4);
    const b = await api(d, 'PUT', `/v1/sandboxes/${id}/files/deep/er/file.bin`, 'new');
    assert.equal(b.status, 200);
    assert.notEqual(a.json.version, b.json.version);
    const g = await api(d, 'GET', `/v1/sandboxes/${id}/files/deep/er/file.bin`);
    assert.equal(g.text, 'new');
    assert.equal(g.headers.get('x-abx-version'), b.json.version);
    const seen = await exec(d, id, ['cat', '/home/user/deep/er/file.bin']);
    assert.equal(seen.out, 'new');
  });

  test('head tells files, directories and missing paths apart', async () => {
    await api(d, 'PUT', `/v1/sandboxes/${id}/files/h/f.txt`, 'hello');
    const f = await api(d, 'HEAD', `/v1/sandboxes/${id}/files/h/f.txt`);
    assert.equal(f.status, 200);
    assert.equal(f.headers.get('content-length'), '5');
    assert.equal(f.headers.get('x-abx-type'), 'file');
    const dir = await api(d, 'HEAD', `/v1/sandboxes/${id}/files/h`);
    assert.equal(dir.headers.get('x-abx-type'), 'dir');
    const m = await api(d, 'HEAD', `/v1/sandboxes/${id}/files/h/nope`);
    assert.equal(m.status, 404);
  });

  test('honest directories: delete keeps the parent, rmdir removes a tree', async () => {
    await api(d, 'PUT', `/v1/sandboxes/${id}/files/hd/a/one`, '1');
    const del = await api(d, 'DELETE', `/v1/sandboxes/${id}/files/hd/a/one`);
    assert.equal(del.status, 204);
    const dir = await api(d, 'HEAD', `/v1/sandboxes/${id}/files/hd/a`);
    assert.equal(dir.headers.get('x-abx-type'), 'dir');
    const deldir = await api(d, 'DELETE', `/v1/sandboxes/${id}/files/hd/a`);
    assert.equal(deldir.status, 409);
    const mk = await api(d, 'POST', `/v1/sandboxes/${id}/mkdir`, { path: '/hd/empty/deeper' });
    assert.equal(mk.status, 201);
    assert.equal(mk.json.created, true);
    const mk2 = await api(d, 'POST', `/v1/sandboxes/${id}/mkdir`, { path: '/hd/empty/deeper' });
    assert.equal(mk2.status, 200);
    assert.equal(mk2.json.created, false);
    const w = await api(d, 'GET', `/v1/sandboxes/${id}/walk?path=/hd`);
    assert.deepEqual(w.json.entries.map((e) => [e.path, e.type]), [['/hd/a', 'dir'], ['/hd/empty', 'dir'], ['/hd/empty/deeper', 'dir']]);
    const rm = await api(d, 'POST', `/v1/sandboxes/${id}/rmdir`, { path: '/hd' });
    assert.equal(rm.status, 204);
    assert.equal((await api(d, 'HEAD', `/v1/sandboxes/${id}/files/hd`)).status, 404);
    const root = await api(d, 'POST', `/v1/sandboxes/${id}/rmdir`, { path: '/' });
    assert.equal(root.status, 400);
  });

  test('rename, with and without overwrite', async () => {
    await api(d, 'PUT', `/v1/sandboxes/${id}/files/mv/a`, 'A');
    await api(d, 'PUT', `/v1/sandboxes/${id}/files/mv/b`, 'B');
    const no = await api(d, 'POST', `/v1/sandboxes/${id}/rename`, { from: '/mv/a', to: '/mv/b' });
    assert.equal(no.status, 409);
    const yes = await api(d, 'POST', `/v1/sandboxes/${id}/rename`, { from: '/mv/a', to: '/mv/b', overwrite: true });
    assert.equal(yes.status, 200);
    assert.equal((await api(d, 'GET', `/v1/sandboxes/${id}/files/mv/b`)).text, 'A');
    const moved = await api(d, 'POST', `/v1/sandboxes/${id}/rename`, { from: '/mv/b', to: '/elsewhere/new/b' });
    assert.equal(moved.status, 200);
    assert.equal(moved.json.path, '/elsewhere/new/b');
  });

  test('walk lists what the sandbox made, sorted, with types', async () => {
    await sh(d, id, 'mkdir -p /home/user/w/d && echo 12345 > /home/user/w/f && ln -s f /home/user/w/l && mkfifo /home/user/w/p');
    const w = await api(d, 'GET', `/v1/sandboxes/${id}/walk?path=/w`);
    assert.deepEqual(
      w.json.entries.map((e) => [e.path, e.type]),
      [['/w/d', 'dir'], ['/w/f', 'file'], ['/w/l', 'symlink'], ['/w/p', 'other']],
    );
    assert.equal(w.json.entries[1].size, 6);
    const fifo = await api(d, 'GET', `/v1/sandboxes/${id}/files/w/p`);
    assert.equal(fifo.status, 400, 'a FIFO is refused, never opened for blocking reads');
  });

  test('sockets, fifos and links to them: 400 naming the type, never opened; they delete', async () => {
    await sh(d, id, `mkdir -p /home/user/odd && cd /home/user/odd && mkfifo fifo && python3 -c "import socket; socket.socket(socket.AF_UNIX).bind('sock')" && ln -s sock link`);
    for (const [name, type] of [['sock', 'unix socket'], ['link', 'unix socket'], ['fifo', 'fifo']]) {
      for (const m of ['GET', 'HEAD']) {
        const r = await api(d, m, `/v1/sandboxes/${id}/files/odd/${name}`);
        if (m === 'HEAD') {
          assert.equal(r.status, 200, `HEAD ${name}`); // a stat: type "other"
          assert.equal(r.headers.get('x-abx-type'), 'other');
          continue;
        }
        assert.equal(r.status, 400, `GET ${name}: ${r.status} ${r.text}`);
        assert.equal(r.json.error, 'bad_request');
        assert.match(r.json.message, new RegExp(`'/odd/${name}' is a ${type}, not a regular file`));
      }
    }
    const put = await api(d, 'PUT', `/v1/sandboxes/${id}/files/odd/sock`, 'x');
    assert.ok(put.status < 300, `replacing a socket by a file: ${put.status}`);
    assert.equal((await api(d, 'DELETE', `/v1/sandboxes/${id}/files/odd/fifo`)).status, 204);
    const rmf = await api(d, 'POST', `/v1/sandboxes/${id}/rmdir`, { path: '/odd/link' });
    assert.equal(rmf.status, 400);
    assert.match(rmf.json.message, /is a symlink, not a directory/);
    await sh(d, id, `cd /home/user/odd && python3 -c "import socket; socket.socket(socket.AF_UNIX).bind('s2')" && mkfifo f2`);
    assert.equal((await api(d, 'POST', `/v1/sandboxes/${id}/rmdir`, { path: '/odd' })).status, 204);
    assert.equal((await api(d, 'HEAD', `/v1/sandboxes/${id}/files/odd`)).status, 404);
  });

  test('rmdir removes a 1,500-deep tree', async () => {
    const r = await exec(d, id, ['python3', '-c', `
import os
os.chdir('/home/user'); os.mkdir('deeptree'); os.chdir('deeptree')
for i in range(1500):
    open('f', 'w').close()
    os.mkdir('d'); os.chdir('d')
print('ok')`]);
    assert.equal(r.out, 'ok\n', r.err);
    const rm = await api(d, 'POST', `/v1/sandboxes/${id}/rmdir`, { path: '/deeptree' });
    assert.equal(rm.status, 204, rm.text);
    assert.equal((await api(d, 'HEAD', `/v1/sandboxes/${id}/files/deeptree`)).status, 404);
  });

  test('versions change even when the sandbox resets mtime', async () => {
    await api(d, 'PUT', `/v1/sandboxes/${id}/files/v.txt`, 'aaaa');
    const v1 = (await api(d, 'HEAD', `/v1/sandboxes/${id}/files/v.txt`)).headers.get('x-abx-version');
    await sh(d, id, 'm=$(stat -c %y /home/user/v.txt); printf bbbb > /home/user/v.txt; touch -d "$m" /home/user/v.txt');
    const v2 = (await api(d, 'HEAD', `/v1/sandboxes/${id}/files/v.txt`)).headers.get('x-abx-version');
    assert.notEqual(v1, v2);
    const v3 = (await api(d, 'HEAD', `/v1/sandboxes/${id}/files/v.txt`)).headers.get('x-abx-version');
    assert.equal(v2, v3, 'stable while nothing changes');
  });

  test('50 MB streams both ways byte-exact without growing abxd', async () => {
    const data = randomBytes(50 << 20);
    const rss0 = rssKb(d.proc.pid);
    const put = await api(d, 'PUT', `/v1/sandboxes/${id}/files/big.bin`, data);
    assert.equal(put.status, 201);
    assert.equal(put.json.size, data.length);
    const get = await api(d, 'GET', `/v1/sandboxes/${id}/files/big.bin`);
    assert.equal(createHash('sha256').update(get.buf).digest('hex'), createHash('sha256').update(data).digest('hex'));
    const inside = await exec(d, id, ['sha256sum', '/home/user/big.bin']);
    assert.equal(inside.out.split(' ')[0], createHash('sha256').update(data).digest('hex'));
    const rss1 = rssKb(d.proc.pid);
    assert.ok(rss1 - rss0 < 20 * 1024, `abxd grew by ${rss1 - rss0} KiB moving 100 MB`);
  });

  test('an interrupted upload leaves nothing behind', async () => {
    const ac = new AbortController();
    const body = new ReadableStream({
      start(c) {
        c.enqueue(new Uint8Array(1 << 20));
      },
      pull() {
        return new Promise(() => {}); // never finishes
      },
    });
    const p = fetch(`${d.url}/v1/sandboxes/${id}/files/partial/upload.bin`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${d.key}` },
      body,
      duplex: 'half',
      signal: ac.signal,
    }).catch(() => {});
    // Sleeps on purpose: the upload must be under way when it is aborted,
    // and the abort must reach abxd before we look for what it left; no
    // answer says when either has happened.
    await sleep(300);
    ac.abort();
    await p;
    await sleep(200);
    const h = await api(d, 'HEAD', `/v1/sandboxes/${id}/files/partial/upload.bin`);
    assert.equal(h.status, 404);
    const w = await api(d, 'GET', `/v1/sandboxes/${id}/walk?path=/partial`);
    assert.deepEqual(w.json.entries, []);
  });

  test('oversized uploads are refused up front', async () => {
    const d2 = await startAbxd({ env: { ABX_MAX_FILE_MB: '1' } });
    try {
      const sb = await createSandbox(d2);
      const r = await api(d2, 'PUT', `/v1/sandboxes/${sb.id}/files/too-big`, Buffer.alloc(2 << 20));
      assert.equal(r.status, 413);
      assert.equal((await api(d2, 'HEAD', `/v1/sandboxes/${sb.id}/files/too-big`)).status, 404);
    } finally {
      await d2.stop();
    }
  });
});

describe('operations', { skip }, () => {
  test('health, readiness, metrics, drain', async () => {
    const d = await startAbxd();
    try {
      assert.equal((await api(d, 'GET', '/healthz', undefined, { auth: false })).status, 200);
      const ready = await api(d, 'GET', '/readyz', undefined, { auth: false });
      assert.equal(ready.status, 200);
      assert.deepEqual(ready.json.missing, []);
      assert.equal((await api(d, 'GET', '/metrics', undefined, { auth: false })).status, 401);
      const sb = await createSandbox(d);
      const m = await api(d, 'GET', '/metrics');
      assert.match(m.text, /^abx_sandboxes 1$/m);
      assert.match(m.text, /^abx_sandboxes_created_total \d+$/m);
      const dr = await api(d, 'POST', '/drain');
      assert.equal(dr.status, 200);
      assert.equal((await api(d, 'POST', '/v1/sandboxes', {})).status, 503);
      const nr = await api(d, 'GET', '/readyz', undefined, { auth: false });
      assert.equal(nr.status, 503);
      assert.equal(nr.json.draining, true);
      assert.equal((await exec(d, sb.id, ['true'])).code, 0, 'running sandboxes keep working');
    } finally {
      await d.stop();
    }
  });

  test('the workspace directory on the host is removed with the sandbox', async () => {
    const d = await startAbxd({ env: { ABX_POOL: '0' } });
    try {
      const sb = await createSandbox(d);
      await api(d, 'PUT', `/v1/sandboxes/${sb.id}/files/x`, 'x');
      assert.deepEqual(readdirSync(join(d.stateDir, 'sandboxes')), [sb.id]);
      await killSandbox(d, sb.id);
      assert.deepEqual(readdirSync(join(d.stateDir, 'sandboxes')), []);
    } finally {
      await d.stop();
    }
  });
});
