#pragma once
// One rule for every numeric option of every subcommand (issue 36, class 10): a value is a
// finite number, read without overflow, inside the option's declared range; anything
// else is a usage error (exit 2) naming the option: "--timeout: must be a number in
// [0.001, 1000000], got 1e8". The range is part of the option's type text in --help
// ("FLOAT in [0.001, 1000000]"), which is where reliability.hostile_cli reads the table of
// options and ranges it tries: a numeric option without one fails that test.
// (The config keys have the same rule in zt::config::Config::set, from the schema.)
#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace zt::apps {

// An integer option in [lo, hi]: the text must be a whole decimal number (no sign for
// lo >= 0 is needed; "-1" is refused by the range), within int64, then within the range.
// For a list option (delimiter ','), each element; an empty element ("1,,2") is refused.
CLI::Validator int_in(int64_t lo, int64_t hi);

// A list of integers in [lo, hi], comma-separated ("1,2,3"; repeatable): every element
// checked as int_in, an empty one ("1,,2", "1,") refused. CLI11's own delimiter drops
// empty elements silently, so list options take their text and int_list() reads it.
CLI::Validator int_list_in(int64_t lo, int64_t hi);
std::vector<int64_t> int_list(const std::vector<std::string>& texts);

// A floating option in [lo, hi]: NaN and infinities refused, then the range.
CLI::Validator number_in(double lo, double hi);

// A size option ("8", "4K", "256M", "1G"; core/units parse_size) in [lo, hi] bytes.
CLI::Validator size_in(uint64_t lo, uint64_t hi);

// Every option of `app` as (name, value): the values given (joined with ','), else its
// default text. What ranks compare before their first collective (issue 36, class 2).
std::vector<std::pair<std::string, std::string>> option_values(const CLI::App& app);

// Every option that takes a value, of every subcommand below `app`, refuses an empty one
// ("--prompt ''", "--tokenizer \"$UNSET\""): "--prompt: an empty value: give one, or leave
// the option out", exit 2. An empty value is never read as the option left out.
void refuse_empty_values(CLI::App& app);

// The machine-readable modes: an option (and value) after which a subcommand's stdout is
// a format for programs (`generate --json`, `estimate --json`, `check --exit-codes
// nagios`). When the parsed command line has one, log::reserve_stdout() sends every log
// line to stderr: stdout holds only the documented output.
void reserve_stdout_for_machine_modes(const CLI::App& app);

// Options that another option turns off (as zt train's inert keys): each rule names the
// option, whether this run ignores it, and why with the fix. A given option whose rule
// holds is a warning: "--chat-template chatml has no effect in this run: it applies with
// --chat; add --chat, or leave it out".
struct InertOption {
  const char* option;
  bool inert;
  std::string why;
};
void warn_inert_options(const CLI::App& sub, const std::vector<InertOption>& rules);

}  // namespace zt::apps
