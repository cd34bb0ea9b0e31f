#pragma once
// Text that came from a user (metrics keys, run facts, file names, host and device names,
// thresholds descriptions) reaching a generated file: one escaping rule per format, used
// by every writer (the run report, zt check's report). Control characters never reach a
// script; invalid UTF-8 never throws.
#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace zt {

// `s` with every control character (below 0x20, 0x7f) and every byte that is not part of
// valid UTF-8 shown as text: \n, \r, \t, \xNN. A backslash is shown as \\, so the result
// reads back unambiguously. Printable text (UTF-8 included) is kept.
std::string visible_text(std::string_view s);

// A gnuplot single-quoted string: visible_text(s), ' doubled, in '...'. Single quotes
// turn off backslash escapes and `command` substitution; no newline can end the command.
std::string gnuplot_string(std::string_view s);

// One CSV text cell (RFC 4180): quoted when it holds , " CR or LF (" doubled); a cell
// starting with = + - @ tab or CR gets a leading ' so no spreadsheet reads it as a formula.
// Numbers are written as they are, not through this.
std::string csv_field(std::string_view s);

// Text inside a Markdown line or table cell: visible_text(s) (no newline starts a heading
// or ends a cell), & < > as HTML entities (no raw HTML), \ ` * _ [ ] | ~ backslash-escaped
// (no code, emphasis, link, image or extra cell), and a leading # + - ! = or "12." (no
// heading, list or rule where the text starts a line).
std::string markdown_text(std::string_view s);

// value.dump(indent) with invalid UTF-8 replaced by U+FFFD instead of throwing.
std::string json_dump(const nlohmann::json& value, int indent = -1);

}  // namespace zt
