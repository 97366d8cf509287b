// AdbClient: our own client of the adb server (the `adb` package's server on
// 127.0.0.1:5037), spoken to through its smart-socket protocol (AOSP
// packages/modules/adb OVERVIEW.TXT, SERVICES.TXT, SYNC.TXT): each request is
// 4 hex digits of length + payload, answered "OKAY" or "FAIL" + 4 hex digits +
// message. Device services (`sync:`, `exec:`) go through `host:transport:SERIAL`
// on a fresh connection. Nothing here runs the `adb` binary except
// StartServer(). Each call opens its own connection, so one client may be used
// from several threads.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "agent/base/result.h"
#include "agent/base/unique_fd.h"

namespace dfarm::harness::adb {

struct ServerAddress {
  std::string host = "127.0.0.1";
  uint16_t port = 5037;
  std::string ToString() const { return host + ":" + std::to_string(port); }
};

// Parses ADB_SERVER_SOCKET's syntax: "tcp:PORT" or "tcp:HOST:PORT".
Result<ServerAddress> ParseServerSocket(const std::string& spec);
// $ADB_SERVER_SOCKET when set (an unparsable value is an error), else 127.0.0.1:5037.
Result<ServerAddress> ServerAddressFromEnv();

// One line of `host:devices-l`.
struct AdbDevice {
  std::string serial;
  std::string state;         // adb's word: device, unauthorized, offline, no permissions, ...
  std::string state_detail;  // the text after "no permissions", empty otherwise
  std::string usb;           // "1-2.3" (bus-port path) for USB devices, empty for TCP
  std::string product;
  std::string model;
  std::string device;
  std::string transport_id;
};

// Parses the text of a `host:devices-l` reply; lines it cannot read are skipped.
std::vector<AdbDevice> ParseDevicesL(const std::string& text);

// The answer to a sync STAT: all zero when the path does not exist.
struct RemoteStat {
  uint32_t mode = 0;
  uint32_t size = 0;
  uint32_t mtime = 0;
  bool exists() const { return mode != 0; }
};

class AdbClient {
 public:
  // `timeout` bounds connecting and each request/reply (not an exec stream's life).
  explicit AdbClient(ServerAddress server,
                     std::chrono::milliseconds timeout = std::chrono::seconds(10));

  const ServerAddress& server() const { return server_; }

  // host:version: the server's protocol version (41 for adb 29.0.6).
  Result<int> Version();
  // Runs `adb -P PORT start-server` (the one place the binary is used) when no
  // server answers on a loopback address; an error says how to start one.
  Result<void> EnsureServer();
  // host:devices-l.
  Result<std::vector<AdbDevice>> ListDevices();
  // host:connect:HOST:PORT; returns the server's sentence ("connected to ...").
  // The server answers OKAY even when it failed: the sentence says which.
  Result<std::string> Connect(const std::string& host_port);
  // host:disconnect:HOST:PORT.
  Result<std::string> Disconnect(const std::string& host_port);

  // Sync STAT of remote_path on the device `serial`.
  Result<RemoteStat> Stat(const std::string& serial, const std::string& remote_path);
  // Sync SEND: pushes local_path to remote_path with permission bits `mode`
  // (e.g. 0755) and modification time `mtime` (unix seconds). Returns bytes sent.
  Result<uint64_t> Push(const std::string& serial, const std::string& local_path,
                        const std::string& remote_path, uint32_t mode, uint32_t mtime);
  // Starts `exec:command` on the device: the returned socket carries the
  // command's stdin and stdout (and, as adbd does for exec:, its stderr) raw;
  // closing it ends the stream. The caller owns the fd; it is blocking with
  // no timeouts set.
  Result<agent::UniqueFd> Exec(const std::string& serial, const std::string& command);
  // Exec, then reads until the command closes the stream (at most max_bytes).
  Result<std::string> ExecOutput(const std::string& serial, const std::string& command,
                                 size_t max_bytes = 1 << 20);

 private:
  Result<agent::UniqueFd> Dial();
  // Sends one request and reads OKAY/FAIL.
  Result<void> Request(int fd, const std::string& request);
  // A host:* request whose reply is OKAY + 4-hex length + text.
  Result<std::string> HostQuery(const std::string& request);
  // A connection switched to the device's transport, then `service` opened.
  Result<agent::UniqueFd> OpenService(const std::string& serial, const std::string& service);

  ServerAddress server_;
  std::chrono::milliseconds timeout_;
};

// Quotes s for the device's /bin/sh (single quotes).
std::string ShellQuote(const std::string& s);

}  // namespace dfarm::harness::adb
