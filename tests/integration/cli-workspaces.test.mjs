// cli-workspaces.test.mjs - `abx ws ...` and `abx store ...` (and libabx's
// workspace functions under them) against a real abxd and its SQLite store.
//
// Every test starts its own abxd without a warm pool, so a sandbox directory
// that appears in its state dir is a wake; it drives abxd with the real abx
// (ABX_BIN_DIR's), deletes the workspaces it made and stops abxd, even when
// it fails. The raw wire (lib.mjs's api) is used only to check what the CLI
// did and to get abxd's own error messages to compare with.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startAbxd, abx as runAbx, api, isRoot } from './lib.mjs';

const skip = !isRoot && 'needs root';

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

function ok(r) {
  assert.equal(r.code, 0, `expected exit 0, got ${r.code}: ${r.stdout} ${r.stderr}`);
  return r;
}

function json(r) {
  return JSON.parse(ok(r).stdout);
}

// A one-line error on stderr and exit 1.
function fails(r, re) {
  assert.equal(r.code, 1, `expected exit 1, got ${r.code}: ${r.stdout} ${r.stderr}`);
  assert.match(r.stderr, re);
  assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
}

// A usage error: exit 2, the problem and the usage on stderr, nothing done.
function usage(r, re) {
  assert.equal(r.code, 2, `expected exit 2, got ${r.code}: ${r.stdout} ${r.stderr}`);
  assert.match(r.stderr, re);
  assert.equal(r.stdout, '');
}

function sandboxDirs(d) {
  const p = join(d.stateDir, 'sandboxes');
  return existsSync(p) ? readdirSync(p) : [];
}

// The state as abxd reports it, over the raw wire.
async function wsState(d, ws) {
  const r = await api(d, 'GET', `/v1/workspaces/${ws}`);
  assert.equal(r.status, 200, r.text);
  return r.json.state;
}

// Runs fn(d, ctx) with a fresh abxd; ctx.create(...args) makes a workspace
// with `abx ws create` and remembers it; everything is removed afterwards.
async function withAbxd(fn, opts = {}) {
  const d = await startAbxd({ ...opts, env: { ABX_POOL: '0', ...(opts.env ?? {}) } });
  const ids = [];
  const tmp = mkdtempSync(join(tmpdir(), 'abx-cli-ws-'));
  const ctx = {
    tmp,
    ids,
    create(...args) {
      const r = ok(abx(d, ['ws', 'create', ...args]));
      const id = r.stdout.trim();
      ids.push(id);
      return id;
    },
  };
  try {
    await fn(d, ctx);
  } finally {
    try {
      for (const id of ids) {
        const r = await api(d, 'DELETE', `/v1/workspaces/${id}`);
        if (r.status !== 204 && r.status !== 404) throw new Error(`delete ${id}: ${r.status} ${r.text}`);
      }
    } finally {
      rmSync(tmp, { recursive: true, force: true });
      await d.stop();
    }
  }
}

