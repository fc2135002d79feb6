// template-build.test.mjs - building templates over a real abxd: POST
// /v1/templates with a tar of the directory, the streamed build log, the
// stored read-only layer stacked under every sandbox of the template with a
// writable layer of its own on top, hostile archives refused, rebuilds,
// restarts, and `abx template build` end to end.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, mkdirSync, writeFileSync, rmSync, existsSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { startAbxd, api, createSandbox, killSandbox, sh, abx, isRoot, until } from './lib.mjs';

const skip = !isRoot && 'needs root';

// --- a small ustar writer, so tests can also write what no tar tool would ---
function header(name, type, size = 0, link = '') {
  const h = Buffer.alloc(512);
  h.write(name.slice(0, 100), 0, 'utf8');
  h.write('0000644\0', 100);
  h.write('0000000\0', 108);
  h.write('0000000\0', 116);
  h.write(size.toString(8).padStart(11, '0') + '\0', 124);
  h.write('00000000000\0', 136);
  h.write(type, 156);
  h.write(link, 157);
  h.write('ustar\0' + '00', 257, 'latin1');
  h.fill(' ', 148, 156);
  let sum = 0;
  for (const b of h) sum += b;
  h.write(sum.toString(8).padStart(6, '0') + '\0 ', 148, 'latin1');
  return h;
}
function pad(buf) {
  const n = (512 - (buf.length % 512)) % 512;
  return Buffer.concat([buf, Buffer.alloc(n)]);
}
// entries: [{name, data} | {name, dir: true} | {name, link} | {name, type}]
function tarOf(entries) {
  const parts = [];
  for (const e of entries) {
    if (e.dir) parts.push(header(e.name, '5'));
    else if (e.link !== undefined) parts.push(header(e.name, '2', 0, e.link));
    else if (e.type) parts.push(header(e.name, e.type));
    else {
      const d = Buffer.from(e.data);
      parts.push(header(e.name, '0', d.length), pad(d));
    }
  }
  parts.push(Buffer.alloc(1024));
  return Buffer.concat(parts);
}

async function build(d, tar, opts = {}) {
  const r = await api(d, 'POST', '/v1/templates', tar, {
    headers: { 'content-type': 'application/x-tar', ...(opts.headers ?? {}) },
    key: opts.key,
  });
  const lines = r.status === 200 ? r.text.split('\n').filter(Boolean).map((l) => JSON.parse(l)) : [];
  return { ...r, lines, last: lines[lines.length - 1] };
}

const TB = (marker) => `name: layered
aliases: [lay]
description: writes /usr, /etc and /opt
env: {LAYERED: "yes"}
resources: {disk_mb: 64}
steps:
  - run: |
      echo building ${marker}
      mkdir -p /usr/local/bin /opt/tb
      printf '#!/bin/sh\\necho hello-${marker}\\n' > /usr/local/bin/hello
      chmod 755 /usr/local/bin/hello
      echo conf-${marker} > /etc/layered.conf
      echo opt-${marker} > /opt/tb/file
  - env: {STAGE: two}
  - workdir: /work/sub
  - run: echo "stage=$STAGE cwd=$(pwd)"
  - copy: {src: files/data.txt, dst: /opt/tb/data.txt}
`;

