// SPDX-License-Identifier: BSL-1.0
// What a README.md block marked `<!-- cpp fragment: coroutine body -->` may use: the library
// and its stores, an io_context `io`, registries `reg` and `registry` (parameters of the
// coroutine it becomes), and the user's own functions the examples call.
#pragma once

#include <dlock/dlock.hpp>
#include <dlock/etcd.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>

#include <chrono>
#include <cstdint>
#include <stdexcept>

namespace asio = boost::asio;
using namespace std::chrono_literals;

// The user's work, declared only: the blocks compile, they do not run.
asio::awaitable<void> render(std::uint64_t fencing_token);
asio::awaitable<void> save(std::uint64_t fencing_token);
asio::awaitable<void> train();
asio::awaitable<void> do_leader_work(std::uint64_t term);
