// dfarm-adb-test-peer: a test-only stand-in for a phone's adbd, reached by the
// real adb server over TCP (`adb connect 127.0.0.1:PORT`). It speaks adb's
// device protocol for real (AOSP packages/modules/adb protocol.txt): 24-byte
// message headers, CNXN answered with a "device::" banner (no AUTH, like a
// device with ro.adb.secure=0), OPEN/OKAY/WRTE/CLSE streams with one
// unacknowledged WRTE per direction. Services:
//   sync:        STAT, SEND (DATA..., DONE with mtime), QUIT; paths must lie
//                under --root (the folder that stands for the phone's storage)
//   exec:CMD     /bin/sh -c CMD in --root, stdin/stdout/stderr on the stream
//                (as adbd's exec: does: stderr is merged into stdout)
// It runs any command it is given: it listens on loopback only and is never
// installed.
//
// Usage: dfarm-adb-test-peer --root DIR [--port N] [--model M] [--product P]
// Prints "listening on 127.0.0.1:<port>" once ready.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>
#include <utime.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace fs = std::filesystem;

// Message commands (protocol.txt), little-endian ASCII.
constexpr uint32_t kCnxn = 0x4e584e43;
constexpr uint32_t kOpen = 0x4e45504f;
constexpr uint32_t kOkay = 0x59414b4f;
constexpr uint32_t kClse = 0x45534c43;
constexpr uint32_t kWrte = 0x45545257;
// A_VERSION_SKIP_CHECKSUM: peers may leave data_check 0 (we still fill it in).
constexpr uint32_t kVersion = 0x01000001;
constexpr uint32_t kMaxPayload = 256 * 1024;
constexpr uint32_t kMaxIncoming = 1024 * 1024;  // what a host may send us at most
constexpr size_t kSyncDataMax = 64 * 1024;
// Honest features: we create missing parent folders on SEND.
constexpr const char* kFeatures = "fixed_push_mkdir";

struct Header {
  uint32_t command, arg0, arg1, data_length, data_check, magic;
};

bool ReadAll(int fd, void* data, size_t size) {
  char* p = static_cast<char*>(data);
  while (size > 0) {
    ssize_t n = ::read(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

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

bool WriteFile(int fd, const char* p, size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

uint32_t Le32(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return uint32_t{u[0]} | uint32_t{u[1]} << 8 | uint32_t{u[2]} << 16 | uint32_t{u[3]} << 24;
}

void PutLe32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

struct Options {
  fs::path root;
  uint16_t port = 0;
  std::string model = "DFarm_Test_Peer";
  std::string product = "dfarm_peer";
};

class Connection;

// One OPENed stream. Outgoing data waits in out_ until the host acknowledged
// the previous WRTE (one in flight, as protocol.txt requires).
class Stream {
 public:
  Stream(Connection* conn, uint32_t local_id, uint32_t remote_id)
      : conn_(conn), local_id_(local_id), remote_id_(remote_id) {}
  virtual ~Stream() = default;
  // Data the host wrote; the stream must call AckWrite() once it is consumed.
  virtual void OnData(std::string data) = 0;
  // The host closed the stream (or the connection ended).
  virtual void OnClose() = 0;
  virtual void Join() {}

  void Write(const std::string& data);  // queues, splitting at the payload limit
  void CloseWhenDrained();              // sends CLSE once queued data is acknowledged
  void OnAck();
  // Blocks while more than `limit` chunks wait (back pressure for pumps).
  void WaitForRoom(size_t limit);
  void AckWrite();
  uint32_t local_id() const { return local_id_; }

 protected:
  void PumpLocked();
  Connection* conn_;
  uint32_t local_id_, remote_id_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> out_;
  bool in_flight_ = false;
  bool close_pending_ = false;
  bool closed_ = false;  // CLSE sent or received
};

class Connection {
 public:
  Connection(int fd, const Options& options) : fd_(fd), options_(options) {}
  ~Connection() { ::close(fd_); }
  void Run();
  bool Send(uint32_t command, uint32_t arg0, uint32_t arg1, const std::string& data);
  uint32_t max_payload() const { return max_payload_.load(); }
  const Options& options() const { return options_; }
  void Forget(uint32_t local_id);

 private:
  void OnOpen(uint32_t remote_id, std::string service);
  std::shared_ptr<Stream> Find(uint32_t local_id);

  int fd_;
  const Options& options_;
  std::mutex write_mu_;
  std::atomic<uint32_t> max_payload_{4096};
  std::mutex streams_mu_;
  std::map<uint32_t, std::shared_ptr<Stream>> streams_;
  std::vector<std::shared_ptr<Stream>> finished_;  // joined when the connection ends
  uint32_t next_id_ = 1;
};

void Stream::Write(const std::string& data) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return;
  size_t max = conn_->max_payload();
  for (size_t off = 0; off < data.size(); off += max) out_.push_back(data.substr(off, max));
  PumpLocked();
}

void Stream::CloseWhenDrained() {
  std::lock_guard<std::mutex> lock(mu_);
  close_pending_ = true;
  PumpLocked();
}

void Stream::OnAck() {
  std::lock_guard<std::mutex> lock(mu_);
  in_flight_ = false;
  PumpLocked();
}

void Stream::WaitForRoom(size_t limit) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return closed_ || out_.size() <= limit; });
}

