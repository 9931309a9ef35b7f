// SPDX-License-Identifier: BSL-1.0
/// @file
/// The PostgreSQL backend (dlock::postgres): leases as rows, fencing from a sequence, NOTIFY on release.
#pragma once

#include <dlock/postgres/config.hpp>
#include <dlock/postgres/store.hpp>
