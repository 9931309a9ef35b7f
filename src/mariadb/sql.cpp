// SPDX-License-Identifier: BSL-1.0
#include "mariadb/sql.hpp"

#include <dlock/error.hpp>

#include "common/sql_cells.hpp"
#include "mariadb/bell_sql.hpp"
#include "mariadb/election_latch_sql.hpp"
#include "mariadb/set_sql.hpp"

#include <charconv>

namespace dlock::mariadb::sql {

using boost::system::error_code;

namespace {

std::string quote_parts(std::string_view table, std::string_view suffix)
{
    return dlock::detail::quote_qualified(table, suffix, '`');
}

// The unqualified table name, and the database it is in (DATABASE() if not given).
std::string schema_of(std::string_view table)
{
    auto dot = table.find('.');
    return dot == std::string_view::npos ? "DATABASE()" : "'" + std::string(table.substr(0, dot)) + "'";
}

std::string bare(std::string_view table)
{
    auto dot = table.find('.');
    return std::string(dot == std::string_view::npos ? table : table.substr(dot + 1));
}

// The time a statement started on the server's clock, in UTC (never the session's time zone).
constexpr std::string_view now = "UTC_TIMESTAMP(6)";

std::string expiry(std::chrono::milliseconds ttl)
{
    return std::string(now) + " + INTERVAL " + std::to_string(ttl.count() * 1000) + " MICROSECOND";
}

// The lease's remaining milliseconds on the server's clock, never negative.
std::string remaining()
{
    return "GREATEST(0, CEIL(TIMESTAMPDIFF(MICROSECOND, " + std::string(now) + ", t.expires_at) / 1000))";
}

// Takes the signal lock for our live lease, once (GET_LOCK counts re-entries: never twice).
std::string take_signal(std::string_view table, const std::string& n, const std::string& tok)
{
    auto lock = signal_lock(table, n);
    return "UPDATE " + quote_table(table) + " AS t SET t.signal_conn = CONNECTION_ID() WHERE t.name = " + n +
           " AND t.owner = " + tok + " AND t.expires_at > " + std::string(now) + " AND (IS_USED_LOCK(" + lock +
           ") <=> CONNECTION_ID() OR GET_LOCK(" + lock + ", 0) = 1)";
}

// Gives the signal lock back if this connection has it and no live lease of ours needs it
// (a lease lost or released): waiters blocked on it wake up.
std::string reconcile(std::string_view table, const std::string& n)
{
    auto lock = signal_lock(table, n);
    return "SELECT IF(IS_USED_LOCK(" + lock + ") <=> CONNECTION_ID() AND NOT EXISTS (SELECT 1 FROM " +
           quote_table(table) + " AS t WHERE t.name = " + n +
           " AND t.signal_conn = CONNECTION_ID() AND t.expires_at > " + std::string(now) + "), RELEASE_LOCK(" + lock +
           "), NULL)";
}

constexpr dlock::detail::bool_cells booleans{"1", "0"};

bool to_bool(const std::optional<std::string>& s, bool& out)
{
    return dlock::detail::cell_bool(s, booleans, out);
}

}  // namespace

std::string hex_literal(std::string_view bytes)
{
    static constexpr char digits[] = "0123456789ABCDEF";
    std::string out = "X'";
    out.reserve(bytes.size() * 2 + 3);
    for (unsigned char c : bytes) {
        out += digits[c >> 4];
        out += digits[c & 15];
    }
    return out + "'";
}

std::string quote_table(std::string_view table)
{
    return quote_parts(table, "");
}

std::string quote_sequence(std::string_view table)
{
    return quote_parts(table, "_fence");
}

std::string quote_queue(std::string_view table)
{
    return quote_parts(table, "_queue");
}

std::string signal_lock(std::string_view table, std::string_view name)
{
    // `table` passed check_table(): letters, digits, '_' and one '.', safe inside quotes.
    auto dot = table.find('.');
    std::string db = dot == std::string_view::npos ? "DATABASE()" : "'" + std::string(table.substr(0, dot)) + "'";
    // Binary throughout: a hex literal next to text would be converted to its character set,
    // and a name that is not valid UTF-8 refused.
    return "CONCAT('dlock:', LEFT(SHA2(CONCAT(CAST(" + db + " AS BINARY), '." + bare(table) + "/', CAST(" +
           std::string(name) + " AS BINARY)), 256), 58))";
}

std::string session_setup()
{
    return "SET SESSION sql_mode = 'STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION'";
}

std::string schema_setup(std::string_view table)
{
    const std::string t = quote_table(table), s = quote_sequence(table), db = schema_of(table), name = bare(table);
    auto missing = [&](const std::string& n) {
        return "NOT EXISTS (SELECT 1 FROM information_schema.tables WHERE table_schema = " + db +
               " AND table_name = '" + n + "')";
    };
    // Checked before CREATE: MariaDB checks the CREATE privilege even for IF NOT EXISTS.
    return "BEGIN NOT ATOMIC\n"
           "  IF " +
           missing(name) + " THEN\n    CREATE TABLE IF NOT EXISTS " + t +
           " (name VARBINARY(2000) NOT NULL PRIMARY KEY, owner VARBINARY(255) NOT NULL,"
           " fence BIGINT UNSIGNED NOT NULL, expires_at DATETIME(6) NOT NULL,"
           " contended BOOLEAN NOT NULL DEFAULT 0, signal_conn BIGINT UNSIGNED NULL) ENGINE=InnoDB;\n"
           "  END IF;\n"
           "  IF " +
           missing(name + "_fence") + " THEN\n    CREATE SEQUENCE IF NOT EXISTS " + s +
           ";\n"
           "  END IF;\n"
           "  IF " +
           missing(name + "_queue") + " THEN\n    CREATE TABLE IF NOT EXISTS " + quote_queue(table) +
           " (name VARBINARY(2000) NOT NULL, token VARBINARY(255) NOT NULL, seq BIGINT UNSIGNED NOT NULL,"
           " ttl_ms BIGINT NOT NULL, listener BIGINT UNSIGNED NOT NULL, expires_at DATETIME(6) NOT NULL,"
           " PRIMARY KEY (name, token)) ENGINE=InnoDB;\n"
           "  END IF;\n" +
           // What the other primitives and the wake-ups need, each only if the user may.
           set_setup(table) + bell_setup(table) + election_latch_setup(table) + "END";
}


namespace {

// A queued waiter (its sleeper `listener` alive) keeps its place while refused, until one
// lease after the holder's end (it re-queues by then); the name taken, its place goes.
std::string enqueue(std::string_view table, const std::string& n, const std::string& tok, std::chrono::milliseconds ttl,
                    std::uint64_t listener)
{
    const std::string q = quote_queue(table), ms = std::to_string(ttl.count() * 1000);
    return "INSERT INTO " + q + " (name, token, seq, ttl_ms, listener, expires_at) SELECT t.name, " + tok +
           ", NEXTVAL(" + quote_sequence(table) + "), " + std::to_string(ttl.count()) + ", " +
           std::to_string(listener) + ", GREATEST(t.expires_at, " + std::string(now) + ") + INTERVAL " + ms +
           " MICROSECOND FROM " + quote_table(table) + " AS t WHERE t.name = " + n + " AND t.owner <> " + tok +
           " ON DUPLICATE KEY UPDATE ttl_ms = VALUES(ttl_ms), listener = VALUES(listener),"
           " expires_at = GREATEST(" +
           q + ".expires_at, VALUES(expires_at));\n" +
           // Read without a lock first: a DELETE reading the lease row would lock the queue row,
           // then the lease row, the reverse of a release's order (a deadlock).
           "SET @dlock_ours = (SELECT COUNT(*) FROM " + quote_table(table) + " AS t WHERE t.name = " + n +
           " AND t.owner = " + tok + ");\nDELETE FROM " + q + " WHERE name = " + n + " AND token = " + tok +
           " AND @dlock_ours > 0";
}

}  // namespace

std::string acquire(std::string_view table, std::string_view name, std::string_view token,
                    std::chrono::milliseconds ttl, bool ring_new, std::uint64_t listener)
{
    const std::string t = quote_table(table), n = hex_literal(name), tok = hex_literal(token);
    const std::string live = "expires_at > " + std::string(now);
    // ON DUPLICATE KEY UPDATE assigns left to right, each later one seeing the earlier ones'
    // new values: contended, signal_conn and fence read the old owner and expiry, owner the
    // old expiry, expires_at the new owner (ours now iff it was ours or it had expired).
    // Ours again (a retry) keeps its fence. A name newly ours has fence 0 until the UPDATE
    // draws it, holding the row: a draw made before waiting for the row could be granted
    // after a later one (issue 29), one made under it is granted (or dropped) first.
    return "INSERT INTO " + t + " (name, owner, fence, expires_at, contended, signal_conn) VALUES (" + n + ", " + tok +
           ", 0, " + expiry(ttl) +
           ", 0, NULL) ON DUPLICATE KEY UPDATE"
           " contended = IF(owner = VALUES(owner), contended, " +
           live +
           "),"
           " signal_conn = IF(owner = VALUES(owner) OR " +
           live +
           ", signal_conn, NULL),"
           " fence = IF(owner = VALUES(owner) OR " +
           live +
           ", fence, 0),"
           " owner = IF(" +
           live +
           ", owner, VALUES(owner)),"
           " expires_at = IF(owner = VALUES(owner), VALUES(expires_at), expires_at);\n"
           "UPDATE " +
           t + " SET fence = NEXTVAL(" + quote_sequence(table) + ") WHERE name = " + n + " AND owner = " + tok +
           " AND fence = 0;\n" + (ring_new ? "SET @dlock_new = ROW_COUNT();\n" : "") + take_signal(table, n, tok) +
           ";\nSELECT t.owner = " + tok + ", t.fence, " + remaining() +
           ", t.signal_conn IS NOT NULL AND IS_USED_LOCK(" + signal_lock(table, n) +
           ") <=> t.signal_conn, t.owner = '' FROM " + t + " AS t WHERE t.name = " + n +
           // A new leader (its fence just drawn) rings the election's observers.
           (ring_new ? ";\nBEGIN NOT ATOMIC\n  IF @dlock_new > 0 THEN\n  " + ring(table, n) + ";\n  END IF;\nEND"
                     : std::string()) +
           (listener == 0 ? std::string() : ";\n" + enqueue(table, n, tok, ttl, listener));
}

std::string renew(std::string_view table, std::string_view name, std::string_view token, std::chrono::milliseconds ttl)
{
    const std::string t = quote_table(table), n = hex_literal(name), tok = hex_literal(token);
    // @dlock_c keeps the row's contended flag from before the update (NULL: no row was ours).
    return "SET @dlock_c = NULL;\nUPDATE " + t +
           " AS t SET t.contended = LEAST(@dlock_c := t.contended, 0), t.expires_at = " + expiry(ttl) +
           " WHERE t.name = " + n + " AND t.owner = " + tok + " AND t.expires_at > " + std::string(now) + ";\n" +
           take_signal(table, n, tok) + ";\nSELECT @dlock_c;\n" + reconcile(table, n);
}

std::string release(std::string_view table, std::string_view name, std::string_view token)
{
    const std::string t = quote_table(table), q = quote_queue(table), n = hex_literal(name), tok = hex_literal(token);
    const std::string live_waiter =
        "expires_at > " + std::string(now) + " AND IS_USED_LOCK(CONCAT('dlock-bell:', listener)) <=> listener";
    // Ours (the row locked): handed to the first live queued waiter (a new fence, its lease
    // from now; it learns by the ring and its retry finds the name its own), else deleted.
    // Not ours: a waiter withdrawing its place. Queue rows of gone waiters go in passing.
    return "BEGIN NOT ATOMIC\n  DECLARE v_found INT;\n  DECLARE v_live INT;\n  DECLARE v_next VARBINARY(255);\n"
           "  DECLARE v_ttl BIGINT;\n  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;\n"
           "  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;\n  START TRANSACTION;\n"
           "  SELECT COUNT(*), MAX(expires_at > " +
           std::string(now) + ") INTO v_found, v_live FROM " + t + " WHERE name = " + n + " AND owner = " + tok +
           " FOR UPDATE;\n  DELETE FROM " + q + " WHERE name = " + n + " AND (token = " + tok + " OR NOT (" +
           live_waiter + "));\n  IF v_found > 0 THEN\n    SET v_next = (SELECT token FROM " + q + " WHERE name = " + n +
           " ORDER BY seq LIMIT 1);\n    IF v_next IS NULL THEN\n      DELETE FROM " + t + " WHERE name = " + n +
           ";\n    ELSE\n      SET v_ttl = (SELECT ttl_ms FROM " + q + " WHERE name = " + n +
           " AND token = v_next);\n      DELETE FROM " + q + " WHERE name = " + n +
           " AND token = v_next;\n      UPDATE " + t + " SET owner = v_next, fence = NEXTVAL(" + quote_sequence(table) +
           "), expires_at = " + std::string(now) +
           " + INTERVAL v_ttl * 1000 MICROSECOND, contended = EXISTS (SELECT 1 FROM " + q + " WHERE name = " + n +
           "), signal_conn = NULL WHERE name = " + n +
           ";\n    END IF;\n  END IF;\n  COMMIT;\n  IF v_found > 0 THEN\n  " + ring(table, n) +
           ";\n    SELECT v_live;\n  ELSE\n    SELECT 1 FROM DUAL WHERE FALSE;\n  END IF;\nEND;\n" +
           reconcile(table, n);
}

std::string force_release(std::string_view table, std::string_view name)
{
    const std::string n = hex_literal(name);
    // Never a set's marker row: the set's own release frees every lease (the third set says so).
    return "DELETE FROM " + quote_table(table) + " WHERE name = " + n + " AND owner <> '' RETURNING expires_at > " +
           std::string(now) + ";\n" + reconcile(table, n) + ";\nSELECT EXISTS (SELECT 1 FROM " + quote_table(table) +
           " WHERE name = " + n + " AND owner = '');\n" + ring_statement(table, n);
}

std::string status(std::string_view table, std::string_view name)
{
    return "SELECT t.owner, t.fence, " + remaining() + ", t.expires_at > " + std::string(now) + ", " +
           queued_count(table) + " FROM " + quote_table(table) + " AS t WHERE t.name = " + hex_literal(name);
}

std::string queued_count(std::string_view table)
{
    return "(SELECT COUNT(*) FROM " + quote_queue(table) + " AS q WHERE q.name = t.name AND q.expires_at > " +
           std::string(now) + ")";
}

std::string wait(std::string_view table, std::string_view name, std::chrono::milliseconds timeout)
{
    auto lock = signal_lock(table, hex_literal(name));
    auto ms = std::max<std::int64_t>(timeout.count(), 1);
    // Fractional seconds: GET_LOCK takes them. Given back in the same statement, so that a
    // new holder's GET_LOCK(.., 0) almost never finds it taken by a waiter.
    std::string secs = std::to_string(ms / 1000) + "." + std::to_string(1000 + ms % 1000).substr(1);
    return "SELECT GET_LOCK(" + lock + ", " + secs + "), RELEASE_LOCK(" + lock + ")";
}

error_code check_name(std::string_view name)
{
    if (name.empty() || name.size() > max_name)
        return error::invalid_name;
    return {};
}

error_code check_token(std::string_view token)
{
    if (token.empty() || token.size() > max_token)
        return error::invalid_name;
    return {};
}

error_code error_of(unsigned e)
{
    switch (e) {
    case 0: return {};
    case 1045:  // ER_ACCESS_DENIED_ERROR: wrong user or password
    case 1698:  // ER_ACCESS_DENIED_NO_PASSWORD_ERROR
    case 1251:  // ER_NOT_SUPPORTED_AUTH_MODE
        return error::auth_failed;
    case 1044:  // ER_DBACCESS_DENIED_ERROR: the database is refused to this user
    case 1142:  // ER_TABLEACCESS_DENIED_ERROR (CREATE, INSERT, ... denied)
    case 1143:  // ER_COLUMNACCESS_DENIED_ERROR
    case 1227:  // ER_SPECIFIC_ACCESS_DENIED_ERROR
    case 1370:  // ER_PROCACCESS_DENIED_ERROR
        return error::permission_denied;
    case 1049:  // ER_BAD_DB_ERROR: no such database
        return error::handshake_failed;
    case 1040:  // ER_CON_COUNT_ERROR: too many connections
    case 1203:  // ER_TOO_MANY_USER_CONNECTIONS
    case 1205:  // ER_LOCK_WAIT_TIMEOUT
    case 1213:  // ER_LOCK_DEADLOCK
    case 1317:  // ER_QUERY_INTERRUPTED (KILL QUERY)
    case 1290:  // ER_OPTION_PREVENTS_STATEMENT (read_only during a switch-over)
    case 1836:  // ER_READ_ONLY_MODE
        return error::server_busy;
    case 1053:  // ER_SERVER_SHUTDOWN
    case 1927:  // ER_CONNECTION_KILLED
    case 4031:  // ER_CLIENT_INTERACTION_TIMEOUT
    case 2006:  // CR_SERVER_GONE_ERROR
    case 2013:  // CR_SERVER_LOST
    case 2055:  // CR_SERVER_LOST_EXTENDED
    case 2027:  // CR_MALFORMED_PACKET
        return error::connection_lost;
    case 2002:  // CR_CONNECTION_ERROR (unix socket)
    case 2003:  // CR_CONN_HOST_ERROR
        return error::connect_failed;
    case 2005:  // CR_UNKNOWN_HOST
        return error::resolve_failed;
    case 1406:  // ER_DATA_TOO_LONG
        return error::invalid_name;
    default: return error::server_error;
    }
}

bool decode_acquire(const result& r, std::chrono::milliseconds ttl, acquire_result& out, holder_info& holder,
                    std::optional<std::uint64_t>& set_permits)
{
    out = {};
    holder = {};
    set_permits.reset();
    if (r.sets.size() != 1)
        return false;
    const auto& rows = r.sets[0];
    if (rows.empty()) {
        out.holder_ttl = std::chrono::milliseconds(0);  // released meanwhile: try again now
        holder.remaining = out.holder_ttl;
        return true;
    }
    if (rows.size() != 1 || rows[0].size() != 5)
        return false;
    const auto& row = rows[0];
    bool ours = false, signal = false, marker = false;
    std::uint64_t fence = 0;
    std::chrono::milliseconds left{};
    if (!to_bool(row[0], ours) || !dlock::detail::cell_u64(row[1], fence) || !dlock::detail::cell_ms(row[2], left) ||
        !to_bool(row[3], signal) || !to_bool(row[4], marker))
        return false;
    if (ours) {
        out.acquired = true;
        out.fencing_token = fence;
        out.granted_ttl = ttl;  // set from the statement's start on the server, after the request left
        return true;
    }
    if (marker)
        set_permits = fence;  // a live set's marker: its fence column is the set's permits
    out.holder_ttl = left;
    holder.remaining = left;
    holder.signal = signal;
    return true;
}

bool decode_renew(const result& r, renew_result& out)
{
    out = {};
    if (r.sets.size() != 2 || r.sets[0].size() != 1 || r.sets[0][0].size() != 1)
        return false;
    const auto& v = r.sets[0][0][0];
    if (!v)
        return true;  // no row was ours
    if (!to_bool(v, out.contended))
        return false;
    out.owned = true;
    return true;
}

bool decode_release(const result& r, bool& out)
{
    out = false;
    if (r.sets.size() != 2)
        return false;
    const auto& rows = r.sets[0];
    if (rows.empty())
        return true;
    return rows.size() == 1 && rows[0].size() == 1 && to_bool(rows[0][0], out);
}

bool decode_force_release(const result& r, bool& out, bool& marker)
{
    marker = false;
    if (r.sets.size() != 3 || r.sets[2].size() != 1 || r.sets[2][0].size() != 1 || !to_bool(r.sets[2][0][0], marker))
        return false;
    result head = r;
    head.sets.pop_back();
    return decode_release(head, out);
}

bool decode_status(const result& r, lock_status& out)
{
    out.held = false;
    out.ttl = std::chrono::milliseconds(-1);
    if (r.sets.size() != 1)
        return false;
    const auto& rows = r.sets[0];
    if (rows.empty())
        return true;
    std::uint64_t fence = 0, queued = 0;
    if (rows.size() != 1 || rows[0].size() != 5 || !dlock::detail::cell_lease(rows[0], booleans, out, fence) ||
        !dlock::detail::cell_u64(rows[0][4], queued))
        return false;
    out.last_fencing_token = fence;
    out.queued = static_cast<std::size_t>(queued);
    return true;
}

bool decode_wait(const result& r, bool& released)
{
    released = false;
    if (r.sets.size() != 1 || r.sets[0].size() != 1 || r.sets[0][0].size() != 2)
        return false;
    const auto& v = r.sets[0][0][0];
    if (!v)
        return true;  // GET_LOCK's own error (killed): no news
    return to_bool(v, released);
}

}  // namespace dlock::mariadb::sql
