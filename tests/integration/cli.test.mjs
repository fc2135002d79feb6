// cli.test.mjs - the abx command (and libabx under it) against a real abxd.
//
// Every test starts its own abxd, drives it with the real build/src/cli/abx
// (or ABX_BIN_DIR's), removes the sandboxes it made and stops abxd, even
// when it fails.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, mkdirSync, openSync, closeSync, readFileSync, rmSync, writeFileSync, existsSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startAbxd, abx as runAbx, abxBin, isRoot, killSandbox, sleep } from './lib.mjs';

const skip = !isRoot && 'needs root';

// Under ABX_BIN_DIR=build-asan/src the CLI is sanitized too: make any report
// fatal and fail the test on it.
const sanitizerEnv = {
  ASAN_OPTIONS: process.env.ASAN_OPTIONS ?? 'detect_leaks=1',
  UBSAN_OPTIONS: process.env.UBSAN_OPTIONS ?? 'print_stacktrace=1:halt_on_error=1',
};
const sanitizerReport = /ERROR: (Address|Leak|Undefined)Sanitizer|runtime error:/;

function abx(d, args, opts = {}) {
  const r = runAbx(d, args, { ...opts, env: { ...sanitizerEnv, ...(opts.env ?? {}) } });
  assert.doesNotMatch(String(r.stderr), sanitizerReport, `abx ${args.join(' ')}`);
  return r;
}
const sha256 = (b) => createHash('sha256').update(b).digest('hex');

// Runs fn(d, ctx) with a fresh abxd; ctx.create(...args) makes a sandbox with
// `abx create` and remembers it; everything is removed afterwards.
async function withAbxd(fn, opts = {}) {
  const d = await startAbxd(opts);
  const ids = [];
  const tmp = mkdtempSync(join(tmpdir(), 'abx-cli-'));
  const ctx = {
    tmp,
    ids,
    create(...args) {
      const r = abx(d, ['create', ...args]);
      assert.equal(r.code, 0, r.stderr);
      const id = r.stdout.trim();
      assert.match(id, /^[a-z0-9]{20}$/);
      ids.push(id);
      return id;
    },
  };
  try {
    await fn(d, ctx);
  } finally {
    try {
      for (const id of ids) await killSandbox(d, id);
    } finally {
      rmSync(tmp, { recursive: true, force: true });
      await d.stop();
    }
  }
}

// Starts abx asynchronously; collects output with arrival times.
function spawnAbx(d, args, opts = {}) {
  const p = spawn(abxBin, args, {
    env: { PATH: process.env.PATH, ABX_URL: d.url, ABX_API_KEY: d.key, ...sanitizerEnv, ...(opts.env ?? {}) },
    stdio: [opts.stdin ?? 'pipe', 'pipe', 'pipe'],
  });
  const r = { p, stdout: '', stderr: '', chunks: [] };
  p.stdout.on('data', (c) => {
    r.stdout += c;
    r.chunks.push({ t: Date.now(), s: c.toString() });
  });
  p.stderr.on('data', (c) => (r.stderr += c));
  r.done = new Promise((res) => p.on('close', (code, signal) => res({ code, signal, t: Date.now() }))).then((end) => {
    assert.doesNotMatch(r.stderr, sanitizerReport, `abx ${args.join(' ')}`);
    return end;
  });
  r.waitFor = async (re, ms = 15000) => {
    const end = Date.now() + ms;
    while (!re.test(r.stdout)) {
      if (Date.now() > end) throw new Error(`timed out waiting for ${re}; stdout=${r.stdout} stderr=${r.stderr}`);
      await sleep(20);
    }
  };
  return r;
}

function json(r) {
  assert.equal(r.code, 0, r.stderr);
  return JSON.parse(r.stdout);
}

// A one-line error on stderr and exit 1.
function fails(r, re) {
  assert.equal(r.code, 1, `expected exit 1, got ${r.code}: ${r.stdout} ${r.stderr}`);
  assert.match(r.stderr, re);
  assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
}

