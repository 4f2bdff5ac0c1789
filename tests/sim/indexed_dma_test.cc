// Indexed DMAs (isa.proto, Dma.index): rows gathered from and scattered to an HBM table by s32
// indices in VMEM, clamped into the table, a scatter's later row staying where two name one row;
// and their time: one HBM request per row, the rows' bytes (not the table's) through the ports.
#include <gtest/gtest.h>

#include "tests/sim/sim_test_util.h"

namespace tpusim::sim {
namespace indexed_dma_test {

using testing::make_system;

constexpr uint32_t kCols = 130;  // rows of 520 bytes: not a whole number of channel granules

void put_indices(System& s, uint64_t address, const std::vector<int32_t>& indices) {
  ASSERT_TRUE(s.write_vmem(CoreId{0}, address, indices.data(), 4 * indices.size()).ok());
}

TEST(IndexedDma, GathersAndScattersRowsByClampedIndex) {
  auto system = make_system();
  const MatrixF table = testing::random_matrix(6, kCols, 1);
  ASSERT_TRUE(system->write_hbm(ChipId{0}, 0, table.data(), 4 * table.size()).ok());
  // Gather rows 4, 0 (clamped from -2), 5 (clamped from 9), 4, 1.
  put_indices(*system, 0x100000, {4, -2, 9, 4, 1});
  // Scatter them to rows 2, 0, 2, 1, 7 (clamped to 3) of a second table: row 2 gets the later.
  put_indices(*system, 0x100100, {2, 0, 2, 1, 7});
  const MatrixF zeros = MatrixF::Zero(4, kCols);
  ASSERT_TRUE(system->write_hbm(ChipId{0}, 1 << 20, zeros.data(), 4 * zeros.size()).ok());
  isa::Program p;
  CoreBuilder c(&p, 0);
  const uint32_t f = c.new_flag();
  const isa::Block rows = block(0, 5, kCols, isa::F32);
  c.dma_gather(block(0, 6, kCols, isa::F32), rows, block(0x100000, 5, 1, isa::S32)).signal(f);
  c.dma_scatter(rows, block(1 << 20, 4, kCols, isa::F32), block(0x100100, 1, 5, isa::S32), 1)
      .wait(f, 1);
  c.halt();
  auto run = system->run(p);
  ASSERT_TRUE(run.ok()) << run.status();
  const MatrixF gathered = testing::get_f32(*system, CoreId{0}, 0, 5, kCols);
  const int want[] = {4, 0, 5, 4, 1};
  for (int r = 0; r < 5; ++r) EXPECT_EQ(gathered.row(r), table.row(want[r])) << r;
  MatrixF scattered(4, kCols);
  ASSERT_TRUE(system->read_hbm(ChipId{0}, 1 << 20, scattered.data(), 4 * scattered.size()).ok());
  EXPECT_EQ(scattered.row(0), table.row(0));  // index 0 <- gathered row 1 (row 0)
  EXPECT_EQ(scattered.row(1), table.row(4));  // index 1 <- gathered row 3 (row 4)
  EXPECT_EQ(scattered.row(2), table.row(5));  // indices 2 <- rows 0 then 2: the later (row 5)
  EXPECT_EQ(scattered.row(3), table.row(1));  // index 7, clamped to 3 <- gathered row 4 (row 1)
}

// 2,048 rows of 4 KiB gathered from BERT-Large's 30,522-row word table: the engine moves the
// 8 MiB of rows (not the table's 125 MB), each row a request of its own on the HBM channels. With
// whole-granule rows the requests spread over every channel, so the gather takes what one dense
// copy of the same bytes takes, within 1%; packed bf16 rows take half.
TEST(IndexedDma, ChargesTheRowsItMovesOneHbmRequestEach) {
  auto system = make_system("v3-8", {MxuPolicy::kTpu, true, nullptr});
  const uint32_t rows = 2048, cols = 1024, vocab = 30522;
  auto cycles = [&](bool indexed, bool packed) {
    isa::Program p;
    CoreBuilder c(&p, 0);
    const isa::Block vmem = block(0, rows, cols, isa::F32);
    InstrRef dma = indexed ? c.dma_gather(block(0, vocab, cols, isa::F32), vmem,
                                          block(12u << 20, rows, 1, isa::S32))
                           : c.dma_to_vmem(block(0, rows, cols, isa::F32), vmem);
    dma.instruction().mutable_dma()->set_packed_bf16(packed);
    c.halt();
    auto run = system->run(p);
    EXPECT_TRUE(run.ok()) << run.status();
    EXPECT_DOUBLE_EQ(system->report(*run).chips.at(0).hbm_bytes,
                     4.0 * rows * cols / (packed ? 2 : 1));
    return static_cast<double>(run->cycles());
  };
  const double dense = cycles(false, false), gathered = cycles(true, false);
  EXPECT_NEAR(gathered / dense, 1.0, 0.01) << gathered << " vs " << dense;
  EXPECT_NEAR(cycles(true, true) / gathered, 0.5, 0.03);
  // 8 MiB at 900 GB/s (8,937 cycles at 940 MHz) plus the access latency.
  EXPECT_GT(gathered, 8937);
  EXPECT_LT(gathered, 8937 + 1000);
}

}  // namespace indexed_dma_test
}  // namespace tpusim::sim
