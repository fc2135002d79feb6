// Files through the real E2B SDK 2.51: write (multipart, octet-stream,
// gzip, streams), read in every format, metadata, the filesystem RPCs,
// signed URLs, and paths that try to leave the sandbox.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { setup, until, envd } from './lib.mjs';

let d, Sandbox, E, sbx;
before(async () => {
  const s = await setup();
  d = s.d;
  E = s.sdk;
  Sandbox = s.sdk.Sandbox;
  sbx = await Sandbox.create();
});
after(async () => {
  if (sbx) await sbx.kill();
  if (d) await d.stop();
});

test('write and read: relative paths below home, root, formats, several files', async () => {
  const w = await sbx.files.write('hello.txt', 'hi there');
  assert.deepEqual({ ...w, metadata: undefined }, {
    name: 'hello.txt',
    path: '/home/user/hello.txt',
    type: 'file',
    metadata: undefined,
  });
  assert.equal(await sbx.files.read('hello.txt'), 'hi there');
  assert.equal(await sbx.files.read('/home/user/hello.txt'), 'hi there');
  const bytes = await sbx.files.read('hello.txt', { format: 'bytes' });
  assert.deepEqual(Buffer.from(bytes), Buffer.from('hi there'));
  const blob = await sbx.files.read('hello.txt', { format: 'blob' });
  assert.equal(await blob.text(), 'hi there');
  const r = await sbx.files.write('r.txt', 'as root', { user: 'root' });
  assert.equal(r.path, '/root/r.txt');
  assert.equal((await sbx.commands.run('stat -c %U:%a /root/r.txt', { user: 'root' })).stdout, 'root:644\n');
  assert.equal((await sbx.commands.run('stat -c %U:%G:%a hello.txt')).stdout, 'user:user:644\n');
  const many = await sbx.files.write([
    { path: '/tmp/a.txt', data: 'A' },
    { path: 'deep/er/b.txt', data: new Uint8Array([0, 1, 2, 255]) },
  ]);
  assert.deepEqual(many.map((m) => m.path), ['/tmp/a.txt', '/home/user/deep/er/b.txt']);
  assert.equal((await sbx.commands.run('od -An -tu1 deep/er/b.txt')).stdout.trim(), '0   1   2 255');
  assert.equal((await sbx.commands.run('stat -c %a deep/er')).stdout, '755\n');
  const empty = await sbx.files.write('empty.txt', '');
  assert.equal(empty.path, '/home/user/empty.txt');
  assert.equal(await sbx.files.read('empty.txt'), '');
  // procfs files report size 0 but have content
  assert.match(await sbx.files.read('/proc/sys/kernel/random/boot_id'), /^[0-9a-f-]{36}\n$/);
  await assert.rejects(sbx.files.read('nope.txt'), E.FileNotFoundError);
  await assert.rejects(sbx.files.read('deep'), E.InvalidArgumentError);
  await assert.rejects(sbx.files.write('deep', 'x'), E.InvalidArgumentError);
  await assert.rejects(sbx.files.read('hello.txt', { user: 'mallory' }), E.AuthenticationError);
});

test('gzip, octet-stream and streamed uploads', async () => {
  await sbx.files.write('g.txt', 'zipped '.repeat(1000), { gzip: true });
  assert.equal(await sbx.files.read('g.txt'), 'zipped '.repeat(1000));
  await sbx.files.write('o.txt', 'octets', { useOctetStream: true });
  assert.equal(await sbx.files.read('o.txt'), 'octets');
  const stream = new ReadableStream({
    start(c) {
      c.enqueue(new TextEncoder().encode('part1 '));
      c.enqueue(new TextEncoder().encode('part2'));
      c.close();
    },
  });
  await sbx.files.write('s.txt', stream);
  assert.equal(await sbx.files.read('s.txt'), 'part1 part2');
  const rs = await sbx.files.read('s.txt', { format: 'stream' });
  const chunks = [];
  for await (const c of rs) chunks.push(Buffer.from(c));
  assert.equal(Buffer.concat(chunks).toString(), 'part1 part2');
});

test('a 50 MB file written and read back byte-exact, multipart and gzip octet-stream', async () => {
  const data = randomBytes(50 * 1024 * 1024);
  const sum = createHash('sha256').update(data).digest('hex');
  await sbx.files.write('big.bin', data);
  const back = Buffer.from(await sbx.files.read('big.bin', { format: 'bytes' }));
  assert.equal(back.length, data.length);
  assert.equal(createHash('sha256').update(back).digest('hex'), sum);
  assert.equal((await sbx.commands.run('sha256sum big.bin')).stdout.split(' ')[0], sum);
  await sbx.files.write('big2.bin', data, { gzip: true });
  assert.equal((await sbx.commands.run('sha256sum big2.bin')).stdout.split(' ')[0], sum);
  await sbx.commands.run('rm big.bin big2.bin');
});

