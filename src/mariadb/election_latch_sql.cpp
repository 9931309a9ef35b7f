// SPDX-License-Identifier: BSL-1.0
#include "mariadb/election_latch_sql.hpp"

#include <dlock/error.hpp>

#include "common/sql_cells.hpp"
#include "mariadb/bell_sql.hpp"

namespace dlock::mariadb::sql {

using boost::system::error_code;

namespace {

std::string quote_latch(std::string_view table)
{
    return dlock::detail::quote_qualified(table, "_latch", '`');
}

std::string quote_member(std::string_view table)
{
    return dlock::detail::quote_qualified(table, "_latch_member", '`');
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

std::string optional(const std::string& create)
{
    return "  BEGIN\n    DECLARE CONTINUE HANDLER FOR SQLEXCEPTION BEGIN END;\n    " + create + ";\n  END;\n";
}

constexpr dlock::detail::bool_cells booleans{"1", "0"};

}  // namespace

std::string election_latch_setup(std::string_view table)
{
    const std::string t = quote_table(table);
    // Columns only elections need: added if missing; a user who may not (the table's owner
    // must) gets locks, and elections fail by themselves with the server's words.
    return "  IF NOT EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = " + schema_of(table) +
           " AND table_name = '" + bare(table) + "' AND column_name = 'value') THEN\n" +
           optional("ALTER TABLE " + t +
                    " ADD COLUMN IF NOT EXISTS value MEDIUMBLOB NULL,"
                    " ADD COLUMN IF NOT EXISTS value_owner VARBINARY(255) NULL") +
           "  END IF;\n" +
           optional("CREATE TABLE IF NOT EXISTS " + quote_latch(table) +
                    " (name VARBINARY(2000) NOT NULL PRIMARY KEY, count BIGINT UNSIGNED NOT NULL,"
                    " expires_at DATETIME(6) NOT NULL) ENGINE=InnoDB") +
           // Members by their SHA-256: a name and a member of 2000 bytes each would not fit one key.
           optional("CREATE TABLE IF NOT EXISTS " + quote_member(table) +
                    " (name VARBINARY(2000) NOT NULL, member BINARY(32) NOT NULL, PRIMARY KEY (name, member))"
                    " ENGINE=InnoDB");
}

std::string leader_acquire(std::string_view table, std::string_view name, std::string_view token,
                           std::chrono::milliseconds ttl)
{
    return acquire(table, name, token, ttl, true);
}

std::string proclaim(std::string_view table, std::string_view name, std::string_view token, std::string_view value)
{
    const std::string t = quote_table(table), n = hex_literal(name), tok = hex_literal(token);
    // The row locked while it is checked: only the live owner writes, and observers are rung.
    return "BEGIN NOT ATOMIC\n  DECLARE v INT DEFAULT 0;\n"
           "  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;\n  START TRANSACTION;\n"
           "  SELECT COUNT(*) INTO v FROM " +
           t + " WHERE name = " + n + " AND owner = " + tok + " AND expires_at > UTC_TIMESTAMP(6) FOR UPDATE;\n" +
           "  IF v > 0 THEN UPDATE " + t + " SET value = " + hex_literal(value) + ", value_owner = " + tok +
           " WHERE name = " + n + "; END IF;\n  COMMIT;\n  IF v > 0 THEN\n  " + ring(table, n) +
           ";\n  END IF;\n  SELECT v > 0;\nEND";
}

std::string leader(std::string_view table, std::string_view name)
{
    return "SELECT t.owner, t.fence, GREATEST(0, CEIL(TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), t.expires_at) /"
           " 1000)), t.expires_at > UTC_TIMESTAMP(6), " +
           queued_count(table) + ", IF(t.value_owner = t.owner, t.value, NULL) FROM " + quote_table(table) +
           " AS t WHERE t.name = " + hex_literal(name);
}

std::string count_down(std::string_view table, std::string_view name, std::string_view member, std::uint64_t count,
                       std::chrono::milliseconds ttl)
{
    const std::string l = quote_latch(table), m = quote_member(table), n = hex_literal(name), c = std::to_string(count),
                      end = " + INTERVAL " + std::to_string(ttl.count()) + " * 1000 MICROSECOND";
    // In the latch's turn (its row, locked; made if missing): members counted once each, the
    // count that completes the latch seen by exactly one call, which rings; an expired latch
    // dropped before it is counted again; a few other expired ones swept in passing, only
    // those whose turn is free (never waiting for another latch while holding this one).
    return "BEGIN NOT ATOMIC\n  DECLARE v_now DATETIME(6);\n  DECLARE v_count BIGINT UNSIGNED;\n"
           "  DECLARE v_expired INT;\n  DECLARE v_n BIGINT UNSIGNED DEFAULT 0;\n  DECLARE v_ok INT DEFAULT 1;\n"
           "  DECLARE v_rang INT DEFAULT 0;\n"
           "  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;\n"
           "  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;\n  START TRANSACTION;\n  INSERT INTO " +
           l + " (name, count, expires_at) VALUES (" + n + ", " + c + ", UTC_TIMESTAMP(6)" + end +
           ") ON DUPLICATE KEY UPDATE name = VALUES(name);\n  SET v_now = UTC_TIMESTAMP(6);\n"
           "  SELECT count, expires_at <= v_now INTO v_count, v_expired FROM " +
           l + " WHERE name = " + n + ";\n  IF v_expired THEN DELETE FROM " + m + " WHERE name = " + n +
           "; SET v_count = " + c + "; END IF;\n  IF v_count <> " + c +
           " THEN\n    SET v_ok = 0;\n  ELSE\n    UPDATE " + l + " SET count = " + c + ", expires_at = v_now" + end +
           " WHERE name = " + n + ";\n    SET v_n = (SELECT COUNT(*) FROM " + m + " WHERE name = " + n +
           ");\n    IF v_n < " + c + " THEN\n      INSERT INTO " + m + " (name, member) VALUES (" + n +
           ", UNHEX(SHA2(" + hex_literal(member) +
           ", 256))) ON DUPLICATE KEY UPDATE name = VALUES(name);\n      IF ROW_COUNT() = 1 THEN\n"
           "        SET v_n = v_n + 1;\n        IF v_n = " +
           c + " THEN SET v_rang = 1; END IF;\n      END IF;\n    END IF;\n  END IF;\n  FOR x IN (SELECT name FROM " +
           l + " WHERE expires_at <= v_now AND name <> " + n + " LIMIT 8 FOR UPDATE SKIP LOCKED) DO\n    DELETE FROM " +
           m + " WHERE name = x.name;\n    DELETE FROM " + l +
           " WHERE name = x.name;\n  END FOR;\n  COMMIT;\n  IF v_rang = 1 THEN\n  " + ring(table, n) +
           ";\n  END IF;\n  SELECT v_ok, IF(v_ok = 1, " + c + " - v_n, v_count);\nEND";
}

std::string latch_read(std::string_view table, std::string_view name)
{
    const std::string n = hex_literal(name);
    return "SELECT l.count, (SELECT COUNT(*) FROM " + quote_member(table) + " AS m WHERE m.name = l.name) FROM " +
           quote_latch(table) + " AS l WHERE l.name = " + n + " AND l.expires_at > UTC_TIMESTAMP(6)";
}

bool decode_proclaim(const result& r, bool& written)
{
    written = false;
    return r.sets.size() == 1 && r.sets[0].size() == 1 && r.sets[0][0].size() == 1 &&
           dlock::detail::cell_bool(r.sets[0][0][0], booleans, written);
}

bool decode_leader(const result& r, lock_status& out)
{
    if (r.sets.size() != 1 || r.sets[0].size() > 1)
        return false;
    if (r.sets[0].empty()) {
        out.held = false;
        out.ttl = std::chrono::milliseconds(-1);
        return true;
    }
    result head = r;
    auto value = head.sets[0][0].back();
    if (head.sets[0][0].size() != 6)
        return false;
    head.sets[0][0].pop_back();
    if (!decode_status(head, out))
        return false;
    // A leader that has proclaimed nothing yet has no value; nobody holding, none either.
    if (out.held && value)
        out.value = *value;
    return true;
}

error_code decode_count_down(const result& r, std::uint64_t& remaining)
{
    bool counted = false;
    if (r.sets.size() != 1 || r.sets[0].size() != 1 || r.sets[0][0].size() != 2 ||
        !dlock::detail::cell_bool(r.sets[0][0][0], booleans, counted) ||
        !dlock::detail::cell_u64(r.sets[0][0][1], remaining) || remaining > max_latch_count)
        return error::protocol_error;
    return counted ? error_code() : error_code(error::count_mismatch);
}

bool decode_latch_state(const result& r, dlock::latch_state& out)
{
    out = {};
    if (r.sets.size() != 1)
        return false;
    const auto& rows = r.sets[0];
    if (rows.empty())
        return true;  // no latch (never counted down, or expired)
    std::uint64_t members = 0;
    if (rows.size() != 1 || rows[0].size() != 2 || !dlock::detail::cell_u64(rows[0][0], out.count) ||
        !dlock::detail::cell_u64(rows[0][1], members) || members > out.count)
        return false;
    out.remaining = out.count - members;
    return true;
}

}  // namespace dlock::mariadb::sql
