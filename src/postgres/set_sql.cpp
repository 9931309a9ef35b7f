// SPDX-License-Identifier: BSL-1.0
#include "postgres/set_sql.hpp"

#include <dlock/error.hpp>

#include "common/sql_cells.hpp"

namespace dlock::postgres::sql {

using boost::system::error_code;

namespace {

// The objects of one table's sets, quoted.
struct names {
    std::string t, q, s, sq, seq, acquire, renew, release, release_side;
    explicit names(std::string_view table)
        : t(quote_table(table)), q(quote_queue(table)), s(dlock::detail::quote_qualified(table, "_set", '"')),
          sq(dlock::detail::quote_qualified(table, "_set_queue", '"')), seq(quote_sequence(table)),
          acquire(dlock::detail::quote_qualified(table, "_set_acquire_v1", '"')),
          renew(dlock::detail::quote_qualified(table, "_set_renew_v1", '"')),
          release(dlock::detail::quote_qualified(table, "_set_release_v1", '"')),
          release_side(dlock::detail::quote_qualified(table, "_set_release_side_v1", '"'))
    {
    }
};

const std::string ms = " * interval '1 millisecond'";

// The name's turn, shared with the mutex's statements: one name's statements and functions
// run one after another, and each statement of a function reads what the earlier ones
// committed (a single statement's snapshot would predate the turn).
std::string turn(const names& n)
{
    return "  PERFORM pg_advisory_xact_lock(hashtextextended('" + n.t +
           "/' || p_name, 0));\n"
           "  v_now := clock_timestamp();\n";
}

// Expired leases go; so do queued waiters that expired or whose listener is gone.
std::string purge(const names& n)
{
    return "  DELETE FROM " + n.s + " AS x WHERE x.name = p_name AND x.expires_at <= v_now;\n  DELETE FROM " + n.sq +
           " AS x WHERE x.name = p_name AND (x.expires_at <= v_now"
           " OR NOT EXISTS (SELECT 1 FROM pg_stat_get_activity(x.listener)));\n";
}

// v_n holders, v_w a writer among them.
std::string count_holders(const names& n)
{
    return "    SELECT count(*), coalesce(bool_or(x.kind = 'w'), false) INTO v_n, v_w FROM " + n.s +
           " AS x WHERE x.name = p_name;\n";
}

// Whether the set admits a lease of `kind` (lease_set::admits).
std::string admits(const std::string& kind)
{
    return "(CASE " + kind + " WHEN 'p' THEN v_n < v_cap WHEN 'r' THEN NOT v_w ELSE v_n = 0 END)";
}

// The queue's head granted while the set admits it, first come first served
// (lease_set::serve); `me`'s own grant goes to v_mine, the others' by NOTIFY.
std::string serve(const names& n, const std::string& me)
{
    return "  FOR r IN SELECT x.token, x.kind, x.ttl_ms FROM " + n.sq +
           " AS x WHERE x.name = p_name ORDER BY x.seq LOOP\n" + count_holders(n) + "    IF NOT " + admits("r.kind") +
           " THEN EXIT; END IF;\n    DELETE FROM " + n.sq + " AS x WHERE x.name = p_name AND x.token = r.token;\n" +
           "    v_fence := nextval('" + n.seq + "');\n    INSERT INTO " + n.s +
           " (name, token, kind, capacity, fence, expires_at, refused_at) VALUES (p_name, r.token, r.kind, v_cap,"
           " v_fence, v_now + r.ttl_ms" +
           ms + ", (SELECT max(y.refused_at) FROM " + n.s + " AS y WHERE y.name = p_name));\n    IF r.token = " + me +
           " THEN v_mine := v_fence;\n    ELSE PERFORM pg_notify('" + std::string(grant_channel) +
           "', format('%s %s %s %s%s', v_fence, r.ttl_ms, octet_length(r.token), r.token, p_name));\n"
           "    END IF;\n  END LOOP;\n";
}

// The name's kind in the lease table: a marker row (owner set_marker, fence the set's
// permits, 0 for a read-write lock) that lives as long as the set's longest lease or queued
// waiter; gone with the set. It takes over an expired
// mutex row (its lease is over).
std::string mark(const names& n)
{
    return "  SELECT greatest((SELECT max(x.expires_at) FROM " + n.s +
           " AS x WHERE x.name = p_name), (SELECT max(x.expires_at) FROM " + n.sq +
           " AS x WHERE x.name = p_name)) INTO v_end;\n"
           "  IF v_end IS NULL THEN\n    DELETE FROM " +
           n.t + " AS x WHERE x.name = p_name AND x.owner = '';\n  ELSE\n    INSERT INTO " + n.t +
           " AS x (name, owner, fence, expires_at) VALUES (p_name, '', v_cap, v_end) ON CONFLICT (name) DO UPDATE"
           " SET owner = '', fence = v_cap, expires_at = EXCLUDED.expires_at"
           " WHERE x.owner = '' OR x.expires_at <= v_now;\n"
           // A live mutex row in the way (a renewal that committed after this call's check):
           // nothing of this call may stand, so it rolls back and the caller retries.
           "    IF NOT FOUND THEN RAISE EXCEPTION 'dlock: % is held as a mutex', p_name USING ERRCODE = '40001';"
           " END IF;\n  END IF;\n";
}

const std::string declare = "DECLARE v_now timestamptz; v_end timestamptz; v_cap int; v_fence bigint;"
                            " v_mine bigint := 0; v_n bigint; v_w boolean; v_held boolean; r record;\n";

// The set's permits as its leases and waiters agree them (0: a read-write lock), or NULL.
std::string capacity_of(const names& n)
{
    return "  SELECT x.capacity INTO v_cap FROM (SELECT y.capacity FROM " + n.s +
           " AS y WHERE y.name = p_name UNION ALL SELECT y.capacity FROM " + n.sq +
           " AS y WHERE y.name = p_name) AS x LIMIT 1;\n";
}

// lease_set::acquire: -1 (kind_mismatch: -1 a mutex, else the set's permits), 1 (the
// fence) or 0 (the soonest holder's remaining ms, -1 if none); refused, queued if asked.
std::string acquire_function(const names& n)
{
    return "CREATE FUNCTION " + n.acquire +
           "(p_name text, p_token text, p_ttl bigint, p_listener int, p_kind text, p_cap int)"
           " RETURNS TABLE (o_state int, o_value bigint) LANGUAGE plpgsql AS $f$\n" +
           declare + "BEGIN\n" + turn(n) + "  IF EXISTS (SELECT 1 FROM " + n.t +
           " AS x WHERE x.name = p_name AND x.owner <> '' AND x.expires_at > v_now) OR EXISTS (SELECT 1 FROM " + n.q +
           " AS x WHERE x.name = p_name AND x.expires_at > v_now"
           " AND EXISTS (SELECT 1 FROM pg_stat_get_activity(x.listener))) THEN\n"
           "    RETURN QUERY SELECT -1, -1::bigint; RETURN;\n  END IF;\n" +
           purge(n) + capacity_of(n) +
           "  IF v_cap IS NOT NULL AND v_cap <> p_cap THEN RETURN QUERY SELECT -1, v_cap::bigint; RETURN; END IF;\n"
           "  v_cap := p_cap;\n  SELECT x.fence INTO v_fence FROM " +
           n.s + " AS x WHERE x.name = p_name AND x.token = p_token;\n  IF FOUND THEN\n    UPDATE " + n.s +
           " AS x SET expires_at = v_now + p_ttl" + ms +
           " WHERE x.name = p_name AND x.token = p_token;\n    DELETE FROM " + n.sq +
           " AS x WHERE x.name = p_name AND x.token = p_token;\n" + mark(n) +
           "    RETURN QUERY SELECT 1, v_fence; RETURN;\n  END IF;\n" + serve(n, "p_token") + "  IF v_mine > 0 THEN\n" +
           mark(n) + "    RETURN QUERY SELECT 1, v_mine; RETURN;\n  END IF;\n" + count_holders(n) +
           "  IF NOT EXISTS (SELECT 1 FROM " + n.sq + " AS x WHERE x.name = p_name) AND " + admits("p_kind") +
           " THEN\n    v_fence := nextval('" + n.seq + "');\n    INSERT INTO " + n.s +
           " (name, token, kind, capacity, fence, expires_at, refused_at) VALUES (p_name, p_token, p_kind, v_cap,"
           " v_fence, v_now + p_ttl" +
           ms + ", (SELECT max(y.refused_at) FROM " + n.s + " AS y WHERE y.name = p_name));\n" + mark(n) +
           "    RETURN QUERY SELECT 1, v_fence; RETURN;\n  END IF;\n" +
           // Refused: the holders' next renewals say someone waits; a live waiter is queued
           // until one lease after the longest holder's end (it re-queues by then).
           "  UPDATE " + n.s + " AS x SET refused_at = v_now WHERE x.name = p_name;\n  IF p_listener > 0 THEN\n" +
           "    INSERT INTO " + n.sq +
           " AS x (name, token, seq, kind, capacity, ttl_ms, listener, expires_at) SELECT p_name, p_token, nextval('" +
           n.seq + "'), p_kind, v_cap, p_ttl, p_listener, greatest(v_now, max(y.expires_at)) + p_ttl" + ms + " FROM " +
           n.s +
           " AS y WHERE y.name = p_name ON CONFLICT (name, token) DO UPDATE SET ttl_ms = EXCLUDED.ttl_ms,"
           " listener = EXCLUDED.listener, expires_at = greatest(x.expires_at, EXCLUDED.expires_at);\n  END IF;\n" +
           mark(n) +
           "  RETURN QUERY SELECT 0, coalesce((SELECT ceil(extract(epoch FROM min(x.expires_at) - v_now) * "
           "1000)::bigint FROM " +
           n.s + " AS x WHERE x.name = p_name), -1::bigint);\nEND $f$";
}

// lease_set::renew, in the turn (the marker follows the lease): (owned, contended: someone
// waits, or was refused within the lease).
std::string renew_function(const names& n)
{
    return "CREATE FUNCTION " + n.renew +
           "(p_name text, p_token text, p_ttl bigint) RETURNS TABLE (o_owned boolean, o_contended boolean)"
           " LANGUAGE plpgsql AS $f$\n" +
           declare + "BEGIN\n" + turn(n) + "  UPDATE " + n.s + " AS x SET expires_at = v_now + p_ttl" + ms +
           " WHERE x.name = p_name AND x.token = p_token AND x.expires_at > v_now"
           " RETURNING coalesce(v_now - x.refused_at < p_ttl" +
           ms +
           ", false) INTO v_w;\n"
           "  IF NOT FOUND THEN RETURN QUERY SELECT false, false; RETURN; END IF;\n" +
           capacity_of(n) + mark(n) + "  RETURN QUERY SELECT true, v_w OR EXISTS (SELECT 1 FROM " + n.sq +
           " AS x WHERE x.name = p_name);\nEND $f$";
}

// The end of a release: the queue served, the release channel told when nobody queued is
// left (the waiters that did not queue retry) and something was freed, the kind's mark.
std::string release_tail(const names& n, const std::string& freed)
{
    return serve(n, "''") + "  IF " + freed + " AND NOT EXISTS (SELECT 1 FROM " + n.sq +
           " AS x WHERE x.name = p_name) THEN PERFORM pg_notify('" + std::string(channel) + "', p_name); END IF;\n" +
           mark(n) + "  RETURN QUERY SELECT v_held;\nEND $f$";
}

// lease_set::release (or, forced, every lease): frees the lease and serves the queue; a
// token that holds nothing is withdrawn.
std::string release_function(const names& n)
{
    return "CREATE FUNCTION " + n.release +
           "(p_name text, p_token text, p_force boolean) RETURNS TABLE (o_held boolean)"
           " LANGUAGE plpgsql AS $f$\n" +
           declare + "BEGIN\n" + turn(n) + purge(n) + capacity_of(n) + "  DELETE FROM " + n.s +
           " AS x WHERE x.name = p_name AND (p_force OR x.token = p_token);\n  v_held := FOUND;\n"
           "  IF NOT v_held AND NOT p_force THEN\n    DELETE FROM " +
           n.sq + " AS x WHERE x.name = p_name AND x.token = p_token;\n" + mark(n) +
           "    RETURN QUERY SELECT false; RETURN;\n  END IF;\n" + release_tail(n, "true");
}

// The operator's override of one side of a read-write lock (lease_set::force_release):
// every lease of kind p_side ('r' every reader, 'w' the writer) goes, and the queue is
// served. A function of its own, so that a release needs only the first one (a user with
// DML rights only, whose owner made the v1 functions, keeps every release working).
std::string release_side_function(const names& n)
{
    return "CREATE FUNCTION " + n.release_side +
           "(p_name text, p_side text) RETURNS TABLE (o_held boolean) LANGUAGE plpgsql AS $f$\n" + declare + "BEGIN\n" +
           turn(n) + purge(n) + capacity_of(n) + "  DELETE FROM " + n.s +
           " AS x WHERE x.name = p_name AND x.kind = p_side;\n  v_held := FOUND;\n" + release_tail(n, "v_held");
}

// The set's tables and functions, if missing and the user may create them.
std::string set_setup(const names& n)
{
    return create_optional("to_regclass('" + n.s + "')",
                           "CREATE TABLE IF NOT EXISTS " + n.s +
                               " (name text NOT NULL, token text NOT NULL, kind text NOT NULL, capacity int NOT NULL,"
                               " fence bigint NOT NULL, expires_at timestamptz NOT NULL,"
                               " refused_at timestamptz,"
                               " PRIMARY KEY (name, token))") +
           create_optional("to_regclass('" + n.sq + "')",
                           "CREATE TABLE IF NOT EXISTS " + n.sq +
                               " (name text NOT NULL, token text NOT NULL, seq bigint NOT NULL, kind text NOT NULL,"
                               " capacity int NOT NULL, ttl_ms bigint NOT NULL, listener int NOT NULL,"
                               " expires_at timestamptz NOT NULL, PRIMARY KEY (name, token))") +
           create_optional("to_regprocedure('" + n.acquire + "(text, text, bigint, int, text, int)')",
                           acquire_function(n)) +
           create_optional("to_regprocedure('" + n.renew + "(text, text, bigint)')", renew_function(n)) +
           create_optional("to_regprocedure('" + n.release + "(text, text, boolean)')", release_function(n)) +
           create_optional("to_regprocedure('" + n.release_side + "(text, text)')", release_side_function(n));
}

constexpr dlock::detail::bool_cells booleans{"t", "f"};

}  // namespace

set_statements make_set_statements(std::string_view table)
{
    names n(table);
    set_statements st;
    st.setup = set_setup(n);
    st.acquire = "SELECT o_state, o_value FROM " + n.acquire + "($1, $2, $3::bigint, $4::int, $5, $6::int)";
    st.renew = "SELECT o_owned, o_contended FROM " + n.renew + "($1, $2, $3::bigint)";
    st.release = "SELECT o_held FROM " + n.release + "($1, $2, $3::boolean)";
    st.release_side = "SELECT o_held FROM " + n.release_side + "($1, $2)";
    st.status =
        "SELECT count(*), coalesce(bool_or(x.kind = 'w'), false), coalesce(max(x.fence), 0),"
        " (SELECT y.token FROM " +
        n.s +
        " AS y WHERE y.name = $1 AND y.expires_at > clock_timestamp() ORDER BY y.fence DESC LIMIT 1),"
        " coalesce(max(GREATEST(0, CEIL(EXTRACT(EPOCH FROM (x.expires_at - clock_timestamp())) * 1000))::bigint),"
        " -1), (SELECT count(*) FROM " +
        n.sq +
        " AS y WHERE y.name = $1 AND y.expires_at > clock_timestamp()), coalesce(max(x.capacity), "
        "(SELECT max(y.capacity) FROM " +
        n.sq + " AS y WHERE y.name = $1), 0), COALESCE(pg_sequence_last_value('" + n.seq + "'::regclass), 0) FROM " +
        n.s + " AS x WHERE x.name = $1 AND x.expires_at > clock_timestamp()";
    return st;
}

error_code decode_set_acquire(const result& r, std::chrono::milliseconds ttl, acquire_result& out, long long& what)
{
    out = {};
    long long state = 0, value = 0;
    if (r.rows.size() != 1 || r.rows[0].size() != 2 || !dlock::detail::cell_i64(r.rows[0][0], state) ||
        !dlock::detail::cell_i64(r.rows[0][1], value))
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
    return r.rows.size() == 1 && r.rows[0].size() == 2 && dlock::detail::cell_bool(r.rows[0][0], booleans, out.owned) &&
           dlock::detail::cell_bool(r.rows[0][1], booleans, out.contended);
}

bool decode_set_release(const result& r, bool& held)
{
    held = false;
    return r.rows.size() == 1 && r.rows[0].size() == 1 && dlock::detail::cell_bool(r.rows[0][0], booleans, held);
}

bool decode_set_status(const result& r, lock_status& out)
{
    if (r.rows.size() != 1 || r.rows[0].size() != 8)
        return false;
    const auto& row = r.rows[0];
    std::uint64_t holders = 0, queued = 0, capacity = 0;
    long long left = 0;
    if (!dlock::detail::cell_u64(row[0], holders) || !dlock::detail::cell_bool(row[1], booleans, out.writer) ||
        !dlock::detail::cell_u64(row[2], out.fencing_token) || !dlock::detail::cell_i64(row[4], left) ||
        !dlock::detail::cell_u64(row[5], queued) || !dlock::detail::cell_u64(row[6], capacity) ||
        !dlock::detail::cell_u64(row[7], out.last_fencing_token))
        return false;
    out.held = holders > 0;
    out.holders = static_cast<std::size_t>(holders);
    out.queued = static_cast<std::size_t>(queued);
    out.capacity = static_cast<unsigned>(capacity);
    out.kind = capacity > 0 ? lease_kind::permit : lease_kind::read;
    out.holder = row[3].value_or("");
    out.ttl = std::chrono::milliseconds(left);
    out.last_fencing_token = std::max(out.last_fencing_token, out.fencing_token);
    return true;
}

}  // namespace dlock::postgres::sql
