// SPDX-License-Identifier: BSL-1.0
#include "mariadb/bell_sql.hpp"

#include "common/sql_cells.hpp"

namespace dlock::mariadb::sql {

namespace {

std::string liveness_lock(const std::string& conn)
{
    return "CONCAT('dlock-bell:', " + conn + ")";
}

}  // namespace

std::string quote_bell(std::string_view table)
{
    return dlock::detail::quote_qualified(table, "_bell", '`');
}

std::string bell_setup(std::string_view table)
{
    return "  BEGIN\n    DECLARE CONTINUE HANDLER FOR SQLEXCEPTION BEGIN END;\n    CREATE TABLE IF NOT EXISTS " +
           quote_bell(table) +
           " (name VARBINARY(2000) NOT NULL, conn BIGINT UNSIGNED NOT NULL, rings BIGINT UNSIGNED NOT NULL DEFAULT 0,"
           " PRIMARY KEY (name, conn)) ENGINE=MEMORY;\n  END;\n";
}

std::string bell_sleep(std::string_view table, std::pair<std::uint64_t, std::uint64_t> baseline,
                       std::chrono::milliseconds bound)
{
    const std::string b = quote_bell(table), lock = liveness_lock("CONNECTION_ID()");
    const std::string mine = " FROM " + b + " WHERE conn = CONNECTION_ID()";
    std::string q =
        "SELECT CONNECTION_ID(), IS_USED_LOCK(" + lock + ") <=> CONNECTION_ID() OR GET_LOCK(" + lock +
        ", 0), @dlock_sleeper := COALESCE(@dlock_sleeper, UUID());\nSELECT b.name, b.rings, t.owner, t.fence FROM " +
        b + " AS b LEFT JOIN " + quote_table(table) +
        " AS t ON t.name = b.name AND t.expires_at > UTC_TIMESTAMP(6) WHERE b.conn = CONNECTION_ID()";
    if (baseline.first == ~std::uint64_t{0})
        return q;
    auto ms = std::max<std::int64_t>(bound.count(), 1);
    // The check reads the table in a statement of its own: a MEMORY table is locked for a
    // whole statement, and a ring's UPDATE must never wait out a SLEEP. A ring after the
    // check KILLs the SLEEP (a KILL QUERY holds for the rest of the query's statements).
    return q + ";\nSET @dlock_bell = (SELECT COUNT(*) = " + std::to_string(baseline.first) +
           " AND COALESCE(SUM(rings), 0) = " + std::to_string(baseline.second) + mine +
           ");\nSELECT SLEEP(IF(@dlock_bell, " + std::to_string(ms / 1000) + "." +
           std::to_string(1000 + ms % 1000).substr(1) + ", 0))";
}

bool decode_bell(const result& r, mariadb::detail::bell_reading& out)
{
    out = {};
    if (r.sets.empty())
        return true;  // nothing read
    if (r.sets[0].size() != 1 || r.sets[0][0].size() != 3 || !dlock::detail::cell_u64(r.sets[0][0][0], out.conn) ||
        !r.sets[0][0][2])
        return false;
    out.session = *r.sets[0][0][2];
    if (r.sets.size() < 2) {
        out.conn = 0;  // stopped before its rows: as if nothing was read
        return true;
    }
    for (const auto& row : r.sets[1]) {
        mariadb::detail::bell_row b;
        if (row.size() != 4 || !row[0] || !dlock::detail::cell_u64(row[1], b.rings) ||
            (row[2] && !dlock::detail::cell_u64(row[3], b.fence)))
            return false;
        b.name = *row[0];
        b.owner = row[2];
        out.rows.push_back(std::move(b));
    }
    return true;
}

std::string bell_enrol(std::string_view table, std::uint64_t conn, const std::vector<std::string>& names)
{
    const std::string b = quote_bell(table);
    std::string q = "INSERT INTO " + b + " (name, conn, rings) VALUES ";
    for (std::size_t i = 0; i < names.size(); ++i)
        q += (i ? ", (" : "(") + hex_literal(names[i]) + ", " + std::to_string(conn) + ", 0)";
    // Rows of sleepers gone without a word (a killed process) go in passing.
    return q + " ON DUPLICATE KEY UPDATE rings = 0;\nDELETE FROM " + b + " WHERE NOT (IS_USED_LOCK(" +
           liveness_lock("conn") + ") <=> conn) LIMIT 64";
}

std::string bell_leave(std::string_view table, std::uint64_t conn, const std::vector<std::string>& names)
{
    std::string q = "DELETE FROM " + quote_bell(table) + " WHERE conn = " + std::to_string(conn);
    if (names.empty())
        return q;
    q += " AND name IN (";
    for (std::size_t i = 0; i < names.size(); ++i)
        q += (i ? ", " : "") + hex_literal(names[i]);
    return q + ")";
}

std::string ring(std::string_view table, const std::string& name)
{
    const std::string b = quote_bell(table);
    return "BEGIN\n  DECLARE CONTINUE HANDLER FOR SQLEXCEPTION BEGIN END;\n  UPDATE " + b +
           " SET rings = rings + 1 WHERE name = " + name + ";\n  SELECT '" + std::string(ring_marker) +
           "', 'v1', GROUP_CONCAT(conn) FROM " + b + " WHERE name = " + name + ";\nEND";
}

std::vector<std::uint64_t> take_rings(result& r)
{
    std::vector<std::uint64_t> out;
    for (auto it = r.sets.begin(); it != r.sets.end();) {
        bool ring = it->size() == 1 && (*it)[0].size() == 3 && (*it)[0][0] == std::string(ring_marker) &&
                    (*it)[0][1] == std::string("v1");
        if (!ring) {
            ++it;
            continue;
        }
        const auto& list = (*it)[0][2];
        for (std::size_t pos = 0; list && pos < list->size();) {
            auto comma = list->find(',', pos);
            std::uint64_t id = 0;
            if (dlock::detail::cell_u64(list->substr(pos, comma - pos), id) && id != 0)
                out.push_back(id);
            pos = comma == std::string::npos ? list->size() : comma + 1;
        }
        it = r.sets.erase(it);
    }
    return out;
}

std::string kill_sleepers(std::string_view table, const std::vector<std::uint64_t>& conns)
{
    std::string q = "BEGIN NOT ATOMIC\n  DECLARE CONTINUE HANDLER FOR SQLEXCEPTION BEGIN END;\n";
    for (auto c : conns) {
        const auto id = std::to_string(c);
        q += "  IF IS_USED_LOCK(" + liveness_lock(id) + ") <=> " + id + " THEN KILL QUERY " + id +
             "; ELSE DELETE FROM " + quote_bell(table) + " WHERE conn = " + id + "; END IF;\n";
    }
    return q + "END";
}

std::string ring_statement(std::string_view table, const std::string& name)
{
    return "BEGIN NOT ATOMIC\n" + ring(table, name) + ";\nEND";
}

}  // namespace dlock::mariadb::sql