test('ws create, ls, info and rm, with --json and usage errors', { skip }, async () => {
  await withAbxd(async (d, ctx) => {
    const w = json(abx(d, ['ws', 'create', '--id', 'proj-1', '--cpu', '0.5', '--memory-mb', '256', '--pids', '64', '--json']));
    ctx.ids.push(w.id);
    assert.equal(w.id, 'proj-1');
    assert.equal(w.state, 'cold');
    assert.equal(w.template, 'base');
    assert.equal(w.cpu, 0.5);
    assert.equal(w.memory_mb, 256);
    assert.equal(w.pids, 64);

    const gen = ctx.create();
    assert.match(gen, /^[a-z0-9]{20}$/);
    fails(abx(d, ['ws', 'create', '--id', 'proj-1']), /cannot create workspace 'proj-1': .*already exists/);
    fails(abx(d, ['ws', 'create', '--id', 'Upper']), /cannot create a workspace: .*'id'/);

    const ls = ok(abx(d, ['ws', 'ls']));
    assert.match(ls.stdout, /^ID\s+STATE\s+TEMPLATE\s+CREATED$/m);
    assert.match(ls.stdout, /^proj-1\s+cold\s+base\s+\d{4}-/m);
    assert.match(ls.stdout, new RegExp(`^${gen}\\s+cold`, 'm'));
    const lsj = json(abx(d, ['ws', 'ls', '--json']));
    assert.deepEqual(lsj.workspaces.map((x) => x.id).sort(), ['proj-1', gen].sort());

    const info = ok(abx(d, ['ws', 'info', 'proj-1']));
    assert.match(info.stdout, /^id: +proj-1$/m);
    assert.match(info.stdout, /^state: +cold$/m);
    assert.match(info.stdout, /^stored: +0 bytes in 0 files, 0 directories$/m);
    const infoj = json(abx(d, ['ws', 'info', '--json', 'proj-1']));
    assert.deepEqual(infoj.usage, { bytes: 0, files: 0, dirs: 0 });

    ok(abx(d, ['ws', 'rm', gen]));
    fails(abx(d, ['ws', 'info', gen]), new RegExp(`cannot get workspace '${gen}': no workspace '${gen}'`));
    // One bad id among several: the others are still removed, exit 1.
    const other = ctx.create();
    const rm = abx(d, ['ws', 'rm', 'nope', other]);
    fails(rm, /cannot delete workspace 'nope'/);
    assert.equal((await api(d, 'GET', `/v1/workspaces/${other}`)).status, 404);

    // The command line is checked before anything is sent.
    usage(abx(d, ['ws']), /abx ws: missing the verb/);
    usage(abx(d, ['ws', 'nope']), /abx ws: unknown verb 'nope'/);
    usage(abx(d, ['ws', 'info']), /abx ws info: missing the workspace/);
    usage(abx(d, ['ws', 'create', 'extra']), /unexpected argument 'extra'/);
    usage(abx(d, ['ws', 'create', '--cpu', '0']), /--cpu must be more than 0/);
    usage(abx(d, ['ws', 'exec', 'proj-1']), /missing the command/);
    usage(abx(d, ['ws', 'cp', 'a', 'b']), /one of SRC and DST must be WS:PATH/);
    usage(abx(d, ['ws', 'rm-file', 'proj-1']), /missing WS and PATH/);
    usage(abx(d, ['store']), /abx store: missing the verb/);
    // --if-match belongs to workspaces only.
    usage(abx(d, ['cp', '--if-match', 'x', 'a', 'sb:/a']), /unknown option '--if-match'/);
    const help = ok(abx(d, ['ws', '--help']));
    assert.match(help.stdout, /^  rm-file +remove a file/m);
    assert.match(ok(abx(d, ['help', 'ws', 'cp'])).stdout, /^Usage: abx ws cp SRC DST/);
    assert.match(ok(abx(d, ['ws', 'exec', '--help'])).stdout, /--idle-timeout S/);
    assert.deepEqual(sandboxDirs(d), []);
  });
});

