// SPDX-License-Identifier: BSL-1.0
// The doorbell's statements (src/mariadb/doorbell.hpp): its table, the sleeper's query and
// its decoding, enrolment, and the ring a change runs after it commits.
#pragma once

#include "mariadb/doorbell.hpp"
#include "mariadb/sql.hpp"

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dlock::mariadb::sql {

/// `<table>_bell`, quoted.
std::string quote_bell(std::string_view table);
/// A compound-statement step creating the bell table if missing (ENGINE=MEMORY: emptied by a
/// restart, which also starts connection ids again); a user who may not create it gets no
/// bells, and waiters sleep their holder's lease.
std::string bell_setup(std::string_view table);
/// The sleeper's query: its id and a value of its session (and its liveness lock
/// `dlock-bell:<id>`, which a ring checks
/// before it KILLs: a stale row never names another connection), its rows, then SLEEP(`bound`)
/// unless its rows changed since `baseline` (rows, sum of rings); without a baseline, no sleep.
std::string bell_sleep(std::string_view table, std::pair<std::uint64_t, std::uint64_t> baseline,
                       std::chrono::milliseconds bound);
/// What the sleeper's query read; false if the result has another shape.
bool decode_bell(const result& r, mariadb::detail::bell_reading& out);
/// Enrols `names` for sleeper `conn` (rings 0); sweeps up to 64 rows of gone sleepers.
std::string bell_enrol(std::string_view table, std::uint64_t conn, const std::vector<std::string>& names);
/// Deregisters `names` of `conn` (empty: every row of `conn`).
std::string bell_leave(std::string_view table, std::uint64_t conn, const std::vector<std::string>& names);
/// The first cell of a ring's result set (3 columns: no statement of the store returns as many).
inline constexpr std::string_view ring_marker = "dlock-ring";
/// A compound-statement block ringing `name` (a hex literal): one more ring on its rows, and a
/// result set naming the sleepers enrolled (ring_marker, "v1", their ids, comma-separated).
/// Any error (no bell table) is ignored: the change stands. The KILLs go out afterwards, on
/// a connection of their own (kill_sleepers): a KILL QUERY can wait for its target, and an
/// operation must not wait with it.
std::string ring(std::string_view table, const std::string& name);
/// Takes the rings' result sets out of `r`: the sleepers to wake.
std::vector<std::uint64_t> take_rings(result& r);
/// KILL QUERY to each sleeper that still holds its liveness lock; the rows of the others go.
/// Errors (a sleeper of another user: not ours to KILL) are ignored.
std::string kill_sleepers(std::string_view table, const std::vector<std::uint64_t>& conns);
/// ring() as a statement of its own.
std::string ring_statement(std::string_view table, const std::string& name);

}  // namespace dlock::mariadb::sql
