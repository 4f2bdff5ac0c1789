// Studies across MPI ranks (issue 37): `mpirun -np 3 tpusim sweep ...` writes the table a run in
// one process writes; a rank killed mid-sweep leaves its point failed and the others done, and
// `--resume` finishes it; a sweep killed outright keeps every point that ended and leaves no point
// running. Open MPI's mpirun comes from `make deps` (openmpi-bin).
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/tools/cli_runner.h"

namespace tpusim::cli {
namespace cli_mpi_test {

namespace fs = std::filesystem;
using testing::CliResult;
using ::testing::HasSubstr;
using testing::run_tpusim;

constexpr char kMpirun[] = "/usr/bin/mpirun";

// mpirun refuses to start ranks as root unless told twice that it may (CI runs as root).
const testing::Environment kMpiEnvironment = {{"OMPI_ALLOW_RUN_AS_ROOT", "1"},
                                              {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"}};

std::vector<std::string> read_lines(const fs::path& file) {
  std::ifstream in(file);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> cells;
  std::stringstream in(line);
  for (std::string cell; std::getline(in, cell, ',');) cells.push_back(cell);
  if (!line.empty() && line.back() == ',') cells.emplace_back();
  return cells;
}

// The CSV without its host-time column (host_seconds: how long the run took on its host).
std::vector<std::string> csv_without_host_time(const fs::path& file) {
  std::vector<std::string> lines = read_lines(file);
  if (lines.empty()) return lines;
  const std::vector<std::string> header = split_csv(lines[0]);
  std::vector<std::string> out;
  for (const std::string& line : lines) {
    const std::vector<std::string> cells = split_csv(line);
    std::string kept;
    for (size_t c = 0; c < cells.size() && c < header.size(); ++c) {
      if (header[c] != "host_seconds") kept += cells[c] + ",";
    }
    out.push_back(kept);
  }
  return out;
}

// The file's contents ("" when it cannot be read).
std::string slurp(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The pids of processes whose command line holds `needle` and, when `rank` >= 0, that are
// `tpusim sweep` as that MPI rank (not the points it runs, which inherit its environment).
std::vector<int> processes_with(const std::string& needle, int rank = -1) {
  std::vector<int> pids;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string cmdline = slurp(entry.path() / "cmdline");
    if (cmdline.find(needle) == std::string::npos) continue;
    if (rank >= 0) {
      if (cmdline.find(std::string("\0sweep\0", 7)) == std::string::npos) continue;
      const std::string env = slurp(entry.path() / "environ");
      if (env.find("OMPI_COMM_WORLD_RANK=" + std::to_string(rank) + '\0') == std::string::npos)
        continue;
    }
    pids.push_back(std::stoi(name));
  }
  return pids;
}

// Whether process `pid` has a child running.
bool has_child(int pid) {
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string stat = slurp(entry.path() / "stat");
    // pid (comm) state ppid ...: the comm may hold spaces, so read after its closing ')'.
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 1));
    std::string state;
    int ppid = 0;
    rest >> state >> ppid;
    if (ppid == pid) return true;
  }
  return false;
}

// Polls `ready` every 20 ms for up to `seconds`.
template <typename Ready>
bool wait_until(Ready ready, double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (ready()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

class MpiSweep : public ::testing::Test {
 protected:
  void SetUp() override {
    tmp_ = fs::temp_directory_path() / ("tpusim-cli-mpi-" + std::to_string(::getpid()));
    fs::remove_all(tmp_);
    fs::create_directories(tmp_);
    // The synthetic data, written once before the points read it.
    auto r = run_tpusim({"train", "--model", "mlp", "--data", data(), "--train-steps", "1",
                         "--timing-only", "--model-dir", (tmp_ / "first").string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  // A test that failed part way may leave its sweep (or mpirun) running: nothing outlives it.
  void TearDown() override {
    for (int pid : processes_with(tmp_.string())) ::kill(pid, SIGKILL);
    fs::remove_all(tmp_);
  }

  std::string data() const { return (tmp_ / "data").string(); }
  std::string out(const std::string& name) const { return (tmp_ / name).string(); }

  // A 2 x 3 grid of timing-only mlp training runs of `steps` steps each, into `dir`.
  std::vector<std::string> sweep_args(const std::string& dir, int steps) const {
    return {"sweep",
            "--set",
            "chip.core.mxu_count=1,2",
            "--set",
            "iterations_per_loop=1,2,3",
            "--out",
            dir,
            "--",
            "train",
            "--model",
            "mlp",
            "--data",
            data(),
            "--train-steps",
            std::to_string(steps),
            "--timing-only",
            "--host-timing",
            "config"};
  }

  testing::StartedProgram start_mpi(int ranks, std::vector<std::string> args,
                                    const std::vector<std::string>& mpirun_flags = {}) const {
    std::vector<std::string> mpi = {"--oversubscribe", "-np", std::to_string(ranks)};
    mpi.insert(mpi.end(), mpirun_flags.begin(), mpirun_flags.end());
    mpi.push_back(testing::tpusim_path());
    mpi.insert(mpi.end(), args.begin(), args.end());
    return testing::start_program(kMpirun, mpi, "", kMpiEnvironment);
  }

  fs::path tmp_;
};

// The same grid into the same folder (its paths are in the table), in one process and then on
// three ranks.
TEST_F(MpiSweep, ThreeRanksWriteTheTableOneProcessWrites) {
  auto local = run_tpusim(sweep_args(out("mpi"), 4));
  ASSERT_EQ(local.exit_code, 0) << local.err;
  const auto local_csv = csv_without_host_time(out("mpi") + "/sweep.csv");
  ASSERT_EQ(local_csv.size(), 7u);
  auto started = start_mpi(3, sweep_args(out("mpi"), 4));
  CliResult mpi = testing::finish_program(started);
  ASSERT_EQ(mpi.exit_code, 0) << mpi.err;
  EXPECT_THAT(mpi.err, HasSubstr("6 point(s), 1 at a time on each of 3 ranks"));
  EXPECT_EQ(csv_without_host_time(out("mpi") + "/sweep.csv"), local_csv);
  // Every point's report and log are in DIR, whichever rank ran it.
  std::ifstream in(out("mpi") + "/sweep.json");
  const auto j = nlohmann::json::parse(in);
  for (const auto& p : j["points"]) {
    EXPECT_GE(p["rank"].get<int>(), 0);
    EXPECT_LT(p["rank"].get<int>(), 3);
    const std::string id = p["point"];
    EXPECT_EQ(slurp(out("mpi") + "/reports/" + id + ".json").empty(), false) << id;
    EXPECT_THAT(slurp(out("mpi") + "/logs/" + id + ".log"), HasSubstr("sim")) << id;
  }
  // The farm's marker of a shared folder is gone with the sweep.
  for (const auto& entry : fs::directory_iterator(out("mpi")))
    EXPECT_EQ(entry.path().filename().string().rfind(".farm-", 0), std::string::npos);
}

// Points that crash (each kills itself with SIGKILL where its training loop ends, through the
// fault points of common/fault_point.h) are rows with exit code 128 + 9; the ranks go on.
TEST_F(MpiSweep, PointsThatCrashAreRecordedWithTheirSignal) {
  const std::string dir = out("crashed");
  auto started = start_mpi(2, sweep_args(dir, 4), {"-x", "TPUSIM_KILL_AT=loop.done:1"});
  CliResult r = testing::finish_program(started);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("FAILED, exit 137; see " + dir + "/logs/p000.log"));
  EXPECT_THAT(r.err, HasSubstr("6 point(s) failed"));
  const auto lines = read_lines(dir + "/sweep.csv");
  ASSERT_EQ(lines.size(), 7u);
  for (size_t i = 1; i < lines.size(); ++i) EXPECT_EQ(split_csv(lines[i])[3], "137") << lines[i];
}

// A rank whose file system is not rank 0's: rank 1 runs in a mount namespace of its own with an
// empty tmpfs over the study's folder (root only: CI runs as root). Its points' files are written
// there at rank 0's paths, sent, and removed with the folders it made; the table is the same.
TEST_F(MpiSweep, ARankWithoutTheSharedFolderSendsItsPointsAndLeavesNothing) {
  if (::geteuid() != 0 || !fs::exists("/usr/bin/unshare")) GTEST_SKIP() << "needs root and unshare";
  const std::string dir = out("unshared");
  const std::vector<std::string> args = sweep_args(dir + "/study", 40);
  auto local = run_tpusim(args);
  ASSERT_EQ(local.exit_code, 0) << local.err;
  const auto local_csv = csv_without_host_time(dir + "/study/sweep.csv");
  std::string command = testing::tpusim_path();
  for (const std::string& a : args) command += " '" + a + "'";
  std::vector<std::string> mpi = {"--oversubscribe", "-np", "1", testing::tpusim_path()};
  mpi.insert(mpi.end(), args.begin(), args.end());
  mpi.insert(mpi.end(), {":", "-np", "1", "/usr/bin/unshare", "-m", "sh", "-c",
                         "mount -t tmpfs none '" + dir + "' && " + command +
                             "; echo \"rank 1 left: $(find '" + dir + "' -mindepth 1 | wc -l)\""});
  auto r = testing::run_program(kMpirun, mpi, "", kMpiEnvironment);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_THAT(r.out, HasSubstr("rank 1 left: 0"));
  EXPECT_EQ(csv_without_host_time(dir + "/study/sweep.csv"), local_csv);
  std::ifstream in(dir + "/study/sweep.json");
  const auto j = nlohmann::json::parse(in);
  int on_rank1 = 0;
  for (const auto& p : j["points"]) on_rank1 += p["rank"] == 1;
  EXPECT_GT(on_rank1, 0) << r.err << r.out;
}

// Rank 2 is killed while it runs a point: rank 0 hears nothing from it for the timeout, fails
// that point with the reason, and the other ranks run the rest. --resume then runs only it.
TEST_F(MpiSweep, ALostRanksPointFailsTheRestRunAndResumeFinishesIt) {
  const std::string dir = out("killed");
  std::vector<std::string> args = sweep_args(dir, 120);
  args.insert(args.begin() + 1, {"--rank-timeout", "5"});
  auto started = start_mpi(3, args, {"--enable-recovery"});
  int rank2 = -1;
  ASSERT_TRUE(wait_until(
      [&] {
        const auto pids = processes_with(dir, 2);
        rank2 = pids.size() == 1 ? pids[0] : -1;
        return rank2 > 0 && has_child(rank2);
      },
      60))
      << "rank 2 never ran a point";
  ::kill(rank2, SIGKILL);
  // (mpirun's own exit status under --enable-recovery is 0 whatever its ranks return.)
  CliResult r = testing::finish_program(started);
  EXPECT_THAT(r.err, HasSubstr("rank 2 was lost: no word from it for"));
  EXPECT_THAT(r.err, HasSubstr("1 point(s) failed"));
  const auto lines = read_lines(dir + "/sweep.csv");
  ASSERT_EQ(lines.size(), 7u) << r.err;
  int lost = 0, done = 0;
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::string exit_code = split_csv(lines[i])[3];
    lost += exit_code == "-1";
    done += exit_code == "0";
  }
  EXPECT_EQ(lost, 1);
  EXPECT_EQ(done, 5);
  // The killed rank's point died with it.
  EXPECT_TRUE(wait_until([&] { return processes_with(dir + "/runs/").empty(); }, 5));

  r = run_tpusim({"sweep", "--resume", dir});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("1 point(s) of 6 (the rest ended before)"));
  // The finished table is the one an uninterrupted sweep into the folder writes.
  const auto resumed = csv_without_host_time(dir + "/sweep.csv");
  ASSERT_EQ(run_tpusim(sweep_args(dir, 120)).exit_code, 0);
  EXPECT_EQ(resumed, csv_without_host_time(dir + "/sweep.csv"));
}

// A sweep killed outright (no MPI) keeps the points that ended and leaves none running;
// --resume runs the rest, and a sweep resumed when nothing is missing runs nothing.
TEST_F(MpiSweep, AKilledSweepKeepsWhatEndedAndResumeRunsTheRest) {
  const std::string dir = out("cut");
  auto started = testing::start_program(testing::tpusim_path(), sweep_args(dir, 60));
  ASSERT_TRUE(wait_until([&] { return read_lines(dir + "/points.jsonl").size() >= 2; }, 60));
  ::kill(started.pid, SIGKILL);
  testing::finish_program(started);
  EXPECT_TRUE(wait_until([&] { return processes_with(dir + "/runs/").empty(); }, 5))
      << "a point outlived its sweep";
  const size_t ended = read_lines(dir + "/points.jsonl").size();
  ASSERT_LT(ended, 6u);
  auto r = run_tpusim({"sweep", "--resume", dir, "-j", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr(std::to_string(6 - ended) + " point(s) of 6"));
  EXPECT_EQ(read_lines(dir + "/sweep.csv").size(), 7u);
  r = run_tpusim({"sweep", "--resume", dir});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("0 point(s) of 6"));
  EXPECT_EQ(run_tpusim({"sweep", "--resume", dir, "--set", "m=1"}).exit_code, 2);
  r = run_tpusim({"sweep", "--resume", out("nothing")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("sweep-args.json cannot be read"));
}

// tune on two ranks gives the rows it gives in one process; the host pipeline of these runs
// (charged from the host config) bounds every value, and tune says so beside its recommendation.
TEST_F(MpiSweep, TuneOnTwoRanksGivesTheRowsOfOneProcessAndNamesTheInputLimit) {
  const std::vector<std::string> tune = {
      "tune", "--iterations-per-loop", "1,10,50", "--model", "mlp", "--data",
      data(), "--host-timing",         "config",  "--json"};
  auto local = run_tpusim(tune);
  ASSERT_EQ(local.exit_code, 0) << local.err;
  std::vector<std::string> mpi_args = {"--oversubscribe", "-np", "2", testing::tpusim_path()};
  mpi_args.insert(mpi_args.end(), tune.begin(), tune.end());
  auto mpi = testing::run_program(kMpirun, mpi_args, "", kMpiEnvironment);
  ASSERT_EQ(mpi.exit_code, 0) << mpi.err;
  const auto local_json = nlohmann::json::parse(local.out);
  EXPECT_EQ(nlohmann::json::parse(mpi.out), local_json);
  EXPECT_EQ(local_json["recommended_iterations_per_loop"], 50);
  EXPECT_EQ(local_json["input_bound"], true);
  EXPECT_EQ(local_json["rows"][2]["input_classification"], "highly_input_bound");
  EXPECT_EQ(local_json["rows"][2]["slowest_host_stage"], "map");
  std::vector<std::string> table = tune;
  table.pop_back();
  auto r = run_tpusim(table);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("recommended iterations_per_loop: 50"));
  EXPECT_THAT(r.out, HasSubstr("the input pipeline bounds the step: at iterations_per_loop 50 "
                               "the device waits for its input 91.4% of the step (highly input "
                               "bound; the host pipeline's slowest stage is 'map')"));
  // Overheads print with two decimals, so a figure just over 3% never reads as 3.0%.
  EXPECT_THAT(r.out, HasSubstr("1.53%"));
}

}  // namespace cli_mpi_test
}  // namespace tpusim::cli
