// What the agent reports about its device at hello (uname, /proc).
#pragma once

#include <string>

#include "agent/client.h"

namespace dfarm::agent {

// Fills everything but protocol_version and features. Never fails: a field
// that cannot be read is left empty (or 0).
DeviceInfo CollectDeviceInfo();

// Android-style ABI name for a uname machine: x86_64 -> "x86_64",
// aarch64 -> "arm64-v8a", armv7l -> "armeabi-v7a", i686 -> "x86"; others as is.
std::string AbiForMachine(const std::string& machine);

}  // namespace dfarm::agent
