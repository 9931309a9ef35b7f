// SPDX-License-Identifier: BSL-1.0
// A program that links dlock::core alone (no Redis, no OpenSSL, no hiredis): the lock on the
// in-process memory store, through the core umbrella header.
#include <dlock/core.hpp>
#include <dlock/version.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <cstdio>
#include <string_view>

int main()
{
    // The library loaded is the one the headers describe (a shared libdlock could differ).
    static_assert(DLOCK_VERSION == DLOCK_VERSION_MAJOR * 10000 + DLOCK_VERSION_MINOR * 100 + DLOCK_VERSION_PATCH);
    if (!dlock::version.compatible_with(dlock::library_version()) ||
        std::string_view(dlock::library_version().string) != DLOCK_VERSION_STRING) {
        std::printf("core consumer: headers %s, library %s\n", DLOCK_VERSION_STRING, dlock::library_version().string);
        return 1;
    }
    boost::asio::io_context io;
    dlock::memory_store store(io.get_executor());
    dlock::registry reg(store);
    std::uint64_t fence = 0;
    boost::asio::co_spawn(
        io,
        [&]() -> boost::asio::awaitable<void> {
            auto g = co_await reg.obtain("core-only").acquire(boost::asio::use_awaitable);
            fence = g.fencing_token();
            co_await g.release(boost::asio::use_awaitable);
        },
        boost::asio::detached);
    io.run();
    if (fence == 0) {
        std::puts("core consumer: no lock");
        return 1;
    }
    std::puts("core consumer: ok");
    return 0;
}