test('ws cp, cat, files, mkdir, mv, rm-file while cold never wake the workspace', { skip }, async () => {
  await withAbxd(async (d, ctx) => {
    const ws = ctx.create('--id', 'cold-ws');
    const data = randomBytes(300 * 1024 + 7);
    const local = join(ctx.tmp, 'a.bin');
    writeFileSync(local, data);

    ok(abx(d, ['ws', 'cp', local, `${ws}:/dir/a.bin`]));
    // Into a directory: it keeps its name.
    const local2 = join(ctx.tmp, 'c.bin');
    writeFileSync(local2, data);
    ok(abx(d, ['ws', 'cp', local2, `${ws}:/dir/`]));
    ok(abx(d, ['ws', 'cp', local2, `${ws}:/dir`]));
    ok(abx(d, ['ws', 'cp', '-', `${ws}:notes.txt`], { input: 'from stdin\n' }));
    assert.equal(await wsState(d, ws), 'cold');

    // Out again: to a file, into a directory, to stdout.
    const out = join(ctx.tmp, 'out.bin');
    ok(abx(d, ['ws', 'cp', `${ws}:/dir/a.bin`, out]));
    assert.ok(readFileSync(out).equals(data), 'downloaded bytes differ');
    ok(abx(d, ['ws', 'cp', `${ws}:/notes.txt`, ctx.tmp]));
    assert.equal(readFileSync(join(ctx.tmp, 'notes.txt'), 'utf8'), 'from stdin\n');
    const cat = abx(d, ['ws', 'cat', ws, '/dir/a.bin'], { encoding: 'buffer' });
    assert.equal(cat.code, 0, String(cat.stderr));
    assert.ok(cat.stdout.equals(data));
    fails(abx(d, ['ws', 'cat', ws, '/nope']), /cannot download '\/nope' from workspace 'cold-ws'/);

    ok(abx(d, ['ws', 'mkdir', ws, '/empty/deep']));
    ok(abx(d, ['ws', 'mv', ws, '/dir/a.bin', '/dir/b.bin']));
    fails(abx(d, ['ws', 'mv', ws, '/dir/b.bin', '/notes.txt']), /already exists.*--overwrite/);
    ok(abx(d, ['ws', 'mv', '--overwrite', ws, '/dir/b.bin', '/notes.txt']));
    fails(abx(d, ['ws', 'rm-file', ws, '/empty']), /it is a directory \(use -r\)/);
    ok(abx(d, ['ws', 'rm-file', '-r', ws, '/empty']));

    const files = ok(abx(d, ['ws', 'files', ws]));
    assert.deepEqual(
      files.stdout.trim().split('\n').map((l) => l.split(/\s+/)),
      [
        ['dir', '0', '/dir'],
        ['file', String(data.length), '/dir/c.bin'],
        ['file', String(data.length), '/notes.txt'],
      ],
    );
    const walk = json(abx(d, ['ws', 'files', '--json', ws, '/dir']));
    assert.equal(walk.state, 'cold');
    assert.deepEqual(walk.entries.map((e) => e.path), ['/dir/c.bin']);

    const m = json(abx(d, ['ws', 'manifest', ws, '--json']));
    const byPath = Object.fromEntries(m.entries.map((e) => [e.path, e]));
    assert.equal(byPath['/notes.txt'].hash, sha256(data));
    assert.equal(byPath['/dir'].type, 'dir');
    const mt = ok(abx(d, ['ws', 'manifest', ws]));
    assert.match(mt.stdout, new RegExp(`^file +${data.length} ${sha256(data)} /dir/c.bin$`, 'm'));
    assert.match(ok(abx(d, ['ws', 'info', ws])).stdout, /^stored: +614414 bytes in 2 files, 1 directories$/m);

    // Flush and close of a cold workspace have nothing to do.
    assert.match(ok(abx(d, ['ws', 'flush', ws])).stdout, /^flushed: 0 files/);
    assert.equal(json(abx(d, ['ws', 'close', ws, '--json'])).files, 0);

    // None of it woke the workspace.
    assert.equal(await wsState(d, ws), 'cold');
    assert.match(ok(abx(d, ['ws', 'info', ws])).stdout, /^state: +cold$/m);
    assert.deepEqual(sandboxDirs(d), [], 'a file operation created a sandbox');

    fails(abx(d, ['ws', 'cp', local, 'nope:/x']), /cannot look up '\/x' in workspace 'nope': no workspace 'nope'/);
  });
});