describe('template build', { skip }, () => {
  let d;
  const made = [];
  before(async () => {
    d = await startAbxd();
  });
  after(async () => {
    for (const id of made) await killSandbox(d, id).catch(() => {});
    await d.stop();
  });
  async function sandbox(body) {
    const s = await createSandbox(d, body);
    made.push(s.id);
    return s.id;
  }

  test('a build streams its log and offers the template at once', async () => {
    const r = await build(d, tarOf([
      { name: './', dir: true },
      { name: 'sandbox-template.yaml', data: TB('one') },
      { name: 'files/data.txt', data: 'copied\n' },
    ]));
    assert.equal(r.status, 200, r.text);
    assert.equal(r.headers.get('content-type'), 'application/x-ndjson');
    assert.deepEqual(r.last.done, true, r.text);
    assert.equal(r.last.template, 'layered');
    assert.ok(r.lines.some((l) => l.step === 1 && l.line === 'building one'), r.text);
    assert.ok(r.lines.some((l) => l.step === 4 && l.line === 'stage=two cwd=/work/sub'), r.text);
    assert.ok(r.lines.some((l) => l.step === 5 && l.start === 'copy'), r.text);
    const t = await api(d, 'GET', '/v1/templates/lay');
    assert.equal(t.status, 200);
    assert.equal(t.json.built, true);
    // the layer on disk: the files the steps changed, ids as the sandbox sees them
    const fs = join(d.stateDir, 'templates', 'layered', 'current', 'fs');
    assert.ok(existsSync(join(fs, 'usr/local/bin/hello')));
    assert.ok(existsSync(join(fs, 'etc/layered.conf')));
    assert.ok(existsSync(join(fs, 'opt/tb/data.txt')));
    assert.ok(!readdirSync(join(d.stateDir, 'templates')).some((n) => n.startsWith('.')));
  });

  test('sandboxes see the layer, each with its own writable layer on top', async () => {
    const a = await sandbox({ template: 'layered' });
    const b = await sandbox({ template: 'lay' });
    let x = await sh(d, a, 'hello; cat /etc/layered.conf /opt/tb/file /opt/tb/data.txt; echo $LAYERED');
    assert.equal(x.code, 0, x.err);
    assert.equal(x.out, 'hello-one\nconf-one\nopt-one\ncopied\nyes\n');
    // root in the sandbox writes /usr, /etc, /opt like a package manager would
    x = await sh(d, a, 'echo mine > /usr/local/bin/x && echo changed > /etc/layered.conf && rm /opt/tb/file && cat /usr/local/bin/x', { user: 'root' });
    assert.equal(x.code, 0, x.err);
    assert.equal(x.out, 'mine\n');
    x = await sh(d, b, 'cat /usr/local/bin/x; cat /etc/layered.conf /opt/tb/file');
    assert.match(x.err, /No such file/);
    assert.equal(x.out, 'conf-one\nopt-one\n');
    assert.ok(!existsSync('/usr/local/bin/x'));
    const fs = join(d.stateDir, 'templates', 'layered', 'current', 'fs');
    assert.ok(!existsSync(join(fs, 'usr/local/bin/x')));
    assert.ok(existsSync(join(fs, 'opt/tb/file')));
    // the host's /usr is still underneath
    x = await sh(d, b, 'test -x /usr/bin/env && echo ok');
    assert.equal(x.out, 'ok\n');
    // a base sandbox keeps the read-only host /usr
    const c = await sandbox({});
    x = await sh(d, c, 'test -e /usr/local/bin/hello || echo absent; touch /usr/x 2>&1 || true', { user: 'root' });
    assert.match(x.out, /absent/);
    assert.match(x.out, /Read-only/);
  });

  test('disk_mb bounds the writable layer', async () => {
    const a = await sandbox({ template: 'layered' });
    const x = await sh(d, a, 'dd if=/dev/zero of=/opt/big bs=1M count=100 2>&1; echo rc=$?', { user: 'root' });
    assert.match(x.out, /No space left/);
  });

  test('a failing step fails the build with its log and leaves no template', async () => {
    const r = await build(d, tarOf([{ name: 'sandbox-template.yaml', data: 'name: broken\nsteps:\n  - run: echo first\n  - run: echo about to fail; exit 7\n' }]));
    assert.equal(r.status, 200);
    assert.ok(r.lines.some((l) => l.step === 2 && l.line === 'about to fail'), r.text);
    assert.match(r.last.error, /step 2 \(line 4\): exited with 7/);
    assert.equal(r.last.step, 2);
    assert.equal((await api(d, 'GET', '/v1/templates/broken')).status, 404);
    // Cleaned up within 300 ms of the answer.
    const hidden = () => readdirSync(join(d.stateDir, 'templates')).some((n) => n.startsWith('.'));
    await until(() => !existsSync(join(d.stateDir, 'templates', 'broken')) && !hidden(), 300);
    assert.ok(!existsSync(join(d.stateDir, 'templates', 'broken')));
    assert.ok(!readdirSync(join(d.stateDir, 'templates')).some((n) => n.startsWith('.')));
  });

  test('an invalid template is 400 with file:line before anything runs', async () => {
    let r = await build(d, tarOf([{ name: 'sandbox-template.yaml', data: 'name: bad\ncapabilites: []\n' }]));
    assert.equal(r.status, 400);
    assert.match(r.json.message, /sandbox-template\.yaml:2: .*capabilites/);
    r = await build(d, tarOf([{ name: 'x.txt', data: 'no template here' }]));
    assert.equal(r.status, 400);
    r = await build(d, tarOf([{ name: 'sandbox-template.yaml', data: 'name: cp\nsteps:\n  - copy: {src: nope.txt, dst: /opt/x}\n' }]));
    assert.equal(r.status, 400);
    assert.match(r.json.message, /nope\.txt/);
    r = await build(d, tarOf([{ name: 'sandbox-template.yaml', data: 'name: cp\nsteps:\n  - copy: {src: sandbox-template.yaml, dst: /root/x}\n' }]));
    assert.equal(r.status, 400);
    assert.match(r.json.message, /not under \/usr, \/etc or \/opt/);
    r = await build(d, tarOf([{ name: 'sandbox-template.yaml', data: 'name: base\n' }]));
    assert.equal(r.status, 400);
    r = await api(d, 'POST', '/v1/templates', '{}', { headers: { 'content-type': 'application/json' } });
    assert.equal(r.status, 415);
  });

  test('hostile archives are refused and write nothing outside the staging area', async () => {
    const victim = join(tmpdir(), 'abx-escape-' + randomBytes(4).toString('hex'));
    const yaml = { name: 'sandbox-template.yaml', data: 'name: hostile\n' };
    const cases = {
      dotdot: [yaml, { name: '../../../../../../..' + victim, data: 'x' }],
      absolute: [yaml, { name: victim, data: 'x' }],
      'symlink out': [yaml, { name: 'out', link: '/tmp' }],
      'symlink out then file': [yaml, { name: 'l', link: '../../../../../../../../tmp' }, { name: 'l/' + victim.split('/').pop(), data: 'x' }],
      'through a symlink': [yaml, { name: 'd', dir: true }, { name: 'l', link: 'd' }, { name: 'l/f', data: 'x' }],
      device: [yaml, { name: 'null', type: '3' }],
      'hard link': [yaml, { name: 'h', type: '1' }],
    };
    for (const [what, entries] of Object.entries(cases)) {
      const r = await build(d, tarOf(entries));
      assert.equal(r.status, 400, `${what}: ${r.status} ${r.text}`);
      assert.equal(r.json.error, 'invalid_archive', what);
    }
    // more entries than allowed
    const many = [yaml];
    for (let i = 0; i < 20001; i++) many.push({ name: `f${i}`, dir: true });
    let r = await build(d, tarOf(many));
    assert.equal(r.status, 400);
    assert.match(r.json.message, /entries/);
    // garbage
    r = await build(d, Buffer.alloc(1536, 0x41));
    assert.equal(r.status, 400);
    assert.ok(!existsSync(victim));
    assert.ok(!existsSync(join(d.stateDir, victim.split('/').pop())));
    assert.equal((await api(d, 'GET', '/v1/templates/hostile')).status, 404);
    // Cleaned up within 200 ms of the answer.
    await until(() => !readdirSync(join(d.stateDir, 'templates')).some((n) => n.startsWith('.')), 200);
    assert.ok(!readdirSync(join(d.stateDir, 'templates')).some((n) => n.startsWith('.')));
  });

  test('building the same name again replaces it for new sandboxes only', async () => {
    const old = await sandbox({ template: 'layered' });
    const r = await build(d, tarOf([
      { name: 'sandbox-template.yaml', data: TB('two') },
      { name: 'files/data.txt', data: 'copied again\n' },
    ]));
    assert.equal(r.last.done, true, r.text);
    const fresh = await sandbox({ template: 'layered' });
    let x = await sh(d, fresh, 'hello; cat /opt/tb/data.txt');
    assert.equal(x.out, 'hello-two\ncopied again\n');
    x = await sh(d, old, 'hello');
    assert.equal(x.out, 'hello-one\n');
  });

  test('a template built on a built template stacks both layers', async () => {
    const r = await build(d, tarOf([{ name: 'sandbox-template.yaml', data: 'name: upper\nbase: layered\nsteps:\n  - run: echo up > /opt/up.txt && hello > /etc/from-base\n' }]));
    assert.equal(r.last.done, true, r.text);
    const s = await sandbox({ template: 'upper' });
    const x = await sh(d, s, 'cat /opt/up.txt /etc/from-base /opt/tb/data.txt; echo $LAYERED');
    assert.equal(x.out, 'up\nhello-two\ncopied again\nyes\n');
  });
});

