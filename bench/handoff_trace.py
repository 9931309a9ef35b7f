#!/usr/bin/env python3
# SPDX-License-Identifier: BSL-1.0
# Where a cross-process hand-off's time goes, by the scheduler's own record: lock_bench's
# pingpong peers (the raw blocking-socket floor, the Asio floor, dlock) take turns on a
# redis-server of their own while `perf record` logs context switches, wake-ups and the
# peers' socket calls on CLOCK_MONOTONIC, the clock the peers print "acq NS" / "rel NS" on.
# Each hand-off (one peer's release, the other's acquire) splits into: the holder's release
# log to its write; that write to the server's first event; the server's start to the
# waiter's wake-up; the wake-up to the waiter running; the waiter running to its acquire log.
# It also counts the hand-offs in which the server woke the holder (its release reply)
# first and the holder then took the server's CPU before the waiter was woken.
# Usage: python3 bench/handoff_trace.py BUILD_DIR [rounds]   (root; needs perf, redis-server)
import bisect, os, re, shutil, socket, statistics, subprocess, sys, tempfile, time

if len(sys.argv) < 2:
    sys.exit("usage: handoff_trace.py BUILD_DIR [rounds]")
BENCH = os.path.join(sys.argv[1], 'bench', 'lock_bench')
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 150
MODES = ['rawpingpong', 'asiopingpong', 'pingpong']


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def start_server(port, d):
    log = os.path.join(d, 'redis.log')
    p = subprocess.Popen(['redis-server', '--port', str(port), '--bind', '127.0.0.1', '--save', '',
                          '--appendonly', 'no', '--dir', d, '--logfile', log])
    for _ in range(500):  # readiness from the log, as the tests read it
        if os.path.exists(log) and 'Ready to accept connections' in open(log).read():
            return p
        time.sleep(0.01)
    p.kill()
    sys.exit('redis-server did not start')


def record(port, d):
    script = os.path.join(d, 'peers.sh')
    with open(script, 'w') as f:
        for m in MODES:
            for side in 'ab':
                f.write(f'{BENCH} --peer {m} {port} {ROUNDS} > {d}/{m}.{side}.out 2>/dev/null & '
                        f'echo $! > {d}/{m}.{side}.pid\n')
            f.write('wait\n')
    events = ','.join(['sched:sched_switch', 'sched:sched_wakeup', 'syscalls:sys_enter_sendto',
                       'syscalls:sys_enter_write', 'syscalls:sys_exit_epoll_wait'])
    subprocess.run(['perf', 'record', '-q', '-e', events, '-a', '-k', 'CLOCK_MONOTONIC', '-o', f'{d}/t.data', '--',
                    'bash', script], check=True, stderr=subprocess.DEVNULL)
    out = subprocess.run(['perf', 'script', '-i', f'{d}/t.data', '--ns', '-F', 'comm,tid,time,event,trace'],
                         check=True, capture_output=True, text=True).stdout
    line = re.compile(r'^\s*(\S.*?)\s+(\d+)\s+(\d+)\.(\d+):\s+(\S+):\s*(.*)$')
    ev = []
    for l in out.splitlines():
        m = line.match(l)
        if m:
            comm, tid, s, frac, name, trace = m.groups()
            ev.append((int(s) * 10**9 + int(frac.ljust(9, '0')[:9]), int(tid), name, trace, comm))
    ev.sort()
    return ev


def analyze(ev, server_pid, d):
    times = [e[0] for e in ev]

    def first_after(t, pred, limit=5_000_000):
        i = bisect.bisect_left(times, t)
        while i < len(ev) and ev[i][0] < t + limit:
            if pred(ev[i]):
                return ev[i]
            i += 1
        return None

    def woke(pid):
        return lambda e: e[2] == 'sched:sched_wakeup' and f'pid={pid} ' in e[3]

    def switched_to(pid):
        return lambda e: e[2] == 'sched:sched_switch' and f'next_pid={pid} ' in e[3]

    def runs(pid):  # switched in, or already running (an event of its own)
        return lambda e: e[1] == pid or switched_to(pid)(e)

    for m in MODES:
        pid = {s: int(open(f'{d}/{m}.{s}.pid').read()) for s in 'ab'}
        log = []
        for s in 'ab':
            for l in open(f'{d}/{m}.{s}.out'):
                p = l.split()
                if len(p) == 2 and p[0] in ('acq', 'rel'):
                    log.append((int(p[1]), p[0], s))
        log.sort()
        seg = {k: [] for k in ['release log -> write', 'write -> server runs', 'server runs -> waiter woken',
                               'waiter woken -> runs', 'waiter runs -> acquire log', 'total']}
        holder_took_cpu = n = 0
        for (tr, k1, s1), (ta, k2, s2) in zip(log, log[1:]):
            if not (k1 == 'rel' and k2 == 'acq' and s1 != s2):
                continue
            h, w = pid[s1], pid[s2]
            wr = first_after(tr, lambda e: e[1] == h and e[2] in ('syscalls:sys_enter_sendto',
                                                                  'syscalls:sys_enter_write'))
            if not wr:
                continue
            srv = first_after(wr[0], runs(server_pid))
            wk = first_after(wr[0], woke(w))
            run = wk and first_after(wk[0], switched_to(w))
            if not srv or not wk or not run or wk[0] > ta:
                continue
            n += 1
            seg['release log -> write'].append(wr[0] - tr)
            seg['write -> server runs'].append(srv[0] - wr[0])
            seg['server runs -> waiter woken'].append(wk[0] - srv[0])
            seg['waiter woken -> runs'].append(run[0] - wk[0])
            seg['waiter runs -> acquire log'].append(ta - run[0])
            seg['total'].append(ta - tr)
            hw = first_after(wr[0] + 1000, woke(h))
            if hw and hw[0] < wk[0]:
                i = bisect.bisect_left(times, hw[0])
                while i < len(ev) and ev[i][0] < wk[0]:
                    e = ev[i]
                    if e[2] == 'sched:sched_switch' and f'prev_pid={server_pid} ' in e[3] and \
                            f'next_pid={h} ' in e[3]:
                        holder_took_cpu += 1
                        break
                    i += 1
        print(f'{m}: {n} hand-offs; the holder took the server\'s CPU before the waiter was woken in '
              f'{holder_took_cpu}')
        for k, v in seg.items():
            if v:
                print(f'  {k:28s} p50 {statistics.median(v) / 1000:7.1f} us   mean {statistics.mean(v) / 1000:7.1f} us')


def main():
    if not shutil.which('perf') or not shutil.which('redis-server'):
        sys.exit('needs perf and redis-server')
    d = tempfile.mkdtemp(prefix='dlock-handoff-')
    port = free_port()
    srv = start_server(port, d)
    try:
        ev = record(port, d)
        analyze(ev, srv.pid, d)
    finally:
        srv.kill()
        srv.wait()
        shutil.rmtree(d, ignore_errors=True)


if __name__ == '__main__':
    main()
