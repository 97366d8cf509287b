#include "reports/store/testing/pg_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "agent/base/subprocess.h"
#include "agent/base/unique_fd.h"

namespace dfarm::store::testing {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr char kServerUser[] = "postgres";  // Debian's postgresql package creates it
constexpr char kDirPrefix[] = "dfarm-pg-";
// The initialized data folder each server starts from a copy of (not under
// kDirPrefix: SweepStaleDirs leaves it alone).
constexpr char kTemplatePrefix[] = "dfarm-pgdata-template-";
constexpr int kPortTries = 5;

// Who runs initdb and postgres: as root the `postgres` user through setpriv
// (which execs in place, so the postmaster stays our child), else ourselves.
struct ServerUser {
  bool switch_user = false;
  uid_t uid = 0;
  gid_t gid = 0;
};

std::string Executable(const std::string& dir, const char* name) {
  std::string path = dir + "/" + name;
  return ::access(path.c_str(), X_OK) == 0 ? path : std::string();
}

// $DFARM_PG_BINDIR, else the highest-numbered /usr/lib/postgresql/N/bin with initdb and postgres.
Result<std::string> FindBinDir() {
  if (const char* env = std::getenv("DFARM_PG_BINDIR"); env && *env) {
    if (Executable(env, "initdb").empty() || Executable(env, "postgres").empty()) {
      return MakeError(std::string("DFARM_PG_BINDIR='") + env + "' holds no initdb and postgres");
    }
    return std::string(env);
  }
  std::string best;
  int best_version = -1;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/usr/lib/postgresql", ec)) {
    std::string bin = entry.path().string() + "/bin";
    int version = std::atoi(entry.path().filename().c_str());
    if (version > best_version && !Executable(bin, "initdb").empty() &&
        !Executable(bin, "postgres").empty()) {
      best = bin;
      best_version = version;
    }
  }
  if (best.empty()) {
    return MakeError(
        "no PostgreSQL found: no /usr/lib/postgresql/*/bin with initdb and postgres "
        "(install postgresql-15, or set DFARM_PG_BINDIR)");
  }
  return best;
}

bool InPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (!dir.empty() && !Executable(dir, name.c_str()).empty()) return true;
  }
  return false;
}

Result<ServerUser> FindServerUser() {
  ServerUser user;
  if (::geteuid() != 0) return user;
  const passwd* pw = ::getpwnam(kServerUser);
  if (!pw) {
    return MakeError(
        std::string("running as root, and PostgreSQL refuses root, but there is no '") +
        kServerUser + "' user to run it as (install postgresql-15)");
  }
  if (!InPath("setpriv")) {
    return MakeError("running as root, but setpriv (util-linux) is not in PATH to switch users");
  }
  user.switch_user = true;
  user.uid = pw->pw_uid;
  user.gid = pw->pw_gid;
  return user;
}

// argv run as `user`; the server also gets SIGQUIT (immediate shutdown) when our thread dies.
std::vector<std::string> AsUser(const ServerUser& user, std::vector<std::string> argv,
                                bool server) {
  if (!user.switch_user) return argv;
  std::vector<std::string> full = {"setpriv", std::string("--reuid=") + kServerUser,
                                   std::string("--regid=") + kServerUser, "--init-groups"};
  if (server) full.push_back("--pdeathsig=SIGQUIT");
  full.push_back("--");
  full.insert(full.end(), argv.begin(), argv.end());
  return full;
}

std::string LogTail(const std::string& path, size_t max_chars = 2000) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::string text = buffer.str();
  if (text.size() > max_chars) text = "..." + text.substr(text.size() - max_chars);
  return text.empty() ? "(" + path + " is empty)" : path + ":\n" + text;
}

fs::path TempRoot() {
  const char* env = std::getenv("TMPDIR");
  return env && *env ? env : "/tmp";
}

bool ProcessGone(pid_t pid) { return pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH; }

// Removes dfarm-pg-<pid>-* folders left by test processes that died (see README.md);
// skips any whose postmaster still runs.
void SweepStaleDirs(const fs::path& tmp) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(tmp, ec)) {
    std::string name = entry.path().filename().string();
    if (name.rfind(kDirPrefix, 0) != 0) continue;
    pid_t owner = std::atoi(name.c_str() + strlen(kDirPrefix));
    if (owner == ::getpid() || !ProcessGone(owner)) continue;
    std::ifstream pidfile(entry.path() / "data" / "postmaster.pid");
    pid_t postmaster = 0;
    if (pidfile >> postmaster && postmaster > 0 && !ProcessGone(postmaster)) continue;
    fs::remove_all(entry.path(), ec);
  }
}