test('metadata becomes user.e2b.* attributes and shows in getInfo and list', async () => {
  const w = await sbx.files.write('m.txt', 'x', { metadata: { Author: 'me', topic: 'a b' } });
  assert.deepEqual(w.metadata, { author: 'me', topic: 'a b' });
  assert.deepEqual((await sbx.files.getInfo('m.txt')).metadata, { author: 'me', topic: 'a b' });
  // Set from inside the sandbox, seen through the API.
  await sbx.commands.run(`python3 -c "import os; os.setxattr('m.txt', 'user.e2b.extra', b'v')"`);
  assert.equal((await sbx.files.getInfo('m.txt')).metadata.extra, 'v');
  const listed = (await sbx.files.list('.')).find((e) => e.name === 'm.txt');
  assert.equal(listed.metadata.author, 'me');
  // An upload without metadata replaces the set.
  await sbx.files.write('m.txt', 'y');
  assert.equal((await sbx.files.getInfo('m.txt')).metadata, undefined);
});

test('filesystem RPCs: getInfo, exists, list depth and order, makeDir, rename, remove', async () => {
  await sbx.commands.run(
    'mkdir -p t/subdir1/subdir1_1 t/subdir1/subdir1_2 t/subdir2 && echo 1 > t/file1.txt && ln -s file1.txt t/link && ln -s /nowhere t/broken',
  );
  const names = (await sbx.files.list('t', { depth: 2 })).map((e) => e.path.replace('/home/user/t/', ''));
  assert.deepEqual(names, ['file1.txt', 'link', 'subdir1', 'subdir1/subdir1_1', 'subdir1/subdir1_2', 'subdir2']);
  const link = await sbx.files.getInfo('t/link');
  assert.equal(link.type, 'file');
  assert.equal(link.symlinkTarget, '/home/user/t/file1.txt');
  assert.equal(link.permissions[0], 'L');
  const dir = await sbx.files.getInfo('t/subdir1');
  assert.equal(dir.type, 'dir');
  assert.equal(dir.permissions, 'drwxr-xr-x');
  assert.equal(dir.mode, 0o755);
  assert.equal(await sbx.files.exists('t/file1.txt'), true);
  assert.equal(await sbx.files.exists('t/nope'), false);
  await assert.rejects(sbx.files.getInfo('t/nope'), E.FileNotFoundError);
  assert.equal(await sbx.files.makeDir('t/new/deeper'), true);
  assert.equal(await sbx.files.makeDir('t/new/deeper'), false);
  const md = await sbx.files.getInfo('t/new/deeper');
  assert.equal(md.mode, 0o755);
  // the file system's size of a directory: 4096 on ext4, 0 for an empty one
  // on the btrfs that holds homes under the disk bound
  assert.equal(typeof md.size, 'number');
  assert.equal(md.owner, 'user');
  await assert.rejects(sbx.files.makeDir('t/file1.txt'), E.InvalidArgumentError);
  await assert.rejects(sbx.files.list('t/file1.txt'), E.InvalidArgumentError);
  await assert.rejects(sbx.files.list('t/missing'), E.FileNotFoundError);
  const mv = await sbx.files.rename('t/file1.txt', 't/moved/here.txt');
  assert.equal(mv.path, '/home/user/t/moved/here.txt');
  await assert.rejects(sbx.files.rename('t/gone', 't/x'), E.FileNotFoundError);
  await sbx.files.remove('t/missing-is-fine');
  await sbx.files.remove('t');
  assert.equal(await sbx.files.exists('t'), false);
  assert.equal((await sbx.commands.run('pwd')).stdout.trim() + '/x', (await sbx.files.write('x', '1')).path);
});

