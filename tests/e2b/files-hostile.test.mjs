// Uploads that fail never damage anything: for a bad gzip body, a second
// gzip member, a truncated one, a client that goes away mid-body (raw
// socket), a file over the size limit and a gzip bomb, the old content of
// an overwritten file is intact, a new file does not appear, and no
// partial or temporary file is visible in the directory. Also odd file
// types (unix sockets, fifos) on /files and the Remove RPC, and a
// 1,500-deep tree removed through the API.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readdirSync, readlinkSync } from 'node:fs';
import net from 'node:net';
import { gzipSync, createGzip } from 'node:zlib';
import { setup, envd, sleep } from './lib.mjs';
import { startAbxd } from '../integration/lib.mjs';

let d, d2, E, Sandbox, sbx, small;
const OLD = 'the old content, which must survive\n';
const MAX_MB = 1; // the second abxd's ABX_MAX_FILE_MB

before(async () => {
  const s = await setup();
  d = s.d;
  E = s.sdk;
  Sandbox = s.sdk.Sandbox;
  sbx = await Sandbox.create();
  const key = 'e2b_' + randomBytes(20).toString('hex');
  d2 = await startAbxd({ key, env: { ABX_POOL: '1', ABX_MAX_FILE_MB: String(MAX_MB) } });
  small = await Sandbox.create({ apiUrl: d2.url, sandboxUrl: d2.url, apiKey: key });
});
after(async () => {
  if (sbx) await sbx.kill();
  if (small) await small.kill();
  if (d) await d.stop();
  if (d2) await d2.stop();
});

// What the directory holds, hidden names included, as the sandbox sees it.
async function listing(box, dir) {
  return (await box.commands.run(`ls -A1 ${dir}`)).stdout;
}

// A directory with an existing file "old.txt" and nothing else; returns
// {dir, before} for checking it afterwards.
async function fresh(box, name) {
  const dir = `/home/user/${name}`;
  await box.commands.run(`mkdir -p ${dir}`);
  await box.files.write(`${dir}/old.txt`, OLD);
  return { dir, before: await listing(box, dir) };
}

async function untouched(box, { dir, before }, what) {
  assert.equal(await box.files.read(`${dir}/old.txt`), OLD, `${what}: old content`);
  assert.equal(await listing(box, dir), before, `${what}: nothing new in the directory`);
}