Result<std::string> MakeServerDir(const ServerUser& user) {
  const fs::path tmp = TempRoot();
  SweepStaleDirs(tmp);
  std::string pattern = (tmp / (kDirPrefix + std::to_string(::getpid()) + "-XXXXXX")).string();
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  if (!::mkdtemp(buf.data())) {
    return MakeError("cannot create a folder '" + pattern + "': " + strerror(errno));
  }
  std::string dir = buf.data();
  if (user.switch_user && ::chown(dir.c_str(), user.uid, user.gid) != 0) {
    std::string why = strerror(errno);
    fs::remove_all(dir);
    return MakeError("cannot give '" + dir + "' to user " + kServerUser + ": " + why);
  }
  return dir;
}

// Runs argv (its output to `log`) and waits for it to exit 0.
Result<void> RunToEnd(const std::vector<std::string>& argv, bool search_path,
                      const std::string& log, const std::string& what) {
  Result<UniqueFd> out = OpenForAppend(log);
  if (!out) return out.error();
  SpawnOptions options;
  options.stdout_fd = out->get();
  options.stderr_fd = out->get();
  options.search_path = search_path;
  Result<pid_t> pid = SpawnProcess(argv, options);
  if (!pid) return MakeError(what + " failed: " + pid.message());
  int status = ReapProcess(*pid, seconds(120));
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return MakeError(what + " " + DescribeWaitStatus(status) + "; " + LogTail(log));
  }
  return Ok();
}

Result<void> InitDb(const std::string& bindir, const ServerUser& user, const std::string& dir) {
  std::vector<std::string> argv = {
      bindir + "/initdb", "-D", dir + "/data", "-A",        "trust", "-U", "dfarm",
      "--no-sync",        "-E", "UTF8",        "--locale=C"};
  return RunToEnd(AsUser(user, argv, false), user.switch_user, dir + "/initdb.log",
                  "initdb into '" + dir + "/data'");
}

// $TMPDIR/dfarm-pgdata-template-<uid>-<version>: one per user and PostgreSQL
// major version (the name of the bin folder's parent, e.g. 15).
fs::path TemplateDir(const std::string& bindir) {
  std::string version = fs::path(bindir).parent_path().filename().string();
  for (char& c : version) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return TempRoot() / (kTemplatePrefix + std::to_string(::geteuid()) + "-" + version);
}

