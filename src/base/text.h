// Text that came from outside gpuwhy (process names, command lines, kernel and file names read
// from traced processes, or any string in a database someone handed over) is untrusted: it may
// hold terminal escapes (ESC, BEL, C1 controls such as CSI) that retitle or rewrite the
// terminal, and bytes that are not UTF-8 (which break JSON). Every path that prints such text
// goes through one of these.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace gw {

// The same text as valid UTF-8: each byte that does not start a well-formed sequence
// (overlong forms, surrogates and code points past U+10FFFF included) becomes U+FFFD.
// `text` without leading and trailing spaces, tabs and line breaks.
std::string TrimSpace(std::string_view text);

std::string ValidUtf8(std::string_view text);

// Valid UTF-8 (as above) that a terminal shows and does not obey: C0 controls, DEL and the
// C1 controls U+0080–U+009F become '?', a tab a space. With keep_line_breaks, '\n' stays (for
// multi-line reports, and CSV fields, where it is quoted). '\r' never stays: it would let a
// name overwrite the line it is printed on.
std::string TerminalSafe(std::string_view text, bool keep_line_breaks = false);

// Serialized JSON (valid UTF-8) with the C1 controls U+0080–U+009F, legal raw in JSON strings
// but obeyed by some terminals, written as \u0080–\u009f escapes. Only strings can hold them,
// so the document means the same.
std::string EscapeC1InJson(std::string json);

// True when TerminalSafe would return the text unchanged (the cheap common case).
bool IsTerminalSafe(std::string_view text);

// The candidate a mistyped `word` most likely meant: the one at the smallest edit distance
// (insertions, deletions, substitutions, and swaps of neighbours, each 1) when that is at most 2
// and under half the word's length; "" when none is that close.
std::string ClosestWord(std::string_view word, const std::vector<std::string>& candidates);

// `text` with the password of every URL in it ("scheme://user:PASSWORD@host") written as ***:
// for command lines that are stored, sent or printed (trace --sink clickhouse://u:pw@…).
std::string RedactUrlPasswords(std::string_view text);

// A command line fit to store and show: RedactUrlPasswords, and the value of every option or
// setting whose name says it is a secret (password, passwd, token, secret, api key, access key,
// credential; any case) written as ***, in each form a command line gives one: `--password X`,
// `--token=X`, `PASSWORD=X` (an environment assignment), `?token=X&` inside a URL.
std::string RedactCredentials(std::string_view command_line);

// `text` as one word for a POSIX shell, for commands printed to be copied: unchanged when it
// has only characters no shell treats specially (letters, digits, / . _ - + : , = @ %),
// otherwise in single quotes with each ' written as '\''.
std::string ShellQuote(std::string_view text);

}  // namespace gw
