// One escaping rule per generated format (see escape.hpp).
#include "zt/core/escape.hpp"

#include <cstdio>

namespace zt {
namespace {

// Length of the valid UTF-8 sequence starting at s[i] (2..4), or 0 when there is none.
size_t utf8_length(std::string_view s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  size_t n = 0;
  unsigned min = 0;
  if (c >= 0xc2 && c <= 0xdf) n = 2, min = 0x80;
  else if (c >= 0xe0 && c <= 0xef) n = 3, min = 0x800;
  else if (c >= 0xf0 && c <= 0xf4) n = 4, min = 0x10000;
  else return 0;
  if (i + n > s.size()) return 0;
  unsigned cp = c & (0x7f >> n);
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return n;
}

}  // namespace

std::string visible_text(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      if (const size_t n = utf8_length(s, i); n > 0) {
        out.append(s.substr(i, n));
        i += n;
        continue;
      }
    }
    ++i;
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f || c >= 0x80) {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out;
}

std::string gnuplot_string(std::string_view s) {
  std::string q(1, '\'');
  for (const char c : visible_text(s)) {
    q.push_back(c);
    if (c == '\'') q.push_back(c);  // '' inside '...'
  }
  q.push_back('\'');
  return q;
}

std::string csv_field(std::string_view s) {
  std::string cell(s);
  if (!cell.empty() && std::string_view("=+-@\t\r").find(cell.front()) != std::string_view::npos)
    cell.insert(cell.begin(), '\'');
  if (cell.find_first_of(",\"\r\n") == std::string::npos) return cell;
  std::string q(1, '"');
  for (const char c : cell) {
    q.push_back(c);
    if (c == '"') q.push_back(c);
  }
  q.push_back('"');
  return q;
}

std::string markdown_text(std::string_view s) {
  // Inline specials anywhere (code, emphasis, links and images need [ ], cells |); block
  // markers (# heading, - + list, = rule, digits. list) only where they start the text,
  // which may start a line: "(vm)" or "--max-bytes" inside a sentence stay as written.
  std::string out;
  const std::string text = visible_text(s);
  const size_t digits = text.find_first_not_of("0123456789");
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '&') out += "&amp;";
    else if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else {
      const bool inline_special = std::string_view("\\`*_[]|~").find(c) != std::string_view::npos;
      const bool block_marker = (i == 0 && std::string_view("#+-!=").find(c) != std::string_view::npos) ||
                                (i == digits && i > 0 && (c == '.' || c == ')'));
      if (inline_special || block_marker) out.push_back('\\');
      out.push_back(c);
    }
  }
  return out;
}

std::string json_dump(const nlohmann::json& value, int indent) {
  return value.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace zt
