// A separate process for the latch (and election) integration tests, on a redis_store at
// 127.0.0.1:PORT. Modes:
//   count_down PORT NAME COUNT MEMBER   counts down for MEMBER ("-": a library-made member),
//                                       prints "remaining N"
//   wait PORT NAME COUNT                waits for the latch, then prints "woken remaining=N"
#include <dlock/dlock.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <cstdio>
#include <iostream>
#include <string>

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

void say(const std::string& line)
{
    std::cout << line << std::endl;  // flushed: the test reads it line by line
}

}  // namespace

int main(int argc, char** argv)
{
    if (argc < 5) {
        std::cerr << "usage: latch_worker MODE PORT NAME ...\n";
        return 2;
    }
    std::string mode = argv[1];
    std::string name = argv[3];
    asio::io_context io;
    dlock::redis::config cfg;
    cfg.port = static_cast<std::uint16_t>(std::stoi(argv[2]));
    dlock::redis_store store(io.get_executor(), cfg);
    dlock::registry reg(store, {.lease = 2s});
    int status = 1;

    auto run = [&](auto body) {
        asio::co_spawn(io, body(), [&](std::exception_ptr e) {
            if (e) {
                try {
                    std::rethrow_exception(e);
                } catch (const std::exception& ex) {
                    say(std::string("error ") + ex.what());
                }
            } else {
                status = 0;
            }
            store.close();
        });
        io.run();
    };

    if (mode == "count_down" && argc >= 6) {
        std::uint64_t count = std::stoull(argv[4]);
        std::string member = argv[5];
        run([&]() -> asio::awaitable<void> {
            dlock::latch l(reg, name, count);
            auto left = member == "-" ? co_await l.count_down(asio::use_awaitable)
                                      : co_await l.count_down(member, asio::use_awaitable);
            say("remaining " + std::to_string(left));
        });
    } else if (mode == "wait") {
        std::uint64_t count = std::stoull(argv[4]);
        run([&]() -> asio::awaitable<void> {
            dlock::latch l(reg, name, count);
            co_await l.wait(asio::use_awaitable);
            auto left = co_await l.count(asio::use_awaitable);
            say("woken remaining=" + std::to_string(left));
        });
    } else {
        std::cerr << "latch_worker: unknown mode or missing arguments\n";
        return 2;
    }
    return status;
}
