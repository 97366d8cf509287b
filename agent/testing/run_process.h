// Runs a program as the tests of agent/runner do: through the shell, with
// its stdout and stderr in files, and reads what it left. Header only, no
// dependency beyond the C++ and POSIX libraries.
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace dfarm::agent::testing {

// A finished process: its exit code (-1 when a signal ended it), stdout and
// stderr.
struct ProcessOutput {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// The bytes of the file at `path` ("" when it cannot be read).
inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// `word` in single quotes for the shell (a quote inside closed, escaped and
// reopened).
inline std::string ShellQuote(const std::string& word) {
  std::string quoted = "'";
  for (char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

// Runs `words` (each quoted) after `prefix` (put in unquoted: "timeout -s
// KILL 5", "env -u VAR A=b"; may be empty), with stdout and stderr in
// stdout.txt and stderr.txt under `dir`, and waits for it.
inline ProcessOutput RunQuoted(const std::vector<std::string>& words, const std::string& dir,
                               const std::string& prefix = "") {
  std::string cmd = prefix;
  for (const std::string& w : words) cmd += (cmd.empty() ? "" : " ") + ShellQuote(w);
  const std::string out = dir + "/stdout.txt", err = dir + "/stderr.txt";
  cmd += " >" + ShellQuote(out) + " 2>" + ShellQuote(err);
  const int status = std::system(cmd.c_str());
  ProcessOutput p;
  p.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  p.out = ReadFile(out);
  p.err = ReadFile(err);
  return p;
}

}  // namespace dfarm::agent::testing
