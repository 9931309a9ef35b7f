// SPDX-License-Identifier: BSL-1.0
// Sans-io: the commands a connection sends after it connects (AUTH, SELECT, CLIENT SETNAME,
// and ROLE through Sentinel) and what their replies mean. The driver (connection.cpp)
// writes request(), feeds each decoded reply, and stops when done().
#pragma once

#include <dlock/redis/config.hpp>
#include <dlock/redis/reply.hpp>

#include <boost/system/error_code.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace dlock::redis::detail {

class handshake {
public:
    /// Which command a reply answers, in the order they are sent.
    enum class step {
        auth,     ///< AUTH [username] password, when a password is set
        select,   ///< SELECT database, when it is not 0
        setname,  ///< CLIENT SETNAME, when client_name is set
        role,     ///< ROLE, through Sentinel: is the address we were given still the master?
    };
    /// Where the handshake stands. Every state but `pending` is final.
    enum class state {
        pending,     ///< replies to come
        done,        ///< every command succeeded (at once when there is nothing to send)
        refused,     ///< an error reply: said() is the server's text
        not_master,  ///< ROLE says the server is not a master: said() names it
    };

    /// From the config of the connection attempt (through Sentinel: with the address found).
    explicit handshake(const config& cfg);

    /// The RESP bytes to write; empty when there is nothing to send.
    const std::string& request() const noexcept { return request_; }
    /// The commands sent, in order (one reply each).
    const std::vector<step>& steps() const noexcept { return steps_; }

    /// One decoded reply, in order; returns the state after it. Ignored once decided.
    state feed(const reply& r);

    state current() const noexcept { return state_; }
    bool done() const noexcept { return state_ != state::pending; }
    /// auth_failed for a refused AUTH or a NOAUTH to any command (the server wants a
    /// password the config does not give); handshake_failed for the others; empty if done.
    boost::system::error_code error() const noexcept { return ec_; }
    /// For last_server_message(): the server's error text, or which server ROLE demoted.
    const std::string& said() const noexcept { return said_; }

private:
    state decide(state s, boost::system::error_code ec, std::string said);

    std::string request_;
    std::vector<step> steps_;
    std::size_t next_ = 0;
    std::string where_;  // "host:port as master 'name'", for ROLE's message
    state state_ = state::pending;
    boost::system::error_code ec_;
    std::string said_;
};

}  // namespace dlock::redis::detail
