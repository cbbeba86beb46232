#include "base/text.h"

#include <gtest/gtest.h>

#include "base/table.h"

namespace gw {
namespace {

TEST(ShellQuote, PlainWordsStayQuotedOnesRoundTripThroughTheShell) {
  EXPECT_EQ(ShellQuote("/tmp/run-1.db"), "/tmp/run-1.db");
  EXPECT_EQ(ShellQuote("my run.db"), "'my run.db'");
  EXPECT_EQ(ShellQuote("it's $HOME`x`"), "'it'\\''s $HOME`x`'");
  EXPECT_EQ(ShellQuote(""), "''");
  // What the shell makes of it is the original text.
  std::string tricky = "a b'c\"$(d)";
  std::string cmd = "printf %s " + ShellQuote(tricky);
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  char buf[64] = {};
  size_t n = fread(buf, 1, sizeof(buf) - 1, p);
  pclose(p);
  EXPECT_EQ(std::string(buf, n), tricky);
}

TEST(ValidUtf8, KeepsGoodTextAndReplacesBadBytes) {
  EXPECT_EQ(ValidUtf8("python3 (train.py) µs → ✓"), "python3 (train.py) µs → ✓");
  EXPECT_EQ(ValidUtf8("a\xFF" "b"), "a\xEF\xBF\xBD" "b");
  EXPECT_EQ(ValidUtf8("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");          // overlong '/'
  EXPECT_EQ(ValidUtf8("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  EXPECT_EQ(ValidUtf8("\xF4\x90\x80\x80").substr(0, 3), "\xEF\xBF\xBD");  // past U+10FFFF
  EXPECT_EQ(ValidUtf8("x\xE2\x86"), "x\xEF\xBF\xBD\xEF\xBF\xBD");         // cut short
}

TEST(TerminalSafe, NeutralizesEscapesBellAndC1) {
  // The attack: a process renamed to retitle root's terminal and clear the screen.
  std::string evil = "x\x1b]0;owned\x07\x1b[2J\xC2\x9B" "31m\x7f";
  std::string safe = TerminalSafe(evil);
  EXPECT_EQ(safe, "x?]0;owned??[2J?31m?");
  EXPECT_EQ(safe.find('\x1b'), std::string::npos);
  EXPECT_TRUE(IsTerminalSafe(safe));
  EXPECT_FALSE(IsTerminalSafe(evil));
  EXPECT_EQ(TerminalSafe("a\tb\nc"), "a b?c");
  EXPECT_EQ(TerminalSafe("a\tb\nc\rd", /*keep_line_breaks=*/true), "a b\nc?d");
  EXPECT_EQ(TerminalSafe("\xFF"), "\xEF\xBF\xBD");
  EXPECT_EQ(TerminalSafe("plain ✓"), "plain ✓");
}

TEST(TerminalSafe, EveryOutputFormatOfATable) {
  Table t;
  t.columns = {"name"};
  t.rows.push_back({std::string("job\x1b]2;pwned\x07\xFF")});
  for (TableFormat f : {TableFormat::kText, TableFormat::kCsv, TableFormat::kJson}) {
    std::string out = FormatTable(t, f);
    EXPECT_EQ(out.find('\x1b'), std::string::npos) << out;
    EXPECT_EQ(out.find('\x07'), std::string::npos) << out;
    EXPECT_EQ(ValidUtf8(out), out) << "not valid UTF-8: " << out;
  }
  EXPECT_NE(FormatTable(t, TableFormat::kJson).find("job\\u001b]2;pwned\\u0007\xEF\xBF\xBD"),
            std::string::npos);
}

TEST(EscapeC1InJson, WritesC1ControlsAsEscapes) {
  EXPECT_EQ(EscapeC1InJson("{\"a\": \"x\xC2\x9B" "31m \xC2\xB5s\"}"),
            "{\"a\": \"x\\u009b31m \xC2\xB5s\"}");  // µ (U+00B5) stays
}

TEST(ClosestWord, SuggestsOnlyWhatIsClose) {
  const std::vector<std::string> commands = {"trace", "explain", "check", "query", "export"};
  EXPECT_EQ(ClosestWord("chekc", commands), "check");   // a swap
  EXPECT_EQ(ClosestWord("explian", commands), "explain");
  EXPECT_EQ(ClosestWord("trac", commands), "trace");    // a letter missing
  EXPECT_EQ(ClosestWord("qeury", commands), "query");
  EXPECT_EQ(ClosestWord("xyz", commands), "");          // nothing close
  EXPECT_EQ(ClosestWord("ex", commands), "");           // too short to guess from
  EXPECT_EQ(ClosestWord(std::string(200, 'a'), commands), "");
}

TEST(RedactUrlPasswords, HidesPasswordsOnlyInUrls) {
  EXPECT_EQ(RedactUrlPasswords("gpuwhy trace --sink clickhouse://admin:s3cr:et@h:8123/db -- x"),
            "gpuwhy trace --sink clickhouse://admin:***@h:8123/db -- x");
  EXPECT_EQ(RedactUrlPasswords("a http://u:p@h b clickhouse://v:q@[::1]"),
            "a http://u:***@h b clickhouse://v:***@[::1]");
  EXPECT_EQ(RedactUrlPasswords("clickhouse://user@h/db"), "clickhouse://user@h/db");
  EXPECT_EQ(RedactUrlPasswords("clickhouse://h:9000/db x@y"), "clickhouse://h:9000/db x@y");
  EXPECT_EQ(RedactUrlPasswords("user:pw@host ://"), "user:pw@host ://");
  EXPECT_EQ(RedactUrlPasswords("clickhouse://a:p@w@h"), "clickhouse://a:***@h");
  EXPECT_EQ(RedactUrlPasswords("clickhouse://a:p/w?x@h/db"), "clickhouse://a:***@h/db");
}

// Issue 34: `sessions` shows the traced command line; the secrets a job's command line carries
// are not stored nor shown.
TEST(RedactCredentials, HidesSecretsInEveryFormACommandLineGivesThem) {
  EXPECT_EQ(RedactCredentials("gpuwhy trace -- python3 train.py --password hunter2 --epochs 3"),
            "gpuwhy trace -- python3 train.py --password *** --epochs 3");
  EXPECT_EQ(RedactCredentials("x --hf-token=abc --api_key XYZ --Secret s -p 7"),
            "x --hf-token=*** --api_key *** --Secret *** -p 7");
  EXPECT_EQ(RedactCredentials("env WANDB_API_KEY=k1 AWS_SECRET_ACCESS_KEY=k2 HOME=/root x"),
            "env WANDB_API_KEY=*** AWS_SECRET_ACCESS_KEY=*** HOME=/root x");
  EXPECT_EQ(RedactCredentials("curl https://u:pw@h/x?token=abc&page=2 db password=pw"),
            "curl https://u:***@h/x?token=***&page=2 db password=***");
  EXPECT_EQ(RedactCredentials("gpuwhy trace --sink clickhouse://admin:s3@h:8123/db -- x"),
            "gpuwhy trace --sink clickhouse://admin:***@h:8123/db -- x");
  // Nothing else changes: names that are not secrets, a flag at the end, "--".
  EXPECT_EQ(RedactCredentials("python3 infer.py --lr=3e-4 --max-tokens 512 --tokenizer t5 "
                              "--password"),
            "python3 infer.py --lr=3e-4 --max-tokens 512 --tokenizer t5 --password");
  EXPECT_EQ(RedactCredentials(""), "");
}

}  // namespace
}  // namespace gw