test('paths never leave the sandbox', async () => {
  // The sandbox's own /etc, not the host's; a planted symlink stays inside.
  await sbx.commands.run('ln -sf /../../../../etc/hostname esc && ln -sf ../../../../../../ up');
  const host = await sbx.files.read('esc');
  assert.equal(host, (await sbx.commands.run('cat /etc/hostname')).stdout);
  await assert.rejects(sbx.files.read('/etc/shadow'), E.FileNotFoundError);
  const up = await sbx.files.list('up');
  assert.ok(up.some((e) => e.name === 'home'), JSON.stringify(up.map((e) => e.name)));
  await sbx.files.write('up/tmp/through-link.txt', 'inside');
  assert.equal((await sbx.commands.run('cat /tmp/through-link.txt')).stdout, 'inside');
  await sbx.files.write('../../../../tmp/dots.txt', 'dots');
  assert.equal((await sbx.commands.run('cat /tmp/dots.txt')).stdout, 'dots');
});

test('signed URLs: download and upload without headers; wrong or expired signatures refused', async () => {
  await sbx.files.write('signed.txt', 'signed content');
  const url = await sbx.downloadUrl('signed.txt');
  const r = await fetch(url);
  assert.equal(r.status, 200);
  assert.equal(await r.text(), 'signed content');
  // not 'up/...': 'up' is a link to / (above), where "user" may not write
  const up = await sbx.uploadUrl('upl/loaded.txt');
  const form = new FormData();
  form.append('file', 'via url');
  const u = await fetch(up, { method: 'POST', body: form });
  assert.equal(u.status, 200, await u.clone().text());
  assert.equal(await sbx.files.read('upl/loaded.txt'), 'via url');
  const bad = url.replace(/signature=v1_[^&]+/, 'signature=v1_AAAA');
  assert.equal((await fetch(bad)).status, 401);
  const other = await sbx.downloadUrl('other.txt');
  assert.equal((await fetch(url.replace('signed.txt', 'other.txt'))).status, 401); // signature covers the path
  assert.notEqual(other, url);
  const exp = await sbx.downloadUrl('signed.txt', { useSignatureExpiration: 1 });
  // Expired within 2.1 s of a 1 s expiration.
  await until(async () => {
    const r = await fetch(exp);
    await r.arrayBuffer();
    return r.status === 401;
  }, 2100, 100);
  const x = await fetch(exp);
  assert.equal(x.status, 401);
  assert.deepEqual(await x.json(), { code: 401, message: 'signature is already expired' });
});

test('hostile upload bodies are refused and harm nothing', async () => {
  const post = (headers, body, q = '?path=h.txt') =>
    envd(d, sbx, 'POST', '/files' + q, { headers, body });
  const mp = (b) => ({ 'Content-Type': `multipart/form-data; boundary=${b}` });
  const cases = [
    [mp('xx'), '--xx\r\nContent-Disposition: form-data; name="file"; filename="a"\r\n\r\nno end'],
    [mp('xx'), 'garbage without any delimiter'],
    [{ 'Content-Type': 'multipart/form-data' }, '--\r\n'],
    [mp('xx'), '--xx\r\n' + 'X: ' + 'y'.repeat(70000) + '\r\n\r\nz\r\n--xx--\r\n'],
    [{ 'Content-Type': 'application/octet-stream', 'Content-Encoding': 'gzip' }, 'not gzip'],
    [{ 'Content-Type': 'application/octet-stream', 'Content-Encoding': 'br' }, 'x'],
    [{ 'Content-Type': 'application/octet-stream' }, 'x', ''],
    [mp('xx'), '--xx\r\nContent-Disposition: form-data; name="file"; filename="a"\r\n\r\n1\r\n--xx\r\nContent-Disposition: form-data; name="file"; filename="a"\r\n\r\n2\r\n--xx--\r\n'],
    [{ 'Content-Type': 'application/octet-stream', 'X-Metadata-K': 'v'.repeat(5000) }, 'x'],
  ];
  for (const [h, body, q] of cases) {
    const r = await post(h, body, q);
    assert.equal(r.status, 400, `${JSON.stringify(h)} ${body.slice(0, 40)}: ${r.status}`);
    assert.equal((await r.json()).code, 400);
  }
  assert.equal((await sbx.commands.run('echo fine')).stdout, 'fine\n');
});

test('a hostile file name cannot inject response headers', async () => {
  await sbx.commands.run(`printf x > "$(printf 'evil"\\r\\nX-Injected: 1')"`);
  const name = 'evil"\r\nX-Injected: 1';
  const r = await envd(d, sbx, 'GET', '/files?path=' + encodeURIComponent(name));
  assert.equal(r.status, 200);
  assert.equal(await r.text(), 'x');
  assert.equal(r.headers.get('x-injected'), null);
  assert.equal(r.headers.get('content-disposition'), 'inline; filename="evil___X-Injected: 1"');
});
