#!/usr/bin/env python3
# SPDX-License-Identifier: BSL-1.0
# The Redis server's own time per uncontended acquire+release cycle, for the minimal hand
# lock, dlock's scripts and two alternative layouts: 20,000 cycles sent with
# `redis-cli --pipe` to a redis-server of its own (loopback, free port, thrown away), then
# INFO commandstats. Top-level commands only: a script's usec already holds its calls.
# Usage: python3 bench/server_cost.py [runs]   (needs redis-server and redis-cli)
import os, re, shutil, socket, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
N = 20000


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def resp(*args):
    out = [f'*{len(args)}\r\n']
    for a in args:
        a = str(a)
        out.append(f'${len(a.encode())}\r\n{a}\r\n')
    return ''.join(out)


def dlock_script(name):
    src = open(os.path.join(HERE, '..', 'src', 'redis', 'redis_scripts.hpp')).read()
    return re.search(r'inline constexpr const char\* ' + name + r' = R"lua\((.*?)\)lua";', src, re.S).group(1)


MINIMAL_RELEASE = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"
STRING_ACQUIRE = """local f = redis.call('INCR', KEYS[2])
if not redis.call('SET', KEYS[1], ARGV[1] .. ' ' .. f, 'NX', 'PX', ARGV[2], 'GET') then return {1, f} end
return {0, redis.call('PTTL', KEYS[1])}"""
STRING_RELEASE = """local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, #ARGV[1] + 1) == ARGV[1] .. ' ' then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], 'released')
  return 1
end
return 0"""


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    port = free_port()
    tmp = tempfile.mkdtemp(prefix='dlock-server-cost-')
    server = subprocess.Popen(['redis-server', '--port', str(port), '--bind', '127.0.0.1', '--save', '',
                               '--appendonly', 'no', '--dir', tmp, '--logfile', os.path.join(tmp, 'log')])
    try:
        for _ in range(100):
            if os.path.exists(os.path.join(tmp, 'log')) and 'Ready to accept' in open(os.path.join(tmp, 'log')).read():
                break
            time.sleep(0.05)

        def cli(*a, data=None):
            r = subprocess.run(['redis-cli', '-p', str(port)] + list(a), input=data, capture_output=True)
            return r.stdout.decode()

        sha = {n: cli('SCRIPT', 'LOAD', body).strip() for n, body in [
            ('acquire', dlock_script('acquire')), ('release', dlock_script('release')),
            ('minrel', MINIMAL_RELEASE), ('sacq', STRING_ACQUIRE), ('srel', STRING_RELEASE)]}
        K, F, Q, QT = '{T}ns:lock:n', '{T}ns:fence', '{T}ns:queue:n', '{T}ns:queue-ttl:n'
        cases = [
            ('minimal: SET NX PX; GET+DEL script', ['set', 'evalsha'],
             lambda i: resp('SET', 'mk', f't{i}', 'NX', 'PX', 30000) + resp('EVALSHA', sha['minrel'], 1, 'mk', f't{i}')),
            ('dlock: acquire and release scripts', ['evalsha'],
             lambda i: resp('EVALSHA', sha['acquire'], 2, K, F, f't{i}', 30000) +
             resp('EVALSHA', sha['release'], 4, K, F, Q, QT, f't{i}', '{T}ns:released:n', '{T}ns:granted:n:')),
            ('string key: INCR+SET NX PX GET; GET+DEL+PUBLISH', ['evalsha'],
             lambda i: resp('EVALSHA', sha['sacq'], 2, 'sk', F, f't{i}', 30000) +
             resp('EVALSHA', sha['srel'], 1, 'sk', f't{i}', 'ch')),
            ('MULTI INCR, SET NX PX GET, EXEC; same release', ['multi', 'incr', 'set', 'exec', 'evalsha'],
             lambda i: resp('MULTI') + resp('INCR', F) + resp('SET', 'xk', f't{i} 1', 'NX', 'PX', 30000, 'GET') +
             resp('EXEC') + resp('EVALSHA', sha['srel'], 1, 'xk', f't{i}', 'ch')),
        ]
        for _ in range(runs):
            for label, counted, gen in cases:
                cli('CONFIG', 'RESETSTAT')
                cli('--pipe', data=''.join(gen(i) for i in range(N)).encode())
                stats = {m.group(1): int(m.group(2)) for m in
                         re.finditer(r'cmdstat_(\w+):calls=\d+,usec=(\d+)', cli('INFO', 'commandstats'))}
                per = {k: stats.get(k, 0) / N for k in counted}
                detail = ' '.join(f'{k} {v:.2f}' for k, v in per.items())
                print(f'{label:50s} {sum(per.values()):5.2f} us per cycle  ({detail})')
    finally:
        server.terminate()
        server.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == '__main__':
    main()
