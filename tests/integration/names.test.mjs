// names.test.mjs - file names are bytes: every name the kernel allows (any
// byte but NUL and '/') round-trips byte-exact through mirror, store,
// restore, walk and manifest, with "path_b64" for names that are not UTF-8;
// a name the store cannot hold is skipped and reported while the rest is
// saved; and no name reaches abxd's log raw (no forged line, no escape).
// SQLite always, PostgreSQL too when ABX_TEST_PG_URL is set.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { startAbxd, api, parseNdjson, isRoot } from './lib.mjs';

const skip = !isRoot && 'needs root';

// The names under test, as bytes.
const FORGED = Buffer.from('x\n<3>abxd: forged line\x1b[31m', 'latin1');
const NAMES = [
  Buffer.from('nl\nx'),
  Buffer.from('tab\tx'),
  Buffer.from('esc\x1b[31m'),
  Buffer.from([0xff]),
  Buffer.from([0x62, 0x61, 0x64, 0xc3, 0x28]), // "bad" + a cut sequence
  Buffer.from([0xed, 0xa0, 0x80]), // a UTF-16 surrogate
  Buffer.from([0xc0, 0xaf]), // an overlong '/'
  Buffer.alloc(255, 0xfe), // 255 bytes, none UTF-8
  Buffer.alloc(255, 'n'),
  Buffer.from('a\\b'),
  Buffer.from('...'),
  Buffer.from('{"path":"x"}'),
  Buffer.from('caf\u00e9 \u20ac'),
  Buffer.from('\x01\x7f'),
  FORGED,
];
const DIR = Buffer.from('dir\n\xff', 'latin1'); // a directory, with a file inside
const DEEPDIR = Buffer.concat([FORGED, Buffer.from('-dir')]);

// The exact bytes of an entry's name: path_b64 when abxd sent it.
function entryBytes(e) {
  assert.equal(typeof e.path, 'string', `an entry without a path: ${JSON.stringify(e)}`);
  if (e.path_b64 !== undefined) {
    const b = Buffer.from(e.path_b64, 'base64');
    assert.equal(b.toString('base64'), e.path_b64, 'path_b64 is standard, padded base64');
    return b;
  }
  return Buffer.from(e.path, 'utf8');
}

// '/'-rooted path bytes as a URL path or query value: every byte that is
// not unreserved percent-encoded, '/' kept when asked.
function pct(bytes, keepSlash = true) {
  let s = '';
  for (const c of bytes) {
    const ch = String.fromCharCode(c);
    if (/[A-Za-z0-9._~-]/.test(ch) || (keepSlash && ch === '/')) s += ch;
    else s += '%' + c.toString(16).toUpperCase().padStart(2, '0');
  }
  return s;
}

const slash = (name) => Buffer.concat([Buffer.from('/'), name]);
const hex = (b) => b.toString('hex');

async function wsExec(d, ws, argv) {
  const r = await api(d, 'POST', `/v1/workspaces/${ws}/exec`, { argv });
  assert.equal(r.status, 200, r.text);
  const p = parseNdjson(r.text);
  return { code: p.result?.exit_code, out: p.stdout, err: p.stderr.toString() };
}

// Python in the sandbox: makes or lists names as hex, so no shell quoting
// stands between the test and the bytes.
const MAKE = `
import os, sys
home = os.environ.get('HOME', '/home/user')
for h in sys.argv[1].split(','):
    name = bytes.fromhex(h)
    with open(os.path.join(home.encode(), name), 'wb') as f:
        f.write(b'content of ' + h.encode())
d = os.path.join(home.encode(), bytes.fromhex(sys.argv[2]))
os.mkdir(d)
with open(os.path.join(d, b'inner'), 'wb') as f:
    f.write(b'inner')
`;
const LIST = `
import os, sys
for n in sorted(os.listdir(bytes.fromhex(sys.argv[1]))):
    print(n.hex())
`;
// Directories nested until the path is past what the store holds (4095
// bytes), below a first directory named forged.
const DEEP = `
import os, sys
os.chdir(os.environ.get('HOME', '/home/user'))
os.mkdir(bytes.fromhex(sys.argv[1]))
os.chdir(bytes.fromhex(sys.argv[1]))
for i in range(25):
    os.mkdir(b'd' * 200)
    os.chdir(b'd' * 200)
open('leaf', 'w').write('leaf')
`;

