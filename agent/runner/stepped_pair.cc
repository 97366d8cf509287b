#include "agent/runner/stepped_pair.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string_view>
#include <utility>
#include <vector>

#include "agent/base/subprocess.h"
#include "agent/runner/runner_json.h"

namespace dfarm::runner {
namespace {

// The partner's document is read up to this size, as the agent reads a runner's.
constexpr size_t kMaxPartnerJson = 1 << 20;

// One byte; false on EOF or an error (retried on EINTR).
bool ReadByte(int fd) {
  char c = 0;
  for (;;) {
    const ssize_t n = ::read(fd, &c, 1);
    if (n == 1) return true;
    if (n < 0 && errno == EINTR) continue;
    return false;
  }
}

bool WriteByte(int fd) {
  const char c = 's';
  for (;;) {
    const ssize_t n = ::write(fd, &c, 1);
    if (n == 1) return true;
    if (n < 0 && errno == EINTR) continue;
    return false;
  }
}

// Everything `fd` gives until EOF, the first kMaxPartnerJson bytes kept.
std::string ReadToEnd(int fd, bool* truncated) {
  std::string text;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    const size_t room = kMaxPartnerJson - std::min(text.size(), kMaxPartnerJson);
    if (static_cast<size_t>(n) > room) *truncated = true;
    text.append(buf, std::min(static_cast<size_t>(n), room));
  }
  return text;
}

// A pipe whose ends are closed on exec; the one the partner keeps is made
// inheritable just before it starts.
bool OpenPipe(UniqueFd* read_end, UniqueFd* write_end) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return false;
  read_end->reset(fds[0]);
  write_end->reset(fds[1]);
  return true;
}

}  // namespace

void StepFds::Warm() { WriteByte(write_.get()); }

bool StepFds::Before(size_t) { return ReadByte(read_.get()); }

void StepFds::After(size_t) { WriteByte(write_.get()); }

void StepFds::Done() {
  read_.reset();
  write_.reset();
}

PartnerRunner::PartnerRunner(const RunnerOptions& options)
    : options_(options), rng_(options.partner_seed) {}

PartnerRunner::~PartnerRunner() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ReapProcess(pid_, std::chrono::milliseconds(0));
  }
}

void PartnerRunner::Fail(const std::string& why) {
  error_ += (error_.empty() ? "" : "; ") + why;
  stepping_ = false;
  go_.reset();
}

void PartnerRunner::StartAndWait() {
  const std::string& path = options_.partner_runner;
  if (::access(path.c_str(), X_OK) != 0) {
    Fail("cannot start partner runner '" + path + "': " + std::strerror(errno));
    return;
  }
  // A write to a partner that died must fail (EPIPE), not kill the driver.
  ::signal(SIGPIPE, SIG_IGN);
  UniqueFd go_r, done_w, out_w;
  if (!OpenPipe(&go_r, &go_) || !OpenPipe(&done_, &done_w) || !OpenPipe(&out_, &out_w)) {
    Fail(std::string("cannot start partner runner: pipe: ") + std::strerror(errno));
    return;
  }
  ::fcntl(go_r.get(), F_SETFD, 0);
  ::fcntl(done_w.get(), F_SETFD, 0);
  std::vector<std::string> argv = {path};
  argv.insert(argv.end(), options_.partner_args.begin(), options_.partner_args.end());
  argv.insert(argv.end(),
              {"--step-fds", std::to_string(go_r.get()) + "," + std::to_string(done_w.get())});
  if (std::find(argv.begin(), argv.end(), "--json") == argv.end()) argv.push_back("--json");
  SpawnOptions spawn;
  spawn.stdout_fd = out_w.get();
  spawn.terminate_with_parent = true;
  auto pid = SpawnProcess(argv, spawn);
  if (!pid.ok()) {
    Fail("cannot start partner runner: " + pid.message());
    return;
  }
  pid_ = *pid;
  // Only the partner holds its ends now, so its death reads as EOF here.
  go_r.reset();
  done_w.reset();
  out_w.reset();
  if (!ReadByte(done_.get())) {
    Fail("partner runner '" + path + "' ended before it was ready");
    return;
  }
  stepping_ = true;
}

bool PartnerRunner::PartnerFirst(size_t k) {
  // ABBA blocks: the partner first on one run of a block's two, the seed
  // says which.
  if (k % 2 == 0) block_flipped_ = (rng_() & 1) != 0;
  return (k % 2 == 0) == block_flipped_;
}

void PartnerRunner::Step() {
  if (!stepping_) return;
  if (!WriteByte(go_.get()) || !ReadByte(done_.get())) {
    Fail("partner runner stopped after " + std::to_string(steps_) + " stepped run(s)");
    return;
  }
  ++steps_;
  order_ += 'B';
}

bool PartnerRunner::Before(size_t k) {
  if (PartnerFirst(k)) Step();
  order_ += 'A';
  return true;
}

void PartnerRunner::After(size_t k) {
  // PartnerFirst(k) was drawn in Before(k); the block's flip is unchanged.
  if ((k % 2 == 0) != block_flipped_) Step();
}

void PartnerRunner::Done() {
  stepping_ = false;
  go_.reset();  // EOF: the partner's measured runs end
}

void PartnerRunner::Collect(JobSteps* steps, std::optional<std::string>* partner_json) {
  Done();
  steps->role = "driver";
  steps->order = order_;
  steps->partner_steps = steps_;
  if (pid_ > 0) {
    bool truncated = false;
    const std::string text = out_ ? ReadToEnd(out_.get(), &truncated) : std::string();
    out_.reset();
    const int status = ReapProcess(pid_, std::chrono::hours(24));
    pid_ = -1;
    auto doc = runner_json::ParseRunnerJson(text);
    const bool exited_ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!truncated && doc.ok() && !doc->status.empty()) {
      *partner_json = runner_json::WriteRunnerJson(*doc);
      if (runner_json::IsOk(*doc) && !exited_ok) {
        Fail("partner runner reported ok but " + DescribeWaitStatus(status));
      }
    } else {
      Fail("partner runner " + DescribeWaitStatus(status) + " without a readable result" +
           (truncated  ? " (its output is over 1 MiB)"
            : doc.ok() ? ""
                       : ": " + doc.message()));
    }
  }
  // A partner that reported ok must have run beside every run of the driver.
  const auto driver_runs = static_cast<int64_t>(std::count(order_.begin(), order_.end(), 'A'));
  if (error_.empty() && partner_json->has_value() && steps_ != driver_runs) {
    Fail("partner runner stepped " + std::to_string(steps_) + " run(s) of " +
         std::to_string(driver_runs));
  }
  steps->partner_error = error_;
}

}  // namespace dfarm::runner