test('create, ls, info, update and kill, with --json', { skip }, async () => {
  await withAbxd(async (d, ctx) => {
    const r = abx(d, ['create', '--memory-mb', '200', '--cpu', '0.5', '--pids', '100', '--timeout', '600',
      '--env', 'FOO=bar baz', '--env', 'EMPTY=', '--meta', 'owner=test', '--meta', 'k=v=w', '--json']);
    const sb = json(r);
    ctx.ids.push(sb.id);
    assert.match(sb.id, /^[a-z0-9]{20}$/);
    assert.equal(sb.memory_mb, 200);
    assert.equal(sb.cpu, 0.5);
    assert.equal(sb.pids, 100);
    assert.equal(sb.timeout_s, 600);
    assert.deepEqual(sb.metadata, { owner: 'test', k: 'v=w' });
    assert.equal(typeof sb.timings.total_ms, 'number');

    const plain = ctx.create();
    const ls = abx(d, ['ls']);
    assert.equal(ls.code, 0, ls.stderr);
    assert.match(ls.stdout, /^ID\s+STATE/);
    assert.ok(ls.stdout.includes(sb.id) && ls.stdout.includes(plain));
    const lsj = json(abx(d, ['ls', '--json']));
    assert.deepEqual(lsj.sandboxes.map((s) => s.id).sort(), [sb.id, plain].sort());

    const info = abx(d, ['info', sb.id]);
    assert.equal(info.code, 0, info.stderr);
    assert.match(info.stdout, /^id: +[a-z0-9]{20}$/m);
    assert.match(info.stdout, /^memory: +200 MiB$/m);
    assert.match(info.stdout, /^metadata: +owner=test\n +k=v=w$/m);
    const infoj = json(abx(d, ['info', sb.id, '--json']));
    assert.equal(infoj.id, sb.id);
    assert.ok(infoj.usage.memory_bytes >= 0);

    // The sandbox env reaches exec.
    const e = abx(d, ['exec', sb.id, '--', 'sh', '-c', 'echo "$FOO|$EMPTY|"']);
    assert.equal(e.code, 0, e.stderr);
    assert.equal(e.stdout, 'bar baz||\n');

    const u = json(abx(d, ['update', sb.id, '--memory-mb', '256', '--pids', '64', '--cpu', '0.25', '--json']));
    assert.equal(u.memory_mb, 256);
    assert.equal(u.pids, 64);
    assert.equal(u.cpu, 0.25);
    const t = abx(d, ['update', sb.id, '--timeout', '100']);
    assert.equal(t.code, 0, t.stderr);
    assert.equal(t.stdout, '');
    const after = json(abx(d, ['info', '--json', sb.id]));
    assert.ok(Math.abs(Date.parse(after.end_at) - Date.now() - 100000) < 5000, after.end_at);
    fails(abx(d, ['update', sb.id, '--memory-mb', '1']), /memory_mb/);

    const k = abx(d, ['kill', sb.id, plain]);
    assert.equal(k.code, 0, k.stderr);
    assert.equal(k.stdout, '');
    fails(abx(d, ['info', sb.id]), new RegExp(`no sandbox '${sb.id}'`));
    assert.deepEqual(json(abx(d, ['ls', '--json'])).sandboxes, []);
  });
});

