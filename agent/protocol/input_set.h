// An input set as one artifact (docs/CONTRACTS.md, "Input set artifacts"):
// the input_<i>.bin files of one set of model inputs packed into one blob, so
// that a set travels to a device by one sha256 like a model, and the agent
// unpacks it into a folder the runner reads with --inputs. Both sides use this
// one codec: the host packs (harness/spec/input_sets.h), the agent unpacks.
//
// Layout (all integers little-endian):
//   8 bytes   magic "DFINSET1"
//   4 bytes   N, the number of files (1..kMaxInputSetFiles)
//   N x 8     the size in bytes of input_0.bin .. input_<N-1>.bin
//   then      the files' bytes, in order, nothing after them
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "agent/base/result.h"

namespace dfarm::agent {

inline constexpr std::string_view kInputSetMagic = "DFINSET1";
inline constexpr size_t kMaxInputSetFiles = 1024;
// The most input sets one job may name (JobSpec::input_set_sha256s).
inline constexpr size_t kMaxInputSetsPerJob = 256;

// Packs `files` (file i becomes input_<i>.bin). An empty list or more than
// kMaxInputSetFiles is an error.
Result<std::string> PackInputSet(const std::vector<std::string>& files);

// Splits a packed set back into its files; an error says what is malformed
// (bad magic, sizes that do not add up to the blob's length).
Result<std::vector<std::string>> UnpackInputSet(std::string_view blob);

// Unpacks the packed set in file `packed_path` into folder `dir` (created;
// 0700) as input_<i>.bin files.
Result<void> UnpackInputSetFile(const std::string& packed_path, const std::string& dir);

}  // namespace dfarm::agent