const pgUrl = process.env.ABX_TEST_PG_URL;
const pgRequired = process.env.ABX_TEST_PG_REQUIRED === '1';
function psql(url, sql) {
  const r = spawnSync('psql', ['-v', 'ON_ERROR_STOP=1', '-qAt', url, '-c', sql], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`psql: ${r.stderr}`);
  return r.stdout;
}
function freshPgDatabase() {
  const name = 'abx_names_' + randomBytes(6).toString('hex');
  psql(pgUrl, `CREATE DATABASE ${name}`);
  return pgUrl.replace(/\/[^/?]*(\?|$)/, `/${name}$1`);
}
const backends = [{ kind: 'sqlite' }];
if (pgUrl || pgRequired) backends.push({ kind: 'postgres' });

for (const backend of backends)
  describe(`file names are bytes (${backend.kind})`, { skip }, () => {
    let d;
    const ws = 'names-' + randomBytes(4).toString('hex');
    const expected = [...NAMES.map(slash), slash(DIR), Buffer.concat([slash(DIR), Buffer.from('/inner')])];

    before(async () => {
      const env = { ABX_POOL: '0' };
      if (backend.kind === 'postgres') {
        assert.ok(pgUrl, 'ABX_TEST_PG_REQUIRED=1 but no ABX_TEST_PG_URL');
        env.ABX_STORE = freshPgDatabase();
      }
      d = await startAbxd({ env });
      const r = await api(d, 'POST', '/v1/workspaces', { id: ws });
      assert.equal(r.status, 201, r.text);
    });
    after(async () => {
      if (d) await api(d, 'DELETE', `/v1/workspaces/${ws}`);
      await d?.stop();
    });

    test('every name is mirrored, walked, stored and restored byte-exact', async () => {
      const made = await wsExec(d, ws, ['/usr/bin/python3', '-c', MAKE, NAMES.map(hex).join(','), hex(DIR)]);
      assert.equal(made.code, 0, made.err);

      // Warm walk: a path for every entry, the exact bytes through path_b64.
      let r = await api(d, 'GET', `/v1/workspaces/${ws}/walk`);
      assert.equal(r.status, 200, r.text);
      assert.equal(r.json.state, 'warm');
      const warm = r.json.entries.map(entryBytes).map(hex).sort();
      for (const n of expected) assert.ok(warm.includes(hex(n)), `warm walk lacks ${hex(n)}`);
      // path_b64 exactly when the name is not UTF-8.
      for (const e of r.json.entries) {
        const b = entryBytes(e);
        const utf8 = Buffer.from(b.toString('utf8'), 'utf8').equals(b);
        assert.equal(e.path_b64 === undefined, utf8, `path_b64 for ${hex(b)}`);
      }

      // Flush stores them all (and skips nothing).
      r = await api(d, 'POST', `/v1/workspaces/${ws}/flush`);
      assert.equal(r.status, 200, r.text);
      assert.equal(r.json.skipped, 0, r.text);

      // The mirror keeps going: a file written afterwards is saved too.
      assert.equal((await wsExec(d, ws, ['/bin/sh', '-c', 'echo later > $HOME/later.txt'])).code, 0);
      r = await api(d, 'POST', `/v1/workspaces/${ws}/close`);
      assert.equal(r.status, 200, r.text);

      // The store has every name, byte-exact, and the later file.
      r = await api(d, 'GET', `/v1/workspaces/${ws}/manifest`);
      assert.equal(r.status, 200, r.text);
      const stored = new Map(r.json.entries.map((e) => [hex(entryBytes(e)), e]));
      for (const n of expected) assert.ok(stored.has(hex(n)), `the store lacks ${hex(n)}`);
      assert.ok(stored.has(hex(Buffer.from('/later.txt'))), 'the later file was not saved');

      // Cold walk (the store), and cold downloads by percent-encoded bytes.
      r = await api(d, 'GET', `/v1/workspaces/${ws}/walk`);
      assert.equal(r.json.state, 'cold');
      const cold = r.json.entries.map(entryBytes).map(hex);
      for (const n of expected) assert.ok(cold.includes(hex(n)), `cold walk lacks ${hex(n)}`);
      for (const n of NAMES) {
        const g = await api(d, 'GET', `/v1/workspaces/${ws}/files${pct(slash(n))}`);
        assert.equal(g.status, 200, `${hex(n)}: ${g.text}`);
        assert.equal(g.text, 'content of ' + hex(n));
      }
      r = await api(d, 'GET', `/v1/workspaces/${ws}/walk?path=${pct(slash(DIR), false)}`);
      assert.equal(r.status, 200, r.text);
      assert.deepEqual(r.json.entries.map(entryBytes).map(hex), [hex(Buffer.concat([slash(DIR), Buffer.from('/inner')]))]);

      // Wake (restore): the sandbox has the same names again.
      const ls = await wsExec(d, ws, ['/usr/bin/python3', '-c', LIST, hex(Buffer.from('/home/user'))]);
      assert.equal(ls.code, 0, ls.err);
      const back = ls.out.toString().trim().split('\n');
      for (const n of NAMES) assert.ok(back.includes(hex(n)), `not restored: ${hex(n)}`);
      assert.ok(back.includes(hex(DIR)));
      const inner = await wsExec(d, ws, ['/usr/bin/python3', '-c', LIST, hex(Buffer.concat([Buffer.from('/home/user/'), DIR]))]);
      assert.equal(inner.out.toString().trim(), hex(Buffer.from('inner')));
      const lsb = await wsExec(d, ws, ['/bin/sh', '-c', 'ls -b $HOME']);
      assert.equal(lsb.code, 0, lsb.err);
      assert.match(lsb.out.toString(), /^nl\\nx$/m);
      assert.match(lsb.out.toString(), /^tab\\tx$/m);
      assert.match(lsb.out.toString(), /^\\377$/m);
    });

    test('names go in by path_b64 and percent-encoding; %00 is refused', async () => {
      const from = slash(Buffer.from([0xff]));
      const to = slash(Buffer.from([0x72, 0xfe, 0x0a]));
      let r = await api(d, 'POST', `/v1/workspaces/${ws}/rename`, {
        from_b64: from.toString('base64'),
        to_b64: to.toString('base64'),
      });
      assert.equal(r.status, 200, r.text);
      assert.equal(hex(entryBytes(r.json)), hex(to));
      r = await api(d, 'GET', `/v1/workspaces/${ws}/files${pct(to)}`);
      assert.equal(r.status, 200, r.text);
      assert.equal(r.text, 'content of ff');
      r = await api(d, 'POST', `/v1/workspaces/${ws}/mkdir`, { path: '/made\nhere' });
      assert.ok(r.status === 201, r.text);
      assert.equal(r.json.path, '/made\nhere');
      assert.equal(r.json.path_b64, undefined);
      // A NUL cannot be part of a name, in any form.
      r = await api(d, 'GET', `/v1/workspaces/${ws}/files/a%00b`);
      assert.equal(r.status, 400, r.text);
      assert.match(r.json.message, /NUL/);
      r = await api(d, 'GET', `/v1/workspaces/${ws}/walk?path=%2Fa%00`);
      assert.equal(r.status, 400, r.text);
      r = await api(d, 'POST', `/v1/workspaces/${ws}/mkdir`, { path_b64: Buffer.from('/a\0b').toString('base64') });
      assert.equal(r.status, 400, r.text);
      r = await api(d, 'POST', `/v1/workspaces/${ws}/mkdir`, { path_b64: 'not base64!' });
      assert.equal(r.status, 400, r.text);
      // A 0x01 byte is a name's like any other (what %00 used to become).
      r = await api(d, 'PUT', `/v1/workspaces/${ws}/files/a%01b`, 'one');
      assert.ok(r.status === 201 || r.status === 200, r.text);
      assert.equal(r.json.path, '/a\x01b');
    });
  });