void Stream::AckWrite() {
  bool closed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed = closed_;
  }
  if (!closed) conn_->Send(kOkay, local_id_, remote_id_, "");
}

void Stream::PumpLocked() {
  if (closed_) return;
  if (!in_flight_ && !out_.empty()) {
    std::string chunk = std::move(out_.front());
    out_.pop_front();
    in_flight_ = true;
    conn_->Send(kWrte, local_id_, remote_id_, chunk);
  }
  if (!in_flight_ && out_.empty() && close_pending_) {
    closed_ = true;
    conn_->Send(kClse, local_id_, remote_id_, "");
    conn_->Forget(local_id_);
  }
  cv_.notify_all();
}

// sync: one request at a time from a byte buffer (SYNC.TXT).
class SyncStream final : public Stream {
 public:
  using Stream::Stream;

  void OnData(std::string data) override {
    buf_ += data;
    while (Step()) {
    }
    AckWrite();
  }
  void OnClose() override {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    if (file_ >= 0) ::close(file_);
    file_ = -1;
  }

 private:
  void Reply(const std::string& id, const std::string& payload) {
    std::string m = id;
    PutLe32(m, static_cast<uint32_t>(payload.size()));
    Write(m + payload);
  }
  void Fail(const std::string& why) { Reply("FAIL", why); }

  // A device path under --root, or empty.
  fs::path Resolve(const std::string& path) {
    fs::path p = fs::path(path).lexically_normal();
    const fs::path& root = conn_->options().root;
    if (!p.is_absolute()) return {};
    auto [r, q] = std::mismatch(root.begin(), root.end(), p.begin(), p.end());
    if (r != root.end()) return {};
    return p;
  }

