// SPDX-License-Identifier: BSL-1.0
/// @file
/// The MariaDB/MySQL backend (dlock::mariadb): leases as rows, fencing from a sequence, GET_LOCK wake-ups.
#pragma once

#include <dlock/mariadb/config.hpp>
#include <dlock/mariadb/store.hpp>
