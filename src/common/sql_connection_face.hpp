// SPDX-License-Identifier: BSL-1.0
// The part of a SQL connection (MariaDB's, PostgreSQL's) that its store sees alike: its
// settings; not copyable, its state behind a shared pointer that the coroutines driving it
// keep alive.
// Light on purpose: each store's files include their connection's header.
#pragma once

#include <memory>
#include <string>

namespace dlock::detail {

/// What each SQL connection is given (PostgreSQL's adds its listener's hooks).
template <class Config>
struct sql_connection_settings {
    Config cfg;
    /// Run after each connect, before any request (empty: nothing).
    std::string setup{};
    /// Not empty: every request fails at once with invalid_option and this text as the
    /// result's message (a config the store refused); nothing connects.
    std::string refused{};
};

template <class Impl>
class sql_connection_face {
public:
    sql_connection_face(const sql_connection_face&) = delete;
    sql_connection_face& operator=(const sql_connection_face&) = delete;

protected:
    explicit sql_connection_face(std::shared_ptr<Impl> i) : impl_(std::move(i)) {}
    ~sql_connection_face() = default;

    std::shared_ptr<Impl> impl_;
};

}  // namespace dlock::detail
