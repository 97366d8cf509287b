#include "reports/store/testing/pg_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

namespace dfarm::store::testing {
namespace {

struct PgConnCloser {
  void operator()(PGconn* conn) const { PQfinish(conn); }
};
using PgConn = std::unique_ptr<PGconn, PgConnCloser>;

// The single value of `sql` on `url`, or "ERROR: ..." so a failed query shows in the assertion.
std::string QueryValue(const std::string& url, const std::string& sql) {
  PgConn conn(PQconnectdb(url.c_str()));
  if (PQstatus(conn.get()) != CONNECTION_OK) {
    return std::string("ERROR: connect: ") + PQerrorMessage(conn.get());
  }
  PGresult* result = PQexec(conn.get(), sql.c_str());
  std::string value = PQresultStatus(result) == PGRES_TUPLES_OK && PQntuples(result) == 1
                          ? PQgetvalue(result, 0, 0)
                          : std::string("ERROR: ") + PQresultErrorMessage(result);
  PQclear(result);
  return value;
}

bool SomethingListensOn(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  bool connected = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return connected;
}

class PgServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!PgServerAvailable(&why)) GTEST_SKIP() << "no PostgreSQL server here: " << why;
  }
};

TEST_F(PgServerTest, ServesQueriesAndCreatesDatabases) {
  PgServerOptions options;
  options.max_connections = 150;
  auto server = PgServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.message();
  PgServer& pg = **server;
  EXPECT_EQ(pg.Url(), "postgresql://dfarm@127.0.0.1:" + std::to_string(pg.port()) + "/postgres");
  EXPECT_EQ(QueryValue(pg.Url(), "SELECT 1"), "1");
  EXPECT_EQ(QueryValue(pg.Url(), "SHOW max_connections"), "150");
  EXPECT_EQ(QueryValue(pg.Url(), "SHOW fsync"), "off");
  EXPECT_EQ(QueryValue(pg.Url(), "SELECT current_user"), "dfarm");

  auto x = pg.CreateDatabase("x");
  ASSERT_TRUE(x.ok()) << x.message();
  EXPECT_EQ(*x, pg.Url("x"));
  EXPECT_EQ(QueryValue(*x, "SELECT current_database()"), "x");
  EXPECT_EQ(QueryValue(*x, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"), "0");
  EXPECT_FALSE(pg.CreateDatabase("x").ok()) << "a second CREATE DATABASE x must fail";
  auto bad = pg.CreateDatabase("x; DROP DATABASE postgres");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().kind, ErrorKind::kInvalidInput);
}

// extra_listen: another address (127.0.0.2 is on lo too) is served, and its
// network trusted; initdb's pg_hba.conf alone trusts 127.0.0.1 only.
TEST_F(PgServerTest, ListensOnExtraAddressesAndTrustsTheirNetworks) {
  PgServerOptions options;
  options.extra_listen = {"127.0.0.2/32"};
  auto server = PgServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.message();
  const std::string port = std::to_string((*server)->port());
  EXPECT_EQ(QueryValue("postgresql://dfarm@127.0.0.2:" + port + "/postgres", "SELECT 1"), "1");
  EXPECT_EQ(QueryValue((*server)->Url(), "SHOW listen_addresses"), "127.0.0.1,127.0.0.2");

  options.extra_listen = {"127.0.0.2"};
  auto bad = PgServer::Start(options);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("expected IPV4ADDRESS/PREFIX"), std::string::npos) << bad.message();
}

TEST_F(PgServerTest, DestructionStopsTheServerAndRemovesItsFolder) {
  auto server = PgServer::Start();
  ASSERT_TRUE(server.ok()) << server.message();
  const std::string dir = (*server)->dir();
  const int port = (*server)->port();
  EXPECT_NE(dir.find("dfarm-pg-" + std::to_string(::getpid()) + "-"), std::string::npos) << dir;
  EXPECT_TRUE(std::filesystem::exists(dir + "/data/PG_VERSION"));
  ASSERT_TRUE(SomethingListensOn(port));
  server->reset();
  EXPECT_FALSE(std::filesystem::exists(dir)) << dir;
  EXPECT_FALSE(SomethingListensOn(port)) << "port " << port;
  std::string url = "postgresql://dfarm@127.0.0.1:" + std::to_string(port) + "/postgres";
  EXPECT_NE(PQping(url.c_str()), PQPING_OK);
}

