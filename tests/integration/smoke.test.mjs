import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startAbxd, createSandbox, killSandbox, exec, api } from './lib.mjs';

test('create, exec, delete', async () => {
  const d = await startAbxd();
  try {
    const sb = await createSandbox(d);
    const r = await exec(d, sb.id, ['echo', 'hi']);
    assert.equal(r.code, 0);
    assert.equal(r.out, 'hi\n');
    await killSandbox(d, sb.id);
    const g = await api(d, 'GET', `/v1/sandboxes/${sb.id}`);
    assert.equal(g.status, 404);
  } finally {
    await d.stop();
  }
});
