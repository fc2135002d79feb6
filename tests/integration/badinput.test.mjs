// badinput.test.mjs - hostile and malformed requests: each gets a clear
// JSON error with a fitting status, and the daemon (and every sandbox in it)
// is unharmed afterwards.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startAbxd, createSandbox, exec, api, rawHttp, isRoot } from './lib.mjs';

const skip = !isRoot && 'needs root';

describe('bad input', { skip }, () => {
  let d, id;
  before(async () => {
    d = await startAbxd();
    id = (await createSandbox(d)).id;
  });
  after(async () => d && (await d.stop()));

  async function unharmed() {
    assert.equal((await api(d, 'GET', '/healthz', undefined, { auth: false })).status, 200);
    const r = await exec(d, id, ['echo', 'ok']);
    assert.equal(r.out, 'ok\n');
  }

  function isError(r, status, code) {
    assert.equal(r.status, status, r.text);
    assert.equal(typeof r.json?.message, 'string', r.text);
    if (code) assert.equal(r.json.error, code);
  }

  test('missing, wrong and malformed credentials', async () => {
    const none = await api(d, 'GET', '/v1/sandboxes', undefined, { auth: false });
    isError(none, 401, 'unauthorized');
    assert.equal(none.headers.get('www-authenticate'), 'Bearer');
    isError(await api(d, 'GET', '/v1/sandboxes', undefined, { key: 'wrong' }), 401);
    isError(await api(d, 'GET', '/v1/sandboxes', undefined, { auth: false, headers: { authorization: `Basic ${d.key}` } }), 401);
    isError(await api(d, 'GET', '/v1/sandboxes', undefined, { key: d.key + 'x' }), 401);
    isError(await api(d, 'GET', '/v1/sandboxes', undefined, { key: d.key.slice(0, -1) }), 401);
    isError(await api(d, 'POST', `/v1/sandboxes/${id}/exec`, { argv: ['true'] }, { auth: false }), 401);
    await unharmed();
  });

  test('unknown routes and wrong methods', async () => {
    isError(await api(d, 'GET', '/v2/nothing'), 404, 'not_found');
    isError(await api(d, 'GET', '/'), 404);
    isError(await api(d, 'GET', `/v1/sandboxes/${id}/nothing`), 404);
    isError(await api(d, 'GET', `/v1/sandboxes/${id}/processes/1/nothing`), 404);
    const m = await api(d, 'PUT', '/v1/sandboxes');
    isError(m, 405, 'method_not_allowed');
    assert.equal(m.headers.get('allow'), 'GET, POST');
    isError(await api(d, 'GET', `/v1/sandboxes/${id}/exec`), 405);
    isError(await api(d, 'POST', '/metrics'), 405);
    isError(await api(d, 'GET', '/v1/sandboxes/nosuchsandbox000000'), 404);
    isError(await api(d, 'GET', `/v1/sandboxes/${'a'.repeat(300)}/files/x`), 404);
    await unharmed();
  });

  test('malformed JSON says where', async () => {
    const r = await api(d, 'POST', '/v1/sandboxes', '{"memory_mb": 12,,}', { headers: { 'content-type': 'application/json' } });
    isError(r, 400, 'bad_request');
    assert.match(r.json.message, /line 1 column \d+/);
    isError(await api(d, 'POST', '/v1/sandboxes', '[1,2]'), 400);
    isError(await api(d, 'POST', '/v1/sandboxes', '"just a string"'), 400);
    isError(await api(d, 'POST', '/v1/sandboxes', '{"a":1}{"b":2}'), 400);
    isError(await api(d, 'POST', '/v1/sandboxes', '{"metadata":{"a":"x","a":"y"}}'), 400);
    isError(await api(d, 'POST', `/v1/sandboxes/${id}/exec`, Buffer.from([0xff, 0xfe, 0x00])), 400);
    await unharmed();
  });

  test('deep nesting is refused before it is parsed', async () => {
    const deep = '{"metadata":' + '['.repeat(100000) + ']'.repeat(100000) + '}';
    const r = await api(d, 'POST', '/v1/sandboxes', deep);
    isError(r, 400);
    assert.match(r.json.message, /nested deeper/);
    await unharmed();
  });

  test('wrong types and values name the field', async () => {
    const cases = [
      [{ memory_mb: 'lots' }, /memory_mb/],
      [{ memory_mb: -5 }, /memory_mb/],
      [{ memory_mb: 1 }, /memory_mb/],
      [{ memory_mb: 1e12 }, /memory_mb/],
      [{ cpu: 10000 }, /cpu/],
      [{ cpu: 'x' }, /cpu/],
      [{ pids: 2 }, /pids/],
      [{ timeout_s: -1 }, /timeout_s/],
      [{ env: { 'BAD KEY': 'x' } }, /env/],
      [{ env: { K: 5 } }, /env/],
      [{ env: ['K=V'] }, /env/],
      [{ metadata: { a: { b: 1 } } }, /metadata/],
      [{ memroy_mb: 5 }, /unknown field 'memroy_mb'/],
      [{ template: 'nope' }, /template/],
    ];
    for (const [body, re] of cases) {
      const r = await api(d, 'POST', '/v1/sandboxes', body);
      assert.ok(r.status === 400 || r.status === 404, `${JSON.stringify(body)} -> ${r.status}`);
      assert.match(r.json.message, re, JSON.stringify(body));
    }
    const execCases = [
      [{}, /argv/],
      [{ argv: [] }, /argv/],
      [{ argv: 'ls' }, /argv/],
      [{ argv: [1] }, /argv/],
      [{ argv: [''] }, /argv/],
      [{ argv: ['a\u0000b'] }, /argv|NUL/],
      [{ argv: ['true'], user: 'admin' }, /user/],
      [{ argv: ['true'], timeout_s: -1 }, /timeout_s/],
      [{ argv: ['true'], timeout_s: 'x' }, /timeout_s/],
      [{ argv: ['true'], stdin: '***' }, /base64/],
      [{ argv: ['true'], env: { 'A=B': 'c' } }, /env/],
      [{ argv: ['true'], cwd: 'x'.repeat(5000) }, /cwd/],
      [{ argv: ['true'], background: 'yes' }, /background/],
    ];
    for (const [body, re] of execCases) {
      const r = await api(d, 'POST', `/v1/sandboxes/${id}/exec`, body);
      assert.equal(r.status, 400, `${JSON.stringify(body).slice(0, 80)} -> ${r.status} ${r.text}`);
      assert.match(r.json.message, re);
    }
    await unharmed();
  });

  test('huge bodies, argv and env are refused', async () => {
    isError(await api(d, 'POST', '/v1/sandboxes', '{"metadata":{"a":"' + 'x'.repeat(2 << 20) + '"}}'), 413, 'too_large');
    isError(await api(d, 'POST', `/v1/sandboxes/${id}/exec`, { argv: Array(5000).fill('x') }), 400);
    const bigArgs = await api(d, 'POST', `/v1/sandboxes/${id}/exec`, { argv: ['echo', 'y'.repeat(300 * 1024)] });
    assert.equal(bigArgs.status, 400);
    const env = {};
    for (let i = 0; i < 600; i++) env['V' + i] = 'x';
    isError(await api(d, 'POST', `/v1/sandboxes/${id}/exec`, { argv: ['true'], env }), 400);
    isError(await api(d, 'POST', `/v1/sandboxes/${id}/exec`, { argv: ['cat'], stdin: Buffer.alloc(2 << 20).toString('base64') }), 413);
    await unharmed();
  });

  test('huge and broken headers', async () => {
    const big = await rawHttp(d, `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(200 * 1024)}\r\nConnection: close\r\n\r\n`);
    assert.match(big, /^HTTP\/1\.1 (413|431|400)/);
    const many = 'X-H: v\r\n'.repeat(20000);
    const r2 = await rawHttp(d, `GET /healthz HTTP/1.1\r\nHost: x\r\n${many}Connection: close\r\n\r\n`);
    assert.match(r2, /^HTTP\/1\.1 (413|431|400)/);
    const garbage = await rawHttp(d, 'THIS IS NOT HTTP\r\n\r\n');
    assert.ok(garbage === '' || /^HTTP\/1\.[01] 4\d\d/.test(garbage), garbage.slice(0, 80));
    const badChunk = await rawHttp(d, `POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${d.key}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\nZZZ\r\nnope\r\n0\r\n\r\n`);
    assert.ok(badChunk === '' || /^HTTP\/1\.1 4\d\d/.test(badChunk), badChunk.slice(0, 80));
    const negLen = await rawHttp(d, `POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${d.key}\r\nContent-Length: -5\r\nConnection: close\r\n\r\n`);
    assert.match(negLen, /^HTTP\/1\.1 4\d\d/);
    await unharmed();
  });

  test('a body announced but never sent does not block others', async () => {
    const hang = rawHttp(d, `POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${d.key}\r\nContent-Length: 100\r\n\r\n{"a":`, { timeoutMs: 1500 });
    await unharmed();
    await hang;
  });

  test('bad paths', async () => {
    isError(await api(d, 'GET', `/v1/sandboxes/${id}/files/${'n'.repeat(300)}`), 400);
    isError(await api(d, 'GET', `/v1/sandboxes/${id}/files/${('d/').repeat(2100)}f`), 400);
    isError(await api(d, 'GET', `/v1/sandboxes/${id}/files/a%00b`), 400); // NUL: never a name's
    isError(await api(d, 'GET', `/v1/sandboxes/${id}/files/a%01b`), 404, 'not_found'); // 0x01 is
    isError(await api(d, 'POST', `/v1/sandboxes/${id}/mkdir`, { path: '../x' }), 400);
    isError(await api(d, 'POST', `/v1/sandboxes/${id}/mkdir`, { path: 7 }), 400);
    isError(await api(d, 'POST', `/v1/sandboxes/${id}/rename`, { from: '/', to: '/x' }), 400);
    isError(await api(d, 'POST', `/v1/sandboxes/${id}/rmdir`, {}), 400);
    isError(await api(d, 'GET', `/v1/sandboxes/${id}/files/no/such/file`), 404, 'not_found');
    isError(await api(d, 'PUT', `/v1/sandboxes/${id}/files/`, 'x'), 409);
    await api(d, 'PUT', `/v1/sandboxes/${id}/files/plain`, 'x');
    isError(await api(d, 'PUT', `/v1/sandboxes/${id}/files/plain/below`, 'x'), 400, 'not_a_directory');
    isError(await api(d, 'GET', `/v1/sandboxes/${id}/processes/abc`), 400);
    isError(await api(d, 'GET', `/v1/sandboxes/${id}/processes/-4`), 400);
    const pid = (await exec(d, id, ['true'])).pid;
    isError(await api(d, 'GET', `/v1/sandboxes/${id}/processes/${pid}/output?offset=-1`), 400);
    isError(await api(d, 'GET', `/v1/sandboxes/${id}/processes/${pid}/output?follow=maybe`), 400);
    isError(await api(d, 'GET', `/v1/sandboxes/${id}/processes/99999/output`), 404);
    await unharmed();
  });

  test('many connections at once', async () => {
    const rs = await Promise.all(Array.from({ length: 200 }, () => api(d, 'GET', '/healthz', undefined, { auth: false })));
    assert.ok(rs.every((r) => r.status === 200));
    await unharmed();
  });
});
