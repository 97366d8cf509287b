// What an agent said at hello (agent::DeviceInfo) as the store keeps it
// (store::DeviceRow): the one conversion, for the scheduler that records a
// device and `dfarm devices` that shows a live one.
#pragma once

#include <string>
#include <vector>

#include "agent/protocol/types.h"
#include "reports/store/store.h"

namespace dfarm::harness {

// The row of device `name` from its agent's description; node, tags, state
// and last_seen are left for the caller.
store::DeviceRow DeviceRowOf(const std::string& name, const agent::DeviceInfo& info);

// The agent's OpenCL devices in the store's form.
std::vector<store::OpenClDevice> OpenClDevicesOf(const agent::DeviceInfo& info);

}  // namespace dfarm::harness