test('exec passes exit codes through and keeps stdout and stderr apart', { skip }, async () => {
  await withAbxd(async (d, ctx) => {
    const id = ctx.create();
    let r = abx(d, ['exec', id, '--', 'sh', '-c', 'echo out; echo err >&2; exit 3']);
    assert.equal(r.code, 3);
    assert.equal(r.stdout, 'out\n');
    assert.equal(r.stderr, 'err\n');

    r = abx(d, ['exec', id, 'true']);
    assert.equal(r.code, 0);
    r = abx(d, ['exec', id, 'nosuchcommand-xyz']);
    assert.equal(r.code, 127);
    r = abx(d, ['exec', id, '--', 'sh', '-c', 'kill -9 $$']);
    assert.equal(r.code, 137);

    // The command's own options are its own, with or without "--".
    r = abx(d, ['exec', id, 'ls', '-a', '/home']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^user$/m);
    r = abx(d, ['exec', '--', id, 'ls', '-a', '/home']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^user$/m);
    r = abx(d, ['exec', '--user', 'root', id, '--', 'echo', '--json', '-i']);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, '--json -i\n');

    let t0 = Date.now();
    r = abx(d, ['exec', '--timeout', '1', id, 'sleep', '30']);
    assert.equal(r.code, 124);
    assert.ok(Date.now() - t0 < 10000);
    t0 = Date.now();
    r = abx(d, ['exec', id, '--idle-timeout', '1', '--', 'sh', '-c', 'echo x; sleep 30']);
    assert.equal(r.code, 124);
    assert.equal(r.stdout, 'x\n');
    assert.ok(Date.now() - t0 < 10000);

    r = abx(d, ['exec', '--cwd', '/tmp', '--user', 'root', '--env', 'A=1', '--env', 'B=two words', id, '--',
      'sh', '-c', 'pwd; id -u; echo "$A $B"']);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, '/tmp\n0\n1 two words\n');

    // --json prints the server's NDJSON and still exits with the code.
    r = abx(d, ['exec', '--json', id, '--', 'sh', '-c', 'printf hi; printf oops >&2; exit 2']);
    assert.equal(r.code, 2);
    const lines = r.stdout.trim().split('\n').map((l) => JSON.parse(l));
    assert.equal(typeof lines[0].pid, 'number');
    const out = Buffer.concat(lines.filter((l) => l.stdout).map((l) => Buffer.from(l.stdout, 'base64')));
    const err = Buffer.concat(lines.filter((l) => l.stderr).map((l) => Buffer.from(l.stderr, 'base64')));
    assert.equal(out.toString(), 'hi');
    assert.equal(err.toString(), 'oops');
    const res = lines.at(-1);
    assert.equal(res.exit_code, 2);
    assert.equal(res.pid, lines[0].pid);

    // A bad cwd is an error of the request, not of the command.
    fails(abx(d, ['exec', '--cwd', '/nonexistent/dir', id, 'true']), /cannot run 'true'/);
  });
});

test('exec streams output as it is produced', { skip }, async () => {
  await withAbxd(async (d, ctx) => {
    const id = ctx.create();
    const r = spawnAbx(d, ['exec', id, '--', 'sh', '-c', 'echo first; sleep 2; echo second >&2; sleep 1; echo third']);
    const end = await r.done;
    assert.equal(end.code, 0, r.stderr);
    assert.equal(r.stdout, 'first\nthird\n');
    assert.equal(r.stderr, 'second\n');
    const first = r.chunks.find((c) => c.s.includes('first'));
    assert.ok(first, 'first line seen');
    assert.ok(!first.s.includes('third'), 'first line came alone');
    // It arrived while the command was still sleeping, not at the end.
    assert.ok(end.t - first.t >= 2500, `first line came only ${end.t - first.t} ms before the end`);
  });
});

test('exec -i forwards stdin: up front, piped, interactive', { skip }, async () => {
  await withAbxd(async (d, ctx) => {
    const id = ctx.create();
    let r = abx(d, ['exec', '-i', id, 'cat'], { input: 'hello\n' });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, 'hello\n');

    // Larger than abxd's 1 MiB per request: streamed through /stdin.
    const big = randomBytes(3 * 1024 * 1024 + 17);
    r = abx(d, ['exec', '--stdin', id, 'sha256sum'], { input: big });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout.split(' ')[0], sha256(big));

    // A small regular file goes up front; a large one is streamed.
    for (const size of [1000, 2 * 1024 * 1024]) {
      const data = randomBytes(size);
      const f = join(ctx.tmp, `in-${size}`);
      writeFileSync(f, data);
      const fd = openSync(f, 'r');
      const s = spawnSync(abxBin, ['exec', '-i', id, 'sha256sum'], {
        env: { PATH: process.env.PATH, ABX_URL: d.url, ABX_API_KEY: d.key, ...sanitizerEnv },
        stdio: [fd, 'pipe', 'pipe'],
        encoding: 'utf8',
      });
      closeSync(fd);
      assert.equal(s.status, 0, s.stderr);
      assert.doesNotMatch(s.stderr, sanitizerReport);
      assert.equal(s.stdout.split(' ')[0], sha256(data));
    }

    // Interactive: the second line is written only after the answer to the first.
    const p = spawnAbx(d, ['exec', '-i', id, '--', 'sh', '-c', 'read a; echo "got $a"; read b; echo "got $b"; cat']);
    p.p.stdin.write('one\n');
    await p.waitFor(/got one\n/);
    p.p.stdin.write('two\n');
    await p.waitFor(/got two\n/);
    p.p.stdin.end('rest');
    const end = await p.done;
    assert.equal(end.code, 0, p.stderr);
    assert.equal(p.stdout, 'got one\ngot two\nrest');

    // Without -i the command's stdin is empty.
    r = abx(d, ['exec', id, 'cat'], { input: 'ignored' });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, '');

    // The command stops reading early: that is fine.
    r = abx(d, ['exec', '-i', id, '--', 'head', '-c', '5'], { input: randomBytes(4 * 1024 * 1024) });
    assert.equal(r.code, 0, r.stderr);
  });
});