test('ws exec wakes the workspace; flush stores what the command wrote; close', { skip }, async () => {
  await withAbxd(async (d, ctx) => {
    const ws = ctx.create();
    const local = join(ctx.tmp, 'in.txt');
    writeFileSync(local, 'restored\n');
    ok(abx(d, ['ws', 'cp', local, `${ws}:/in.txt`]));
    assert.equal(await wsState(d, ws), 'cold');

    // The exit code, stdout and stderr pass through as with abx exec.
    let r = abx(d, ['ws', 'exec', ws, '--', 'sh', '-c', 'pwd; cat in.txt; echo made > made.txt; mkdir -p out/sub; echo err >&2; exit 3']);
    assert.equal(r.code, 3, r.stderr);
    assert.equal(r.stdout, '/home/user\nrestored\n');
    assert.equal(r.stderr, 'err\n');
    assert.equal(await wsState(d, ws), 'warm');
    assert.match(ok(abx(d, ['ws', 'info', ws])).stdout, /^state: +warm$/m);

    r = abx(d, ['ws', 'exec', '--timeout', '1', ws, 'sleep', '30']);
    assert.equal(r.code, 124);
    r = abx(d, ['ws', 'exec', '-i', ws, 'cat'], { input: 'piped\n' });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, 'piped\n');
    fails(abx(d, ['ws', 'exec', '-i', ws, 'cat'], { input: Buffer.alloc(2 << 20) }), /larger than 1048576 bytes/);
    r = abx(d, ['ws', 'exec', '--json', '--env', 'X=y', ws, '--', 'sh', '-c', 'printf "$X"; exit 2']);
    assert.equal(r.code, 2);
    const lines = r.stdout.trim().split('\n').map((l) => JSON.parse(l));
    assert.equal(typeof lines[0].pid, 'number');
    assert.equal(Buffer.from(lines[1].stdout, 'base64').toString(), 'y');
    assert.equal(lines.at(-1).exit_code, 2);
    const bg = ok(abx(d, ['ws', 'exec', '-d', ws, 'true']));
    assert.match(bg.stdout, /^\d+\n$/);
    fails(abx(d, ['ws', 'exec', 'nope', 'true']), /cannot run 'true' in workspace 'nope': no workspace 'nope'/);

    // Warm file verbs go to the sandbox.
    assert.equal(ok(abx(d, ['ws', 'cat', ws, '/made.txt'])).stdout, 'made\n');
    assert.equal(json(abx(d, ['ws', 'files', '--json', ws])).state, 'warm');

    // flush stores what the command wrote; the manifest shows it.
    const flushed = ok(abx(d, ['ws', 'flush', ws]));
    assert.match(flushed.stdout, /^flushed: [1-9]\d* files \(\d+ bytes\) and [1-9]\d* directories stored/);
    const m = Object.fromEntries(json(abx(d, ['ws', 'manifest', '--json', ws])).entries.map((e) => [e.path, e]));
    assert.equal(m['/made.txt']?.hash, sha256('made\n'), JSON.stringify(m));
    assert.equal(m['/out/sub']?.type, 'dir');
    assert.equal(m['/in.txt']?.hash, sha256('restored\n'));
    assert.match(ok(abx(d, ['ws', 'manifest', ws])).stdout, new RegExp(`^file +5 ${sha256('made\n')} /made.txt$`, 'm'));

    // close mirrors and ends the sandbox; the store serves the files after.
    ok(abx(d, ['ws', 'exec', ws, '--', 'sh', '-c', 'echo late > late.txt']));
    const closed = json(abx(d, ['ws', 'close', '--json', ws]));
    assert.equal(closed.files, 1, JSON.stringify(closed));
    assert.equal(await wsState(d, ws), 'cold');
    assert.equal(ok(abx(d, ['ws', 'cat', ws, 'late.txt'])).stdout, 'late\n');
    assert.equal(json(abx(d, ['ws', 'files', '--json', ws])).state, 'cold');

    // rm of a warm workspace kills its sandbox.
    ok(abx(d, ['ws', 'exec', ws, 'true']));
    assert.equal(await wsState(d, ws), 'warm');
    ok(abx(d, ['ws', 'rm', ws]));
    fails(abx(d, ['ws', 'info', ws]), /no workspace/);
  });
});