// Item: a sandbox-chosen name must not forge a log line. A file named like
// a log line with a terminal escape, and a tree below a directory named so
// that is too deep for the store: the skip is logged once, escaped.
for (const backend of backends)
  describe(`unstorable names are skipped, and logged escaped (${backend.kind})`, { skip }, () => {
    let d;
    const ws = 'deep-' + randomBytes(4).toString('hex');
    before(async () => {
      const env = { ABX_POOL: '0' };
      if (backend.kind === 'postgres') env.ABX_STORE = freshPgDatabase();
      d = await startAbxd({ env });
      const r = await api(d, 'POST', '/v1/workspaces', { id: ws });
      assert.equal(r.status, 201, r.text);
    });
    after(async () => {
      if (d) await api(d, 'DELETE', `/v1/workspaces/${ws}`);
      await d?.stop();
    });

    test('the rest is saved, the skip reported, the log clean', async () => {
      const made = await wsExec(d, ws, ['/usr/bin/python3', '-c', MAKE, hex(FORGED), hex(Buffer.from('plain'))]);
      assert.equal(made.code, 0, made.err);
      const deep = await wsExec(d, ws, ['/usr/bin/python3', '-c', DEEP, hex(DEEPDIR)]);
      assert.equal(deep.code, 0, deep.err);
      assert.equal((await wsExec(d, ws, ['/bin/sh', '-c', 'echo after > $HOME/after-deep.txt'])).code, 0);
      let r = await api(d, 'POST', `/v1/workspaces/${ws}/flush`);
      // Whatever the mirror did, the log names the entry - escaped.
      const deadline = Date.now() + 5000;
      while (!/forged line/.test(d.log) && Date.now() < deadline) await new Promise((t) => setTimeout(t, 50));
      const log = d.log;
      assert.match(log, /forged line/, 'nothing logged about the entry');
      assert.doesNotMatch(log, /^<3>abxd: forged line/m, 'a forged log line');
      assert.ok(!log.includes('\x1b'), 'an ESC byte reached the log');
      for (const line of log.split('\n')) assert.doesNotMatch(line, /^<\d>/);
      assert.ok(log.includes('x\\n<3>abxd: forged line\\x1b[31m'), log);

      assert.equal(r.status, 200, r.text);
      assert.ok(r.json.skipped >= 1, r.text);
      const k = r.json.skipped_entries[0];
      assert.equal(k.error, 'name_too_long');
      assert.ok(entryBytes(k).subarray(0, DEEPDIR.length + 1).equals(slash(DEEPDIR)), r.text);
      r = await api(d, 'GET', `/v1/workspaces/${ws}/manifest`);
      const stored = r.json.entries.map(entryBytes).map((b) => b.toString('latin1'));
      assert.ok(stored.includes('/after-deep.txt'), 'a file next to the skipped tree was not saved');
      assert.ok(stored.includes('/' + FORGED.toString('latin1')), 'the forged name was not saved');
      assert.ok(stored.some((p) => p.startsWith('/' + DEEPDIR.toString('latin1') + '/dddd')));
      // The next flush still works and does not log the same skip again.
      r = await api(d, 'POST', `/v1/workspaces/${ws}/flush`);
      assert.equal(r.status, 200, r.text);
      assert.ok(r.json.skipped >= 1);
      assert.equal(d.log.split('cannot store').length - 1, 1, d.log);
    });
  });

