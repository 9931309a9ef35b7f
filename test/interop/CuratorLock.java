// SPDX-License-Identifier: BSL-1.0
// A Java service locking with Apache Curator's InterProcessMutex, for the interop tests and
// the bench: the same lock path as dlock's zookeeper_store, checked on shared files.
//   count CONNECT PATH SECTIONS COUNTER_FILE LOG_FILE
//       SECTIONS critical sections: read the counter, sleep 1 ms, write it + 1, append
//       "java-<pid> <czxid of our lock node>" to the log. Prints "done".
//   bench CONNECT PATH N
//       N uncontended acquire+release cycles; prints "p50_us=.. p99_us=.."
//   hold CONNECT PATH MILLIS
//       acquires, prints "acquired <czxid>", holds MILLIS, releases, prints "released".
//   wait CONNECT PATH
//       prints "waiting", acquires, prints "acquired <czxid>", releases.
//   handoff CONNECT PATH N
//       two sessions take turns: one holds while the other queues behind it; the time from
//       the holder's release to the waiter's acquire, N times; prints "p50_us=.. p99_us=.."
//   sections CONNECT PATH read|write|permits=N THREADS SECTIONS HOLD_MS LOG_FILE
//       InterProcessReadWriteLock's side, or one of N permits of InterProcessSemaphoreV2:
//       THREADS threads, each SECTIONS sections of HOLD_MS, appending "B|E r|w|p java-<pid>
//       <czxid>" as lock_worker's sections do. Prints "done".
//   hold-rw CONNECT PATH read|write|permits=N MILLIS
//       takes that side or a permit, prints "acquired <czxid>", holds MILLIS, releases,
//       prints "released".
//   latch CONNECT PATH ID MILLIS
//       LeaderLatch with participant id ID: prints "waiting", then "acquired <czxid>" once it
//       leads, leads MILLIS, closes the latch, prints "released".
//   leader-of CONNECT PATH
//       prints "leader <id>" of the latch's leader as LeaderLatch.getLeader() tells it.
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Arrays;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.retry.ExponentialBackoffRetry;

public class CuratorLock {
    // getLockPath() is protected: our own node, for its czxid (the fencing token dlock uses).
    static class Mutex extends InterProcessMutex {
        Mutex(CuratorFramework c, String path) { super(c, path); }
        String node() { return getLockPath(); }
    }

    // The two sides of InterProcessReadWriteLock, with their nodes (getLockPath() is protected).
    static class Writer extends InterProcessReadWriteLock.WriteLock {
        Writer(CuratorFramework c, String path) { super(c, path, null); }
        String node() { return getLockPath(); }
    }
    static class Reader extends InterProcessReadWriteLock.ReadLock {
        Reader(CuratorFramework c, String path, Writer w) { super(c, path, null, w); }
        String node() { return getLockPath(); }
    }

    // One side of a fresh read-write lock: acquire, and the node's czxid once held.
    interface Side {
        long acquire() throws Exception;
        void release() throws Exception;
    }
    // "read", "write" or "permits=N" (a lease of InterProcessSemaphoreV2, its czxid the token).
    static Side side(CuratorFramework c, String path, String what) {
        if (what.startsWith("permits=")) {
            InterProcessSemaphoreV2 sem = new InterProcessSemaphoreV2(c, path, Integer.parseInt(what.substring(8)));
            Lease[] held = new Lease[1];
            return new Side() {
                public long acquire() throws Exception {
                    held[0] = sem.acquire();
                    return c.checkExists().forPath(path + "/leases/" + held[0].getNodeName()).getCzxid();
                }
                public void release() throws Exception {
                    sem.returnLease(held[0]);
                }
            };
        }
        boolean read = what.equals("read");
        Writer w = new Writer(c, path);
        Reader r = new Reader(c, path, w);
        return new Side() {
            public long acquire() throws Exception {
                if (read)
                    r.acquire();
                else
                    w.acquire();
                return c.checkExists().forPath(read ? r.node() : w.node()).getCzxid();
            }
            public void release() throws Exception {
                if (read)
                    r.release();
                else
                    w.release();
            }
        };
    }

    static synchronized void append(Path log, String line) throws Exception {
        Files.writeString(log, line, StandardOpenOption.CREATE, StandardOpenOption.APPEND);
    }

