#pragma once
// A `tpusim` subcommand and the conventions every one follows: --help prints its usage to
// stdout and exits 0; a usage error (unknown option, missing argument, bad value) prints the
// problem and the usage to stderr and exits 2; a failure of the job itself exits 1.

#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "common/json_text.h"

namespace tpusim::cli {

enum ExitCode : int { kOk = 0, kFailed = 1, kUsage = 2 };

struct Command {
  std::string name;     // "config", "backends", "train"
  std::string summary;  // one line for `tpusim --help`
  // Runs with the arguments after the subcommand name.
  std::function<int(const std::vector<std::string>& args)> run;
};

// All subcommands, in the order `tpusim --help` lists them.
const std::vector<Command>& commands();

// Parses `args` against `options` (and `positional` names) into `vm`. Returns -1 when the
// command should go on, or the exit code to return now (after --help or a usage error,
// whose message it has printed with `usage`).
int parse_args(const std::vector<std::string>& args,
               const boost::program_options::options_description& options,
               const boost::program_options::positional_options_description& positional,
               const std::string& usage, boost::program_options::variables_map* vm);

// Prints "tpusim: <message>" and `usage` to stderr; returns kUsage.
int usage_error(const std::string& message, const std::string& usage);

// Prints "tpusim: <message>" to stderr; returns kFailed.
int failure(const std::string& message);

// Writes `text` to stderr as it is and flushes: the libraries' progress (a job's log callback).
void log_to_stderr(const std::string& text);

}  // namespace tpusim::cli