// The E2B surface keeps its shapes: names that are not UTF-8 arrive as
// U+FFFD (as envd's watch events do), never as entries without a name.
describe('file names on the E2B surface', { skip }, () => {
  let d, sbx;
  before(async () => {
    d = await startAbxd({ key: 'e2b_' + randomBytes(20).toString('hex'), env: { ABX_POOL: '0' } });
    const r = await fetch(d.url + '/sandboxes', {
      method: 'POST',
      headers: { 'X-API-KEY': d.key, 'Content-Type': 'application/json' },
      body: JSON.stringify({ templateID: 'base', timeout: 120 }),
    });
    const text = await r.text();
    assert.equal(r.status, 201, text);
    sbx = JSON.parse(text);
  });
  after(async () => {
    if (sbx) await fetch(d.url + `/sandboxes/${sbx.sandboxID}`, { method: 'DELETE', headers: { 'X-API-KEY': d.key } });
    await d?.stop();
  });
  const envdHeaders = () => ({
    'E2b-Sandbox-Id': sbx.sandboxID,
    'X-Access-Token': sbx.envdAccessToken ?? '',
  });

  test('ListDir names every entry; /files takes percent-encoded bytes', async () => {
    // Upload to a name that is not UTF-8 through /files?path=.
    let r = await fetch(d.url + `/files?path=${pct(Buffer.from('/home/user/e\xff', 'latin1'), false)}`, {
      method: 'POST',
      headers: { ...envdHeaders(), 'Content-Type': 'application/octet-stream' },
      body: 'bytes',
    });
    const up = await r.text();
    assert.equal(r.status, 200, up);
    r = await fetch(d.url + '/filesystem.Filesystem/ListDir', {
      method: 'POST',
      headers: { ...envdHeaders(), 'Content-Type': 'application/json' },
      body: JSON.stringify({ path: '/home/user', depth: 1 }),
    });
    const body = await r.json();
    assert.equal(r.status, 200, JSON.stringify(body));
    for (const e of body.entries) {
      assert.equal(typeof e.name, 'string', JSON.stringify(e));
      assert.equal(typeof e.path, 'string', JSON.stringify(e));
    }
    assert.ok(body.entries.some((e) => e.name === 'e\ufffd'), JSON.stringify(body));
    r = await fetch(d.url + `/files?path=${pct(Buffer.from('/home/user/e\xff', 'latin1'), false)}`, {
      headers: envdHeaders(),
    });
    assert.equal(r.status, 200);
    assert.equal(await r.text(), 'bytes');
    r = await fetch(d.url + `/files?path=%2Fhome%2Fuser%2Fe%00`, { headers: envdHeaders() });
    assert.equal(r.status, 400);
  });
});
