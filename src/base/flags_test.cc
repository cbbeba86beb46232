#include "base/flags.h"

#include <gtest/gtest.h>

namespace gw {
namespace {

TEST(ParseDuration, AcceptsUnitsAndCombinations) {
  EXPECT_EQ(ParseDurationNs("120s").value(), 120'000'000'000);
  EXPECT_EQ(ParseDurationNs("2m").value(), 120'000'000'000);
  EXPECT_EQ(ParseDurationNs("1h30m").value(), 5'400'000'000'000);
  EXPECT_EQ(ParseDurationNs("500ms").value(), 500'000'000);
  EXPECT_EQ(ParseDurationNs("7").value(), 7'000'000'000);
  EXPECT_EQ(ParseDurationNs("1.5s").value(), 1'500'000'000);
}

TEST(ParseDuration, RejectsGarbage) {
  EXPECT_FALSE(ParseDurationNs("1.2.3s").ok());  // issue 12: was read as 1.2 s
  EXPECT_FALSE(ParseDurationNs(".s").ok());
  EXPECT_FALSE(ParseDurationNs("").ok());
  EXPECT_FALSE(ParseDurationNs("abc").ok());
  EXPECT_FALSE(ParseDurationNs("10x").ok());
  EXPECT_FALSE(ParseDurationNs("-5s").ok());
}

TEST(ParseSize, BinaryMultiples) {
  EXPECT_EQ(ParseSizeBytes("512M").value(), 512LL << 20);
  EXPECT_EQ(ParseSizeBytes("2G").value(), 2LL << 30);
  EXPECT_EQ(ParseSizeBytes("2GiB").value(), 2LL << 30);
  EXPECT_EQ(ParseSizeBytes("100").value(), 100);
  EXPECT_FALSE(ParseSizeBytes("lots").ok());
}

TEST(FlagSet, ParsesFlagsAndPositionals) {
  FlagSet f("query", "gpuwhy query", "x");
  f.Add({"db", FlagKind::kString, "PATH", "", ""})
      .Add({"json", FlagKind::kBool, "", "", ""})
      .Add({"since", FlagKind::kDuration, "DUR", "", ""});
  ASSERT_TRUE(f.Parse({"--db", "/tmp/x.db", "SELECT 1", "--json", "--since=2m"}).ok());
  EXPECT_EQ(f.GetString("db"), "/tmp/x.db");
  EXPECT_TRUE(f.GetBool("json"));
  EXPECT_EQ(f.GetDurationNs("since"), 120'000'000'000);
  ASSERT_EQ(f.positionals().size(), 1u);
  EXPECT_EQ(f.positionals()[0], "SELECT 1");
}

// "--record false" must not set --record and leave "false" as a stray word: every boolean flag
// takes its value after '='.
TEST(FlagSet, BooleanValueAfterASpaceIsRefusedWithTheEqualsForm) {
  FlagSet f("trace", "gpuwhy trace", "x");
  f.Add({"record", FlagKind::kBool, "", "", "true"}).Add({"db", FlagKind::kString, "PATH", "", ""});
  Status st = f.Parse({"--record", "false", "--db", "x.db"});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("--record=false"), std::string::npos) << st.message();
  FlagSet g("trace", "gpuwhy trace", "x");
  g.Add({"record", FlagKind::kBool, "", "", "true"});
  ASSERT_TRUE(g.Parse({"--record=false"}).ok());
  EXPECT_FALSE(g.GetBool("record", true));
  // A word that is not a boolean value after a boolean flag is an ordinary positional.
  FlagSet h("query", "gpuwhy query", "x");
  h.Add({"json", FlagKind::kBool, "", "", ""});
  ASSERT_TRUE(h.Parse({"--json", "SELECT 1"}).ok());
  EXPECT_EQ(h.positionals().size(), 1u);
}

TEST(FlagSet, UnknownFlagAndMissingValueAreErrors) {
  FlagSet f("query", "gpuwhy query", "x");
  f.Add({"db", FlagKind::kString, "PATH", "", ""});
  Status st = f.Parse({"--nope"});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("--nope"), std::string::npos);
  FlagSet g("query", "gpuwhy query", "x");
  g.Add({"db", FlagKind::kString, "PATH", "", ""});
  EXPECT_FALSE(g.Parse({"--db"}).ok());
}

TEST(FlagSet, HelpListsEveryFlag) {
  FlagSet f("explain", "gpuwhy explain", "Explains.");
  f.Add({"since", FlagKind::kDuration, "DUR", "window", "120s"});
  ASSERT_TRUE(f.Parse({"--help"}).ok());
  EXPECT_TRUE(f.help_requested());
  EXPECT_NE(f.HelpText().find("--since DUR"), std::string::npos);
  EXPECT_NE(f.HelpText().find("(default 120s)"), std::string::npos);
}

// Issue 34: `export --help` showed "--o FILE"; a one-letter flag is written with one dash (the
// parser takes both spellings).
TEST(FlagSet, OneLetterFlagsShowOneDash) {
  FlagSet f("export", "gpuwhy export", "Exports.");
  f.Add({"output", FlagKind::kString, "FILE", "file to write", ""})
      .Add({"o", FlagKind::kString, "FILE", "the same as --output", ""});
  std::string help = f.HelpText();
  EXPECT_NE(help.find("\n  -o FILE "), std::string::npos) << help;
  EXPECT_EQ(help.find("--o "), std::string::npos) << help;
  EXPECT_NE(help.find("\n  --output FILE "), std::string::npos) << help;
  ASSERT_TRUE(f.Parse({"-o", "a.json"}).ok());
  EXPECT_EQ(f.GetString("o"), "a.json");
  FlagSet g("export", "gpuwhy export", "Exports.");
  g.Add({"o", FlagKind::kString, "FILE", "", ""});
  Status st = g.Parse({"-o"});
  EXPECT_NE(st.message().find("flag -o needs"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace gw

namespace gw {
namespace {

TEST(ParseSize, RejectsWhatWouldOverflow) {
  EXPECT_EQ(ParseSizeBytes("4M").value(), 4 << 20);
  EXPECT_FALSE(ParseSizeBytes("99999999999T").ok());  // issue 12: an undefined cast before
  EXPECT_FALSE(ParseSizeBytes("1e30").ok());
  EXPECT_FALSE(ParseSizeBytes("1.2.3M").ok());
}

}  // namespace
}  // namespace gw