// O_TMPFILE files abxd holds open ("/dir/#123 (deleted)"): the staged uploads.
function stagedFds(daemon) {
  const dir = `/proc/${daemon.proc.pid}/fd`;
  let n = 0;
  for (const fd of readdirSync(dir)) {
    try {
      if (/\/#\d+ \(deleted\)$/.test(readlinkSync(`${dir}/${fd}`))) n++;
    } catch {
      // closed meanwhile
    }
  }
  return n;
}

async function noneStaged(daemon) {
  const deadline = Date.now() + 10000;
  while (stagedFds(daemon) > 0) {
    if (Date.now() > deadline) assert.fail('abxd still holds a staged upload');
    await sleep(50);
  }
}

const post = (box, daemon, path, headers, body) =>
  fetch(`${daemon.url}/files?path=${encodeURIComponent(path)}&username=user`, {
    method: 'POST',
    headers: { 'E2b-Sandbox-Id': box.sandboxId, 'X-Access-Token': box.envdAccessToken ?? '', ...headers },
    body,
    duplex: 'half',
  });

const octets = { 'Content-Type': 'application/octet-stream' };
const gz = { ...octets, 'Content-Encoding': 'gzip' };

test('a bad, doubled or truncated gzip body changes nothing', async () => {
  const t = await fresh(sbx, 'gz');
  const good = gzipSync(Buffer.from('new content '.repeat(1000)));
  const cases = [
    ['not gzip', Buffer.from('this is not gzip at all')],
    ['two members', Buffer.concat([good, gzipSync(Buffer.from('second member'))])],
    ['truncated', good.subarray(0, good.length - 6)],
    ['bad checksum', Buffer.concat([good.subarray(0, good.length - 8), Buffer.alloc(8)])],
  ];
  for (const [what, body] of cases) {
    for (const target of ['old.txt', 'new.txt']) {
      const r = await post(sbx, d, `${t.dir}/${target}`, gz, body);
      assert.equal(r.status, 400, `${what} -> ${target}: ${r.status}`);
      assert.equal((await r.json()).code, 400);
      await untouched(sbx, t, `${what} -> ${target}`);
    }
  }
  // and a good one still goes through, replacing the file whole
  const ok = await post(sbx, d, `${t.dir}/old.txt`, gz, good);
  assert.equal(ok.status, 200, await ok.clone().text());
  assert.equal(await sbx.files.read(`${t.dir}/old.txt`), 'new content '.repeat(1000));
  await noneStaged(d);
});

test('a multipart upload is all or nothing', async () => {
  const t = await fresh(sbx, 'mp');
  const b = 'xxBOUNDARYxx';
  const part = (name, data) =>
    `--${b}\r\nContent-Disposition: form-data; name="file"; filename="${t.dir}/${name}"\r\n` +
    `Content-Type: application/octet-stream\r\n\r\n${data}\r\n`;
  // The first file is complete, the body then ends without its closing
  // delimiter: neither file changes.
  const body = part('old.txt', 'replaced') + part('new.txt', 'never');
  const r = await post(sbx, d, `${t.dir}/x`, { 'Content-Type': `multipart/form-data; boundary=${b}` }, body);
  assert.equal(r.status, 400);
  await untouched(sbx, t, 'multipart without its end');
  const ok = await post(sbx, d, `${t.dir}/x`, { 'Content-Type': `multipart/form-data; boundary=${b}` },
    body + `--${b}--\r\n`);
  assert.equal(ok.status, 200, await ok.clone().text());
  assert.equal(await sbx.files.read(`${t.dir}/old.txt`), 'replaced');
  assert.equal(await sbx.files.read(`${t.dir}/new.txt`), 'never');
});

// Sends the start of an upload over a raw socket and hangs up.
function hangUp(daemon, box, path, headers, bodyStart) {
  return new Promise((resolve, reject) => {
    const s = net.connect(daemon.port, '127.0.0.1', () => {
      const h = [
        `POST /files?path=${encodeURIComponent(path)}&username=user HTTP/1.1`,
        `Host: 127.0.0.1:${daemon.port}`,
        `E2b-Sandbox-Id: ${box.sandboxId}`,
        `X-Access-Token: ${box.envdAccessToken ?? ''}`,
        ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
        '',
        '',
      ].join('\r\n');
      s.write(h);
      // The client goes away 300 ms into the body: the disconnect is the test.
      s.write(bodyStart, () => setTimeout(() => {
        s.destroy();
        resolve();
      }, 300));
    });
    s.on('error', reject);
  });
}

test('a client that goes away mid-body changes nothing', async () => {
  const t = await fresh(sbx, 'gone');
  const half = randomBytes(512 * 1024);
  const gzHalf = gzipSync(randomBytes(1024 * 1024)).subarray(0, 300 * 1024);
  const b = 'yyBOUNDARYyy';
  for (const target of ['old.txt', 'new.txt']) {
    const path = `${t.dir}/${target}`;
    await hangUp(d, sbx, path, { ...octets, 'Content-Length': String(4 << 20) }, half);
    await noneStaged(d);
    await untouched(sbx, t, `length, ${target}`);
    await hangUp(d, sbx, path, { ...octets, 'Transfer-Encoding': 'chunked' },
      Buffer.concat([Buffer.from(half.length.toString(16) + '\r\n'), half, Buffer.from('\r\n')]));
    await noneStaged(d);
    await untouched(sbx, t, `chunked, ${target}`);
    await hangUp(d, sbx, path, { ...gz, 'Content-Length': String(2 << 20) }, gzHalf);
    await noneStaged(d);
    await untouched(sbx, t, `gzip, ${target}`);
    await hangUp(d, sbx, path, { 'Content-Type': `multipart/form-data; boundary=${b}`, 'Content-Length': String(4 << 20) },
      Buffer.concat([Buffer.from(`--${b}\r\nContent-Disposition: form-data; name="file"; filename="${path}"\r\n\r\n`), half]));
    await noneStaged(d);
    await untouched(sbx, t, `multipart, ${target}`);
  }
  assert.equal((await sbx.commands.run('echo still fine')).stdout, 'still fine\n');
});

test('over the size limit: 413, nothing written, however the body comes', async () => {
  const t = await fresh(small, 'big');
  const over = randomBytes((MAX_MB << 20) + 1);
  const b = 'zzBOUNDARYzz';
  const stream = (buf) => new ReadableStream({
    start(c) {
      for (let o = 0; o < buf.length; o += 65536) c.enqueue(buf.subarray(o, o + 65536));
      c.close();
    },
  });
  for (const target of ['old.txt', 'new.txt']) {
    const path = `${t.dir}/${target}`;
    const cases = [
      ['with a length', octets, over],
      ['chunked', octets, stream(over)],
      ['gzip', gz, gzipSync(over)],
      ['multipart', { 'Content-Type': `multipart/form-data; boundary=${b}` },
        Buffer.concat([Buffer.from(`--${b}\r\nContent-Disposition: form-data; name="file"; filename="${path}"\r\n\r\n`), over, Buffer.from(`\r\n--${b}--\r\n`)])],
    ];
    for (const [what, h, body] of cases) {
      const r = await post(small, d2, path, h, body);
      assert.equal(r.status, 413, `${what} -> ${target}: ${r.status}`);
      const j = await r.json();
      assert.equal(j.code, 413);
      assert.match(j.message, /1048576 bytes/, j.message);
      await untouched(small, t, `${what} -> ${target}`);
    }
  }
  // exactly the limit is fine
  const r = await post(small, d2, `${t.dir}/exact.bin`, octets, randomBytes(MAX_MB << 20));
  assert.equal(r.status, 200, await r.clone().text());
  await noneStaged(d2);
});

// 256 MiB of zeros in about 256 KB of gzip: refused by the ratio cap long
// before it is decoded, with the default size limit (8 GiB) far away.
function bomb() {
  return new Promise((resolve) => {
    const z = createGzip({ level: 9 });
    const out = [];
    z.on('data', (c) => out.push(c));
    z.on('end', () => resolve(Buffer.concat(out)));
    const zero = Buffer.alloc(1 << 20);
    for (let i = 0; i < 256; i++) z.write(zero);
    z.end();
  });
}

test('a gzip bomb stops early with 413 and writes nothing', async () => {
  const t = await fresh(sbx, 'bomb');
  const body = await bomb();
  assert.ok(body.length < 300 * 1024, `${body.length}`);
  for (const target of ['old.txt', 'new.txt']) {
    const r = await post(sbx, d, `${t.dir}/${target}`, gz, body);
    assert.equal(r.status, 413, `${target}: ${r.status}`);
    const j = await r.json();
    assert.match(j.message, /expands more than 1024-fold/, j.message);
    // It stopped within one 4 KiB slice of input past the cap (1 MiB free
    // + at most 4 MiB), not at 256 MiB nor at the end of a 64 KiB chunk.
    const decoded = Number(j.message.match(/\((\d+) bytes from/)[1]);
    assert.ok(decoded < 6 << 20, `decoded ${decoded}`);
    await untouched(sbx, t, `bomb -> ${target}`);
  }
  // Highly compressible but honest data below the free allowance passes.
  const r = await post(sbx, d, `${t.dir}/zeros.bin`, gz, gzipSync(Buffer.alloc(512 * 1024)));
  assert.equal(r.status, 200, await r.clone().text());
  await noneStaged(d);
});

test('sockets and fifos: downloads refused with 400 naming the type, Remove works', async () => {
  await sbx.commands.run(
    `mkdir -p odd && cd odd && mkfifo fifo && python3 -c "import socket; socket.socket(socket.AF_UNIX).bind('sock')" && ln -s sock link`,
  );
  for (const [name, type] of [['fifo', 'fifo'], ['sock', 'unix socket'], ['link', 'unix socket']]) {
    const r = await envd(d, sbx, 'GET', `/files?path=${encodeURIComponent('/home/user/odd/' + name)}&username=user`);
    assert.equal(r.status, 400, `${name}: ${r.status}`);
    assert.match((await r.json()).message, new RegExp(`is a ${type}, not a regular file`));
    await assert.rejects(sbx.files.read(`odd/${name}`), E.InvalidArgumentError);
    // writing over one is refused the same way, and it stays
    const w = await post(sbx, d, `/home/user/odd/${name}`, octets, 'x');
    assert.equal(w.status, 400, `write ${name}: ${w.status}`);
  }
  assert.equal((await sbx.files.getInfo('odd/sock')).type, undefined);
  await sbx.files.remove('odd/fifo');
  await sbx.files.remove('odd/sock');
  assert.equal(await sbx.files.exists('odd/fifo'), false);
  assert.equal(await sbx.files.exists('odd/sock'), false);
  await sbx.commands.run(`cd odd && mkfifo f2 && python3 -c "import socket; socket.socket(socket.AF_UNIX).bind('s2')"`);
  await sbx.files.remove('odd');
  assert.equal(await sbx.files.exists('odd'), false);
});

test('a 1,500-deep tree is removed through the Remove RPC', async () => {
  const r = await sbx.commands.run(
    `python3 -c "
import os
os.mkdir('deep'); os.chdir('deep')
for i in range(1500):
    open('f', 'w').close()
    os.mkfifo('p')
    os.mkdir('d'); os.chdir('d')
print('ok')"`,
  );
  assert.equal(r.stdout, 'ok\n');
  await sbx.files.remove('deep');
  assert.equal(await sbx.files.exists('deep'), false);
  assert.equal((await sbx.commands.run('ls -A ~ | grep -c deep || true')).stdout.trim(), '0');
});
