// Helpers shared by the agent's tests: a temp folder removed at the end and
// shell-script "runners" put into an artifact store.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "agent/artifact_store.h"
#include "agent/sha256.h"

namespace dfarm::agent::testing {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "dfarm_agent_test.XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) abort();
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline std::string HashOf(const std::string& bytes) {
  Sha256 h;
  h.Update(bytes.data(), bytes.size());
  return h.FinishHex();
}

inline void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A runner that prints a valid ok document and echoes its argv to stderr.
inline const char* kOkRunner =
    "#!/bin/sh\n"
    "echo \"args: $*\" >&2\n"
    "echo '{\"status\":\"ok\",\"model\":\"m.tflite\",\"delegate\":\"cpu\",\"num_threads\":1,"
    "\"metrics\":{\"mean_us\":12.5,\"num_runs\":3},\"samples_us\":[12,13,12.5]}'\n";

}  // namespace dfarm::agent::testing
