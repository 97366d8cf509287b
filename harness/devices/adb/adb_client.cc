#include "harness/devices/adb/adb_client.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

extern char** environ;

namespace dfarm::harness::adb {
namespace {

using agent::UniqueFd;

constexpr size_t kSyncDataMax = 64 * 1024;  // SYNC.TXT: DATA chunks are at most 64 KiB
constexpr size_t kMaxReply = 1 << 20;

std::string ErrnoText() { return std::strerror(errno); }

bool WriteAll(int fd, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::send(fd, p, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// Reads exactly size bytes; false on EOF, error or timeout (errno says which).
bool ReadAll(int fd, void* data, size_t size) {
  char* p = static_cast<char*>(data);
  while (size > 0) {
    ssize_t n = ::recv(fd, p, size, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) errno = ECONNRESET;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

void SetTimeouts(int fd, std::chrono::milliseconds t) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(t.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((t.count() % 1000) * 1000);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

void PutLe32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint32_t GetLe32(const unsigned char* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

// Reads a 4-hex-digit length and that many bytes.
Result<std::string> ReadHexString(int fd, const std::string& what) {
  char len_hex[5] = {};
  if (!ReadAll(fd, len_hex, 4)) return MakeError(what + ": reply cut short: " + ErrnoText());
  char* end = nullptr;
  unsigned long len = std::strtoul(len_hex, &end, 16);
  if (end != len_hex + 4) {
    return MakeError(what + ": bad length '" + std::string(len_hex, 4) + "' in reply");
  }
  std::string s(len, '\0');
  if (len > 0 && !ReadAll(fd, s.data(), len)) {
    return MakeError(what + ": reply cut short: " + ErrnoText());
  }
  return s;
}

bool IsLoopback(const std::string& host) {
  return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1";
}

}  // namespace

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out.push_back(c);
    }
  }
  return out + "'";
}

Result<ServerAddress> ParseServerSocket(const std::string& spec) {
  auto bad = [&](const std::string& why) {
    return MakeError("bad adb server socket '" + spec + "' (ADB_SERVER_SOCKET): " + why +
                     "; expected tcp:PORT or tcp:HOST:PORT");
  };
  if (spec.rfind("tcp:", 0) != 0) return bad("only tcp: is supported");
  std::string rest = spec.substr(4);
  ServerAddress a;
  size_t colon = rest.rfind(':');
  std::string port_text = rest;
  if (colon != std::string::npos) {
    a.host = rest.substr(0, colon);
    port_text = rest.substr(colon + 1);
    if (a.host.size() > 2 && a.host.front() == '[' && a.host.back() == ']') {
      a.host = a.host.substr(1, a.host.size() - 2);
    }
    if (a.host.empty()) return bad("empty host");
  }
  char* end = nullptr;
  unsigned long port = std::strtoul(port_text.c_str(), &end, 10);
  if (port_text.empty() || *end != '\0' || port == 0 || port > 65535) return bad("bad port");
  a.port = static_cast<uint16_t>(port);
  return a;
}

Result<ServerAddress> ServerAddressFromEnv() {
  const char* env = std::getenv("ADB_SERVER_SOCKET");
  if (env && *env) return ParseServerSocket(env);
  return ServerAddress{};
}

std::vector<AdbDevice> ParseDevicesL(const std::string& text) {
  std::vector<AdbDevice> out;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    size_t p = line.find_first_of(" \t");
    if (line.empty() || p == 0 || p == std::string::npos) continue;
    AdbDevice d;
    d.serial = line.substr(0, p);
    p = line.find_first_not_of(" \t", p);
    if (p == std::string::npos) continue;
    std::string rest = line.substr(p);
    static const std::string kNoPerm = "no permissions";
    std::vector<std::string> tokens;
    {
      std::istringstream ts(rest);
      std::string t;
      while (ts >> t) tokens.push_back(t);
    }
    size_t first_kv = 1;
    if (rest.rfind(kNoPerm, 0) == 0) {
      d.state = kNoPerm;
      // The detail runs up to the first key:value token adb appends.
      std::string detail;
      first_kv = 2;
      while (first_kv < tokens.size() && tokens[first_kv].rfind("usb:", 0) != 0 &&
             tokens[first_kv].rfind("transport_id:", 0) != 0) {
        if (!detail.empty()) detail += ' ';
        detail += tokens[first_kv++];
      }
      d.state_detail = detail;
    } else {
      d.state = tokens[0];
    }
    for (size_t i = first_kv; i < tokens.size(); ++i) {
      const std::string& t = tokens[i];
      size_t c = t.find(':');
      if (c == std::string::npos) continue;
      std::string key = t.substr(0, c), value = t.substr(c + 1);
      if (key == "usb") d.usb = value;
      if (key == "product") d.product = value;
      if (key == "model") d.model = value;
      if (key == "device") d.device = value;
      if (key == "transport_id") d.transport_id = value;
    }
    out.push_back(std::move(d));
  }
  return out;
}

AdbClient::AdbClient(ServerAddress server, std::chrono::milliseconds timeout)
    : server_(std::move(server)), timeout_(timeout) {}

Result<UniqueFd> AdbClient::Dial() {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  std::string port = std::to_string(server_.port);
  int rc = ::getaddrinfo(server_.host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0) {
    return MakeError("adb server at " + server_.ToString() +
                     ": cannot resolve host: " + ::gai_strerror(rc));
  }
  std::string last = "no address";
  for (addrinfo* ai = res; ai; ai = ai->ai_next) {
    UniqueFd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
    if (!fd) continue;
    SetTimeouts(fd.get(), timeout_);
    if (::connect(fd.get(), ai->ai_addr, ai->ai_addrlen) == 0) {
      ::freeaddrinfo(res);
      int one = 1;
      ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      return fd;
    }
    last = ErrnoText();
  }
  ::freeaddrinfo(res);
  return MakeError("adb server at " + server_.ToString() + " is not reachable: " + last);
}

Result<void> AdbClient::Request(int fd, const std::string& request) {
  if (request.size() > 0xffff) return MakeError("adb request too long: " + request.substr(0, 40));
  char len[5];
  std::snprintf(len, sizeof len, "%04zx", request.size());
  std::string frame = std::string(len, 4) + request;
  if (!WriteAll(fd, frame.data(), frame.size())) {
    return MakeError("adb server at " + server_.ToString() + ": cannot send '" + request +
                     "': " + ErrnoText());
  }
  char status[4];
  if (!ReadAll(fd, status, 4)) {
    return MakeError("adb server at " + server_.ToString() + ": no answer to '" + request +
                     "': " + ErrnoText());
  }
  if (std::memcmp(status, "OKAY", 4) == 0) return Ok();
  if (std::memcmp(status, "FAIL", 4) == 0) {
    auto message = ReadHexString(fd, "adb server at " + server_.ToString());
    return MakeError("adb server refused '" + request +
                     "': " + (message ? *message : message.message()));
  }
  return MakeError("adb server at " + server_.ToString() + ": unexpected answer '" +
                   std::string(status, 4) + "' to '" + request + "'");
}

Result<std::string> AdbClient::HostQuery(const std::string& request) {
  auto fd = Dial();
  if (!fd) return fd.error();
  if (auto r = Request(fd->get(), request); !r) return r.error();
  return ReadHexString(fd->get(), "adb server at " + server_.ToString() + " ('" + request + "')");
}

Result<int> AdbClient::Version() {
  auto text = HostQuery("host:version");
  if (!text) return text.error();
  char* end = nullptr;
  long v = std::strtol(text->c_str(), &end, 16);
  if (text->empty() || *end != '\0') {
    return MakeError("adb server at " + server_.ToString() + ": bad version '" + *text + "'");
  }
  return static_cast<int>(v);
}

Result<void> AdbClient::EnsureServer() {
  auto v = Version();
  if (v) return Ok();
  if (!IsLoopback(server_.host)) return v.error();
  std::string port = std::to_string(server_.port);
  std::vector<std::string> args = {"adb", "-P", port, "start-server"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  // The server's "daemon started" chatter goes to our stderr, not stdout.
  posix_spawn_file_actions_adddup2(&actions, STDERR_FILENO, STDOUT_FILENO);
  int rc = ::posix_spawnp(&pid, "adb", &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    return MakeError("adb server at " + server_.ToString() +
                     " is not running and `adb start-server` could not run (" + std::strerror(rc) +
                     "); install the adb package or start a server");
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  v = Version();
  if (v) return Ok();
  return MakeError("adb server at " + server_.ToString() + " is not running and `adb -P " + port +
                   " start-server` did not start it: " + v.message());
}

Result<std::vector<AdbDevice>> AdbClient::ListDevices() {
  auto text = HostQuery("host:devices-l");
  if (!text) return text.error();
  return ParseDevicesL(*text);
}

Result<std::string> AdbClient::Connect(const std::string& host_port) {
  return HostQuery("host:connect:" + host_port);
}

Result<std::string> AdbClient::Disconnect(const std::string& host_port) {
  return HostQuery("host:disconnect:" + host_port);
}

Result<UniqueFd> AdbClient::OpenService(const std::string& serial, const std::string& service) {
  auto fd = Dial();
  if (!fd) return fd.error();
  if (auto r = Request(fd->get(), "host:transport:" + serial); !r) {
    return MakeError("adb device '" + serial + "': " + r.message());
  }
  if (auto r = Request(fd->get(), service); !r) {
    return MakeError("adb device '" + serial + "': " + r.message());
  }
  return std::move(*fd);
}

namespace {

// Reads one sync reply header: id + le32.
Result<std::pair<std::string, uint32_t>> ReadSyncHeader(int fd, const std::string& what) {
  unsigned char h[8];
  if (!ReadAll(fd, h, 8)) return MakeError(what + ": sync reply cut short: " + ErrnoText());
  return std::make_pair(std::string(reinterpret_cast<char*>(h), 4), GetLe32(h + 4));
}

Result<std::string> ReadSyncFail(int fd, uint32_t len, const std::string& what) {
  if (len > kMaxReply) return MakeError(what + ": sync FAIL message too long");
  std::string msg(len, '\0');
  if (len > 0 && !ReadAll(fd, msg.data(), len)) {
    return MakeError(what + ": sync reply cut short: " + ErrnoText());
  }
  return msg;
}

void SendQuit(int fd) {
  std::string quit = "QUIT";
  PutLe32(quit, 0);
  WriteAll(fd, quit.data(), quit.size());
}

}  // namespace

Result<RemoteStat> AdbClient::Stat(const std::string& serial, const std::string& remote_path) {
  std::string what = "adb device '" + serial + "': stat '" + remote_path + "'";
  auto fd = OpenService(serial, "sync:");
  if (!fd) return fd.error();
  std::string req = "STAT";
  PutLe32(req, static_cast<uint32_t>(remote_path.size()));
  req += remote_path;
  if (!WriteAll(fd->get(), req.data(), req.size())) {
    return MakeError(what + ": cannot send: " + ErrnoText());
  }
  unsigned char r[16];
  if (!ReadAll(fd->get(), r, sizeof r))
    return MakeError(what + ": reply cut short: " + ErrnoText());
  if (std::memcmp(r, "STAT", 4) != 0) {
    return MakeError(what + ": unexpected sync reply '" +
                     std::string(reinterpret_cast<char*>(r), 4) + "'");
  }
  SendQuit(fd->get());
  return RemoteStat{GetLe32(r + 4), GetLe32(r + 8), GetLe32(r + 12)};
}

Result<uint64_t> AdbClient::Push(const std::string& serial, const std::string& local_path,
                                 const std::string& remote_path, uint32_t mode, uint32_t mtime) {
  std::string what =
      "adb device '" + serial + "': push '" + local_path + "' to '" + remote_path + "'";
  std::ifstream in(local_path, std::ios::binary);
  if (!in) return MakeError(what + ": cannot open the local file");
  std::string spec = remote_path + "," + std::to_string((mode & 07777) | S_IFREG);
  if (spec.size() > 1024) return MakeError(what + ": remote path too long (1024 bytes at most)");
  auto fd = OpenService(serial, "sync:");
  if (!fd) return fd.error();
  std::string msg = "SEND";
  PutLe32(msg, static_cast<uint32_t>(spec.size()));
  msg += spec;
  if (!WriteAll(fd->get(), msg.data(), msg.size())) {
    return MakeError(what + ": cannot send: " + ErrnoText());
  }
  uint64_t sent = 0;
  std::string chunk(8 + kSyncDataMax, '\0');
  while (in) {
    in.read(chunk.data() + 8, static_cast<std::streamsize>(kSyncDataMax));
    size_t n = static_cast<size_t>(in.gcount());
    if (n == 0) break;
    std::memcpy(chunk.data(), "DATA", 4);
    std::string len;
    PutLe32(len, static_cast<uint32_t>(n));
    std::memcpy(chunk.data() + 4, len.data(), 4);
    if (!WriteAll(fd->get(), chunk.data(), 8 + n)) {
      // The device may have failed the SEND early and said why.
      auto h = ReadSyncHeader(fd->get(), what);
      if (h && h->first == "FAIL") {
        auto m = ReadSyncFail(fd->get(), h->second, what);
        return MakeError(what + ": the device refused: " + (m ? *m : m.message()));
      }
      return MakeError(what + ": cannot send data: " + ErrnoText());
    }
    sent += n;
  }
  if (in.bad()) return MakeError(what + ": cannot read the local file");
  std::string done = "DONE";
  PutLe32(done, mtime);
  if (!WriteAll(fd->get(), done.data(), done.size())) {
    return MakeError(what + ": cannot send: " + ErrnoText());
  }
  auto h = ReadSyncHeader(fd->get(), what);
  if (!h) return h.error();
  if (h->first == "FAIL") {
    auto m = ReadSyncFail(fd->get(), h->second, what);
    return MakeError(what + ": the device refused: " + (m ? *m : m.message()));
  }
  if (h->first != "OKAY") return MakeError(what + ": unexpected sync reply '" + h->first + "'");
  SendQuit(fd->get());
  return sent;
}

Result<UniqueFd> AdbClient::Exec(const std::string& serial, const std::string& command) {
  auto fd = OpenService(serial, "exec:" + command);
  if (!fd) return fd.error();
  SetTimeouts(fd->get(), std::chrono::milliseconds(0));
  return std::move(*fd);
}

Result<std::string> AdbClient::ExecOutput(const std::string& serial, const std::string& command,
                                          size_t max_bytes) {
  auto fd = OpenService(serial, "exec:" + command);
  if (!fd) return fd.error();
  // No shutdown(SHUT_WR): the server takes a half-close for the end of the
  // whole stream and would close the command before it printed anything.
  std::string out;
  char buf[16384];
  while (out.size() < max_bytes) {
    ssize_t n = ::recv(fd->get(), buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return MakeError("adb device '" + serial + "': exec '" + command + "': " + ErrnoText());
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  if (out.size() > max_bytes) out.resize(max_bytes);
  return out;
}

}  // namespace dfarm::harness::adb
