// SPDX-License-Identifier: BSL-1.0
// Sans-io Sentinel discovery: what one sentinel is asked and what its replies mean
// (sentinel_query), and the walk over the configured sentinels (sentinel_walk). The driver
// (sentinel.cpp) only connects, writes, reads, decodes and times each sentinel out.
#pragma once

#include <dlock/redis/config.hpp>
#include <dlock/redis/reply.hpp>

#include <boost/system/error_code.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace dlock::redis::detail {

/// One sentinel, one question: [AUTH [user] password] then SENTINEL get-master-addr-by-name.
class sentinel_query {
public:
    /// Where the exchange stands. Every state but `pending` is final.
    enum class state {
        pending,         ///< more replies to come
        found,           ///< host() and port() hold the master's address
        auth_refused,    ///< an error reply to AUTH
        refused,         ///< an error reply to the question (NOAUTH, an unknown command...)
        unknown_master,  ///< nil: the sentinel does not monitor this master
        malformed,       ///< an answer that is not [host, port] with a port in 1..65535
        closed,          ///< the connection ended before the answer
        failed,          ///< the driver gave up (connect error, bad RESP, timeout): fail()'s code
    };

    explicit sentinel_query(const sentinel_config& sc);

    /// The RESP bytes to write once connected.
    const std::string& request() const noexcept { return request_; }

    /// One decoded reply, in order; returns the state after it. Ignored once decided.
    state feed(const reply& r);
    /// The connection failed while writing or reading (decided answers stay as they are).
    void closed();
    /// The driver gave up on this sentinel with `ec`; this overrides any state but `found`
    /// (a cancelled read reports a closed connection, the timeout is what happened).
    void fail(boost::system::error_code ec);

    state current() const noexcept { return state_; }
    bool done() const noexcept { return state_ != state::pending; }
    const std::string& host() const noexcept { return host_; }
    std::uint16_t port() const noexcept { return port_; }
    /// The dlock::error of a final state other than `found` (empty while pending or found).
    boost::system::error_code error() const noexcept { return ec_; }
    /// What the sentinel said, for the message: its error text or our description of the
    /// answer; empty when the error's own message says it (connect failure, timeout).
    const std::string& said() const noexcept { return said_; }

private:
    state decide(state s, boost::system::error_code ec, std::string said);

    std::string master_;
    std::string request_;
    bool auth_pending_ = false;  // the next reply answers AUTH
    state state_ = state::pending;
    boost::system::error_code ec_;
    std::string said_;
    std::string host_;
    std::uint16_t port_ = 0;
};

/// Asks the sentinels in order until one answers with an address (the Sentinel client
/// guidelines): next() says whom to ask, record() what asking them came to.
class sentinel_walk {
public:
    explicit sentinel_walk(const sentinel_config& sc);

    /// The sentinel to ask next; nullptr once the walk is over (an address, or none left).
    const sentinel_node* next() const noexcept { return done_ ? nullptr : &nodes_[at_]; }
    /// What asking next() came to (a decided query; a pending one counts as a protocol error).
    void record(const sentinel_query& q);

    bool done() const noexcept { return done_; }
    /// Once done: empty if found; auth_failed if the last sentinel asked refused our AUTH
    /// (the most useful thing to report); else resolve_failed.
    boost::system::error_code result() const noexcept { return result_; }
    /// "sentinel HOST:PORT: what it said" for each sentinel that did not answer, "; "-joined.
    const std::string& message() const noexcept { return message_; }
    /// The master's address, when found.
    const std::string& host() const noexcept { return host_; }
    std::uint16_t port() const noexcept { return port_; }
    /// The sentinels in the order to ask them next time: the one that answered first.
    const std::vector<sentinel_node>& nodes() const noexcept { return nodes_; }

private:
    std::vector<sentinel_node> nodes_;
    std::size_t at_ = 0;
    bool done_ = false;
    boost::system::error_code last_;
    boost::system::error_code result_;
    std::string message_;
    std::string host_;
    std::uint16_t port_ = 0;
};

}  // namespace dlock::redis::detail
