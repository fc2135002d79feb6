// http-limits.test.mjs - slow, greedy and ambiguous HTTP clients: a request
// head has a deadline, a request body an idle timeout and a minimum rate,
// one client address cannot take every connection, a body announced larger
// than its route takes is refused before it is read, and framing that two
// HTTP parsers could read differently is answered 400 and the connection
// closed. Response streams and legitimate keep-alive keep working.
//
// Every wait is bounded: abxd runs with 2 s timeouts here, and each raw
// connection gives up (and the test fails) after its own deadline.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { startAbxd, createSandbox, killSandbox, exec, api, isRoot, sleep } from './lib.mjs';

const skip = !isRoot && 'needs root';

const HEADER_S = 2;
const BODY_S = 2;
const PER_IP = 20;

// A raw connection: c.write(bytes), c.end (a promise of {data, ms, closed}
// once the server closes it or after limitMs), c.status() the first status
// line received.
function conn(d, { localAddress, limitMs = 8000 } = {}) {
  const s = net.connect({ port: d.port, host: '127.0.0.1', localAddress });
  const t0 = Date.now();
  let data = '';
  s.on('data', (b) => (data += b.toString('latin1')));
  const end = new Promise((resolve) => {
    const t = setTimeout(() => {
      s.destroy();
      resolve({ data, ms: Date.now() - t0, closed: false });
    }, limitMs);
    s.on('close', () => {
      clearTimeout(t);
      resolve({ data, ms: Date.now() - t0, closed: true });
    });
    s.on('error', () => {});
  });
  const connected = new Promise((resolve) => s.on('connect', resolve));
  return {
    s,
    end,
    connected,
    write: (b) => s.write(b),
    get data() {
      return data;
    },
  };
}

const statusLine = (data) => data.split('\r\n')[0];

// Sends bytes on a fresh connection and waits for the server to close it.
async function oneShot(d, bytes, limitMs = 5000) {
  const c = conn(d, { limitMs });
  c.write(bytes);
  return c.end;
}

