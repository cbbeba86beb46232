#include "base/table.h"

#include <gtest/gtest.h>

namespace gw {
namespace {

TEST(WithThousands, GroupsDigits) {
  EXPECT_EQ(WithThousands(0), "0");
  EXPECT_EQ(WithThousands(999), "999");
  EXPECT_EQ(WithThousands(14504), "14,504");
  EXPECT_EQ(WithThousands(-1234567), "-1,234,567");
}

Table Sample() {
  Table t;
  t.columns = {"process", "switches", "off_cpu_sec"};
  t.rows.push_back({std::string("python3 (train.py)"), int64_t{14504}, 62.04});
  t.rows.push_back({std::string("fluent-bit"), int64_t{2890}, std::monostate{}});
  return t;
}

TEST(FormatTable, TextIsAlignedWithNumbersRight) {
  std::string out = FormatTable(Sample(), TableFormat::kText);
  EXPECT_EQ(out,
            "process            | switches | off_cpu_sec\n"
            "-------------------|----------|------------\n"
            "python3 (train.py) |   14,504 |        62.0\n"
            "fluent-bit         |    2,890 |\n");
}

TEST(FormatTable, CsvQuotesAndKeepsRawNumbers) {
  Table t = Sample();
  t.rows[1][0] = std::string("a,\"b\"");
  std::string out = FormatTable(t, TableFormat::kCsv);
  EXPECT_EQ(out, "process,switches,off_cpu_sec\npython3 (train.py),14504,62.039999999999999\n"
                 "\"a,\"\"b\"\"\",2890,\n");
}

TEST(FormatTable, JsonHasNullsAndEscapes) {
  Table t = Sample();
  t.rows[1][0] = std::string("x\"\n");
  std::string out = FormatTable(t, TableFormat::kJson);
  EXPECT_NE(out.find("\"off_cpu_sec\": null"), std::string::npos);
  EXPECT_NE(out.find("\"x\\\"\\n\""), std::string::npos);
  EXPECT_NE(out.find("\"switches\": 14504"), std::string::npos);
}

TEST(FormatTable, TextNeutralizesControlCharacters) {
  Table t;
  t.columns = {"name"};
  t.rows.push_back({std::string("evil\x1b[2J")});
  std::string out = FormatTable(t, TableFormat::kText);
  EXPECT_EQ(out.find('\x1b'), std::string::npos);
}

}  // namespace
}  // namespace gw