  // Handles one complete message from buf_; false when more bytes are needed.
  bool Step() {
    if (buf_.size() < 8) return false;
    std::string id = buf_.substr(0, 4);
    uint32_t len = Le32(buf_.data() + 4);
    if (id == "DONE") {  // length carries the mtime
      buf_.erase(0, 8);
      FinishSend(len);
      return true;
    }
    if (len > kSyncDataMax + 1024) {
      Fail("sync message '" + id + "' too long");
      buf_.clear();
      CloseWhenDrained();
      return false;
    }
    if (buf_.size() < 8 + len) return false;
    std::string body = buf_.substr(8, len);
    buf_.erase(0, 8 + len);
    if (id == "STAT") {
      struct stat st {};
      fs::path p = Resolve(body);
      std::string r = "STAT";
      if (!p.empty() && ::lstat(p.c_str(), &st) == 0) {
        PutLe32(r, static_cast<uint32_t>(st.st_mode));
        PutLe32(r, static_cast<uint32_t>(st.st_size));
        PutLe32(r, static_cast<uint32_t>(st.st_mtime));
      } else {
        PutLe32(r, 0);
        PutLe32(r, 0);
        PutLe32(r, 0);
      }
      Write(r);
    } else if (id == "SEND") {
      size_t comma = body.rfind(',');
      std::string path = comma == std::string::npos ? body : body.substr(0, comma);
      mode_ =
          comma == std::string::npos ? 0644 : std::strtoul(body.c_str() + comma + 1, nullptr, 10);
      send_error_.clear();
      in_send_ = true;
      send_path_ = Resolve(path);
      if (send_path_.empty()) {
        send_error_ = "'" + path + "' is outside this device's storage";
        return true;
      }
      std::error_code ec;
      fs::create_directories(send_path_.parent_path(), ec);
      // Like adbd: a new file replaces the old one (a running binary stays intact).
      fs::path tmp = send_path_;
      tmp += ".dfarm-peer-tmp";
      file_ = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      if (file_ < 0) send_error_ = "cannot create '" + path + "': " + std::strerror(errno);
    } else if (id == "DATA") {
      if (!in_send_) {
        Fail("DATA outside SEND");
      } else if (file_ >= 0 && !WriteFile(file_, body.data(), body.size())) {
        send_error_ = std::string("write failed: ") + std::strerror(errno);
      }
    } else if (id == "QUIT") {
      CloseWhenDrained();
    } else {
      Fail("unsupported sync request '" + id + "'");
    }
    return true;
  }

  void FinishSend(uint32_t mtime) {
    if (!in_send_) {
      Fail("DONE outside SEND");
      return;
    }
    in_send_ = false;
    fs::path tmp = send_path_;
    tmp += ".dfarm-peer-tmp";
    if (file_ >= 0) {
      ::fchmod(file_, mode_ & 07777);
      ::close(file_);
      file_ = -1;
      if (send_error_.empty()) {
        utimbuf t{static_cast<time_t>(mtime), static_cast<time_t>(mtime)};
        ::utime(tmp.c_str(), &t);
        if (::rename(tmp.c_str(), send_path_.c_str()) != 0) {
          send_error_ = std::string("rename failed: ") + std::strerror(errno);
        }
      }
      if (!send_error_.empty()) ::unlink(tmp.c_str());
    }
    if (send_error_.empty()) {
      Reply("OKAY", "");
    } else {
      Fail(send_error_);
    }
  }

  std::string buf_;
  bool in_send_ = false;
  fs::path send_path_;
  unsigned long mode_ = 0644;
  int file_ = -1;
  std::string send_error_;
};

// exec:CMD: a child on a socketpair; a writer thread feeds its stdin, a pump
// thread sends its output.
class ExecStream final : public Stream {
 public:
  using Stream::Stream;

  bool Start(const std::string& command) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return false;
    pid_ = ::fork();
    if (pid_ < 0) {
      ::close(sv[0]);
      ::close(sv[1]);
      return false;
    }
    if (pid_ == 0) {
      ::setpgid(0, 0);
      ::dup2(sv[1], 0);
      ::dup2(sv[1], 1);
      ::dup2(sv[1], 2);
      if (::chdir(conn_->options().root.c_str()) != 0) ::_exit(126);
      ::signal(SIGPIPE, SIG_DFL);
      ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(sv[1]);
    sock_ = sv[0];
    writer_ = std::thread([this] { WriterLoop(); });
    pump_ = std::thread([this] { PumpLoop(); });
    return true;
  }

  void OnData(std::string data) override {
    std::lock_guard<std::mutex> lock(in_mu_);
    in_.push_back(std::move(data));
    in_cv_.notify_all();
  }

