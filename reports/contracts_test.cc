// The report row's columns are those docs/CONTRACTS.md lists, in its order.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "reports/report.h"
#include "tests/house/contracts_doc.h"

namespace dfarm::reports {
namespace {

TEST(ContractsTest, ReportRowColumnsAreTheDocumentedOnesInOrder) {
  const std::vector<std::string> documented =
      testing::DocumentedList(std::string(DFARM_SOURCE_DIR) + "/docs/CONTRACTS.md",
                              "read columns by name, not by position):", "Absent values");
  ASSERT_FALSE(documented.empty()) << "docs/CONTRACTS.md lost its report row column list";
  EXPECT_EQ(documented, TableColumns());
}

}  // namespace
}  // namespace dfarm::reports
