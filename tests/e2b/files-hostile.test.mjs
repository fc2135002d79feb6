// Odd file types (unix sockets, fifos, links to them) on /files and the
// Remove RPC, and a 1,500-deep tree removed through the API.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { setup, envd } from './lib.mjs';

let d, E, Sandbox, sbx;

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

const post = (box, daemon, path, headers, body) =>
  fetch(`${daemon.url}/files?path=${encodeURIComponent(path)}&username=user`, {
    method: 'POST',
    headers: { 'E2b-Sandbox-Id': box.sandboxId, 'X-Access-Token': box.envdAccessToken ?? '', ...headers },
    body,
    duplex: 'half',
  });

const octets = { 'Content-Type': 'application/octet-stream' };

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
