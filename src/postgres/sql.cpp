#include "postgres/sql.hpp"

#include <dlock/error.hpp>

#include <charconv>

namespace dlock::postgres::sql {

using boost::system::error_code;

namespace {

std::string quote_parts(std::string_view table, std::string_view suffix)
{
    std::string out;
    auto dot = table.find('.');
    if (dot != std::string_view::npos) {
        out += "\"" + std::string(table.substr(0, dot)) + "\".";
        table = table.substr(dot + 1);
    }
    return out + "\"" + std::string(table) + std::string(suffix) + "\"";
}

// The lease's remaining milliseconds on the server's clock, never negative.
constexpr std::string_view remaining =
    "GREATEST(0, CEIL(EXTRACT(EPOCH FROM (t.expires_at - clock_timestamp())) * 1000))::bigint";

bool to_u64(const std::optional<std::string>& s, std::uint64_t& out)
{
    if (!s)
        return false;
    auto [end, ec] = std::from_chars(s->data(), s->data() + s->size(), out);
    return ec == std::errc() && end == s->data() + s->size();
}

bool to_ms(const std::optional<std::string>& s, std::chrono::milliseconds& out)
{
    std::uint64_t v = 0;
    if (!to_u64(s, v))
        return false;
    out = std::chrono::milliseconds(static_cast<std::int64_t>(v));
    return true;
}

bool to_bool(const std::optional<std::string>& s, bool& out)
{
    if (!s || (*s != "t" && *s != "f"))
        return false;
    out = *s == "t";
    return true;
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

statements make_statements(std::string_view table)
{
    const std::string t = quote_table(table), s = quote_sequence(table);
    const std::string ttl = "clock_timestamp() + $3::bigint * interval '1 millisecond'";
    const std::string rem(remaining);
    statements st;
    // Created only if missing (a user without CREATE works on existing ones); two processes
    // that race to create them both succeed.
    st.setup = "DO $dlock$ BEGIN\n"
               "  IF to_regclass('" +
               t +
               "') IS NULL THEN\n"
               "    BEGIN\n"
               "      CREATE TABLE IF NOT EXISTS " +
               t +
               " (name text PRIMARY KEY, owner text NOT NULL,"
               " fence bigint NOT NULL, expires_at timestamptz NOT NULL, contended boolean NOT NULL DEFAULT false);\n"
               "    EXCEPTION WHEN OTHERS THEN\n"  // a racing creator: fine if it exists now
               "      IF to_regclass('" +
               t +
               "') IS NULL THEN RAISE; END IF;\n"
               "    END;\n"
               "  END IF;\n"
               "  IF to_regclass('" +
               s +
               "') IS NULL THEN\n"
               "    BEGIN\n"
               "      CREATE SEQUENCE IF NOT EXISTS " +
               s +
               ";\n"
               "    EXCEPTION WHEN OTHERS THEN\n"
               "      IF to_regclass('" +
               s +
               "') IS NULL THEN RAISE; END IF;\n"
               "    END;\n"
               "  END IF;\n"
               "END $dlock$";
    // Free, expired or ours: taken in one statement. Ours again (a retry) keeps its fence.
    st.acquire = "INSERT INTO " + t +
                 " AS t (name, owner, fence, expires_at, contended)"
                 " VALUES ($1, $2, nextval('" +
                 s + "'), " + ttl +
                 ", false)"
                 " ON CONFLICT (name) DO UPDATE SET owner = EXCLUDED.owner,"
                 " fence = CASE WHEN t.owner = EXCLUDED.owner THEN t.fence ELSE EXCLUDED.fence END,"
                 " expires_at = EXCLUDED.expires_at,"
                 " contended = CASE WHEN t.owner = EXCLUDED.owner THEN t.contended ELSE false END"
                 " WHERE t.expires_at <= clock_timestamp() OR t.owner = EXCLUDED.owner"
                 " RETURNING t.fence";
    st.contend = "UPDATE " + t + " AS t SET contended = true WHERE t.name = $1 AND t.owner <> $2 RETURNING " + rem;
    // RETURNING's subquery sees the row as it was before this statement.
    st.renew = "UPDATE " + t + " AS t SET expires_at = " + ttl +
               ", contended = false"
               " WHERE t.name = $1 AND t.owner = $2 AND t.expires_at > clock_timestamp()"
               " RETURNING (SELECT o.contended FROM " +
               t + " AS o WHERE o.name = $1)";
    st.release = "WITH d AS (DELETE FROM " + t +
                 " AS t WHERE t.name = $1 AND t.owner = $2"
                 " RETURNING t.name, t.expires_at > clock_timestamp() AS live)"
                 " SELECT d.live, pg_notify('" +
                 std::string(channel) + "', d.name) FROM d";
    st.force_release = "WITH d AS (DELETE FROM " + t +
                       " AS t WHERE t.name = $1"
                       " RETURNING t.name, t.expires_at > clock_timestamp() AS live)"
                       " SELECT d.live, pg_notify('" +
                       std::string(channel) + "', d.name) FROM d";
    st.status =
        "SELECT t.owner, t.fence, " + rem + ", t.expires_at > clock_timestamp() FROM " + t + " AS t WHERE t.name = $1";
    return st;
}

std::string listen()
{
    return "LISTEN " + std::string(channel);
}

error_code check_name(std::string_view name)
{
    if (name.empty() || name.size() > max_name || name.find('\0') != std::string_view::npos)
        return error::invalid_name;
    return {};
}

bool valid_ttl(std::chrono::milliseconds ttl)
{
    return ttl.count() > 0 && ttl <= max_ttl;
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

bool decode_acquire(const result& r, std::chrono::milliseconds ttl, acquire_result& out)
{
    out = {};
    if (r.rows.empty())
        return true;  // held by another owner: ask contend
    if (r.rows.size() != 1 || r.rows[0].size() != 1 || !to_u64(r.rows[0][0], out.fencing_token))
        return false;
    out.acquired = true;
    out.granted_ttl = ttl;  // set on the server's clock, after the request left
    return true;
}

bool decode_contend(const result& r, acquire_result& out)
{
    out.acquired = false;
    out.holder_ttl = std::chrono::milliseconds(0);  // released meanwhile: try again now
    if (r.rows.empty())
        return true;
    return r.rows.size() == 1 && r.rows[0].size() == 1 && to_ms(r.rows[0][0], out.holder_ttl);
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

bool decode_release(const result& r, bool& out)
{
    out = false;
    if (r.rows.empty())
        return true;
    return r.rows.size() == 1 && !r.rows[0].empty() && to_bool(r.rows[0][0], out);
}

bool decode_status(const result& r, lock_status& out)
{
    out.held = false;
    out.ttl = std::chrono::milliseconds(-1);
    if (r.rows.empty())
        return true;
    if (r.rows.size() != 1 || r.rows[0].size() != 4)
        return false;
    const auto& row = r.rows[0];
    bool live = false;
    std::uint64_t fence = 0;
    std::chrono::milliseconds ms{};
    if (!row[0] || !to_u64(row[1], fence) || !to_ms(row[2], ms) || !to_bool(row[3], live))
        return false;
    out.last_fencing_token = fence;
    if (live) {
        out.held = true;
        out.holder = *row[0];
        out.fencing_token = fence;
        out.ttl = ms;
    }
    return true;
}

}  // namespace dlock::postgres::sql
