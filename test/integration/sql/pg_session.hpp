// SPDX-License-Identifier: BSL-1.0
// A libpq session of a test's own on the executable's PostgreSQL, to hold rows in
// transactions the stores then wait behind.
#pragma once

#include "integration/sql/postgres_family.hpp"

#include <boost/test/unit_test.hpp>

#include <libpq-fe.h>

#include <string>
#include <vector>

namespace dlock::test {

struct pg_session {
    PGconn* raw = PQconnectdb(pg_server().url().c_str());
    pg_session() { BOOST_REQUIRE(PQstatus(raw) == CONNECTION_OK); }
    ~pg_session() { PQfinish(raw); }
    pg_session(const pg_session&) = delete;
    pg_session& operator=(const pg_session&) = delete;
    // The first cell of the answer ("" if none).
    std::string exec(const std::string& sql, std::vector<const char*> params = {})
    {
        PGresult* r = PQexecParams(raw, sql.c_str(), static_cast<int>(params.size()), nullptr, params.data(), nullptr,
                                   nullptr, 0);
        auto status = PQresultStatus(r);
        std::string first = PQntuples(r) > 0 ? PQgetvalue(r, 0, 0) : "";
        PQclear(r);
        BOOST_TEST((status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK), PQerrorMessage(raw));
        return first;
    }
};

}  // namespace dlock::test
