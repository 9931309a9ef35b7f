// SPDX-License-Identifier: BSL-1.0
// A memory store on an io_context, and coroutines on it whose exceptions fail the test:
// the fixture of the driver's unit tests.
#pragma once

#include <dlock/memory_store.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include <chrono>
#include <exception>

namespace dlock::test {

struct memory_fixture {
    boost::asio::io_context io;
    dlock::memory_store store{io.get_executor()};

    template <class F>
    void spawn(F f)
    {
        boost::asio::co_spawn(io, std::move(f), [](std::exception_ptr e) {
            if (e)
                std::rethrow_exception(e);
        });
    }
    void run(std::chrono::milliseconds limit = std::chrono::seconds(10)) { io.run_for(limit); }
};

}  // namespace dlock::test
