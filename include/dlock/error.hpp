// SPDX-License-Identifier: BSL-1.0
/// @file
/// Error codes of dlock: one category, one value per problem a caller can act on.
#pragma once

#include <dlock/export.hpp>

#include <boost/system/error_code.hpp>

#include <ostream>
#include <type_traits>

namespace dlock {

/// Errors reported by dlock. `boost::asio::error::operation_aborted` is never reused for
/// these: it means the caller cancelled, and nothing else.
enum class error {
    /// The connection failed while the request was in flight; it may or may not have run.
    connection_lost = 1,
    /// The operation did not complete within its configured timeout.
    timeout,
    /// The server's reply does not follow the store's protocol; the connection is reset.
    protocol_error,
    /// The server rejected AUTH: wrong password or ACL user.
    auth_failed,
    /// TCP or unix-socket connect failed (refused, unreachable, no such socket).
    connect_failed,
    /// Host name resolution failed.
    resolve_failed,
    /// The TLS handshake failed (wrong CA, bad certificate, not a TLS server).
    tls_failed,
    /// The server answered with an error reply; the reply text is kept in the response.
    server_error,
    /// The server rejected the connection's setup after it was opened (the store's
    /// last_error_text() says which step and why).
    handshake_failed,
    /// The object was closed or destroyed while the operation was pending.
    closed,
    /// A URL could not be parsed at all.
    invalid_url,
    /// The URL scheme is not one the chosen store accepts (the parser's message lists them).
    unsupported_scheme,
    /// The port is missing digits or out of range 1..65535.
    invalid_port,
    /// The database index is not a non-negative integer.
    invalid_database,
    /// A configuration option (URL query or JSON field) is unknown or has a bad value.
    invalid_option,
    /// A duration is not of the form 250ms, 5s, 2m or 1h (or plain milliseconds).
    invalid_duration,
    /// The request holds no command, or a reply did not have the expected shape.
    invalid_request,
    /// The lock name is empty or longer than the configured limit.
    invalid_name,
    /// The lease is zero, negative, or too short to outlive a store round trip.
    invalid_lease,
    /// The lease ended (expired, deleted or taken over) before it was released or renewed.
    lock_lost,
    /// The lock was held elsewhere and the caller asked not to wait.
    would_block,
    /// The guard holds nothing (already released, moved from, or never acquired).
    not_held,
    /// Too few nodes of a multi-node store (Redlock) answered to form a majority.
    no_quorum,
    /// Fewer replicas than required acknowledged a new lease within the WAIT timeout
    /// (redis_store_options::wait_replicas); the lease was given back.
    not_replicated,
    /// The server refused the operation for this user (a right the store needs is missing);
    /// the server's text is in store::last_error_text(). Permanent.
    permission_denied,
    /// A key the lock uses holds a value of another type (something else wrote it). Permanent.
    wrong_type,
    /// The server is temporarily unable to serve (loading its data, busy script, failover
    /// in progress, cluster down). Transient: retried.
    server_busy,
    /// Another operation of the same kind is already pending on this object (such as a second
    /// wait_lost on one guard).
    operation_in_progress,
    /// The handle is empty (a default-constructed lock): obtain it from a registry.
    invalid_handle,
    /// The store cannot serve this request (a lease kind it lacks, or a lease it cannot set).
    not_supported,
    /// The store's session ended: every lease it kept alive is gone.
    session_lost,
    /// The name is already used as another primitive, or as a semaphore with another number
    /// of permits: every user of a name must agree on what it is. Permanent.
    kind_mismatch,
    /// The name already exists at the store with another count (a latch created with a
    /// different count by another user of the name). Permanent.
    count_mismatch,
};

/// Whether a failed store operation may succeed if tried again unchanged (the connection
/// dropped, the server was busy, no majority answered). Anything else is permanent: a
/// waiting acquire fails with it instead of retrying. protocol_error is permanent: a
/// server (or proxy) that answers nonsense will go on doing so.
DLOCK_API bool is_transient(const boost::system::error_code& ec) noexcept;

/// The `dlock` error category.
DLOCK_API const boost::system::error_category& dlock_category() noexcept;

/// Makes an error_code in the `dlock` category.
inline boost::system::error_code make_error_code(error e) noexcept
{
    return {static_cast<int>(e), dlock_category()};
}

/// Prints the error's message (for logs and test diagnostics).
inline std::ostream& operator<<(std::ostream& os, error e)
{
    return os << make_error_code(e).message();
}

}  // namespace dlock

namespace boost::system {
/// Makes dlock::error convert to boost::system::error_code (through dlock::make_error_code).
template <>
struct is_error_code_enum<::dlock::error> : std::true_type {
};
}  // namespace boost::system