test('background exec, ps, logs --follow, signal', { skip }, async () => {
  await withAbxd(async (d, ctx) => {
    const id = ctx.create();
    const script = 'echo start; trap "echo got TERM; exit 7" TERM; while :; do sleep 0.1; done';
    const bg = abx(d, ['exec', '-d', id, '--', 'sh', '-c', script]);
    assert.equal(bg.code, 0, bg.stderr);
    assert.match(bg.stdout, /^\d+\n$/);
    const pid = Number(bg.stdout);

    const ps = abx(d, ['ps', id]);
    assert.equal(ps.code, 0, ps.stderr);
    assert.match(ps.stdout, new RegExp(`^\\s*${pid} running .* sh -c echo start`, 'm'));
    let procs = json(abx(d, ['ps', id, '--json'])).processes;
    let p = procs.find((x) => x.pid === pid);
    assert.equal(p.state, 'running');
    assert.equal(p.background, true);

    const logs = spawnAbx(d, ['logs', '-f', id, String(pid)]);
    await logs.waitFor(/start\n/);
    const sig = abx(d, ['signal', id, String(pid), 'TERM']);
    assert.equal(sig.code, 0, sig.stderr);
    assert.equal(sig.stdout, '');
    const end = await logs.done;
    assert.equal(end.code, 0, logs.stderr);
    assert.equal(logs.stdout, 'start\ngot TERM\n');

    procs = json(abx(d, ['ps', '--json', id])).processes;
    p = procs.find((x) => x.pid === pid);
    assert.equal(p.state, 'exited');
    assert.equal(p.exit_code, 7);

    // Reattach from an offset, without following: what is there, then the end.
    let r = abx(d, ['logs', id, String(pid), '--offset', '6']);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, 'got TERM\n');

    fails(abx(d, ['signal', id, String(pid), 'KILL']), /has exited/);
    fails(abx(d, ['logs', id, '99999']), /no process 99999/);
    fails(abx(d, ['signal', id, String(pid), 'NOPE']), /signal/);

    // Background with --json, and with stdin pumped before the pid is printed.
    const j = json(abx(d, ['exec', '-d', '--json', id, 'sleep', '0.1']));
    assert.equal(typeof j.pid, 'number');
    assert.deepEqual(j.argv, ['sleep', '0.1']);
    r = abx(d, ['exec', '-d', '-i', id, '--', 'sh', '-c', 'cat > /tmp/got'], { input: 'piped in' });
    assert.equal(r.code, 0, r.stderr);
    const bpid = Number(r.stdout);
    const out = spawnAbx(d, ['logs', '-f', id, String(bpid)]);
    assert.equal((await out.done).code, 0, out.stderr);
    r = abx(d, ['exec', id, 'cat', '/tmp/got']);
    assert.equal(r.stdout, 'piped in');
  });
});

test('signals to abx exec reach the command', { skip }, async () => {
  await withAbxd(async (d, ctx) => {
    const id = ctx.create();
    const p = spawnAbx(d, ['exec', id, '--', 'sh', '-c', 'trap "echo caught INT; exit 5" INT; echo ready; while :; do sleep 0.1; done']);
    await p.waitFor(/ready\n/);
    p.p.kill('SIGINT');
    const end = await p.done;
    assert.equal(end.code, 5, p.stderr);
    assert.equal(p.stdout, 'ready\ncaught INT\n');

    const q = spawnAbx(d, ['exec', id, '--', 'sh', '-c', 'echo ready; exec sleep 100']);
    await q.waitFor(/ready\n/);
    const t0 = Date.now();
    q.p.kill('SIGTERM');
    const qend = await q.done;
    assert.equal(qend.code, 143, q.stderr);
    assert.ok(Date.now() - t0 < 5000);
    const procs = json(abx(d, ['ps', id, '--json'])).processes;
    assert.ok(procs.every((x) => x.state === 'exited'), JSON.stringify(procs));
  });
});

