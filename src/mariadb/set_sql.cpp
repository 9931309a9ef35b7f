// SPDX-License-Identifier: BSL-1.0
#include "mariadb/set_sql.hpp"

#include <dlock/error.hpp>

#include "common/sql_cells.hpp"
#include "mariadb/bell_sql.hpp"

namespace dlock::mariadb::sql {

using boost::system::error_code;

namespace {

// One call's objects and arguments, quoted and as literals.
struct call {
    std::string table, t, s, sq, seq, n, tok;
    call(std::string_view tbl, std::string_view name, std::string_view token)
        : table(tbl), t(quote_table(tbl)), s(dlock::detail::quote_qualified(tbl, "_set", '`')),
          sq(dlock::detail::quote_qualified(tbl, "_set_queue", '`')), seq(quote_sequence(tbl)), n(hex_literal(name)),
          tok(hex_literal(token))
    {
    }
};

std::string after(const std::string& ms)
{
    return "v_now + INTERVAL " + ms + " * 1000 MICROSECOND";
}

// Expired leases go; so do queued waiters that expired or whose sleeper is gone.
std::string purge(const call& c)
{
    return "    DELETE FROM " + c.s + " WHERE name = " + c.n + " AND expires_at <= v_now;\n    DELETE FROM " + c.sq +
           " WHERE name = " + c.n +
           " AND (expires_at <= v_now OR NOT (IS_USED_LOCK(CONCAT('dlock-bell:', listener)) <=> listener));\n";
}

// The set's permits as its leases and waiters agree them (0: a read-write lock), or NULL.
std::string capacity_of(const call& c)
{
    return "SET v_cap = (SELECT x.capacity FROM (SELECT capacity FROM " + c.s + " WHERE name = " + c.n +
           " UNION ALL SELECT capacity FROM " + c.sq + " WHERE name = " + c.n + ") AS x LIMIT 1);\n";
}

// v_n holders, v_w a writer among them.
std::string count_holders(const call& c)
{
    return "SELECT COUNT(*), COALESCE(MAX(kind = 'w'), 0) INTO v_n, v_w FROM " + c.s + " WHERE name = " + c.n + ";\n";
}

// Whether the set admits a lease of `kind` (lease_set::admits).
std::string admits(const std::string& kind)
{
    return "(CASE " + kind + " WHEN 'p' THEN v_n < v_cap WHEN 'r' THEN NOT v_w ELSE v_n = 0 END)";
}

// A new lease with the next fence (v_fence), refused_at carried over from the set.
std::string grant(const call& c, const std::string& token, const std::string& kind, const std::string& ms)
{
    return "SET v_fence = NEXTVAL(" + c.seq + ");\n      SET v_ref = (SELECT MAX(refused_at) FROM " + c.s +
           " WHERE name = " + c.n + ");\n      INSERT INTO " + c.s +
           " (name, token, kind, capacity, fence, expires_at, refused_at) VALUES (" + c.n + ", " + token + ", " + kind +
           ", v_cap, v_fence, " + after(ms) + ", v_ref);\n";
}

// The queue's head granted while the set admits it, first come first served
// (lease_set::serve); `me`'s own grant goes to v_mine, the others' ring the bell.
std::string serve(const call& c, const std::string& me)
{
    return "    serve: FOR r IN (SELECT token, kind, ttl_ms FROM " + c.sq + " WHERE name = " + c.n +
           " ORDER BY seq) DO\n      " + count_holders(c) + "      IF NOT " + admits("r.kind") +
           " THEN LEAVE serve; END IF;\n      DELETE FROM " + c.sq + " WHERE name = " + c.n +
           " AND token = r.token;\n      " + grant(c, "r.token", "r.kind", "r.ttl_ms") + "      IF r.token = " + me +
           " THEN SET v_mine = v_fence; ELSE SET v_rang = 1; END IF;\n    END FOR serve;\n";
}

// Every call: one transaction; first the name's row in the lease table, locked (inserted
// expired if missing), then a live mutex there, or live waiters queued for one, end the call
// (v_mutex). After `body`, the
// name's marker follows the set (its longest lease or waiter), or goes with it; a change
// others wait for rings the bell once committed; `result` is the one row returned.
std::string in_turn(const call& c, const std::string& body, const std::string& result)
{
    return "BEGIN NOT ATOMIC\n"
           "  DECLARE v_now DATETIME(6);\n  DECLARE v_end DATETIME(6);\n  DECLARE v_ref DATETIME(6);\n"
           "  DECLARE v_cap INT;\n  DECLARE v_fence BIGINT UNSIGNED;\n  DECLARE v_mine BIGINT UNSIGNED DEFAULT 0;\n"
           "  DECLARE v_n BIGINT;\n  DECLARE v_w INT;\n  DECLARE v_state INT DEFAULT 0;\n"
           "  DECLARE v_value BIGINT DEFAULT -1;\n  DECLARE v_rang INT DEFAULT 0;\n  DECLARE v_mutex INT DEFAULT 0;\n"
           "  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;\n"
           "  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;\n  START TRANSACTION;\n  body: BEGIN\n    INSERT INTO " +
           c.t + " (name, owner, fence, expires_at) VALUES (" + c.n +
           ", '', 0, UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE name = VALUES(name);\n"
           "    SET v_now = UTC_TIMESTAMP(6);\n    IF EXISTS (SELECT 1 FROM " +
           c.t + " WHERE name = " + c.n + " AND owner <> '' AND expires_at > v_now) OR EXISTS (SELECT 1 FROM " +
           quote_queue(c.table) + " WHERE name = " + c.n +
           " AND expires_at > v_now AND IS_USED_LOCK(CONCAT('dlock-bell:', listener)) <=> listener) THEN SET v_mutex = "
           "1; LEAVE body; END IF;\n" +
           body + "  END;\n  IF v_mutex = 1 OR v_state = -1 THEN\n    ROLLBACK;\n  ELSE\n    " + capacity_of(c) +
           "    SET v_end = GREATEST(COALESCE((SELECT MAX(expires_at) FROM " + c.s + " WHERE name = " + c.n +
           "), '1000-01-01'), COALESCE((SELECT MAX(expires_at) FROM " + c.sq + " WHERE name = " + c.n +
           "), '1000-01-01'));\n    IF v_cap IS NULL OR v_end <= '1000-01-01' THEN\n      DELETE FROM " + c.t +
           " WHERE name = " + c.n + " AND owner = '';\n    ELSE\n      UPDATE " + c.t +
           " SET owner = '', fence = v_cap, expires_at = v_end, contended = 0, signal_conn = NULL WHERE name = " + c.n +
           ";\n    END IF;\n    COMMIT;\n  END IF;\n  IF v_rang = 1 THEN\n  " + ring(c.table, c.n) +
           ";\n  END IF;\n  SELECT " + result + ";\nEND";
}

}  // namespace

std::string set_setup(std::string_view table)
{
    call c(table, "", "");
    auto optional = [](const std::string& create) {
        return "  BEGIN\n    DECLARE CONTINUE HANDLER FOR SQLEXCEPTION BEGIN END;\n    " + create + ";\n  END;\n";
    };
    return optional("CREATE TABLE IF NOT EXISTS " + c.s +
                    " (name VARBINARY(2000) NOT NULL, token VARBINARY(255) NOT NULL, kind CHAR(1) NOT NULL,"
                    " capacity INT NOT NULL, fence BIGINT UNSIGNED NOT NULL, expires_at DATETIME(6) NOT NULL,"
                    " refused_at DATETIME(6) NULL, PRIMARY KEY (name, token)) ENGINE=InnoDB") +
           optional("CREATE TABLE IF NOT EXISTS " + c.sq +
                    " (name VARBINARY(2000) NOT NULL, token VARBINARY(255) NOT NULL, seq BIGINT UNSIGNED NOT NULL,"
                    " kind CHAR(1) NOT NULL, capacity INT NOT NULL, ttl_ms BIGINT NOT NULL,"
                    " listener BIGINT UNSIGNED NOT NULL, expires_at DATETIME(6) NOT NULL,"
                    " PRIMARY KEY (name, token)) ENGINE=InnoDB");
}

std::string set_acquire(std::string_view table, std::string_view name, std::string_view token,
                        std::chrono::milliseconds ttl, std::uint64_t listener, char kind, unsigned permits)
{
    call c(table, name, token);
    const std::string ms = std::to_string(ttl.count()), k = std::string("'") + kind + "'",
                      cap = std::to_string(permits);
    // lease_set::acquire: ours already (a grant, a retry), served from the queue, taken if
    // nobody queues and the set admits it, else refused and (a live sleeper) queued until one
    // lease after the longest holder's end (it re-queues by then).
    const std::string body =
        purge(c) + "    " + capacity_of(c) + "    IF v_cap IS NOT NULL AND v_cap <> " + cap +
        " THEN SET v_state = -1; SET v_value = v_cap; LEAVE body; END IF;\n    SET v_cap = " + cap +
        ";\n    SET v_fence = (SELECT fence FROM " + c.s + " WHERE name = " + c.n + " AND token = " + c.tok +
        ");\n    IF v_fence IS NOT NULL THEN\n      UPDATE " + c.s + " SET expires_at = " + after(ms) +
        " WHERE name = " + c.n + " AND token = " + c.tok + ";\n      DELETE FROM " + c.sq + " WHERE name = " + c.n +
        " AND token = " + c.tok + ";\n      SET v_state = 1; SET v_value = v_fence; LEAVE body;\n    END IF;\n" +
        serve(c, c.tok) + "    IF v_mine > 0 THEN SET v_state = 1; SET v_value = v_mine; LEAVE body; END IF;\n    " +
        count_holders(c) + "    IF NOT EXISTS (SELECT 1 FROM " + c.sq + " WHERE name = " + c.n + ") AND " + admits(k) +
        " THEN\n      " + grant(c, c.tok, k, ms) +
        "      SET v_state = 1; SET v_value = v_fence; LEAVE body;\n    END IF;\n    UPDATE " + c.s +
        " SET refused_at = v_now WHERE name = " + c.n + ";\n" +
        (listener == 0 ? std::string()
                       : "    SET v_end = GREATEST(v_now, COALESCE((SELECT MAX(expires_at) FROM " + c.s +
                             " WHERE name = " + c.n + "), v_now));\n    INSERT INTO " + c.sq +
                             " (name, token, seq, kind, capacity, ttl_ms, listener, expires_at) VALUES (" + c.n + ", " +
                             c.tok + ", NEXTVAL(" + c.seq + "), " + k + ", v_cap, " + ms + ", " +
                             std::to_string(listener) + ", v_end + INTERVAL " + ms +
                             " * 1000 MICROSECOND) ON DUPLICATE KEY UPDATE ttl_ms = VALUES(ttl_ms),"
                             " listener = VALUES(listener), expires_at = GREATEST(expires_at, VALUES(expires_at));\n") +
        "    SET v_value = COALESCE((SELECT CEIL(TIMESTAMPDIFF(MICROSECOND, v_now, MIN(expires_at)) / 1000) FROM " +
        c.s + " WHERE name = " + c.n + "), -1);\n";
    return in_turn(c, body, "IF(v_mutex = 1, -1, v_state), v_value");
}

std::string set_renew(std::string_view table, std::string_view name, std::string_view token,
                      std::chrono::milliseconds ttl)
{
    call c(table, name, token);
    const std::string ms = std::to_string(ttl.count());
    const std::string mine = " WHERE name = " + c.n + " AND token = " + c.tok;
    // lease_set::renew: contended if someone waits, or was refused within the lease.
    const std::string body = "    SET v_fence = (SELECT fence FROM " + c.s + mine +
                             " AND expires_at > v_now);\n    IF v_fence IS NULL THEN LEAVE body; END IF;\n"
                             "    SET v_ref = (SELECT refused_at FROM " +
                             c.s + mine + ");\n    UPDATE " + c.s + " SET expires_at = " + after(ms) + mine +
                             ";\n    SET v_state = 1;\n    SET v_value = COALESCE(v_ref > v_now - INTERVAL " + ms +
                             " * 1000 MICROSECOND, 0) OR EXISTS (SELECT 1 FROM " + c.sq + " WHERE name = " + c.n +
                             ");\n";
    return in_turn(c, body, "v_state, IF(v_state = 1, v_value, 0)");
}

std::string set_release(std::string_view table, std::string_view name, std::string_view token, char force)
{
    call c(table, name, token);
    const bool forced = force != '0';
    // Forced: every lease ('1'), every reader ('r') or the writer ('w').
    const std::string which = force == '1'   ? "1"
                              : force == 'r' ? "kind = 'r'"
                              : force == 'w' ? "kind = 'w'"
                                             : "token = " + c.tok;
    // lease_set::release (or forced): frees the lease and serves the queue; a token that
    // holds nothing is withdrawn. The waiters that did not queue are rung when nobody queued
    // is left.
    const std::string body = purge(c) + "    " + capacity_of(c) + "    DELETE FROM " + c.s + " WHERE name = " + c.n +
                             " AND " + which + ";\n    SET v_value = ROW_COUNT() > 0;\n    IF v_value = 0 AND " +
                             (forced ? "1" : "0") + " = 0 THEN\n      DELETE FROM " + c.sq + " WHERE name = " + c.n +
                             " AND token = " + c.tok + ";\n      LEAVE body;\n    END IF;\n" + serve(c, "X''") +
                             "    IF NOT EXISTS (SELECT 1 FROM " + c.sq + " WHERE name = " + c.n +
                             ") THEN SET v_rang = 1; END IF;\n";
    return in_turn(c, body, "IF(v_mutex = 1, 0, v_value)");
}

std::string set_status(std::string_view table, std::string_view name)
{
    call c(table, name, "");
    const std::string now = "UTC_TIMESTAMP(6)", live = " WHERE y.name = " + c.n + " AND y.expires_at > " + now;
    return "SELECT COUNT(*), COALESCE(MAX(x.kind = 'w'), 0), COALESCE(MAX(x.fence), 0), (SELECT y.token FROM " + c.s +
           " AS y" + live +
           " ORDER BY y.fence DESC LIMIT 1), COALESCE(MAX(GREATEST(0, CEIL(TIMESTAMPDIFF(MICROSECOND, " + now +
           ", x.expires_at) / 1000))), -1), (SELECT COUNT(*) FROM " + c.sq + " AS y" + live +
           "), COALESCE(MAX(x.capacity), (SELECT MAX(y.capacity) FROM " + c.sq + " AS y WHERE y.name = " + c.n +
           "), 0) FROM " + c.s + " AS x WHERE x.name = " + c.n + " AND x.expires_at > " + now;
}

namespace {

constexpr dlock::detail::bool_cells booleans{"1", "0"};

// The one row of the one result set a call returns.
const row* only_row(const result& r, std::size_t columns)
{
    if (r.sets.size() != 1 || r.sets[0].size() != 1 || r.sets[0][0].size() != columns)
        return nullptr;
    return &r.sets[0][0];
}

}  // namespace

error_code decode_set_acquire(const result& r, std::chrono::milliseconds ttl, acquire_result& out, long long& what)
{
    out = {};
    long long state = 0, value = 0;
    const row* row = only_row(r, 2);
    if (!row || !dlock::detail::cell_i64((*row)[0], state) || !dlock::detail::cell_i64((*row)[1], value))
        return error::protocol_error;
    if (state == -1) {
        what = value;
        return error::kind_mismatch;
    }
    if (state == 1 && value > 0) {
        out.acquired = true;
        out.fencing_token = static_cast<std::uint64_t>(value);
        out.granted_ttl = ttl;
        return {};
    }
    if (state != 0)
        return error::protocol_error;
    out.holder_ttl = std::chrono::milliseconds(value);
    return {};
}

bool decode_set_renew(const result& r, renew_result& out)
{
    out = {};
    const row* row = only_row(r, 2);
    return row && dlock::detail::cell_bool((*row)[0], booleans, out.owned) &&
           dlock::detail::cell_bool((*row)[1], booleans, out.contended);
}

bool decode_set_release(const result& r, bool& held)
{
    held = false;
    const row* row = only_row(r, 1);
    return row && dlock::detail::cell_bool((*row)[0], booleans, held);
}

bool decode_set_status(const result& r, lock_status& out)
{
    const row* row = only_row(r, 7);
    if (!row)
        return false;
    std::uint64_t holders = 0, queued = 0, capacity = 0;
    long long left = 0;
    if (!dlock::detail::cell_u64((*row)[0], holders) || !dlock::detail::cell_bool((*row)[1], booleans, out.writer) ||
        !dlock::detail::cell_u64((*row)[2], out.fencing_token) || !dlock::detail::cell_i64((*row)[4], left) ||
        !dlock::detail::cell_u64((*row)[5], queued) || !dlock::detail::cell_u64((*row)[6], capacity))
        return false;
    out.held = holders > 0;
    out.holders = static_cast<std::size_t>(holders);
    out.queued = static_cast<std::size_t>(queued);
    out.capacity = static_cast<unsigned>(capacity);
    out.kind = capacity > 0 ? lease_kind::permit : lease_kind::read;
    out.holder = (*row)[3].value_or("");
    out.ttl = std::chrono::milliseconds(left);
    out.last_fencing_token = std::max(out.last_fencing_token, out.fencing_token);
    return true;
}

}  // namespace dlock::mariadb::sql
