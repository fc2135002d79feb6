// lib.mjs - start a real abxd and point the real E2B SDK at it the way a
// user would: E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY, nothing else.
//
// Each test file runs in its own Node process (node --test), so each sets
// the environment once for its own abxd before loading the SDK.
import { randomBytes } from 'node:crypto';
import { startAbxd } from '../integration/lib.mjs';

export { sleep, until, api } from '../integration/lib.mjs';

// Starts abxd, sets the three variables, and loads the SDK (pkg 'e2b' is
// 2.51.x, 'e2b-245' the 2.45 client that uses the v1 paths).
export async function setup({ pkg = 'e2b', args = [], env = {} } = {}) {
  // A key of E2B's shape: the 2.45 client refuses any other before sending.
  const key = 'e2b_' + randomBytes(20).toString('hex');
  const d = await startAbxd({ key, args, env: { ABX_POOL: '2', ...env } });
  process.env.E2B_API_URL = d.url;
  process.env.E2B_SANDBOX_URL = d.url;
  process.env.E2B_API_KEY = d.key;
  const sdk = await import(pkg);
  return { d, sdk };
}

// Raw envd request to sandbox sbx (for what the SDK does not expose).
export async function envd(d, sbx, method, path, { headers = {}, body } = {}) {
  return fetch(d.url + path, {
    method,
    headers: {
      'E2b-Sandbox-Id': sbx.sandboxId,
      'X-Access-Token': sbx.envdAccessToken ?? '',
      ...headers,
    },
    body,
  });
}
