// SPDX-License-Identifier: BSL-1.0
// dlock: distributed locks from the shell. See `dlock --help` and the README.
#include "cli/commands.hpp"
#include "cli/exit_status.hpp"
#include "cli/options.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include <cstdlib>
#include <exception>
#include <fstream>
#include <iostream>
#include <sstream>

namespace {

bool read_file(const std::string& path, std::string& text)
{
    std::ifstream in(path);
    if (!in)
        return false;
    std::ostringstream s;
    s << in.rdbuf();
    text = s.str();
    return !in.bad();
}

}  // namespace

int main(int argc, char** argv)
{
    using namespace dlock::cli;
    dlock::cli::options o;
    parse_error err;
    if (!parse(
            {argv + 1, argv + argc}, o, err, [](const char* k) { return std::getenv(k); }, read_file)) {
        std::cerr << "dlock: " << err.message << "\n";
        return exit_status::usage;
    }
    if (o.cmd == command::help) {
        std::cout << usage(o.help_topic);
        return exit_status::ok;
    }
    if (o.cmd == command::version) {
        std::cout << version_text();
        return exit_status::ok;
    }
    boost::asio::io_context io;
    auto st = open_store(o, io.get_executor());
    int rc = exit_status::internal;
    auto body = o.cmd == command::run      ? run_command(o, *st)
                : o.cmd == command::elect  ? elect_command(o, *st)
                : o.cmd == command::status ? status_command(o, *st)
                                           : release_command(o, *st);
    boost::asio::co_spawn(io, std::move(body), [&](std::exception_ptr e, int r) {
        rc = r;
        if (e) {
            rc = exit_status::internal;
            try {
                std::rethrow_exception(e);
            } catch (const std::exception& x) {
                std::cerr << "dlock: internal error: " << x.what() << "\n";
            }
        }
        st->close();  // lets io.run() return once the lock's background work is done
    });
    io.run();
    return rc;
}
