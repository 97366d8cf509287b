// libFuzzer target for the agent's message state machine: the input is the
// byte stream a host sends on one connection (length-prefixed frames, as in
// the frame fuzzer's corpus), after a valid Hello that offers every feature.
// An in-process agent (Server, stdio transport: ServeStream) serves it over a
// socketpair with a temporary store: uploads, Have/Put*, RunJob, CancelJob,
// Ping/Pong, device state, in any order and with any fields. It must not
// crash, hang or trip a sanitizer, must end when the host closes its side,
// and must reply a bounded amount. Jobs never run an uploaded runner: the
// runner prefix is /bin/false, so a job ends at once (the runner stays out).
// Built only with -DDFARM_BUILD_FUZZERS=ON and clang; see README.md here.
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "agent/daemon/server.h"
#include "agent/protocol/features.h"
#include "agent/protocol/framing.h"
#include "agent/protocol/messages.h"
#include "agent/protocol/protocol.h"

namespace dfarm::agent {
namespace {

// Replies per input are bounded by this many bytes per input byte, plus a
// fixed allowance (HelloReply with the device info, error replies, results).
constexpr size_t kReplyBytesPerInputByte = 64;
constexpr size_t kReplyAllowance = size_t{1} << 20;

const std::string& StoreDir() {
  static const std::string* dir = [] {
    char tmpl[] = "/tmp/dfarm-session-fuzz-XXXXXX";
    const char* made = ::mkdtemp(tmpl);
    if (made == nullptr) std::abort();
    static std::string root = made;
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(root, ignored);
    });
    return new std::string(root + "/store");
  }();
  return *dir;
}

std::vector<uint8_t> HelloFrame() {
  flatbuffers::FlatBufferBuilder fbb;
  std::vector<std::string> features;
  for (std::string_view f : kKnownFeatures) features.emplace_back(f);
  auto names = fbb.CreateVectorOfStrings(features);
  FinishFrame(fbb, 1, wire::CreateHello(fbb, kProtocolVersion, names));
  return {fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize()};
}

void FuzzOne(const uint8_t* data, size_t size) {
  ServerOptions options;
  options.stdio = true;
  options.store_dir = StoreDir();
  options.quota_bytes = size_t{64} << 20;
  options.hello_timeout = std::chrono::milliseconds(2000);
  options.heartbeat_interval = std::chrono::milliseconds(1000);
  options.progress_interval = std::chrono::milliseconds(100);
  options.supervisor.record_device_state = false;
  options.supervisor.runner_prefix = {"/bin/false"};
  options.supervisor.max_timeout_ms = 1000;
  auto server = Server::Create(options);
  if (!server.ok()) std::abort();  // the temporary store must open

  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) std::abort();
  const int host = fds[0], agent_fd = fds[1];

  size_t replied = 0;
  std::thread drain([&] {
    uint8_t buf[65536];
    for (;;) {
      const ssize_t n = ::read(host, buf, sizeof buf);
      if (n <= 0) break;
      replied += static_cast<size_t>(n);
    }
  });
  std::thread serve([&] {
    server.value()->ServeStream(agent_fd, agent_fd);
    ::shutdown(agent_fd, SHUT_WR);  // the drain ends
  });

  const std::vector<uint8_t> hello = HelloFrame();
  bool sent = WriteFrame(host, hello.data(), hello.size()).ok();
  // The rest as it came (the agent may close first: a failed write ends it).
  if (sent) sent = WriteAll(host, data, size, DeadlineAfter(std::chrono::seconds(5))).ok();
  ::shutdown(host, SHUT_WR);
  serve.join();
  drain.join();
  ::close(host);
  ::close(agent_fd);
  if (replied > kReplyAllowance + kReplyBytesPerInputByte * size) std::abort();
}

}  // namespace
}  // namespace dfarm::agent

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  dfarm::agent::FuzzOne(data, size);
  return 0;
}
