#pragma once
// Entry points of the subcommands, one per cmd_*.cc; listed in commands.cc.

#include <string>
#include <vector>

namespace tpusim::cli {

int run_analyze(const std::vector<std::string>& args);
int run_allreduce(const std::vector<std::string>& args);
int run_backends(const std::vector<std::string>& args);
int run_compare(const std::vector<std::string>& args);
int run_compare_profile(const std::vector<std::string>& args);
int run_compile(const std::vector<std::string>& args);
int run_config(const std::vector<std::string>& args);
int run_data(const std::vector<std::string>& args);
int run_evaluate(const std::vector<std::string>& args);
int run_import(const std::vector<std::string>& args);
int run_layers(const std::vector<std::string>& args);
int run_matmul(const std::vector<std::string>& args);
int run_opcheck(const std::vector<std::string>& args);
int run_predict(const std::vector<std::string>& args);
int run_sweep(const std::vector<std::string>& args);
int run_train(const std::vector<std::string>& args);
int run_tune(const std::vector<std::string>& args);
int run_validate(const std::vector<std::string>& args);

}  // namespace tpusim::cli
