// What the agent reports about its device at hello (uname, /proc).
#pragma once

#include <string>
#include <vector>

#include "agent/protocol/types.h"

namespace dfarm::agent {

// Fills everything but protocol_version and features. Never fails: a field
// that cannot be read is left empty (or 0).
DeviceInfo CollectDeviceInfo();

// The OpenCL devices of every platform (ListOpenClDevices, dlopen'ed): empty
// when the build has no OpenCL headers, the device no OpenCL library, or the
// platforms cannot be listed. Never fails.
std::vector<OpenClDeviceInfo> CollectOpenClDevices();

// Android-style ABI name for a uname machine: x86_64 -> "x86_64",
// aarch64 -> "arm64-v8a", armv7l -> "armeabi-v7a", i686 -> "x86"; others as is.
std::string AbiForMachine(const std::string& machine);

// PRETTY_NAME of an os-release file's text (else NAME + VERSION_ID), unquoted.
std::string ParseOsRelease(const std::string& text);

// The Android properties reported at hello, read with getprop when present.
inline constexpr const char* kAndroidProperties[] = {
    "ro.product.model",         "ro.product.manufacturer",
    "ro.soc.manufacturer",      "ro.soc.model",
    "ro.board.platform",        "ro.build.fingerprint",
    "ro.build.version.release", "ro.build.version.sdk"};

}  // namespace dfarm::agent