// The template's data folder, made once by initdb (about 1.5 s; a copy takes
// a tenth of that). Concurrent test processes wait on a lock file beside it;
// the folder appears by rename, so a crashed initdb leaves no half template.
Result<fs::path> TemplateData(const std::string& bindir, const ServerUser& user) {
  const fs::path dir = TemplateDir(bindir);
  const fs::path data = dir / "data";
  UniqueFd lock(::open((dir.string() + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!lock) {
    return MakeError("cannot open '" + dir.string() + ".lock': " + strerror(errno));
  }
  while (::flock(lock.get(), LOCK_EX) != 0) {
    if (errno != EINTR) return MakeError("cannot lock '" + dir.string() + ".lock'");
  }
  std::error_code ec;
  if (fs::exists(data / "PG_VERSION", ec)) return data;
  const std::string building = dir.string() + ".new-" + std::to_string(::getpid());
  fs::remove_all(building, ec);
  fs::remove_all(dir, ec);
  if (!fs::create_directory(building, ec)) {
    return MakeError("cannot create '" + building + "': " + ec.message());
  }
  if (user.switch_user && ::chown(building.c_str(), user.uid, user.gid) != 0) {
    std::string why = strerror(errno);
    fs::remove_all(building, ec);
    return MakeError("cannot give '" + building + "' to user " + kServerUser + ": " + why);
  }
  if (Result<void> init = InitDb(bindir, user, building); !init) {
    fs::remove_all(building, ec);
    return init.error();
  }
  fs::rename(building, dir, ec);
  if (ec)
    return MakeError("cannot rename '" + building + "' to '" + dir.string() + "': " + ec.message());
  return data;
}

// dir/data: a copy of the template (owner and modes kept: `cp -a`).
Result<void> CopyTemplate(const std::string& bindir, const ServerUser& user,
                          const std::string& dir) {
  Result<fs::path> data = TemplateData(bindir, user);
  if (!data) return data.error();
  return RunToEnd(
      {"cp", "-a", data->string(), dir + "/data"}, true, dir + "/initdb.log",
      "copying the initialized data folder '" + data->string() + "' (remove it if it is damaged)");
}

// A port nobody listened on a moment ago; the server may still lose it to
// another process before it binds, so Start() retries.
Result<int> PickPort() {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return MakeError(std::string("cannot pick a port: socket: ") + strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return MakeError(std::string("cannot pick a port on 127.0.0.1: ") + strerror(errno));
  }
  return static_cast<int>(ntohs(addr.sin_port));
}

std::string PingInfo(int port) {
  return "host=127.0.0.1 port=" + std::to_string(port) +
         " user=dfarm dbname=postgres connect_timeout=2";
}

// "127.0.0.1" and the ADDRESS of each of options.extra_listen.
std::string ListenAddresses(const PgServerOptions& options) {
  std::string out = "127.0.0.1";
  for (const std::string& a : options.extra_listen) out += "," + a.substr(0, a.find('/'));
  return out;
}

// Trusts the clients of each network of options.extra_listen (pg_hba.conf
// masks the address's host bits itself).
Result<void> TrustExtraNetworks(const std::string& dir, const PgServerOptions& options) {
  std::ofstream hba(dir + "/data/pg_hba.conf", std::ios::app);
  for (const std::string& a : options.extra_listen) {
    const size_t slash = a.find('/');
    in_addr ip{};
    if (slash == std::string::npos || ::inet_pton(AF_INET, a.substr(0, slash).c_str(), &ip) != 1) {
      return MakeError(ErrorKind::kInvalidInput,
                       "extra_listen '" + a + "': expected IPV4ADDRESS/PREFIX");
    }
    hba << "host all all " << a << " trust\n";
  }
  hba.flush();
  if (!hba) return MakeError("cannot append to '" + dir + "/data/pg_hba.conf'");
  return Ok();
}

struct Launch {
  pid_t pid = -1;
  bool port_taken = false;  // the server exited because it could not bind the port
};

// Starts the postmaster and waits until it accepts connections.
Result<Launch> LaunchServer(const std::string& bindir, const ServerUser& user,
                            const std::string& dir, int port, const PgServerOptions& options) {
  const std::string data = dir + "/data", log = dir + "/server.log";
  Result<UniqueFd> out = OpenForAppend(log);
  if (!out) return out.error();
  std::vector<std::string> argv = {bindir + "/postgres",
                                   "-D",
                                   data,
                                   "-p",
                                   std::to_string(port),
                                   "-c",
                                   "listen_addresses=" + ListenAddresses(options),
                                   "-c",
                                   "unix_socket_directories=" + data,
                                   "-c",
                                   "fsync=off",
                                   "-c",
                                   "max_connections=" + std::to_string(options.max_connections)};
  SpawnOptions spawn;
  spawn.stdout_fd = out->get();
  spawn.stderr_fd = out->get();
  spawn.search_path = user.switch_user;
  spawn.terminate_with_parent = !user.switch_user;  // setpriv sets SIGQUIT itself
  Result<pid_t> pid = SpawnProcess(AsUser(user, argv, true), spawn);
  if (!pid) return MakeError("cannot start postgres: " + pid.message());
  const auto deadline = std::chrono::steady_clock::now() + seconds(60);
  while (PQping(PingInfo(port).c_str()) != PQPING_OK) {
    int status = 0;
    if (TryReap(*pid, &status)) {
      std::string tail = LogTail(log);
      if (tail.find("Address already in use") != std::string::npos) return Launch{-1, true};
      return MakeError("postgres on port " + std::to_string(port) + " " +
                       DescribeWaitStatus(status) + " while starting; " + tail);
    }
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(*pid, SIGQUIT);
      ReapProcess(*pid, seconds(10));
      return MakeError("postgres on port " + std::to_string(port) +
                       " did not accept connections within 60 s; " + LogTail(log));
    }
    std::this_thread::sleep_for(milliseconds(20));
  }
  return Launch{*pid, false};
}

struct PgConnCloser {
  void operator()(PGconn* conn) const { PQfinish(conn); }
};
struct PgResultClearer {
  void operator()(PGresult* result) const { PQclear(result); }
};

}  // namespace