    public static void main(String[] args) throws Exception {
        String mode = args[0];
        CuratorFramework client = CuratorFrameworkFactory.builder()
            .connectString(args[1])
            .sessionTimeoutMs(4000)
            .connectionTimeoutMs(4000)
            .retryPolicy(new ExponentialBackoffRetry(50, 10))
            .build();
        client.start();
        client.blockUntilConnected();
        Mutex lock = new Mutex(client, args[2]);
        String pid = Long.toString(ProcessHandle.current().pid());
        switch (mode) {
        case "count": {
            int sections = Integer.parseInt(args[3]);
            Path counter = Path.of(args[4]), log = Path.of(args[5]);
            for (int i = 0; i < sections; ++i) {
                lock.acquire();
                long czxid = client.checkExists().forPath(lock.node()).getCzxid();
                String text = Files.exists(counter) ? Files.readString(counter).trim() : "";
                long v = text.isEmpty() ? 0 : Long.parseLong(text);
                Thread.sleep(1);
                Files.writeString(counter, Long.toString(v + 1));
                Files.writeString(log, "java-" + pid + " " + czxid + "\n", StandardOpenOption.CREATE,
                                  StandardOpenOption.APPEND);
                lock.release();
            }
            System.out.println("done");
            break;
        }
        case "bench": {
            int n = Integer.parseInt(args[3]);
            long[] us = new long[n];
            for (int i = 0; i < n + 50; ++i) {
                long t0 = System.nanoTime();
                lock.acquire();
                lock.release();
                if (i >= 50)
                    us[i - 50] = (System.nanoTime() - t0) / 1000;
            }
            Arrays.sort(us);
            System.out.println("p50_us=" + us[n / 2] + " p99_us=" + us[(int) (n * 0.99)]);
            break;
        }
        case "handoff": {
            int n = Integer.parseInt(args[3]);
            CuratorFramework other = CuratorFrameworkFactory.builder().connectString(args[1]).sessionTimeoutMs(4000)
                .connectionTimeoutMs(4000).retryPolicy(new ExponentialBackoffRetry(50, 10)).build();
            other.start();
            other.blockUntilConnected();
            Mutex second = new Mutex(other, args[2]);
            long[] us = new long[n];
            for (int i = 0; i < n + 10; ++i) {
                Mutex holder = i % 2 == 0 ? lock : second, waiter = i % 2 == 0 ? second : lock;
                holder.acquire();
                long[] got = new long[1];
                Thread t = new Thread(() -> {
                    try {
                        waiter.acquire();
                        got[0] = System.nanoTime();
                        waiter.release();
                    } catch (Exception e) {
                        throw new RuntimeException(e);
                    }
                });
                t.start();
                while (holder.getParticipantNodes().size() < 2)
                    Thread.sleep(1);
                long t0 = System.nanoTime();
                holder.release();
                t.join();
                if (i >= 10)
                    us[i - 10] = (got[0] - t0) / 1000;
            }
            Arrays.sort(us);
            System.out.println("p50_us=" + us[n / 2] + " p99_us=" + us[(int) (n * 0.99)]);
            other.close();
            break;
        }
        case "hold": {
            lock.acquire();
            System.out.println("acquired " + client.checkExists().forPath(lock.node()).getCzxid());
            System.out.flush();
            Thread.sleep(Long.parseLong(args[3]));
            lock.release();
            System.out.println("released");
            break;
        }
        case "wait": {
            System.out.println("waiting");
            System.out.flush();
            lock.acquire();
            System.out.println("acquired " + client.checkExists().forPath(lock.node()).getCzxid());
            lock.release();
            break;
        }
        case "sections": {
            String what = args[3];
            int threads = Integer.parseInt(args[4]), sections = Integer.parseInt(args[5]);
            long hold = Long.parseLong(args[6]);
            Path log = Path.of(args[7]);
            String kind = what.startsWith("permits=") ? "p" : what.equals("read") ? "r" : "w";
            Thread[] ts = new Thread[threads];
            boolean[] failed = new boolean[1];
            for (int t = 0; t < threads; ++t) {
                ts[t] = new Thread(() -> {
                    try {
                        Side s = side(client, args[2], what);
                        for (int i = 0; i < sections; ++i) {
                            long czxid = s.acquire();
                            append(log, "B " + kind + " java-" + pid + " " + czxid + "\n");
                            Thread.sleep(hold);
                            append(log, "E " + kind + " java-" + pid + " " + czxid + "\n");
                            s.release();
                        }
                    } catch (Exception e) {
                        e.printStackTrace();
                        failed[0] = true;
                    }
                });
                ts[t].start();
            }
            for (Thread t : ts)
                t.join();
            System.out.println(failed[0] ? "failed" : "done");
            break;
        }
        case "hold-rw": {
            Side s = side(client, args[2], args[3]);
            System.out.println("acquired " + s.acquire());
            System.out.flush();
            Thread.sleep(Long.parseLong(args[4]));
            s.release();
            System.out.println("released");
            break;
        }
        case "latch": {
            LeaderLatch latch = new LeaderLatch(client, args[2], args[3]);
            System.out.println("waiting");
            System.out.flush();
            latch.start();
            latch.await();
            String node = latch.getOurPath();
            System.out.println("acquired " + client.checkExists().forPath(node).getCzxid());
            System.out.flush();
            Thread.sleep(Long.parseLong(args[4]));
            latch.close();
            System.out.println("released");
            break;
        }
        case "leader-of": {
            LeaderLatch latch = new LeaderLatch(client, args[2], "observer");  // not started: reads only
            System.out.println("leader " + latch.getLeader().getId());
            break;
        }
        default:
            System.err.println("CuratorLock: unknown mode " + mode);
            System.exit(2);
        }
        System.out.flush();
        client.close();
    }
}
