// SPDX-License-Identifier: BSL-1.0
#include <dlock/error.hpp>

#include <string>

namespace dlock {
namespace {

class category final : public boost::system::error_category {
public:
    const char* name() const noexcept override { return "dlock"; }

    std::string message(int ev) const override
    {
        // Every store returns these: no message names one store or its protocol; the store's
        // own words (the server's text, the schemes it takes) are in its diagnostics
        // (store::last_error_text, lock::diagnostics) or the parser's message.
        switch (static_cast<error>(ev)) {
        case error::connection_lost:
            return "connection to the server was lost while the request was in flight; it may or may not have run";
        case error::timeout: return "operation timed out; raise the timeout or check the server's load";
        case error::protocol_error:
            return "the server's reply does not follow the store's protocol, and the connection was reset: check that "
                   "the URL points at a server of that store (not a proxy or another service)";
        case error::auth_failed: return "authentication failed: check the user name and password";
        case error::connect_failed:
            return "could not connect: check host, port or socket path and that the server runs";
        case error::resolve_failed: return "could not resolve the host name: check its spelling and the resolver";
        case error::tls_failed:
            return "TLS handshake failed: check the CA file, certificates and that the server speaks TLS";
        case error::server_error:
            return "the server answered with an error; its own text is kept apart (the reply, or the store's "
                   "last_error_text())";
        case error::handshake_failed:
            return "the server refused to set up the connection after it was opened: the store's last_error_text() "
                   "has its reason (check the database, namespace or session settings in the URL)";
        case error::closed: return "the object was closed while the operation was pending";
        case error::invalid_url:
            return "invalid URL: check it against the store's URL format (the parser's message says what is wrong)";
        case error::unsupported_scheme:
            return "unsupported URL scheme: use a scheme of the chosen store (the parser's message lists them)";
        case error::invalid_port: return "invalid port: expected a number from 1 to 65535";
        case error::invalid_database: return "invalid database number: expected a non-negative integer";
        case error::invalid_option: return "invalid configuration option: unknown name or bad value";
        case error::invalid_duration:
            return "invalid duration: expected a number with unit ms, s, m or h (e.g. 500ms, 30s)";
        case error::invalid_request: return "invalid request or unexpected reply shape";
        case error::invalid_name:
            return "invalid lock name: must be non-empty and within the configured maximum length";
        case error::invalid_lease: return "invalid lease: must be positive and well above the store round-trip time";
        case error::lock_lost: return "the lock's lease was lost (expired or taken) before it was released";
        case error::would_block: return "the lock is held elsewhere";
        case error::not_held: return "the guard holds no lock";
        case error::no_quorum:
            return "too few of the store's nodes answered to form a majority: check that most of them are up and "
                   "reachable";
        case error::not_replicated:
            return "too few replicas acknowledged the lock in time: check the replicas, or ask the store for fewer "
                   "acknowledgements";
        case error::permission_denied:
            return "the server refused the operation for this user: grant it the rights the store needs (the "
                   "README lists them per store); the store's last_error_text() has the server's words and the "
                   "way out";
        case error::wrong_type:
            return "an entry the lock uses at the store holds data of another kind: another program writes under "
                   "this namespace; choose another namespace or remove the entry";
        case error::server_busy: return "the server is temporarily unable to serve (loading, busy, failing over)";
        case error::operation_in_progress: return "an operation of the same kind is already pending on this object";
        case error::invalid_handle: return "the handle is empty (default-constructed): obtain it from a registry";
        case error::not_supported:
            return "the store cannot serve this request: it lacks this primitive or setting (the README lists "
                   "what each store offers)";
        case error::session_lost: return "the store's session ended, and every lease it kept alive with it";
        case error::kind_mismatch:
            return "the name is in use as another primitive, or as a semaphore with another number of permits";
        case error::count_mismatch:
            return "the latch exists at the store with a different count: every user of a name must give the "
                   "same count (or use another name)";
        }
        return "unknown dlock error";
    }
};

}  // namespace

bool is_transient(const boost::system::error_code& ec) noexcept
{
    if (ec.category() != dlock_category())
        return false;
    switch (static_cast<error>(ec.value())) {
    case error::connection_lost:
    case error::timeout:
    case error::connect_failed:
    case error::resolve_failed:
    case error::no_quorum:
    case error::not_replicated:
    case error::server_busy: return true;
    default: return false;
    }
}

const boost::system::error_category& dlock_category() noexcept
{
    static const category cat;
    return cat;
}

}  // namespace dlock
