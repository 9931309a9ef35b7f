// SPDX-License-Identifier: BSL-1.0
// The Curator side of the interop tests: test/interop/CuratorLock.java, compiled once per test
// run (against Debian's Curator jars) into a throwaway directory, and the command that runs one
// of its modes with a small JVM.
#pragma once

#include <dlock/guard.hpp>
#include <dlock/zookeeper/store.hpp>

#include "common/child.hpp"
#include "common/redis_server.hpp"  // run_capture
#include "common/zk_ensemble.hpp"
#include "integration/consensus/support.hpp"  // temp_dir

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>

#include <stdexcept>
#include <string>
#include <vector>

namespace dlock::test {

inline const std::string& curator_dir()
{
    static const std::string dir = [] {
        auto d = temp_dir("dlock-zkt");
        int status = -1;
        auto out = run_capture(
            {"/usr/bin/javac", "-cp", zk_ensemble::curator_classpath(), "-d", d, DLOCK_CURATOR_SOURCE}, &status);
        if (status != 0)
            throw std::runtime_error("javac CuratorLock.java failed (is default-jdk-headless installed?): " + out);
        return d;
    }();
    return dir;
}

/// `java ... CuratorLock <args>` (the modes are listed at the top of CuratorLock.java).
inline std::vector<std::string> curator(std::vector<std::string> args)
{
    std::vector<std::string> argv = {"/usr/bin/java",
                                     "-Xmx96m",
                                     "-XX:+UseSerialGC",
                                     "-XX:TieredStopAtLevel=1",
                                     "-cp",
                                     zk_ensemble::curator_classpath() + ":" + curator_dir(),
                                     "CuratorLock"};
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
}

/// Hands `g` (dlock's hold of `name`) to a Curator process that waits for it: once the store
/// shows one node queued behind ours, releases it; the process then says "acquired <czxid>"
/// with a czxid above g's fencing token.
inline boost::asio::awaitable<void> hand_to_curator(dlock::zookeeper_store& store, const std::string& name,
                                                    dlock::guard& g, child& waiter)
{
    using namespace std::chrono_literals;
    auto s = co_await status_until(store, name, [](const dlock::lock_status& s) { return s.queued > 0; });
    BOOST_TEST(s.queued == 1u);
    auto mine = g.fencing_token();
    co_await g.release();
    auto got = waiter.read_line(30s);
    BOOST_REQUIRE((got && got->rfind("acquired ", 0) == 0));
    BOOST_TEST(std::stoull(got->substr(9)) > mine);
}

}  // namespace dlock::test