TEST_F(PgServerTest, AFailedStartSaysWhyAndLeavesNoFolder) {
  PgServerOptions options;
  options.max_connections = 0;  // postgres refuses it: the valid range starts at 1
  auto server = PgServer::Start(options);
  ASSERT_FALSE(server.ok());
  EXPECT_NE(server.message().find("max_connections"), std::string::npos) << server.message();
  EXPECT_NE(server.message().find("server.log"), std::string::npos) << server.message();
  const char* tmpdir = std::getenv("TMPDIR");
  std::string mine = "dfarm-pg-" + std::to_string(::getpid()) + "-";
  for (const auto& entry :
       std::filesystem::directory_iterator(tmpdir && *tmpdir ? tmpdir : "/tmp")) {
    EXPECT_NE(entry.path().filename().string().rfind(mine, 0), 0u) << entry.path();
  }
}

TEST_F(PgServerTest, TwoServersAtOnceUseDifferentPortsAndFolders) {
  auto a = PgServer::Start();
  ASSERT_TRUE(a.ok()) << a.message();
  auto b = PgServer::Start();
  ASSERT_TRUE(b.ok()) << b.message();
  EXPECT_NE((*a)->port(), (*b)->port());
  EXPECT_NE((*a)->dir(), (*b)->dir());
  ASSERT_TRUE((*a)->CreateDatabase("only_in_a").ok());
  EXPECT_EQ(QueryValue((*a)->Url(), "SELECT count(*) FROM pg_database WHERE datname = 'only_in_a'"),
            "1");
  EXPECT_EQ(QueryValue((*b)->Url(), "SELECT count(*) FROM pg_database WHERE datname = 'only_in_a'"),
            "0");
}

TEST_F(PgServerTest, AnAttachedHandleCreatesAndDropsDatabasesButNeverStopsTheServer) {
  auto server = PgServer::Start();
  ASSERT_TRUE(server.ok()) << server.message();
  const std::string count = "SELECT count(*) FROM pg_database WHERE datname = 'shared_one'";
  {
    std::unique_ptr<PgServer> attached = PgServer::Attach((*server)->port());
    EXPECT_TRUE(attached->dir().empty());
    auto url = attached->CreateDatabase("shared_one");
    ASSERT_TRUE(url.ok()) << url.message();
    EXPECT_EQ(*url, (*server)->Url("shared_one"));
    EXPECT_EQ(QueryValue((*server)->Url(), count), "1");
    PgConn open(PQconnectdb(url->c_str()));  // FORCE ends it
    ASSERT_EQ(PQstatus(open.get()), CONNECTION_OK);
    auto dropped = attached->DropDatabase("shared_one");
    ASSERT_TRUE(dropped.ok()) << dropped.message();
    EXPECT_EQ(QueryValue((*server)->Url(), count), "0");
    EXPECT_FALSE(attached->DropDatabase("shared_one").ok());
    EXPECT_EQ(attached->DropDatabase("Bad-Name").error().kind, ErrorKind::kInvalidInput);
  }
  EXPECT_TRUE(SomethingListensOn((*server)->port()));
  EXPECT_EQ(QueryValue((*server)->Url(), "SELECT 1"), "1");
}

// dfarm-test-pg, the CTest run's shared server: start writes "PORT PID" once
// the server accepts connections, stop ends it and removes the file.
TEST_F(PgServerTest, TheFixtureProgramStartsAndStopsASharedServer) {
  const std::string file = std::filesystem::temp_directory_path() /
                           ("dfarm-test-pg-" + std::to_string(::getpid()) + ".txt");
  const std::string program = std::string(DFARM_BINARY_DIR) + "/bin/dfarm-test-pg";
  ASSERT_EQ(std::system((program + " start " + file + " > /dev/null").c_str()), 0);
  std::ifstream in(file);
  int port = 0;
  long pid = 0;
  ASSERT_TRUE(in >> port >> pid) << file;
  EXPECT_EQ(
      QueryValue("postgresql://dfarm@127.0.0.1:" + std::to_string(port) + "/postgres", "SELECT 1"),
      "1");
  // A second start while it lives is refused.
  EXPECT_NE(std::system((program + " start " + file + " 2> /dev/null").c_str()), 0);
  ASSERT_EQ(std::system((program + " stop " + file + " > /dev/null").c_str()), 0);
  EXPECT_FALSE(std::filesystem::exists(file));
  EXPECT_FALSE(SomethingListensOn(port)) << "port " << port;
  EXPECT_EQ(std::system((program + " stop " + file + " > /dev/null").c_str()), 0);
  EXPECT_EQ(WEXITSTATUS(std::system((program + " bogus " + file + " 2> /dev/null").c_str())), 2);
}

}  // namespace
}  // namespace dfarm::store::testing