test('cp copies a 50 MB file both ways byte-exact, and through -', { skip }, async () => {
  await withAbxd(async (d, ctx) => {
    const id = ctx.create('--memory-mb', '1024');
    const data = randomBytes(50 * 1024 * 1024);
    const src = join(ctx.tmp, 'big.bin');
    writeFileSync(src, data);

    let r = abx(d, ['cp', src, `${id}:/big/data.bin`]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, '');
    r = abx(d, ['exec', id, 'sha256sum', 'big/data.bin']);
    assert.equal(r.stdout.split(' ')[0], sha256(data));

    const back = join(ctx.tmp, 'back.bin');
    r = abx(d, ['cp', `${id}:/big/data.bin`, back]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, '');
    assert.equal(sha256(readFileSync(back)), sha256(data));

    // Through stdin and stdout.
    r = abx(d, ['cp', '-', `${id}:piped.bin`], { input: data });
    assert.equal(r.code, 0, r.stderr);
    r = abx(d, ['cp', `${id}:/piped.bin`, '-'], { encoding: 'buffer' });
    assert.equal(r.code, 0, r.stderr.toString());
    assert.equal(r.stdout.length, data.length);
    assert.equal(sha256(r.stdout), sha256(data));
    r = abx(d, ['cat', id, '/piped.bin'], { encoding: 'buffer' });
    assert.equal(sha256(r.stdout), sha256(data));

    // Output of exec is byte-exact too (many base64 lines).
    const five = data.subarray(0, 5 * 1024 * 1024 + 3);
    writeFileSync(join(ctx.tmp, 'five.bin'), five);
    assert.equal(abx(d, ['cp', join(ctx.tmp, 'five.bin'), `${id}:/five.bin`]).code, 0);
    r = abx(d, ['exec', id, 'cat', 'five.bin'], { encoding: 'buffer' });
    assert.equal(r.code, 0);
    assert.equal(sha256(r.stdout), sha256(five));

    // Into directories: the source's name is kept.
    r = abx(d, ['cp', join(ctx.tmp, 'five.bin'), `${id}:/big/`]);
    assert.equal(r.code, 0, r.stderr);
    r = abx(d, ['cp', join(ctx.tmp, 'five.bin'), `${id}:/big`]);
    assert.equal(r.code, 0, r.stderr);
    const ls = json(abx(d, ['files', id, '/big', '--json'])).entries.map((e) => e.path);
    assert.deepEqual(ls, ['/big/data.bin', '/big/five.bin']);
    const localDir = join(ctx.tmp, 'dir');
    mkdirSync(localDir);
    r = abx(d, ['cp', `${id}:/big/five.bin`, localDir]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(sha256(readFileSync(join(localDir, 'five.bin'))), sha256(five));

    // A failed download leaves the destination as it was, and no litter.
    const keep = join(ctx.tmp, 'keep.txt');
    writeFileSync(keep, 'keep');
    fails(abx(d, ['cp', `${id}:/nope.bin`, keep]), /cannot download '\/nope.bin'/);
    assert.equal(readFileSync(keep, 'utf8'), 'keep');
    assert.deepEqual(readdirSync(ctx.tmp).filter((n) => n.includes('.abx-')), []);
    fails(abx(d, ['cp', '-', `${id}:/big`], { input: 'x' }), /is a directory/);
    fails(abx(d, ['cp', join(ctx.tmp, 'missing'), `${id}:/x`]), /cannot open/);
    assert.equal(abx(d, ['cp', src, join(ctx.tmp, 'x')]).code, 2);
  });
});

test('cp streams: abx never holds the file', { skip }, async () => {
  await withAbxd(async (d, ctx) => {
    const id = ctx.create('--memory-mb', '1024');
    const total = 64 * 1024 * 1024;
    const chunk = randomBytes(1024 * 1024);
    const p = spawnAbx(d, ['cp', '-', `${id}:/stream.bin`]);
    const hash = createHash('sha256');
    for (let sent = 0; sent < total; sent += chunk.length) {
      hash.update(chunk);
      if (!p.p.stdin.write(chunk)) await new Promise((r) => p.p.stdin.once('drain', r));
    }
    // Everything but what sits in pipes has gone through abx by now.
    const hwm = Number(readFileSync(`/proc/${p.p.pid}/status`, 'utf8').match(/VmHWM:\s+(\d+)/)[1]);
    p.p.stdin.end();
    const end = await p.done;
    assert.equal(end.code, 0, p.stderr);
    assert.ok(hwm * 1024 < total / 2, `abx peaked at ${hwm} kB while uploading ${total} bytes`);
    const r = abx(d, ['exec', id, 'sha256sum', 'stream.bin']);
    assert.equal(r.stdout.split(' ')[0], hash.digest('hex'));
  });
});

test('files, mkdir, mv, rm and cat', { skip }, async () => {
  await withAbxd(async (d, ctx) => {
    const id = ctx.create();
    let r = abx(d, ['mkdir', id, '/d1/d2']);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, '');
    r = abx(d, ['mkdir', id, '/d1/d2']);
    assert.equal(r.code, 0, r.stderr);
    r = abx(d, ['cp', '-', `${id}:/d1/a.txt`], { input: 'alpha\n' });
    assert.equal(r.code, 0, r.stderr);

    r = abx(d, ['files', id]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^dir +\d+ \/d1$/m);
    assert.match(r.stdout, /^dir +\d+ \/d1\/d2$/m);
    assert.match(r.stdout, /^file +6 \/d1\/a\.txt$/m);
    const entries = json(abx(d, ['files', id, '/d1', '--json'])).entries;
    const a = entries.find((e) => e.path === '/d1/a.txt');
    assert.equal(a.type, 'file');
    assert.equal(a.size, 6);
    assert.equal(typeof a.version, 'string');

    r = abx(d, ['cat', id, '/d1/a.txt']);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, 'alpha\n');
    r = abx(d, ['mv', id, '/d1/a.txt', '/d1/b.txt']);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(abx(d, ['cat', id, '/d1/b.txt']).stdout, 'alpha\n');
    fails(abx(d, ['cat', id, '/d1/a.txt']), /cannot download '\/d1\/a.txt'/);

    abx(d, ['cp', '-', `${id}:/d1/c.txt`], { input: 'gamma\n' });
    fails(abx(d, ['mv', id, '/d1/c.txt', '/d1/b.txt']), /--overwrite/);
    r = abx(d, ['mv', '--overwrite', id, '/d1/c.txt', '/d1/b.txt']);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(abx(d, ['cat', id, '/d1/b.txt']).stdout, 'gamma\n');

    // Names that need percent-encoding.
    const odd = '/we ird/na%me #1 é?.txt';
    r = abx(d, ['cp', '-', `${id}:${odd}`], { input: 'odd' });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(abx(d, ['cat', id, odd]).stdout, 'odd');
    assert.ok(json(abx(d, ['files', id, '/we ird', '--json'])).entries.some((e) => e.path === odd));
    r = abx(d, ['exec', id, 'cat', `/home/user${odd}`]);
    assert.equal(r.stdout, 'odd');

    fails(abx(d, ['rm', id, '/d1']), /is a directory \(use -r\)/);
    r = abx(d, ['rm', id, '/d1/b.txt']);
    assert.equal(r.code, 0, r.stderr);
    r = abx(d, ['rm', '-r', id, '/d1']);
    assert.equal(r.code, 0, r.stderr);
    assert.ok(!json(abx(d, ['files', id, '--json'])).entries.some((e) => e.path.startsWith('/d1')));
    fails(abx(d, ['rm', id, '/nope']), /cannot remove '\/nope'/);
    fails(abx(d, ['cat', id, '/../etc/passwd']), /cannot download/);
  });
});

