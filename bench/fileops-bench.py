#!/usr/bin/env python3
"""fileops-bench.py - native file operations on one sandbox, one keep-alive
connection, sequential: what a file operation costs end to end.

make bench runs it twice in one run: against an abxd in the ns isolation
mode, where every file operation goes through the sandbox user's file helper
(abx-fileops, src/sandbox/fileops.h), and against one in the none mode,
where the same functions run inside abxd - the helper's cost is the
difference. Prints NAME.OP.p50_us=... lines (p50, p90, p99, mean) for
bench/run.sh. Python's standard library only.
"""
import argparse
import http.client
import json
import os
import statistics
import sys
import time
import urllib.parse


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--url', required=True)
    ap.add_argument('--key', default=os.environ.get('ABX_API_KEY', ''))
    ap.add_argument('--name', required=True)
    ap.add_argument('-n', type=int, default=500)
    ap.add_argument('-w', type=int, default=50)
    ap.add_argument('--walk-files', type=int, default=1000)
    ap.add_argument('--walk-n', type=int, default=50)
    a = ap.parse_args()
    u = urllib.parse.urlparse(a.url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    hdr = {'Authorization': f'Bearer {a.key}'}

    def req(method, path, body=None, ok=(200, 201, 204)):
        c.request(method, path, body=body, headers=hdr)
        r = c.getresponse()
        data = r.read()
        if r.status not in ok:
            sys.exit(f'{method} {path}: {r.status} {data[:200]!r}')
        return data

    sid = json.loads(req('POST', '/v1/sandboxes', b'{}'))['id']
    try:
        script = f'mkdir -p t && for i in $(seq {a.walk_files}); do echo $i > t/f$i; done'
        req('POST', f'/v1/sandboxes/{sid}/exec', json.dumps({'argv': ['sh', '-c', script]}))
        body = os.urandom(4096)
        base = f'/v1/sandboxes/{sid}'
        ops = [
            ('put_4k', 'PUT', f'{base}/files/b/x.bin', body, a.n),
            ('get_4k', 'GET', f'{base}/files/b/x.bin', None, a.n),
            ('head', 'HEAD', f'{base}/files/b/x.bin', None, a.n),
            ('walk', 'GET', f'{base}/walk?path=/t', None, a.walk_n),
        ]
        for name, method, path, b, n in ops:
            for _ in range(min(a.w, n)):
                req(method, path, b)
            xs = []
            for _ in range(n):
                t0 = time.perf_counter()
                req(method, path, b)
                xs.append((time.perf_counter() - t0) * 1e6)
            xs.sort()
            q = lambda p: xs[min(len(xs) - 1, int(len(xs) * p))]
            print(f'{a.name}.{name}.n={n}')
            print(f'{a.name}.{name}.p50_us={q(0.50):.0f}')
            print(f'{a.name}.{name}.p90_us={q(0.90):.0f}')
            print(f'{a.name}.{name}.p99_us={q(0.99):.0f}')
            print(f'{a.name}.{name}.mean_us={statistics.fmean(xs):.0f}')
    finally:
        req('DELETE', f'/v1/sandboxes/{sid}', ok=(200, 204, 404))


if __name__ == '__main__':
    main()
