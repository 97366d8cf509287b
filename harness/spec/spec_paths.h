// Paths as a sweep spec gives them (input_sets.cc defines these): shared by
// spec "inputs" and "eval".
#pragma once

#include <filesystem>
#include <string>

namespace dfarm::harness {

// `given` against the spec's folder when relative, lexically normal.
std::filesystem::path ResolveSpecPath(const std::string& given, const std::string& spec_folder);

// Whether `p` names an image the host decodes: .png, .jpg or .jpeg, any case.
bool IsImageFile(const std::filesystem::path& p);

}  // namespace dfarm::harness
