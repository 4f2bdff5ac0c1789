#include "tests/tools/onnx_text_model.h"

#include <fstream>

#include <gtest/gtest.h>
#include <onnx/defs/parser.h>

namespace tpusim::cli::testing {

std::string write_model(const std::string& text, const std::string& name) {
  onnx::ModelProto m;
  const auto status = onnx::OnnxParser::Parse(m, text.c_str());
  EXPECT_TRUE(status.IsOK()) << status.ErrorMessage();
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path, std::ios::binary) << m.SerializeAsString();
  return path;
}

}  // namespace tpusim::cli::testing
