#pragma once
// The CLI tests' ONNX models: written in ONNX's text syntax, saved to a file for tpusim to read.

#include <string>

namespace tpusim::cli::testing {

// Parses the model `text` (a test failure names the parser's complaint), writes it to `name` in
// the test's temporary folder and returns the path.
std::string write_model(const std::string& text, const std::string& name);

}  // namespace tpusim::cli::testing