describe('template build: restart and CLI', { skip }, () => {
  let d, dir, state;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'abx-tb-'));
    chmodSync(dir, 0o711); // a split abxd's network process walks down to state/
    state = join(dir, 'state');
    d = await startAbxd({ stateDir: state });
  });
  after(async () => {
    await d?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  test('abx template build DIR builds, logs and fails like the API', async () => {
    const t = join(dir, 'clitpl');
    mkdirSync(join(t, 'files'), { recursive: true });
    writeFileSync(join(t, 'sandbox-template.yaml'), TB('cli'));
    writeFileSync(join(t, 'files', 'data.txt'), 'from the cli\n');
    let r = abx(d, ['template', 'build', t]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /==> step 1: run \(line 7\)/);
    assert.match(r.stdout, /building cli/);
    assert.match(r.stdout, /built template 'layered'/);
    const s = await createSandbox(d, { template: 'layered' });
    const x = await sh(d, s.id, 'hello; cat /opt/tb/data.txt');
    assert.equal(x.out, 'hello-cli\nfrom the cli\n');
    await killSandbox(d, s.id);

    const bad = join(dir, 'bad');
    mkdirSync(bad);
    writeFileSync(join(bad, 'sandbox-template.yaml'), 'name: bad\nsteps:\n  - run: echo nope >&2; exit 3\n');
    r = abx(d, ['template', 'build', bad]);
    assert.notEqual(r.code, 0);
    assert.match(r.stdout, /nope/);
    assert.match(r.stderr, /step 1 \(line 3\): exited with 3/);
    writeFileSync(join(bad, 'sandbox-template.yaml'), 'name: bad\nbase: nothere\n');
    r = abx(d, ['template', 'build', bad]);
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, /nothere/);
    // special files are refused before anything is sent
    writeFileSync(join(bad, 'sandbox-template.yaml'), 'name: bad\n');
    spawnSync('mkfifo', [join(bad, 'fifo')]);
    r = abx(d, ['template', 'build', bad]);
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, /fifo.*not a file, directory or symlink/);
  });

  test('a built template survives a restart; a templates-dir one with steps needs its layer', async () => {
    await d.stop({ keepState: true });
    // the same content in --templates-dir uses the stored layer...
    const tdir = join(dir, 'tdir');
    mkdirSync(join(tdir, 'layered', 'files'), { recursive: true });
    writeFileSync(join(tdir, 'layered', 'sandbox-template.yaml'), TB('cli'));
    writeFileSync(join(tdir, 'layered', 'files', 'data.txt'), 'from the cli\n');
    d = await startAbxd({ stateDir: d.stateDir, args: ['--templates-dir', tdir] });
    const s = await createSandbox(d, { template: 'layered' });
    const x = await sh(d, s.id, 'hello');
    assert.equal(x.out, 'hello-cli\n');
    await killSandbox(d, s.id);
    await d.stop({ keepState: true });
    // ...other content is refused, saying how to build it
    writeFileSync(join(tdir, 'layered', 'files', 'data.txt'), 'changed\n');
    await assert.rejects(startAbxd({ stateDir: d.stateDir, args: ['--templates-dir', tdir] }), /has build steps.*abx template build/s);
    d = await startAbxd({ stateDir: d.stateDir });
    assert.equal((await api(d, 'GET', '/v1/templates/layered')).json.built, true);
  });
});
