// SPDX-License-Identifier: BSL-1.0
#include "postgres/sql.hpp"

#include <dlock/error.hpp>

#include "common/sql_cells.hpp"
#include "postgres/set_sql.hpp"

#include <algorithm>
#include <charconv>

namespace dlock::postgres::sql {

using boost::system::error_code;

namespace {

std::string quote_parts(std::string_view table, std::string_view suffix)
{
    return dlock::detail::quote_qualified(table, suffix, '"');
}

// The lease's remaining milliseconds on the server's clock, never negative.
constexpr std::string_view remaining =
    "GREATEST(0, CEIL(EXTRACT(EPOCH FROM (t.expires_at - clock_timestamp())) * 1000))::bigint";

constexpr dlock::detail::bool_cells booleans{"t", "f"};

bool to_bool(const std::optional<std::string>& s, bool& out)
{
    return dlock::detail::cell_bool(s, booleans, out);
}

bool contains(std::string_view hay, std::string_view needle)
{
    return hay.find(needle) != std::string_view::npos;
}

}  // namespace

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

std::string quote_latch(std::string_view table)
{
    return quote_parts(table, "_latch");
}

std::string quote_latch_member(std::string_view table)
{
    return quote_parts(table, "_latch_member");
}

std::string quote_count_down(std::string_view table)
{
    return quote_parts(table, "_count_down_v1");  // a new body gets a new name
}

// A user who may not create what an optional feature needs still gets locks, and the
// feature fails by itself with the server's words.
std::string create_optional(const std::string& check, const std::string& create)
{
    return "  IF " + check + " IS NULL THEN\n    BEGIN\n      " + create +
           ";\n    EXCEPTION WHEN OTHERS THEN NULL;\n    END;\n  END IF;\n";
}

namespace {

// A DO-block step that creates `what` (`create` is its CREATE .. IF NOT EXISTS) only if it is
// missing: a user without CREATE works on existing ones, and two racing creators both succeed.
std::string create_if_missing(const std::string& what, const std::string& create)
{
    return "  IF to_regclass('" + what + "') IS NULL THEN\n    BEGIN\n      " + create +
           ";\n    EXCEPTION WHEN OTHERS THEN\n      IF to_regclass('" + what +
           "') IS NULL THEN RAISE; END IF;\n    END;\n  END IF;\n";
}

// The name's turn: a transaction-scoped advisory lock on (table, name), taken first by every
// statement that draws a fence or hands the name on, before any row lock (one order: no
// deadlock). Draws and grants of one name then happen one statement after another, so a
// token drawn is granted (or dropped) before the next one is drawn: tokens rise in grant
// order even when a backend stalls between its draw and the row (issue 29).
std::string turn(const std::string& t)
{
    return "turn AS (SELECT pg_advisory_xact_lock(hashtextextended('" + t + "/' || $1::text, 0)) IS NULL AS k)";
}

// The release: the name's turn, then its current row locked (releases of one name take turns), then the
// first unexpired queued token whose listening backend still exists gets the name with a new
// fence (claimed with SKIP LOCKED: a token being withdrawn is passed over); nobody: delete.
// Garbage rows of the queue (expired, dead listener, the releasing token) go in passing.
std::string release_sql(const std::string& t, const std::string& s, const std::string& q, bool force)
{
    // Forced, whoever holds it, but never a set's marker row (the set's own release frees it).
    const std::string mine = force ? " AND t.owner <> ''" : " AND t.owner = $2";
    const std::string alive = "EXISTS (SELECT 1 FROM pg_stat_get_activity(q.listener))";
    return "WITH " + turn(t) + ", cur AS (SELECT t.owner, t.expires_at > clock_timestamp() AS live FROM turn, " + t +
           " AS t WHERE t.name = $1" + mine +
           " FOR UPDATE OF t),"
           " nxt AS (SELECT q.token, q.ttl_ms FROM " +
           q + " AS q, cur WHERE q.name = $1 AND q.token <> cur.owner AND q.expires_at > clock_timestamp() AND " +
           alive +
           " ORDER BY q.seq LIMIT 1 FOR UPDATE OF q SKIP LOCKED),"
           " gone AS (DELETE FROM " +
           q + " AS q WHERE q.name = $1 AND (" + (force ? "" : "q.token = $2 OR ") +
           "q.token IN (SELECT n.token FROM nxt AS n) OR q.expires_at <= clock_timestamp() OR NOT " + alive +
           ") RETURNING q.token),"
           " upd AS (UPDATE " +
           t + " AS t SET owner = n.token, fence = nextval('" + s +
           "'), expires_at = clock_timestamp() + n.ttl_ms * interval '1 millisecond',"
           " contended = EXISTS (SELECT 1 FROM " +
           q +
           " AS o WHERE o.name = $1 AND o.token <> n.token AND o.expires_at > clock_timestamp()),"
           " was_contended = false FROM nxt AS n WHERE t.name = $1" +
           mine +
           " RETURNING t.owner, t.fence, n.ttl_ms),"
           " del AS (DELETE FROM " +
           t + " AS t WHERE t.name = $1" + mine +
           " AND EXISTS (SELECT 1 FROM cur) AND NOT EXISTS (SELECT 1 FROM nxt) RETURNING t.name),"
           " note AS (SELECT pg_notify('" +
           std::string(grant_channel) +
           "', format('%s %s %s %s%s', u.fence, u.ttl_ms, octet_length(u.owner), u.owner, $1::text)) FROM upd AS u"
           " UNION ALL SELECT pg_notify('" +
           std::string(channel) +
           "', d.name) FROM del AS d)"
           " SELECT (SELECT c.live FROM cur AS c), (SELECT count(*) FROM note), " +
           // Forced: the third column says a set's marker holds the name (its own release frees it).
           (force ? "EXISTS (SELECT 1 FROM " + t + " AS m WHERE m.name = $1 AND m.owner = '')"
                  : "NOT EXISTS (SELECT 1 FROM cur) AND EXISTS (SELECT 1 FROM " + q +
                        " AS w WHERE w.name = $1 AND w.token = $2) AND NOT EXISTS (SELECT 1 FROM gone AS g WHERE "
                        "g.token = $2)");
}

// A bigint of milliseconds as an interval.
constexpr std::string_view millis = " * interval '1 millisecond'";

// The lease's end if it starts now: $3 ms on the server's clock.
std::string lease_end()
{
    return "clock_timestamp() + $3::bigint" + std::string(millis);
}

// Columns only an optional feature needs (an election's value): added if missing, and if
// the user may not (the table's owner must), the feature fails by itself and the locks work.
std::string add_optional_columns(const std::string& t, const std::string& first, const std::string& columns)
{
    return "  IF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass('" + t + "') AND attname = '" +
           first +
           "' AND NOT attisdropped) THEN\n"
           "    BEGIN\n      ALTER TABLE " +
           t + " ADD COLUMN IF NOT EXISTS " + columns +
           ";\n    EXCEPTION WHEN OTHERS THEN NULL;\n    END;\n  END IF;\n";
}

// The count-down of one member, in the latch's own turn (an advisory lock on its name): each
// statement of the function then reads what every earlier count-down committed, so the
// members are counted once each, the count that completes the latch is seen by exactly one
// call, which NOTIFYs, and an expired latch is dropped before it is counted again. A few
// other expired latches go in passing, each only if its turn is free (never waiting for
// another name's turn while holding this one: no deadlock).
std::string count_down_function(const std::string& t, const std::string& l, const std::string& m, const std::string& f)
{
    const std::string key = "hashtextextended('" + t + "/latch/' || ";
    const std::string ttl = " + p_ttl * interval '1 millisecond'";
    return "CREATE FUNCTION " + f +
           "(p_name text, p_member text, p_count bigint, p_ttl bigint)"
           " RETURNS TABLE (o_counted boolean, o_value bigint) LANGUAGE plpgsql AS $f$\n"
           "DECLARE v_now timestamptz; v_count bigint; v_n bigint;\n"
           "BEGIN\n"
           "  PERFORM pg_advisory_xact_lock(" +
           key +
           "p_name, 0));\n"
           "  v_now := clock_timestamp();\n"
           "  DELETE FROM " +
           l +
           " AS x WHERE x.name = p_name AND x.expires_at <= v_now;\n"
           "  DELETE FROM " +
           l + " AS x WHERE x.name IN (SELECT y.name FROM " + l +
           " AS y WHERE y.expires_at <= v_now AND y.name <> p_name LIMIT 8)"
           " AND x.expires_at <= v_now AND pg_try_advisory_xact_lock(" +
           key +
           "x.name, 0));\n"
           "  SELECT x.count INTO v_count FROM " +
           l +
           " AS x WHERE x.name = p_name;\n"
           "  IF FOUND AND v_count <> p_count THEN\n"
           "    RETURN QUERY SELECT false, v_count; RETURN;\n"
           "  END IF;\n"
           "  IF FOUND THEN\n"
           "    UPDATE " +
           l + " AS x SET expires_at = v_now" + ttl +
           " WHERE x.name = p_name;\n"
           "  ELSE\n"
           "    INSERT INTO " +
           l + " (name, count, expires_at) VALUES (p_name, p_count, v_now" + ttl +
           ");\n"
           "  END IF;\n"
           "  SELECT count(*) INTO v_n FROM " +
           m +
           " AS y WHERE y.name = p_name;\n"
           "  IF v_n < p_count THEN\n"
           "    INSERT INTO " +
           m +
           " (name, member) VALUES (p_name, p_member) ON CONFLICT DO NOTHING;\n"
           "    IF FOUND THEN\n"
           "      v_n := v_n + 1;\n"
           "      IF v_n = p_count THEN PERFORM pg_notify('" +
           std::string(channel) +
           "', p_name); END IF;\n"
           "    END IF;\n"
           "  END IF;\n"
           "  RETURN QUERY SELECT true, p_count - v_n;\n"
           "END $f$";
}

// A latch's tables and function, if missing and the user may create them.
std::string latch_setup(std::string_view table)
{
    const std::string t = quote_table(table), l = quote_latch(table), m = quote_latch_member(table),
                      f = quote_count_down(table);
    return create_optional("to_regclass('" + l + "')",
                           "CREATE TABLE IF NOT EXISTS " + l +
                               " (name text PRIMARY KEY, count bigint NOT NULL, expires_at timestamptz NOT NULL)") +
           create_optional("to_regclass('" + m + "')",
                           "CREATE TABLE IF NOT EXISTS " + m + " (name text NOT NULL REFERENCES " + l +
                               " (name) ON DELETE CASCADE, member text NOT NULL, PRIMARY KEY (name, member))") +
           create_optional("to_regprocedure('" + f + "(text, text, bigint, bigint)')", count_down_function(t, l, m, f));
}

// Tables of the previous version are upgraded in place (a column, the queue); a user
// with DML only works once an owner has done that.
std::string setup_sql(const std::string& t, const std::string& s, const std::string& q,
                      const std::string& latch_setup_of_table)
{
    return "DO $dlock$ BEGIN\n" +
           create_if_missing(t, "CREATE TABLE IF NOT EXISTS " + t +
                                    " (name text PRIMARY KEY, owner text NOT NULL, fence bigint NOT NULL,"
                                    " expires_at timestamptz NOT NULL, contended boolean NOT NULL DEFAULT false,"
                                    " was_contended boolean NOT NULL DEFAULT false)") +
           create_if_missing(s, "CREATE SEQUENCE IF NOT EXISTS " + s) +
           create_if_missing(q, "CREATE TABLE IF NOT EXISTS " + q +
                                    " (name text NOT NULL, token text NOT NULL, seq bigint NOT NULL,"
                                    " ttl_ms bigint NOT NULL, listener int NOT NULL,"
                                    " expires_at timestamptz NOT NULL, PRIMARY KEY (name, token))") +
           "  IF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass('" + t +
           "') AND attname = 'was_contended' AND NOT attisdropped) THEN\n"
           "    ALTER TABLE " +
           t +
           " ADD COLUMN IF NOT EXISTS was_contended boolean NOT NULL DEFAULT false;\n"
           "  END IF;\n" +
           add_optional_columns(t, "value", "value text, ADD COLUMN IF NOT EXISTS value_owner text") +
           latch_setup_of_table + "END $dlock$";
}

// The CTEs before the acquire's INSERT: the name's turn; `cur`, its row (read and locked
// once the turn is ours: a one-time filter); `nxt`, the first live waiter queued before the
// caller's place if the row is free or expired and not the caller's (locked too: the
// snapshot predates the turn, and a queue row withdrawn meanwhile must be passed over); `who` takes the name
// (`nxt`'s token and lease, else the caller's); `f`, the fence, drawn once in the turn.
std::string acquire_ctes(const std::string& t, const std::string& s, const std::string& q)
{
    const std::string in_turn = "(SELECT NOT k FROM turn)";
    return "WITH " + turn(t) + ", cur AS (SELECT t.owner, t.expires_at > clock_timestamp() AS live FROM " + t +
           " AS t WHERE " + in_turn + " AND t.name = $1 FOR UPDATE OF t), nxt AS (SELECT w.token, w.ttl_ms FROM " + q +
           " AS w WHERE " + in_turn +
           " AND w.name = $1 AND w.token <> $2 AND w.expires_at > clock_timestamp()"
           " AND EXISTS (SELECT 1 FROM pg_stat_get_activity(w.listener))"
           " AND NOT EXISTS (SELECT 1 FROM cur WHERE cur.live OR cur.owner = $2)"
           " AND w.seq < COALESCE((SELECT m.seq FROM " +
           q +
           " AS m WHERE m.name = $1 AND m.token = $2), 9223372036854775807)"
           " ORDER BY w.seq LIMIT 1 FOR UPDATE OF w SKIP LOCKED),"
           " who AS (SELECT COALESCE((SELECT n.token FROM nxt AS n), $2) AS owner,"
           " COALESCE((SELECT n.ttl_ms FROM nxt AS n), $3::bigint) AS ttl),"
           " f AS (SELECT nextval('" +
           s + "') AS v FROM turn)";
}

// One clock reading (`now`) judges the row: free, expired or ours is taken (ours again, a
// retry, keeps its fence); held by another is marked contended and, when asked, the token
// queued behind it until one waiter lease after the holder's end (a live waiter re-queues
// by then). Taking the name withdraws the token's own queue row. The fence is drawn in the
// name's turn (from `turn`): never before a wait for the row that a later draw could pass.
// A name free or expired while live waiters queued before us (a holder that crashed or
// paused) goes to the first of them, as a release hands it on (`handed`, with a grant
// NOTIFY), and we are refused and queued behind it: FIFO holds past an expiry too.
std::string acquire_sql(const std::string& t, const std::string& s, const std::string& q)
{
    const std::string ms(millis);
    const std::string rem(remaining);
    const std::string now = "(EXCLUDED.expires_at - (SELECT h.ttl FROM who AS h)" + ms + ")";
    const std::string take = "t.owner = EXCLUDED.owner OR t.expires_at <= " + now;
    return acquire_ctes(t, s, q) + ", a AS (INSERT INTO " + t +
           " AS t (name, owner, fence, expires_at, contended)"
           " SELECT $1, h.owner, (SELECT f.v FROM f), clock_timestamp() + h.ttl" +
           ms +
           ", EXISTS (SELECT 1 FROM nxt) FROM who AS h"
           " ON CONFLICT (name) DO UPDATE SET"
           " owner = CASE WHEN " +
           take +
           " THEN EXCLUDED.owner ELSE t.owner END,"
           " fence = CASE WHEN t.owner = EXCLUDED.owner THEN t.fence WHEN t.expires_at <= " +
           now +
           " THEN EXCLUDED.fence ELSE t.fence END,"
           " expires_at = CASE WHEN " +
           take +
           " THEN EXCLUDED.expires_at ELSE t.expires_at END,"
           " contended = CASE WHEN t.owner = EXCLUDED.owner THEN t.contended WHEN t.expires_at <= " +
           now +
           " THEN EXCLUDED.contended ELSE true END"
           " RETURNING t.owner = $2 AS ours, t.owner, t.fence, t.fence = (SELECT f.v FROM f) AS fresh, " +
           rem +
           " AS rem),"
           " handed AS (SELECT a.owner, a.fence, n.ttl_ms FROM a, nxt AS n WHERE a.owner = n.token AND a.fresh),"
           " g AS (SELECT pg_notify('" +
           std::string(grant_channel) +
           "', format('%s %s %s %s%s', x.fence, x.ttl_ms, octet_length(x.owner), x.owner, $1::text)) FROM handed AS x),"
           " q AS (INSERT INTO " +
           q +
           " AS q (name, token, seq, ttl_ms, listener, expires_at)"
           " SELECT $1, $2, nextval('" +
           s + "'), $3::bigint, $4::int, clock_timestamp() + (a.rem + $3::bigint)" + ms +
           " FROM a WHERE NOT a.ours AND $4::int > 0 AND a.owner <> ''"
           " ON CONFLICT (name, token) DO UPDATE SET ttl_ms = EXCLUDED.ttl_ms, listener = EXCLUDED.listener,"
           " expires_at = GREATEST(q.expires_at, EXCLUDED.expires_at) RETURNING q.token),"
           " d AS (DELETE FROM " +
           q +
           " AS q USING a WHERE q.name = $1 AND ((a.ours AND q.token = $2) OR q.token IN (SELECT x.owner FROM handed "
           "AS x)) RETURNING q.token)"
           " SELECT a.ours, a.fence, a.rem, a.owner = '' FROM a WHERE (SELECT count(*) FROM g) >= 0";
}

}  // namespace

statements make_statements(std::string_view table)
{
    const std::string t = quote_table(table), s = quote_sequence(table), q = quote_queue(table);
    const std::string ttl = lease_end();
    const std::string rem(remaining);
    statements st;
    st.setup = setup_sql(t, s, q, latch_setup(table) + make_set_statements(table).setup);
    st.acquire = acquire_sql(t, s, q);
    // SET's right-hand sides read the row as it was: the flag moves to was_contended.
    st.renew = "UPDATE " + t + " AS t SET expires_at = " + ttl +
               ", was_contended = t.contended, contended = false"
               " WHERE t.name = $1 AND t.owner = $2 AND t.expires_at > clock_timestamp()"
               " RETURNING t.was_contended";
    st.release = release_sql(t, s, q, false);
    st.force_release = release_sql(t, s, q, true);
    // One counter serves every name: its last value bounds the name's last token (NULL before
    // the first nextval, or without USAGE on it).
    const std::string status_columns =
        "SELECT t.owner, t.fence, " + rem + ", t.expires_at > clock_timestamp(), (SELECT count(*) FROM " + q +
        " AS q WHERE q.name = $1 AND q.expires_at > clock_timestamp()), COALESCE(pg_sequence_last_value('" + s +
        "'::regclass), 0)";
    const std::string status_from = " FROM (SELECT 1) AS one LEFT JOIN " + t + " AS t ON t.name = $1";
    st.status = status_columns + status_from;
    // A value is its proclaimer's: read only while that lease owns the row, so any other
    // lease that takes the row (an expiry, a hand-off) has none, and no lock statement
    // needs to know the columns.
    st.leader = status_columns + ", CASE WHEN t.value_owner = t.owner THEN t.value END" + status_from;
    // Fenced by the lease: only the live owner writes; observers hear of it as of a release.
    st.proclaim = "WITH u AS (UPDATE " + t +
                  " AS t SET value = $3, value_owner = $2 WHERE t.name = $1 AND t.owner = $2"
                  " AND t.expires_at > clock_timestamp()"
                  " RETURNING t.name), note AS (SELECT pg_notify('" +
                  std::string(channel) + "', u.name) FROM u) SELECT (SELECT count(*) FROM note) > 0";
    st.count_down = "SELECT o_counted, o_value FROM " + quote_count_down(table) + "($1, $2, $3::bigint, $4::bigint)";
    const std::string l = quote_latch(table), m = quote_latch_member(table);
    st.latch_state = "SELECT l.count, (SELECT count(*) FROM " + m + " AS m WHERE m.name = l.name) FROM " + l +
                     " AS l WHERE l.name = $1 AND l.expires_at > clock_timestamp()";
    return st;
}

std::string listen()
{
    return "LISTEN " + std::string(channel) + "; LISTEN " + std::string(grant_channel);
}

bool decode_grant(std::string_view p, grant& out)
{
    // "<fence> <ttl> <token bytes> <token><name>"
    std::uint64_t v[3] = {};
    for (auto& x : v) {
        auto sp = p.find(' ');
        if (sp == std::string_view::npos)
            return false;
        auto [end, ec] = std::from_chars(p.data(), p.data() + sp, x);
        if (ec != std::errc() || end != p.data() + sp)
            return false;
        p.remove_prefix(sp + 1);
    }
    if (v[0] == 0 || v[1] == 0 || v[2] == 0 || v[2] >= p.size())
        return false;
    out.notice = grant_notice{v[0], std::chrono::milliseconds(static_cast<std::int64_t>(v[1])), {}};
    out.token = std::string(p.substr(0, v[2]));
    out.name = std::string(p.substr(v[2]));
    return true;
}

error_code check_name(std::string_view name)
{
    if (name.empty() || name.size() > max_name || name.find('\0') != std::string_view::npos)
        return error::invalid_name;
    return {};
}

error_code error_of(const result& r)
{
    const std::string_view s = r.sqlstate;
    if (s.empty())
        return r.message.empty() ? error_code() : error_code(error::server_error);
    if (s == "28P01" || s == "28000")
        return error::auth_failed;
    if (s == "42501")
        return error::permission_denied;
    if (s == "3D000")
        return error::handshake_failed;
    if (s == "57P03" || s == "40001" || s == "40P01" || s == "55P03" || s == "25006" || s.substr(0, 2) == "53")
        return error::server_busy;
    if (s == "57P01" || s == "57P02" || s.substr(0, 2) == "08")
        return error::connection_lost;
    if (s == "54000" || s == "22021" || s == "22P05")
        return error::invalid_name;
    return error::server_error;
}

error_code connect_error_of(std::string_view m)
{
    if (contains(m, "password authentication failed") || contains(m, "no password supplied") ||
        contains(m, "SASL authentication") || contains(m, "authentication failed") ||
        (contains(m, "role \"") && contains(m, "does not exist")))
        return error::auth_failed;
    if (contains(m, "database \"") && contains(m, "does not exist"))
        return error::handshake_failed;
    if (contains(m, "permission denied for database") || contains(m, "no pg_hba.conf entry"))
        return error::permission_denied;
    if (contains(m, "starting up") || contains(m, "shutting down") || contains(m, "recovery mode") ||
        contains(m, "too many clients") || contains(m, "remaining connection slots"))
        return error::server_busy;
    if (contains(m, "could not translate host name"))
        return error::resolve_failed;
    return error::connect_failed;
}

bool decode_acquire(const result& r, std::chrono::milliseconds ttl, acquire_result& out,
                    std::optional<std::uint64_t>& set_permits)
{
    out = {};
    set_permits.reset();
    if (r.rows.size() != 1 || r.rows[0].size() != 4)
        return false;
    const auto& row = r.rows[0];
    bool ours = false, a_set = false;
    if (!to_bool(row[0], ours) || !to_bool(row[3], a_set))
        return false;
    if (a_set) {  // the marker's fence is the set's permits
        std::uint64_t permits = 0;
        if (ours || !dlock::detail::cell_u64(row[1], permits))
            return false;
        set_permits = permits;
    }
    if (!ours)
        return dlock::detail::cell_ms(row[2], out.holder_ttl);  // held by another owner
    if (!dlock::detail::cell_u64(row[1], out.fencing_token))
        return false;
    out.acquired = true;
    out.granted_ttl = ttl;  // set on the server's clock, after the request left
    return true;
}

bool decode_renew(const result& r, renew_result& out)
{
    out = {};
    if (r.rows.empty())
        return true;
    if (r.rows.size() != 1 || r.rows[0].size() != 1 || !to_bool(r.rows[0][0], out.contended))
        return false;
    out.owned = true;
    return true;
}

bool decode_release(const result& r, release_outcome& out)
{
    out = {};
    if (r.rows.size() != 1 || r.rows[0].size() != 3)
        return false;
    const auto& row = r.rows[0];
    if (row[0] && !to_bool(row[0], out.held))  // NULL: not ours
        return false;
    return to_bool(row[2], out.raced);
}

bool decode_status(const result& r, lock_status& out)
{
    out.held = false;
    out.ttl = std::chrono::milliseconds(-1);
    out.queued = 0;
    if (r.rows.size() != 1 || r.rows[0].size() != 6)
        return false;
    const auto& row = r.rows[0];
    std::uint64_t queued = 0;
    if (!dlock::detail::cell_u64(row[4], queued) || !dlock::detail::cell_u64(row[5], out.last_fencing_token))
        return false;
    out.queued = static_cast<std::size_t>(queued);
    if (!row[0])
        return true;  // no row: never taken, or released
    std::uint64_t fence = 0;
    if (!dlock::detail::cell_lease(row, booleans, out, fence))
        return false;
    out.last_fencing_token = std::max(out.last_fencing_token, fence);
    return true;
}

bool decode_proclaim(const result& r, bool& written)
{
    written = false;
    return r.rows.size() == 1 && r.rows[0].size() == 1 && to_bool(r.rows[0][0], written);
}

error_code decode_count_down(const result& r, std::uint64_t& remaining)
{
    bool counted = false;
    if (r.rows.size() != 1 || r.rows[0].size() != 2 || !to_bool(r.rows[0][0], counted) ||
        !dlock::detail::cell_u64(r.rows[0][1], remaining) || remaining > max_latch_count)
        return error::protocol_error;
    return counted ? error_code() : error_code(error::count_mismatch);
}

bool decode_latch_state(const result& r, latch_state& out)
{
    out = {};
    if (r.rows.empty())
        return true;  // no latch (never counted down, or expired)
    std::uint64_t members = 0;
    if (r.rows.size() != 1 || r.rows[0].size() != 2 || !dlock::detail::cell_u64(r.rows[0][0], out.count) ||
        !dlock::detail::cell_u64(r.rows[0][1], members) || members > out.count)
        return false;
    out.remaining = out.count - members;
    return true;
}

bool decode_leader(const result& r, lock_status& out)
{
    if (r.rows.size() != 1 || r.rows[0].size() != 7)
        return false;
    result head = r;
    auto value = head.rows[0].back();
    head.rows[0].pop_back();
    if (!decode_status(head, out))
        return false;
    // A leader that has proclaimed nothing yet has no value; nobody holding, none either.
    if (out.held && value)
        out.value = *value;
    return true;
}

}  // namespace dlock::postgres::sql
