// getHost(port) through the real E2B SDK: abxd started with --domain
// returns that domain at create, and HTTP whose Host is what getHost()
// gives reaches the server listening inside the sandbox.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { setup, sleep } from './lib.mjs';

let d, Sandbox, E;
before(async () => {
  const s = await setup({ args: ['--domain', 'sbx.test'] });
  d = s.d;
  E = s.sdk;
  Sandbox = s.sdk.Sandbox;
});
after(async () => d && (await d.stop()));

// A request to abxd carrying the Host the SDK would use (the SDK's URL is
// https://<host>; a TLS proxy in front would forward it like this).
function get(host, path = '/') {
  return new Promise((resolve, reject) => {
    const r = http.request({ host: '127.0.0.1', port: d.port, path, headers: { Host: host } }, (res) => {
      let body = '';
      res.on('data', (c) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode, body }));
    });
    r.on('error', reject);
    r.end();
  });
}

test('getHost reaches a server inside the sandbox; closed ports and dead sandboxes get 502', async () => {
  const sbx = await Sandbox.create();
  try {
    const host = sbx.getHost(8000);
    assert.equal(host, `8000-${sbx.sandboxId}.sbx.test`);
    await sbx.files.write('site/index.html', 'hello through the proxy');
    await sbx.commands.run('python3 -m http.server 8000 --bind 127.0.0.1 --directory site', {
      background: true,
      timeoutMs: 0,
    });
    let r;
    for (let i = 0; i < 100; i++) {
      r = await get(host, '/index.html');
      if (r.status === 200) break;
      await sleep(100);
    }
    assert.equal(r.status, 200);
    assert.equal(r.body, 'hello through the proxy');
    const closed = await get(sbx.getHost(8001));
    assert.equal(closed.status, 502);
    assert.equal(JSON.parse(closed.body).port, 8001);
    await assert.rejects(Sandbox.updateNetwork(sbx.sandboxId, { allowOut: ['203.0.113.1'] }), E.SandboxError);
  } finally {
    await sbx.kill();
  }
  const dead = await get(`8000-${sbx.sandboxId}.sbx.test`);
  assert.equal(dead.status, 502);
  assert.equal(JSON.parse(dead.body).sandboxId, sbx.sandboxId);
});