describe('HTTP limits', { skip }, () => {
  let d, id;
  before(async () => {
    d = await startAbxd({
      env: {
        ABX_HTTP_HEADER_TIMEOUT_S: String(HEADER_S),
        ABX_HTTP_BODY_TIMEOUT_S: String(BODY_S),
        ABX_HTTP_BODY_MIN_RATE: '100',
        ABX_HTTP_MAX_CONNS: '256',
        ABX_HTTP_MAX_CONNS_PER_IP: String(PER_IP),
        ABX_MAX_FILE_MB: '1',
      },
    });
    id = (await createSandbox(d)).id;
  });
  after(async () => {
    if (d && id) await killSandbox(d, id).catch(() => {}); // d.stop() kills the rest
    if (d) await d.stop();
  });

  async function unharmed() {
    assert.equal((await api(d, 'GET', '/healthz', undefined, { auth: false })).status, 200);
  }

  const auth = () => `Authorization: Bearer ${d.key}\r\n`;

  test('a request head that trickles in is closed at its deadline with 408', async () => {
    const c = conn(d);
    c.write('GET /healthz HTTP/1.1\r\nHost: x\r\n');
    // One header byte every 300 ms: each resets an idle timer, none the deadline.
    const drip = setInterval(() => c.s.writable && c.write('X'), 300);
    const r = await c.end;
    clearInterval(drip);
    assert.ok(r.closed, 'the slow connection is still open');
    assert.equal(statusLine(r.data), 'HTTP/1.1 408 Request Timeout');
    assert.match(r.data, /"error":"timeout"/);
    assert.ok(r.ms >= HEADER_S * 1000 - 200 && r.ms < HEADER_S * 1000 + 2000, `closed after ${r.ms} ms`);

    // A connection that says nothing is closed at the same deadline.
    const quiet = await conn(d).end;
    assert.ok(quiet.closed);
    assert.equal(statusLine(quiet.data), 'HTTP/1.1 408 Request Timeout');
    await unharmed();
  });

  test('keep-alive: requests are served, an idle connection is closed quietly', async () => {
    const c = conn(d);
    const req = 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n';
    c.write(req);
    // A sleep on purpose: half the header deadline between two requests.
    await sleep(HEADER_S * 500);
    c.write(req); // within the deadline counted from the first request's end
    const r = await c.end;
    assert.ok(r.closed);
    assert.equal(r.data.match(/HTTP\/1\.1 200 OK/g)?.length, 2, r.data);
    assert.doesNotMatch(r.data, /408/, 'an idle kept-alive connection gets no unsolicited answer');
    assert.ok(r.ms < HEADER_S * 1000 * 2 + 2000, `closed after ${r.ms} ms`);
  });

  test('a stalled or trickling request body is ended with 408', async () => {
    const head = `POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\n${auth()}Content-Type: application/json\r\n`;
    // Stalls after a few bytes.
    const stall = await oneShot(d, `${head}Content-Length: 100\r\n\r\n{"a":`);
    assert.ok(stall.closed);
    assert.equal(statusLine(stall.data), 'HTTP/1.1 408 Request Timeout');
    assert.match(stall.data, /no request body byte/);
    assert.ok(stall.ms < BODY_S * 1000 + 2000, `closed after ${stall.ms} ms`);

    // One byte every 250 ms: never idle for long, but far below 100 bytes/s.
    const c = conn(d);
    c.write(`${head}Content-Length: 1000\r\n\r\n`);
    const drip = setInterval(() => c.s.writable && c.write(' '), 250);
    const slow = await c.end;
    clearInterval(drip);
    assert.ok(slow.closed);
    assert.equal(statusLine(slow.data), 'HTTP/1.1 408 Request Timeout');
    assert.match(slow.data, /slower than 100 bytes\/s/);
    assert.ok(slow.ms < BODY_S * 1000 * 2 + 2000, `closed after ${slow.ms} ms`);

    // A chunk size of sixteen 'f's: MHD takes it as 2^64-1 bytes to come;
    // nothing comes, so the body timeout ends it.
    const huge = await oneShot(d, `${head}Transfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\n{}`);
    assert.ok(huge.closed);
    assert.equal(statusLine(huge.data), 'HTTP/1.1 408 Request Timeout');
    assert.ok(huge.ms < BODY_S * 1000 + 2000, `closed after ${huge.ms} ms`);
    await unharmed();
  });

  test('a body announced larger than the route takes is refused before it is read', async () => {
    const tenGiB = 10 * 1024 * 1024 * 1024;
    for (const [path, method] of [
      [`/v1/sandboxes/${id}/exec`, 'POST'],
      ['/v1/sandboxes', 'POST'],
      [`/v1/sandboxes/${id}/mkdir`, 'POST'],
      [`/v1/sandboxes/${id}/files/big`, 'PUT'],
    ]) {
      const r = await oneShot(
        d,
        `${method} ${path} HTTP/1.1\r\nHost: x\r\n${auth()}Content-Type: application/json\r\nContent-Length: ${tenGiB}\r\n\r\n`,
        // Well below the body timeout: the answer must not wait for a body.
        1500,
      );
      assert.equal(statusLine(r.data), 'HTTP/1.1 413 Content Too Large', `${path}: ${r.data.slice(0, 200)}`);
      assert.match(r.data, /"error":"too_large"/);
      assert.ok(r.closed, `${path}: connection left open`);
    }
    await unharmed();
  });

  test('ambiguous framing is answered 400 and the connection closed', async () => {
    const post = `POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\n${auth()}Content-Type: application/json\r\n`;
    const before_ = (await api(d, 'GET', '/v1/sandboxes')).json.length;
    const cases = {
      'Content-Length with Transfer-Encoding': `${post}Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n`,
      'two different Content-Lengths': `${post}Content-Length: 2\r\nContent-Length: 7\r\n\r\n{}`,
      'a repeated Content-Length': `${post}Content-Length: 2\r\nContent-Length: 2\r\n\r\n{}`,
      'Transfer-Encoding other than chunked': `${post}Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n`,
      'Transfer-Encoding identity': `${post}Transfer-Encoding: identity\r\n\r\n{}`,
      'two Transfer-Encodings': `${post}Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`,
      'chunked in HTTP/1.0': `POST /v1/sandboxes HTTP/1.0\r\nHost: x\r\n${auth()}Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n`,
      'space before the colon': `${post}Content-Length : 2\r\n\r\n{}`,
      'a bare CR in a value': `GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: a\rb\r\n\r\n`,
      'a control character in a value': `GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: a\x01b\r\n\r\n`,
      'no Host in HTTP/1.1': `GET /healthz HTTP/1.1\r\n\r\n`,
      'two Hosts': `GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n`,
      'a space in the request target': `GET /healthz x HTTP/1.1\r\nHost: x\r\n\r\n`,
      'a malformed chunk size': `${post}Transfer-Encoding: chunked\r\n\r\nZZZ\r\nnope\r\n0\r\n\r\n`,
    };
    for (const [what, bytes] of Object.entries(cases)) {
      const r = await oneShot(d, bytes, 1500);
      assert.equal(statusLine(r.data), 'HTTP/1.1 400 Bad Request', `${what}: ${JSON.stringify(r.data.slice(0, 300))}`);
      assert.ok(r.closed, `${what}: connection left open`);
    }
    // A chunk size past 64 bits: MHD's own 413, and closed.
    const over = await oneShot(d, `${post}Transfer-Encoding: chunked\r\n\r\nfffffffffffffffff\r\n{}`, 1500);
    assert.equal(statusLine(over.data), 'HTTP/1.1 413 Content Too Large');
    assert.ok(over.closed);
    // None of them created a sandbox.
    assert.equal((await api(d, 'GET', '/v1/sandboxes')).json.length, before_);
    await unharmed();
  });

  test('one client address cannot take every connection', async () => {
    // PER_IP silent connections from one address (127.0.0.3: nobody else's)
    // fill its share...
    const hog = '127.0.0.3';
    const hogs = Array.from({ length: PER_IP }, () => conn(d, { localAddress: hog }));
    await Promise.all(hogs.map((c) => c.connected));
    // Time for abxd to accept them all (a client sees its connect end
    // before abxd counts it; nothing outside shows the count).
    await sleep(100);
    // ... so the next ones from there are refused at once, with 429 ...
    const extra = await Promise.all(
      Array.from({ length: 300 }, () => conn(d, { localAddress: hog, limitMs: 3000 }).end),
    );
    for (const r of extra) {
      assert.ok(r.closed, 'an excess connection was kept');
      assert.equal(statusLine(r.data), 'HTTP/1.1 429 Too Many Requests');
      assert.match(r.data, /too_many_connections/);
    }
    // ... while other clients (127.0.0.2, and 127.0.0.1 through fetch) are served.
    const other = conn(d, { localAddress: '127.0.0.2', limitMs: 1500 });
    other.write('GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    const o = await other.end;
    assert.equal(statusLine(o.data), 'HTTP/1.1 200 OK', o.data);
    await unharmed();
    // The hogs end at the header deadline, and their address is served again.
    const ended = await Promise.all(hogs.map((c) => c.end));
    for (const r of ended) {
      assert.ok(r.closed);
      assert.equal(statusLine(r.data), 'HTTP/1.1 408 Request Timeout');
    }
    // Time for abxd to count the closed ones out (not visible outside).
    await sleep(100);
    const again = conn(d, { localAddress: hog, limitMs: 1500 });
    again.write('GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    assert.equal(statusLine((await again.end).data), 'HTTP/1.1 200 OK');
  });

  test('long responses and paced bodies are not cut', async () => {
    // An exec whose output takes longer than every timeout.
    const r = await exec(d, id, ['sh', '-c', `sleep ${HEADER_S + BODY_S + 1}; echo done`]);
    assert.equal(r.out, 'done\n');

    // A chunked upload paced over 3 s at ~1 KiB/s, above the minimum rate.
    const c = conn(d, { limitMs: 10000 });
    c.write(`PUT /v1/sandboxes/${id}/files/paced HTTP/1.1\r\nHost: x\r\n${auth()}Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n`);
    for (let i = 0; i < 6; i++) {
      await sleep(500); // the pacing is the test
      c.write(`200\r\n${'p'.repeat(512)}\r\n`);
    }
    c.write('0\r\n\r\n');
    const up = await c.end;
    assert.match(statusLine(up.data), /^HTTP\/1\.1 20[01] /, up.data);
    const got = await api(d, 'GET', `/v1/sandboxes/${id}/files/paced`);
    assert.equal(got.text, 'p'.repeat(512 * 6));
    await unharmed();
  });

  test('a Connect client stream may pause between envelopes, not inside one', async () => {
    // E2B StreamInput: a client stream of stdin that waits for input.
    const e2b = await api(d, 'POST', '/sandboxes', { templateID: 'base' }, { auth: false, headers: { 'X-API-Key': d.key } });
    assert.equal(e2b.status, 201, e2b.text);
    const sbx = e2b.json;
    try {
      const env = (obj) => {
        const p = Buffer.from(JSON.stringify(obj));
        const h = Buffer.alloc(5);
        h.writeUInt32BE(p.length, 1);
        return Buffer.concat([h, p]);
      };
      const envdHead =
        `POST /process.Process/StreamInput HTTP/1.1\r\nHost: x\r\nE2b-Sandbox-Id: ${sbx.sandboxID}\r\n` +
        `X-Access-Token: ${sbx.envdAccessToken ?? ''}\r\nContent-Type: application/connect+json\r\n` +
        'Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n';
      const chunk = (b) => Buffer.concat([Buffer.from(b.length.toString(16) + '\r\n'), b, Buffer.from('\r\n')]);

      const patient = conn(d, { limitMs: 12000 });
      patient.write(envdHead);
      patient.write(chunk(env({ start: { process: { pid: 999999 } } })));
      await sleep(BODY_S * 1000 + 1500); // between envelopes: allowed
      assert.equal(patient.data, '', 'the stream was answered early');
      patient.write(chunk(env({ keepalive: {} })));
      patient.write('0\r\n\r\n');
      const p = await patient.end;
      assert.equal(statusLine(p.data), 'HTTP/1.1 200 OK', p.data);

      const stalled = conn(d, { limitMs: 8000 });
      stalled.write(envdHead);
      const half = env({ keepalive: {} });
      stalled.write(chunk(half.subarray(0, 3))); // inside an envelope header
      const s = await stalled.end;
      assert.ok(s.closed);
      assert.equal(statusLine(s.data), 'HTTP/1.1 408 Request Timeout', s.data);
      assert.ok(s.ms < BODY_S * 1000 + 2000, `closed after ${s.ms} ms`);
    } finally {
      await api(d, 'DELETE', `/sandboxes/${sbx.sandboxID}`, undefined, { auth: false, headers: { 'X-API-Key': d.key } });
    }
    await unharmed();
  });
});
