// What end-to-end tests need to run a command and read what it printed:
// standard C++ and POSIX only (e2e_util.h adds agents, child processes and
// store counts on top).
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace dfarm::e2e {

// A file's whole contents ("" when it cannot be read).
inline std::string Slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// How a program that ran to the end ended: its exit code (-1 when it did
// not exit normally) and what it printed.
struct Outcome {
  int code = -1;
  std::string out;
  std::string err;
  std::string all() const { return out + err; }
};

// `program` and `args`, each single-quoted, for a shell (test paths and
// arguments hold no quotes).
inline std::string QuotedCommand(const std::filesystem::path& program,
                                 const std::vector<std::string>& args) {
  std::string cmd = "'" + program.string() + "'";
  for (const std::string& a : args) cmd += " '" + a + "'";
  return cmd;
}

// Runs the shell command `command` in folder `dir`, its stdout and stderr
// going to dir/stdout and dir/stderr, and returns how it ended.
inline Outcome RunShell(const std::filesystem::path& dir, const std::string& command) {
  const std::string cmd = "cd '" + dir.string() + "' && " + command + " >'" +
                          (dir / "stdout").string() + "' 2>'" + (dir / "stderr").string() + "'";
  const int status = std::system(cmd.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, Slurp(dir / "stdout"),
          Slurp(dir / "stderr")};
}

}  // namespace dfarm::e2e