test('--if-match: a stale version fails with abxd\'s 412 message, cold and warm', { skip }, async () => {
  await withAbxd(async (d, ctx) => {
    const ws = ctx.create();
    const f = (name, text) => {
      const p = join(ctx.tmp, name);
      writeFileSync(p, text);
      return p;
    };
    ok(abx(d, ['ws', 'cp', f('v1', 'v1'), `${ws}:/f`]));
    const v1 = sha256('v1');
    assert.equal(json(abx(d, ['ws', 'files', '--json', ws])).entries[0].version, v1);

    for (const phase of ['cold', 'warm']) {
      if (phase === 'warm') {
        ok(abx(d, ['ws', 'exec', ws, 'true']));
        assert.equal(await wsState(d, ws), 'warm');
      }
      const current = sha256(ok(abx(d, ['ws', 'cat', ws, '/f'])).stdout);
      const stale = sha256('not the content');
      // abxd's own message for this precondition, to find in abx's error.
      const raw = await api(d, 'PUT', `/v1/workspaces/${ws}/files/f`, 'x', { headers: { 'if-match': stale } });
      assert.equal(raw.status, 412, raw.text);
      assert.equal(raw.json.error, 'precondition_failed');

      let r = abx(d, ['ws', 'cp', '--if-match', stale, f('v2', 'v2'), `${ws}:/f`]);
      fails(r, /cannot upload '.*v2' to '\/f' in workspace/);
      assert.ok(r.stderr.includes(raw.json.message), `${phase}: ${r.stderr} lacks "${raw.json.message}"`);
      assert.equal(ok(abx(d, ['ws', 'cat', ws, '/f'])).stdout, 'v1', 'a failed precondition wrote');

      // The current version (quoted like an ETag, too) lets it through.
      ok(abx(d, ['ws', 'cp', '--if-match', `"${current}"`, f('v2', `v2-${phase}`), `${ws}:/f`]));
      assert.equal(ok(abx(d, ['ws', 'cat', ws, '/f'])).stdout, `v2-${phase}`);
      // '' means "only if absent".
      fails(abx(d, ['ws', 'cp', '--if-match', '', f('v3', 'v3'), `${ws}:/f`]), /cannot upload/);
      ok(abx(d, ['ws', 'cp', '--if-match', '', f('n', 'n'), `${ws}:/new-${phase}`]));

      // rm-file: stale refused, current accepted.
      fails(abx(d, ['ws', 'rm-file', '--if-match', stale, ws, `/new-${phase}`]), /cannot remove '\/new-\w+' in workspace/);
      ok(abx(d, ['ws', 'cat', ws, `/new-${phase}`]));
      ok(abx(d, ['ws', 'rm-file', '--if-match', sha256('n'), ws, `/new-${phase}`]));
      fails(abx(d, ['ws', 'cat', ws, `/new-${phase}`]), /no such file/);
      // Put back the content the loop expects.
      ok(abx(d, ['ws', 'cp', f('v1', 'v1'), `${ws}:/f`]));
    }

    usage(abx(d, ['ws', 'cp', '--if-match', 'a"b', f('x', 'x'), `${ws}:/x`]), /--if-match wants a version/);
    usage(abx(d, ['ws', 'cp', '--if-match', v1, `${ws}:/f`, join(ctx.tmp, 'o')]), /--if-match applies to uploads/);
    ok(abx(d, ['ws', 'close', ws]));
  });
});

test('store check and gc; a damaged store fails check and a wake, loudly', { skip }, async () => {
  await withAbxd(async (d, ctx) => {
    const ws = ctx.create();
    const p = join(ctx.tmp, 'g');
    writeFileSync(p, 'old content');
    ok(abx(d, ['ws', 'cp', p, `${ws}:/g`]));
    writeFileSync(p, 'precious data');
    ok(abx(d, ['ws', 'cp', p, `${ws}:/dir/bad.txt`]));
    ok(abx(d, ['ws', 'cp', p, `${ws}:/g`])); // 'old content' is now garbage

    assert.match(ok(abx(d, ['store', 'check'])).stdout, /^ok: sqlite store, 2 files, \d+ blobs\n$/);
    const c = json(abx(d, ['store', 'check', '--json']));
    assert.equal(c.ok, true);
    assert.equal(c.store, 'sqlite');

    const gc = ok(abx(d, ['store', 'gc']));
    assert.match(gc.stdout, /^deleted [1-9]\d* blobs, freed \d+ bytes\n$/);
    const gcj = json(abx(d, ['store', 'gc', '--json']));
    assert.equal(gcj.held_lease, true);
    assert.equal(gcj.blobs_deleted, 0);
    assert.equal(ok(abx(d, ['ws', 'cat', ws, '/g'])).stdout, 'precious data');

    // Tamper with the blob: check says so (exit 1), and a wake refuses with
    // abxd's message naming the path (500 stays exit 1, the message intact).
    const hash = sha256('precious data');
    const blob = join(d.stateDir, 'store', 'blobs', hash.slice(0, 2), hash);
    assert.ok(existsSync(blob), `no blob at ${blob}`);
    writeFileSync(blob, 'tampered data');
    fails(abx(d, ['store', 'check']), /abx store check: the sqlite store is damaged: 0 missing blobs, 1 corrupt blobs, 0 orphan entries; first: /);
    const cj = abx(d, ['store', 'check', '--json']);
    assert.equal(cj.code, 1);
    assert.equal(JSON.parse(cj.stdout).corrupt_blobs, 1);
    fails(abx(d, ['ws', 'exec', ws, 'true']), /cannot run 'true' in workspace '\w+': .*\/dir\/bad\.txt/);
    assert.equal(await wsState(d, ws), 'cold');

    writeFileSync(blob, 'precious data');
    ok(abx(d, ['store', 'check']));
    assert.equal(ok(abx(d, ['ws', 'exec', ws, 'cat', 'dir/bad.txt'])).stdout, 'precious data');
    ok(abx(d, ['ws', 'close', ws]));
  });
});
