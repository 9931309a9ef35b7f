// SPDX-License-Identifier: BSL-1.0
/// @file
/// The etcd backend (dlock::etcd): etcd's own lock recipe through its JSON gateway.
#pragma once

#include <dlock/etcd/config.hpp>
#include <dlock/etcd/store.hpp>
