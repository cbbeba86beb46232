#include "base/text.h"

#include <algorithm>
#include <cstdint>

namespace gw {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Length of the well-formed UTF-8 sequence at text[i] (1-4), or 0 when none starts there;
// *cp receives the code point.
size_t SequenceAt(std::string_view text, size_t i, uint32_t* cp) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  unsigned char b = byte(i);
  if (b < 0x80) {
    *cp = b;
    return 1;
  }
  size_t len;
  uint32_t min;
  if (b >= 0xC2 && b <= 0xDF) {
    len = 2, min = 0x80, *cp = b & 0x1F;
  } else if (b >= 0xE0 && b <= 0xEF) {
    len = 3, min = 0x800, *cp = b & 0x0F;
  } else if (b >= 0xF0 && b <= 0xF4) {
    len = 4, min = 0x10000, *cp = b & 0x07;
  } else {
    return 0;
  }
  if (i + len > text.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    *cp = (*cp << 6) | (byte(i + k) & 0x3F);
  }
  if (*cp < min || *cp > 0x10FFFF || (*cp >= 0xD800 && *cp <= 0xDFFF)) return 0;
  return len;
}

bool IsControl(uint32_t cp) { return cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp <= 0x9F); }

}  // namespace

std::string TrimSpace(std::string_view text) {
  size_t a = text.find_first_not_of(" \t\n\r");
  if (a == std::string_view::npos) return "";
  size_t b = text.find_last_not_of(" \t\n\r");
  return std::string(text.substr(a, b - a + 1));
}

std::string ValidUtf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    uint32_t cp;
    size_t len = SequenceAt(text, i, &cp);
    if (len == 0) {
      out += kReplacement;
      ++i;
    } else {
      out.append(text.substr(i, len));
      i += len;
    }
  }
  return out;
}

bool IsTerminalSafe(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    uint32_t cp;
    size_t len = SequenceAt(text, i, &cp);
    if (len == 0 || IsControl(cp)) return false;
    i += len;
  }
  return true;
}

std::string TerminalSafe(std::string_view text, bool keep_line_breaks) {
  if (IsTerminalSafe(text)) return std::string(text);
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    uint32_t cp;
    size_t len = SequenceAt(text, i, &cp);
    if (len == 0) {
      out += kReplacement;
      ++i;
      continue;
    }
    if (IsControl(cp)) {
      if (keep_line_breaks && cp == '\n') {
        out += '\n';
      } else {
        out += cp == '\t' ? ' ' : '?';
      }
    } else {
      out.append(text.substr(i, len));
    }
    i += len;
  }
  return out;
}

std::string EscapeC1InJson(std::string json) {
  if (json.find('\xC2') == std::string::npos) return json;
  std::string out;
  out.reserve(json.size() + 16);
  for (size_t i = 0; i < json.size(); ++i) {
    unsigned char next = i + 1 < json.size() ? static_cast<unsigned char>(json[i + 1]) : 0;
    if (static_cast<unsigned char>(json[i]) == 0xC2 && next >= 0x80 && next <= 0x9F) {
      static const char kHex[] = "0123456789abcdef";
      out += "\\u00";
      out += kHex[next >> 4];
      out += kHex[next & 0xF];
      ++i;
    } else {
      out += json[i];
    }
  }
  return out;
}

namespace {

// Optimal string alignment distance: Levenshtein plus a swap of two neighbours.
size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

}  // namespace

std::string ClosestWord(std::string_view word, const std::vector<std::string>& candidates) {
  if (word.size() > 64) return "";  // no one mistypes a word this long
  std::string best;
  size_t best_distance = 3;
  for (const std::string& c : candidates) {
    size_t distance = EditDistance(word, c);
    if (distance < best_distance && 2 * distance < std::max(word.size(), c.size())) {
      best = c;
      best_distance = distance;
    }
  }
  return best;
}