  void OnClose() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = true;
      cv_.notify_all();
    }
    {
      std::lock_guard<std::mutex> lock(in_mu_);
      in_closed_ = true;
      in_cv_.notify_all();
    }
    // Like adbd closing its end: the child reads EOF and gets EPIPE on writes.
    if (sock_ >= 0) ::shutdown(sock_, SHUT_RDWR);
  }

  void Join() override {
    if (writer_.joinable()) writer_.join();
    if (pump_.joinable()) pump_.join();
    if (sock_ >= 0) ::close(sock_);
    sock_ = -1;
  }

 private:
  void WriterLoop() {
    for (;;) {
      std::string data;
      {
        std::unique_lock<std::mutex> lock(in_mu_);
        in_cv_.wait(lock, [&] { return in_closed_ || !in_.empty(); });
        if (in_.empty()) return;
        data = std::move(in_.front());
        in_.pop_front();
      }
      if (!WriteAll(sock_, data.data(), data.size())) {
        // The child stopped reading; drop what it will never read.
      }
      AckWrite();
    }
  }

  void PumpLoop() {
    std::string buf(kMaxPayload, '\0');
    for (;;) {
      WaitForRoom(2);
      ssize_t n = ::read(sock_, buf.data(), buf.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      Write(buf.substr(0, static_cast<size_t>(n)));
    }
    CloseWhenDrained();
    // Reap; a child that outlives its stream by 5 s is killed.
    int status = 0;
    bool reaped = false;
    for (int i = 0; i < 500 && !reaped; ++i) {
      reaped = ::waitpid(pid_, &status, WNOHANG) == pid_;
      if (!reaped) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (!reaped) {
      ::kill(-pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
    }
    std::lock_guard<std::mutex> lock(in_mu_);
    in_closed_ = true;
    in_cv_.notify_all();
  }

  pid_t pid_ = -1;
  int sock_ = -1;
  std::thread writer_, pump_;
  std::mutex in_mu_;
  std::condition_variable in_cv_;
  std::deque<std::string> in_;
  bool in_closed_ = false;
};

bool Connection::Send(uint32_t command, uint32_t arg0, uint32_t arg1, const std::string& data) {
  uint32_t check = 0;
  for (unsigned char c : data) check += c;
  std::string m;
  PutLe32(m, command);
  PutLe32(m, arg0);
  PutLe32(m, arg1);
  PutLe32(m, static_cast<uint32_t>(data.size()));
  PutLe32(m, check);
  PutLe32(m, command ^ 0xffffffffu);
  m += data;
  std::lock_guard<std::mutex> lock(write_mu_);
  return WriteAll(fd_, m.data(), m.size());
}

std::shared_ptr<Stream> Connection::Find(uint32_t local_id) {
  std::lock_guard<std::mutex> lock(streams_mu_);
  auto it = streams_.find(local_id);
  return it == streams_.end() ? nullptr : it->second;
}

void Connection::Forget(uint32_t local_id) {
  std::lock_guard<std::mutex> lock(streams_mu_);
  auto it = streams_.find(local_id);
  if (it == streams_.end()) return;
  finished_.push_back(it->second);
  streams_.erase(it);
}

void Connection::OnOpen(uint32_t remote_id, std::string service) {
  while (!service.empty() && service.back() == '\0') service.pop_back();
  uint32_t id;
  {
    std::lock_guard<std::mutex> lock(streams_mu_);
    id = next_id_++;
  }
  std::shared_ptr<Stream> stream;
  if (service == "sync:") {
    stream = std::make_shared<SyncStream>(this, id, remote_id);
  } else if (service.rfind("exec:", 0) == 0) {
    auto exec = std::make_shared<ExecStream>(this, id, remote_id);
    {
      std::lock_guard<std::mutex> lock(streams_mu_);
      streams_[id] = exec;
    }
    Send(kOkay, id, remote_id, "");
    if (!exec->Start(service.substr(5))) {
      exec->CloseWhenDrained();
    }
    return;
  }
  if (!stream) {
    std::fprintf(stderr, "dfarm-adb-test-peer: refusing service '%s'\n", service.c_str());
    Send(kClse, 0, remote_id, "");
    return;
  }
  {
    std::lock_guard<std::mutex> lock(streams_mu_);
    streams_[id] = stream;
  }
  Send(kOkay, id, remote_id, "");
}

void Connection::Run() {
  for (;;) {
    char h[24];
    if (!ReadAll(fd_, h, sizeof h)) break;
    Header m{Le32(h), Le32(h + 4), Le32(h + 8), Le32(h + 12), Le32(h + 16), Le32(h + 20)};
    if (m.magic != (m.command ^ 0xffffffffu) || m.data_length > kMaxIncoming) {
      std::fprintf(stderr, "dfarm-adb-test-peer: bad message header, closing\n");
      break;
    }
    std::string data(m.data_length, '\0');
    if (m.data_length > 0 && !ReadAll(fd_, data.data(), data.size())) break;
    switch (m.command) {
      case kCnxn: {
        // Answer directly (no AUTH): a device with ro.adb.secure=0.
        max_payload_ = std::min(m.arg1, kMaxPayload);
        std::string banner = "device::ro.product.name=" + options_.product +
                             ";ro.product.model=" + options_.model +
                             ";ro.product.device=" + options_.product + ";features=" + kFeatures;
        Send(kCnxn, std::min(m.arg0, kVersion), kMaxPayload, banner);
        break;
      }
      case kOpen:
        OnOpen(m.arg0, std::move(data));
        break;
      case kOkay:
        if (auto s = Find(m.arg1)) s->OnAck();
        break;
      case kWrte:
        if (auto s = Find(m.arg1)) s->OnData(std::move(data));
        break;
      case kClse:
        if (auto s = Find(m.arg1)) {
          s->OnClose();
          Forget(m.arg1);
        }
        break;
      default:
        break;  // AUTH and others: a device that never asked has nothing to do
    }
  }
  std::vector<std::shared_ptr<Stream>> all;
  {
    std::lock_guard<std::mutex> lock(streams_mu_);
    for (auto& [id, s] : streams_) all.push_back(s);
    streams_.clear();
  }
  for (auto& s : all) s->OnClose();
  for (auto& s : all) s->Join();
  std::vector<std::shared_ptr<Stream>> done;
  {
    std::lock_guard<std::mutex> lock(streams_mu_);
    done.swap(finished_);
  }
  for (auto& s : done) s->Join();
}

int Usage() {
  std::fprintf(stderr,
               "usage: dfarm-adb-test-peer --root DIR [--port N] [--model M] [--product P]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 >= argc) return Usage();
    std::string v = argv[++i];
    if (a == "--root") {
      options.root = v;
    } else if (a == "--port") {
      char* end = nullptr;
      unsigned long port = std::strtoul(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || port > 65535) return Usage();
      options.port = static_cast<uint16_t>(port);
    } else if (a == "--model") {
      options.model = v;
    } else if (a == "--product") {
      options.product = v;
    } else {
      return Usage();
    }
  }
  if (options.root.empty()) return Usage();
  std::error_code ec;
  fs::create_directories(options.root, ec);
  options.root = fs::canonical(options.root, ec);
  if (ec) {
    std::fprintf(stderr, "dfarm-adb-test-peer: bad --root: %s\n", ec.message().c_str());
    return 1;
  }
  ::signal(SIGPIPE, SIG_IGN);
  int lfd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(options.port);
  if (::bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(lfd, 8) != 0) {
    std::fprintf(stderr, "dfarm-adb-test-peer: cannot listen: %s\n", std::strerror(errno));
    return 1;
  }
  socklen_t len = sizeof addr;
  ::getsockname(lfd, reinterpret_cast<sockaddr*>(&addr), &len);
  std::printf("listening on 127.0.0.1:%u\n", ntohs(addr.sin_port));
  std::fflush(stdout);
  for (;;) {
    int fd = ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR) continue;
      break;
    }
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    std::thread([fd, &options] {
      Connection c(fd, options);
      c.Run();
    }).detach();
  }
  return 0;
}
