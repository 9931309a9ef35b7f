// SPDX-License-Identifier: BSL-1.0
// A program outside dlock's tree: compiles the public headers and links every layer of the
// library (config parsing, script hashing through OpenSSL, the connection and its hiredis
// decoder, the subscriber). It needs no server: the connection is closed before it is used.
#include <dlock/error.hpp>
#include <dlock/redis/config.hpp>
#include <dlock/redis/connection.hpp>
#include <dlock/redis/script.hpp>
#include <dlock/redis/subscriber.hpp>

#include <boost/asio/io_context.hpp>

#include <cstdio>

int main()
{
    dlock::redis::config cfg;
    dlock::redis::config_error err;
    if (!dlock::redis::parse_url("redis://127.0.0.1:6390/2?request_timeout=250ms", cfg, err) || cfg.port != 6390 ||
        cfg.database != 2 || cfg.request_timeout != std::chrono::milliseconds(250)) {
        std::puts("parse_url failed");
        return 1;
    }
    if (dlock::redis::script("return 1").sha1().size() != 40) {
        std::puts("script sha1 failed");
        return 1;
    }

    boost::asio::io_context io;
    dlock::redis::connection conn(io.get_executor(), cfg);
    dlock::redis::subscriber sub(io.get_executor(), cfg);
    sub.close();
    conn.close();
    dlock::redis::request req;
    req.push("PING");
    boost::system::error_code got;
    bool done = false;
    conn.async_exec(req, [&](boost::system::error_code ec, dlock::redis::response) {
        got = ec;
        done = true;
    });
    io.run();
    if (!done || got != dlock::error::closed) {
        std::printf("async_exec on a closed connection: %s\n", got.message().c_str());
        return 1;
    }
    std::puts("dlock consumer ok");
    return 0;
}
