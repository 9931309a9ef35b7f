// SPDX-License-Identifier: BSL-1.0
/// @file
/// The memcached backend (dlock::memcached): an efficiency lock over memcached's meta protocol.
#pragma once

#include <dlock/memcached/config.hpp>
#include <dlock/memcached/store.hpp>
