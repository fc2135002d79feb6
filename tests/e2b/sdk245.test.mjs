// The core cases with the older 2.45 client, which creates and connects
// through the v1 paths (POST /sandboxes, /sandboxes/{id}/connect) and
// always sends timeout, secure and allow_internet_access.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { setup } from './lib.mjs';

let d, Sandbox, E;
before(async () => {
  const s = await setup({ pkg: 'e2b-245' });
  d = s.d;
  E = s.sdk;
  Sandbox = s.sdk.Sandbox;
});
after(async () => d && (await d.stop()));

test('2.45: create, run, background + connect, info, list, kill', async () => {
  const sbx = await Sandbox.create({ metadata: { v: '245' } });
  try {
    const r = await sbx.commands.run('echo $((6*7)); id -un');
    assert.equal(r.stdout, '42\nuser\n');
    await assert.rejects(sbx.commands.run('exit 5'), (e) => e instanceof E.CommandExitError && e.exitCode === 5);
    const h = await sbx.commands.run('sleep 0.5; echo late', { background: true });
    await h.disconnect();
    const again = await sbx.commands.connect(h.pid);
    assert.equal((await again.wait()).exitCode, 0);
    const other = await Sandbox.connect(sbx.sandboxId);
    assert.equal((await other.commands.run('echo via-connect')).stdout, 'via-connect\n');
    const info = await Sandbox.getInfo(sbx.sandboxId);
    assert.deepEqual(info.metadata, { v: '245' });
    const listed = await Sandbox.list({ query: { metadata: { v: '245' } } }).nextItems();
    assert.equal(listed.length, 1);
  } finally {
    assert.equal(await Sandbox.kill(sbx.sandboxId), true);
  }
  assert.equal(await Sandbox.kill(sbx.sandboxId), false);
  await assert.rejects(Sandbox.connect(sbx.sandboxId), E.SandboxNotFoundError);
});