test('errors: unknown sandbox, keys, usage, unreachable abxd', { skip }, async () => {
  await withAbxd(async (d, ctx) => {
    fails(abx(d, ['info', 'nosuchsandbox']), /^abx info: cannot get sandbox 'nosuchsandbox': no sandbox 'nosuchsandbox'$/m);
    fails(abx(d, ['exec', 'nosuchsandbox', 'true']), /no sandbox 'nosuchsandbox'/);
    fails(abx(d, ['cp', '-', 'nosuchsandbox:/x'], { input: 'x' }), /no sandbox/);
    fails(abx(d, ['cat', 'nosuchsandbox', '/x']), /no sandbox/);
    fails(abx(d, ['kill', 'nosuchsandbox']), /no sandbox/);
    fails(abx(d, ['info', 'bad/id']), /invalid sandbox id/);

    fails(abx(d, ['ls'], { env: { ABX_API_KEY: '' } }), /ABX_API_KEY is not set/);
    fails(abx(d, ['create'], { env: { ABX_API_KEY: 'wrong' } }), /not valid/);
    // Probes need no key.
    assert.equal(abx(d, ['health'], { env: { ABX_API_KEY: '' } }).code, 0);
    assert.equal(abx(d, ['ready'], { env: { ABX_API_KEY: '' } }).code, 0);

    const usage = [
      [[]],
      [['frob'], /unknown verb 'frob'[\s\S]*create[\s\S]*exec/],
      [['ls', '--frob'], /unknown option '--frob'[\s\S]*Usage: abx ls/],
      [['ls', 'extra'], /unexpected argument 'extra'/],
      [['info'], /missing the sandbox ID/],
      [['exec', 'abc'], /missing the command/],
      [['exec'], /missing the sandbox ID/],
      [['exec', '--timeout', 'soon', 'abc', 'true'], /--timeout/],
      [['exec', '--user', 'admin', 'abc', 'true'], /--user/],
      [['exec', 'abc', '--cwd'], /needs a value/],
      [['create', '--memory-mb', 'lots'], /--memory-mb wants a whole number/],
      [['create', '--env', 'NOEQUALS'], /KEY=VALUE/],
      [['create', '--cpu', '-1'], /--cpu/],
      [['update', 'abc'], /nothing to update/],
      [['cp', 'a', 'b'], /one of SRC and DST/],
      [['cp', 'abc:/x'], /expected SRC and DST/],
      [['logs', 'abc', 'notapid'], /not a process id/],
      [['signal', 'abc', '1'], /expected ID PID SIGNAL/],
      [['rm', 'abc'], /missing ID and PATH/],
      [['mv', 'abc', '/a'], /missing/],
      [['rm', '-x', 'abc', '/a'], /unknown option '-x'/],
    ];
    for (const [args, re] of usage) {
      const r = abx(d, args);
      assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
      if (re) assert.match(r.stderr, re, args.join(' '));
      assert.equal(r.stdout, '', args.join(' '));
    }
    for (const verb of ['create', 'ls', 'info', 'update', 'kill', 'exec', 'ps', 'logs', 'signal', 'cp', 'files',
      'rm', 'mkdir', 'mv', 'cat', 'health', 'ready', 'drain', 'metrics']) {
      const r = abx(d, [verb, '--help']);
      assert.equal(r.code, 0, verb);
      assert.match(r.stdout, new RegExp(`^Usage: abx ${verb}`), verb);
    }
    assert.match(abx(d, ['--help']).stdout, /Verbs:/);

    // Nothing listens there.
    const gone = { ABX_URL: 'http://127.0.0.1:9' };
    fails(abx(d, ['ls'], { env: gone }), /cannot list sandboxes: .*127\.0\.0\.1/);
    fails(abx(d, ['health'], { env: gone }), /not healthy/);
    fails(abx(d, ['ls'], { env: { ABX_URL: 'localhost:8700' } }), /not an http/);
    assert.equal(ctx.ids.length, 0);
  });
});

test('health, ready, metrics, drain', { skip }, async () => {
  await withAbxd(async (d, ctx) => {
    const id = ctx.create();
    let r = abx(d, ['health']);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, 'ok\n');
    assert.deepEqual(json(abx(d, ['health', '--json'])), { status: 'ok' });
    r = abx(d, ['ready']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^ready \(isolation \w+, cgroup v\d\)$/m);
    assert.equal(json(abx(d, ['ready', '--json'])).ready, true);
    r = abx(d, ['metrics']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^abx_sandboxes 1$/m);

    r = abx(d, ['drain']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /draining.*1 still running/);
    assert.deepEqual(json(abx(d, ['drain', '--json'])), { draining: true, sandboxes: 1 });
    fails(abx(d, ['ready']), /not ready: draining/);
    r = abx(d, ['ready', '--json']);
    assert.equal(r.code, 1);
    assert.equal(JSON.parse(r.stdout).draining, true);
    fails(abx(d, ['create']), /draining/);
    // The running sandbox goes on.
    r = abx(d, ['exec', id, 'echo', 'still']);
    assert.equal(r.stdout, 'still\n');
  });
});