std::string RedactUrlPasswords(std::string_view text) {
  std::string out;
  size_t pos = 0;
  for (size_t scheme; (scheme = text.find("://", pos)) != std::string_view::npos;) {
    size_t start = scheme + 3;
    // The userinfo ends at the URL's last '@' (a password may hold '/', '?' or '@' unescaped,
    // as the URL parsers here take it), the URL at white space.
    size_t end = text.find_first_of(" \t\n", start);
    if (end == std::string_view::npos) end = text.size();
    size_t at = text.rfind('@', end == 0 ? 0 : end - 1);
    size_t colon = text.find(':', start);
    if (at != std::string_view::npos && at >= start && at < end && colon < at) {
      out.append(text.substr(pos, colon + 1 - pos));
      out += "***";
      pos = at;
    } else {
      out.append(text.substr(pos, start - pos));
      pos = start;
    }
  }
  out.append(text.substr(pos));
  return out;
}

namespace {

// Whether an option or variable name (dashes, '_', '.' and case ignored) names a secret: it
// ends with one of the keys (HF_TOKEN, --db-password, WANDB_API_KEY), so that --max-tokens
// or --tokenizer do not.
bool SecretName(std::string_view name) {
  std::string n;
  for (char c : name) {
    if (c == '-' || c == '_' || c == '.') continue;
    n += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  }
  for (std::string_view key : {"password", "passwd", "passphrase", "token", "secret", "secretkey",
                               "apikey", "accesskey", "credential", "credentials", "privatekey"}) {
    if (n.size() >= key.size() && n.compare(n.size() - key.size(), key.size(), key) == 0) {
      return true;
    }
  }
  return false;
}

// One word: every NAME=VALUE in it (at its start or after ? & ; ,) with a secret NAME gets
// VALUE (up to the next & ; , or the word's end) written as ***.
std::string RedactAssignments(std::string_view word) {
  std::string out;
  size_t pos = 0;
  while (pos < word.size()) {
    size_t eq = word.find('=', pos);
    if (eq == std::string_view::npos) break;
    size_t name_start = word.find_last_of("?&;,", eq);
    name_start = name_start == std::string_view::npos || name_start < pos ? pos : name_start + 1;
    size_t value_end = word.find_first_of("&;,", eq + 1);
    if (value_end == std::string_view::npos) value_end = word.size();
    out.append(word.substr(pos, eq + 1 - pos));
    if (SecretName(word.substr(name_start, eq - name_start)) && value_end > eq + 1) {
      out += "***";
    } else {
      out.append(word.substr(eq + 1, value_end - eq - 1));
    }
    pos = value_end;
    if (pos < word.size()) out += word[pos++];
  }
  if (pos < word.size()) out.append(word.substr(pos));
  return out;
}

}  // namespace

std::string RedactCredentials(std::string_view command_line) {
  std::string text = RedactUrlPasswords(command_line);
  std::string out;
  bool hide_next = false;  // the previous word was a secret's option without "=": --password X
  size_t pos = 0;
  while (pos < text.size()) {
    size_t space = text.find_first_of(" \t\n", pos);
    if (space == std::string::npos) space = text.size();
    std::string_view word = std::string_view(text).substr(pos, space - pos);
    if (word.empty()) {
    } else if (hide_next) {
      out += "***";
      hide_next = false;
    } else {
      bool option = word[0] == '-' && word.find('=') == std::string_view::npos;
      hide_next = option && word != "--" && SecretName(word);
      out += RedactAssignments(word);
    }
    if (space < text.size()) out += text[space];
    pos = space + 1;
  }
  return out;
}

std::string ShellQuote(std::string_view text) {
  bool plain = !text.empty();
  for (char c : text) {
    bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                std::string_view("/._-+:,=@%").find(c) != std::string_view::npos;
    plain = plain && safe;
  }
  if (plain) return std::string(text);
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

}  // namespace gw