Result<std::unique_ptr<PgServer>> PgServer::Start(const PgServerOptions& options) {
  Result<std::string> bindir = FindBinDir();
  if (!bindir) return bindir.error();
  Result<ServerUser> user = FindServerUser();
  if (!user) return user.error();
  Result<std::string> dir = MakeServerDir(*user);
  if (!dir) return dir.error();
  auto fail = [&](const Error& error) -> Result<std::unique_ptr<PgServer>> {
    std::error_code ec;
    fs::remove_all(*dir, ec);
    return MakeError("cannot start a PostgreSQL server: " + error.message);
  };
  if (Result<void> init = CopyTemplate(*bindir, *user, *dir); !init) return fail(init.error());
  if (Result<void> hba = TrustExtraNetworks(*dir, options); !hba) return fail(hba.error());
  for (int attempt = 1; attempt <= kPortTries; ++attempt) {
    Result<int> port = PickPort();
    if (!port) return fail(port.error());
    Result<Launch> launch = LaunchServer(*bindir, *user, *dir, *port, options);
    if (!launch) return fail(launch.error());
    if (!launch->port_taken) {
      return std::unique_ptr<PgServer>(new PgServer(*dir, launch->pid, *port));
    }
  }
  return fail(MakeError("every one of " + std::to_string(kPortTries) +
                        " free ports was taken before postgres could bind it; " +
                        LogTail(*dir + "/server.log")));
}

std::unique_ptr<PgServer> PgServer::Attach(int port) {
  return std::unique_ptr<PgServer>(new PgServer(std::string(), -1, port));
}

std::unique_ptr<PgServer> PgServer::AttachToRun() {
  const char* file = std::getenv("DFARM_TEST_PG_FILE");
  int port = 0;
  pid_t pid = 0;
  if (file == nullptr || !ReadSharedServerFile(file, &port, &pid) || ::kill(pid, 0) != 0) {
    return nullptr;
  }
  return Attach(port);
}

PgServer::~PgServer() {
  if (dir_.empty()) return;  // attached: another process owns the server
  if (pid_ > 0) {
    ::kill(pid_, SIGQUIT);  // immediate shutdown: no checkpoint, the data is thrown away
    ReapProcess(pid_, seconds(10));
  }
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

std::string PgServer::Url(const std::string& database) const {
  return "postgresql://dfarm@127.0.0.1:" + std::to_string(port_) + "/" + database;
}

namespace {

// Runs `verb` DATABASE `name` (plus `suffix`) on the server at `url`.
Result<void> DatabaseCommand(const std::string& url, const std::string& verb,
                             const std::string& name, const std::string& suffix) {
  bool valid = !name.empty();
  for (char c : name)
    valid = valid && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_');
  const std::string what = "cannot " + verb + " database '" + name + "'";
  if (!valid) return MakeError(ErrorKind::kInvalidInput, what + ": the name must match [a-z0-9_]+");
  std::unique_ptr<PGconn, PgConnCloser> conn(PQconnectdb(url.c_str()));
  if (PQstatus(conn.get()) != CONNECTION_OK) {
    return MakeError(what + ": cannot connect to " + url + ": " + PQerrorMessage(conn.get()));
  }
  const std::string sql = verb + " database " + name + suffix;
  std::unique_ptr<PGresult, PgResultClearer> result(PQexec(conn.get(), sql.c_str()));
  if (PQresultStatus(result.get()) != PGRES_COMMAND_OK) {
    return MakeError(what + " on " + url + ": " + PQresultErrorMessage(result.get()));
  }
  return {};
}

}  // namespace

Result<std::string> PgServer::CreateDatabase(const std::string& name) {
  if (Result<void> r = DatabaseCommand(Url(), "create", name, ""); !r) return r.error();
  return Url(name);
}

Result<void> PgServer::DropDatabase(const std::string& name) {
  return DatabaseCommand(Url(), "drop", name, " with (force)");
}

bool PgServerAvailable(std::string* why) {
  Result<std::string> bindir = FindBinDir();
  Result<ServerUser> user = bindir ? FindServerUser() : Result<ServerUser>(bindir.error());
  if (user) return true;
  if (why) *why = user.message();
  return false;
}

bool ReadSharedServerFile(const std::string& file, int* port, pid_t* pid) {
  std::ifstream in(file);
  long p = 0;
  long id = 0;
  if (!(in >> p >> id) || p <= 0 || p > 65535 || id <= 0) return false;
  *port = static_cast<int>(p);
  *pid = static_cast<pid_t>(id);
  return true;
}

}  // namespace dfarm::store::testing
