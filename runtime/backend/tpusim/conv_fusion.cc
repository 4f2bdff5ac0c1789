// Fused convolutions (Fusion in lowering.h): their fragments (conv_fusion_plan.cc: which fuse).
#include <algorithm>
#include <map>

#include "runtime/backend/tpusim/conv_bands.h"
#include "runtime/backend/tpusim/conv_patterns.h"
#include "runtime/backend/tpusim/conv_tiles.h"
#include "runtime/backend/tpusim/conv_windows.h"
#include "runtime/backend/tpusim/group_lowering.h"
#include "runtime/backend/tpusim/im2col.h"
#include "runtime/backend/tpusim/lowering.h"
#include "runtime/lowering/gemm.h"

namespace tpusim::runtime::tpusim_backend {

using isa::Vector;
using sim::block;

namespace {

// A consumer taken in by an input gradient (fusion_plan.h) as its band tiles compute it: the
// group and the reductions taking it in (none: the group alone), the gradient given in VMEM.
struct InputGradConsumer {
  SiblingReductions r;
  int gradient = -1;
  ConvConsumerBlocks blocks;
  std::map<size_t, size_t> loaded_at;  // its slots but the gradient's -> their tile inputs
  bool present() const { return gradient >= 0; }
};

// A convolution's bands as find_conv_fusions checked them.
absl::StatusOr<std::vector<Band>> conv_bands(const Lowering& l, const Im2col& g, Cut cut,
                                             const BandWidths& widths) {
  return image_bands(l.emit.tile_budget_bytes(), g, cut, widths);
}

// The band's part of each image of an HBM tensor of images (its rows y0 ..) ...
TileOperand image_rows(uint64_t hbm, const Im2col& g, const Band& band) {
  return band_rows(hbm, band.y0 * g.W * g.C, band.g.image_elements(), g.image_elements());
}
// ... or of one with `per_window` values for each window (its window rows oy0 ..).
TileOperand window_rows(uint64_t hbm, const Im2col& g, const Band& band, int64_t per_window) {
  return band_rows(hbm, band.oy0 * g.OW * per_window, band.g.pixels() * per_window,
                   g.pixels() * per_window);
}

// Computes the images' producer group (ImageProducer) on tile `t`'s band of images (its input 0,
// as the band's `bg` lays them out; its rows after the tile's first `fixed_inputs` inputs), over
// the images in place, as the first step of the tile's chain; none without one.
void produce_images(Lowering& l, const ImageProducer& p, Tile& t, const Im2col& bg,
                    size_t fixed_inputs) {
  if (p.empty()) return;
  std::vector<isa::Block> rows;
  for (size_t k = 0; k < p.rows.size(); ++k) rows.push_back(t.in(fixed_inputs + k));
  const auto pixels = static_cast<uint32_t>(t.rows() * bg.image_elements() / bg.C);
  sim::VectorChain chain;
  compute_image_producer(l, p, t.in(0).address(), pixels, rows, t.scratch(0).address(), chain);
  t.chain(t.e_builder().vector(chain.instruction()));
}

// Zeroes `out` on the tile's chain for window products (conv_windows.h) to accumulate into: the
// hooks put their weight loads after the tile's loads and their matmuls after the zeroing.
WindowHooks zeroed_output(Tile& t, const isa::Block& out) {
  t.chain(t.e_builder().fill(out, 0));
  const uint64_t zeroed = t.chain_count();
  return WindowHooks{[&t](sim::InstrRef& load) { t.after_loads(load); },
                     [&t, zeroed](sim::InstrRef& mm) { t.fan_out(mm, zeroed); }};
}

// The band's images as a fragment loads them: the producer group's image when the fragment
// computes the group, else the images' own buffer; and the producer's rows after `inputs`.
TileOperand images_of(Lowering& l, const ImageProducer& p, int images, const Im2col& g,
                      const Band& band) {
  return image_rows(l.address(p.empty() ? images : p.image), g, band);
}
void add_rows(const ImageProducer& p, std::vector<TileOperand>* inputs) {
  inputs->insert(inputs->end(), p.rows.begin(), p.rows.end());
}

// A tile's part of the forward convolution's output reductions, as steps of `chain`: each
// reduction's column sums of the tile's output rows (`out`, [pixels, filters], its values as the
// output holds them) or of their squares (computed at `squares`, a partial sum's row after them,
// both kept in registers) into its row of the accumulator; the first tile's sums start it, every
// later one's are added in order, as lower_sibling_reductions sums its tiles.
void sum_output(const Lowering& l, const Fusion& conv, const isa::Block& accumulator,
                sim::VectorChain& chain, const isa::Block& out, uint64_t squares, bool first) {
  namespace vo = sim::vector_ops;
  const uint32_t filters = out.cols();
  const isa::Block squared = block(squares, out.rows(), filters, isa::F32);
  const isa::Block part = block(squares + uint64_t{out.rows()} * filters * 4, 1, filters, isa::F32);
  bool squares_made = false;
  for (size_t r = 0; r < conv.reductions.size(); ++r) {
    const bool square = summed_square(l.graph, conv.reductions[r]) >= 0;
    if (square && !squares_made) {
      chain.add(vo::unary(Vector::SQUARE, squared, out), true);
      squares_made = true;
    }
    const isa::Block sum = block(accumulator.address() + r * filters * 4, 1, filters, isa::F32);
    const isa::Block& values = square ? squared : out;
    if (first) {
      chain.add(vo::reduce(Vector::REDUCE_SUM, sum, values, 0));
      continue;
    }
    chain.add(vo::reduce(Vector::REDUCE_SUM, part, values, 0), true);
    chain.add(vo::binary(Vector::ADD, sum, sum, part));
  }
}

// Forward: per tile of images and band of their output rows (the whole image when it fits),
// im2col into scratch (as lower_extract_patches does into its output), optionally a copy of the
// patches to their buffer, then patches x w on the MXUs into the tile's output rows
// ([images x OH x OW, filters] is the output's [images, OH*OW*filters]); then, once the MXUs are
// done, a bf16 output rounded and the output reductions summed. The tiles are software-pipelined
// (Emitter::pipelined_bands): the next tile's patches are built while the MXUs multiply this
// one's.
class ForwardTiles {
 public:
  ForwardTiles(Lowering& l, int id, const Fusion& conv, const Im2col& g,
               const std::vector<Band>& parts, const ImageProducer& producer)
      : l_(l),
        n_(l.node(id)),
        conv_(conv),
        producer_(producer),
        parts_(parts),
        g_(g),
        filters_(static_cast<uint32_t>(n_.shape.dim(3))),
        next_slot_(l.emit.core().mxu_count, 0) {}

  // The images' producer computed, the patches built and the products issued.
  void feed(Tile& t, size_t i) {
    sim::CoreBuilder& b = t.e_builder();
    const Band& band = parts_[i];
    const Im2col& bg = band.g;
    produce_images(l_, producer_, t, bg, 2);
    if (bg.windowed) {
      feed_windows(t, i);
      return;
    }
    // The patches: the images themselves (identity), whose loads the MXUs' weight loads wait
    // for; else built in the scratch, from the band's stride phases after them where it splits.
    const uint64_t patches = bg.identity ? t.in(0).address() : t.scratch(0).address();
    if (!bg.identity) {
      build_patches(t, bg, t.in(0).address(), patches,
                    patches + uint64_t{t.rows()} * static_cast<uint64_t>(bg.patch_elements()) * 4);
    }
    const uint64_t built = bg.identity && producer_.empty() ? 0 : t.chain_count();
    if (conv_.patches_kept) {
      const TileOperand kept = window_rows(l_.address(conv_.patches), g_, band, g_.patch);
      sim::InstrRef store = t.store(block(patches, t.rows(), kept.cols, isa::F32),
                                    block(kept.hbm + t.first_row() * g_.patch_elements() * 4,
                                          t.rows(), kept.cols, isa::F32, kept.stride),
                                    built);
      if (bg.identity) t.after_loads(store);
    }
    emit_mxu_product(
        l_.emit.core(), b, block(patches, pixels(t, i), static_cast<uint32_t>(g_.patch), isa::F32),
        block(t.in(1).address(), static_cast<uint32_t>(g_.patch), filters_, isa::F32), output(t, i),
        false, l_.precision, next_slot_, [&](sim::InstrRef& load) { t.after_loads(load); },
        [&](sim::InstrRef& mm, bool) { t.fan_out(mm, built); });
  }

  // What reads the products, one chain once the MXUs are done: a bf16 output rounded (the store
  // waits for the chain), the output reductions summed.
  void finish(Tile& t, size_t i) {
    sim::VectorChain chain;
    if (n_.dtype == DType::kBF16)
      chain.add(sim::vector_ops::unary(Vector::ROUND_BF16, t.out(), t.out()));
    if (!conv_.reductions.empty()) {
      const Im2col& bg = parts_[i].g;
      const uint64_t squares =
          t.scratch(0).address() +
          uint64_t{t.rows()} * static_cast<uint64_t>(patch_scratch_elements(bg)) * 4;
      sum_output(l_, conv_, t.accumulator(), chain, output(t, i), squares,
                 i == 0 && t.first_row() == 0);
    }
    if (!chain.empty()) t.chain(t.join(t.e_builder().vector(chain.instruction())));
  }

 private:
  // The products of every kernel offset, the windows read in place (conv_windows.h), accumulated
  // into the output, which the chain zeroes first.
  void feed_windows(Tile& t, size_t i) {
    const WindowHooks hooks = zeroed_output(t, output(t, i));
    forward_window_products(l_.emit.core(), t.e_builder(),
                            WindowTile{parts_[i].g, t.rows(), t.in(0).address(), t.out().address(),
                                       t.in(1).address(), filters_},
                            l_.precision, next_slot_, hooks);
  }

  uint32_t pixels(const Tile& t, size_t i) const {
    return static_cast<uint32_t>(t.rows() * parts_[i].g.pixels());
  }
  isa::Block output(const Tile& t, size_t i) const {
    return block(t.out().address(), pixels(t, i), filters_, isa::F32);
  }

  Lowering& l_;
  const Node& n_;
  const Fusion& conv_;
  const ImageProducer& producer_;
  const std::vector<Band>& parts_;
  const Im2col g_;
  const uint32_t filters_;
  std::vector<uint32_t> next_slot_;
};

absl::Status lower_conv_forward(Lowering& l, int id, const Fusion& conv) {
  const Node& n = l.node(id);
  const Node& e = l.node(conv.patches);
  const Shape& in = l.node(e.inputs[0]).shape;
  const Im2col g(e.attrs.window, in, e.shape, conv.feed);
  const int64_t filters = n.shape.dim(3);
  const bool sums = !conv.reductions.empty();
  if (g.windowed && conv.patches_kept)
    return absl::InternalError("tpusim backend: a convolution reading its windows keeps patches");
  const ImageProducer producer = image_producer(l, e.inputs[0]);
  const auto parts =
      conv_bands(l, g, Cut::kWindowRows, forward_widths(filters, sums, producer.blocks));
  if (!parts.ok()) return parts.status();
  const TileOperand weights{TileOperand::Kind::kRow, l.address(n.inputs[1]), isa::F32,
                            static_cast<uint32_t>(g.patch * filters)};
  std::vector<TileBand> bands;
  for (const Band& band : *parts) {
    std::vector<TileOperand> inputs{images_of(l, producer, e.inputs[0], g, band), weights};
    add_rows(producer, &inputs);
    bands.push_back({window_rows(l.address(id), g, band, filters), std::move(inputs),
                     static_cast<uint32_t>(with_producer(forward_scratch(band.g, filters, sums),
                                                         band.g, producer.blocks))});
  }
  ForwardTiles tiles(l, id, conv, g, *parts, producer);
  const uint32_t scratch = with_producer(forward_scratch(g, filters, sums), g, producer.blocks) > 0
                               ? 1
                               : 0;  // (width 0: the output's)
  const isa::Block totals = l.emit.pipelined_bands(
      static_cast<uint64_t>(in.dim(0)), bands, scratch,
      static_cast<uint32_t>(conv.reductions.size() * filters),
      [&](Tile& t, size_t i) { tiles.feed(t, i); }, [&](Tile& t, size_t i) { tiles.finish(t, i); });
  if (!sums) return absl::OkStatus();
  // The sums, written once every tile's are in.
  Tile last = l.emit.epilogue();
  for (size_t r = 0; r < conv.reductions.size(); ++r) {
    const isa::Block sum =
        block(totals.address() + r * filters * 4, 1, static_cast<uint32_t>(filters), isa::F32);
    last.store(sum,
               block(l.address(conv.reductions[r]), 1, static_cast<uint32_t>(filters), isa::F32),
               last.chain_count());
  }
  return absl::OkStatus();
}

// The image gradient's blocks in an input gradient's band tile: the tile's output rows, or with
// a consumer taken in (fusion_plan.h) a scratch block of the image's shape.
isa::Block gradient_rows(const Tile& t, const InputGradConsumer& c, const Im2col& bg) {
  if (!c.present()) return t.out();
  const ConsumerScratch at = input_grad_consumer_scratch(bg, c.blocks);
  return block(t.scratch(0).address() + t.rows() * at.gradient * 4, t.rows(),
               static_cast<uint32_t>(bg.image_elements()), isa::F32);
}

// The consumer's loads for a band: its values of the image's shape (the band's rows of each),
// its rows and scalars (once); each slot's tile input after the convolution's `fixed` ones noted.
std::vector<TileOperand> consumer_loads(InputGradConsumer& c, const Im2col& g, const Band& band,
                                        size_t fixed) {
  std::vector<TileOperand> loads;
  c.loaded_at.clear();
  for (const auto& [node, slot] : c.r.ops.slot) {
    if (node == c.gradient) continue;
    TileOperand tile = c.r.ops.tiles[slot];
    if (tile.kind == TileOperand::Kind::kFull) tile = image_rows(tile.hbm, g, band);
    c.loaded_at.emplace(slot, fixed + loads.size());
    loads.push_back(tile);
  }
  return loads;
}

// The consumer on the tile's band (`bg`), once its image gradient is in `gradient`: its group
// and the reductions' parts over the band's pixels as [pixels, channels] rows, its value into
// the tile's output; `after_products`: the chain's step waits for every MXU product first.
void consume_gradient(Lowering& l, Tile& t, const InputGradConsumer& c, const Im2col& bg,
                      const isa::Block& gradient, bool first, bool after_products) {
  const auto channels = static_cast<uint32_t>(c.blocks.channels);
  const auto pixels = static_cast<uint32_t>(t.rows() * bg.image_elements() / channels);
  const ConsumerScratch at = input_grad_consumer_scratch(bg, c.blocks);
  const uint64_t scratch = t.scratch(0).address();
  auto rows_at = [&](uint64_t address) { return block(address, pixels, channels, isa::F32); };
  const size_t gradient_slot = c.r.ops.slot.at(c.gradient);
  const GroupBlocks blocks{
      [&](size_t slot) {
        if (slot == gradient_slot) return rows_at(gradient.address());
        const isa::Block loaded = t.in(c.loaded_at.at(slot));
        const TileOperand& tile = c.r.ops.tiles[slot];
        return tile.kind == TileOperand::Kind::kFull ? rows_at(loaded.address()) : loaded;
      },
      [&](size_t j) {
        return rows_at(scratch + t.rows() * (at.blocks + j * bg.image_elements()) * 4);
      },
      [&] { return rows_at(t.out().address()); },
      {}};  // no rng_uniform member (the fusion plan takes in none)
  sim::VectorChain chain;
  c.r.compute(l, blocks, rows_at(scratch + t.rows() * at.value * 4),
              block(scratch + t.rows() * at.part * 4, 1, channels, isa::F32), t.accumulator(),
              first, chain);
  const sim::InstrRef ref = t.e_builder().vector(chain.instruction());
  t.chain(after_products ? t.join(ref) : ref);
}

// Input gradient: per tile of images and band of their rows (the whole image when it fits), g x
// w_t on the MXUs into scratch (the patch gradients of the windows that reach the band), then
// col2im into the band as lower_patches_to_image does: every pixel sums its windows in the same
// order as over the whole image. With a consumer taken in, the band's gradient stays in VMEM and
// the consumer computes its value (and its reductions' parts) from it, as their own fragments
// would from the written gradient.
absl::Status lower_conv_input_grad(Lowering& l, int id, const Fusion& conv,
                                   InputGradConsumer& consumer) {
  const Node& n = l.node(id);
  const Node& d = l.node(conv.patches);
  const Im2col g(n.attrs.window, n.shape, d.shape, conv.feed);
  const int64_t filters = l.node(d.inputs[0]).shape.dim(3);
  const auto parts = conv_bands(l, g, Cut::kImageRows, input_grad_widths(filters, consumer.blocks));
  if (!parts.ok()) return parts.status();
  const TileOperand weights{TileOperand::Kind::kRow, l.address(d.inputs[1]), isa::F32,
                            static_cast<uint32_t>(filters * g.patch)};
  const uint64_t out = l.address(consumer.present() ? consumer.r.stored : id);
  std::vector<TileBand> bands;
  for (const Band& band : *parts) {
    std::vector<TileOperand> inputs{window_rows(l.address(d.inputs[0]), g, band, filters), weights};
    if (consumer.present()) {
      const std::vector<TileOperand> loads = consumer_loads(consumer, g, band, inputs.size());
      inputs.insert(inputs.end(), loads.begin(), loads.end());
    }
    bands.push_back({image_rows(out, g, band), std::move(inputs),
                     static_cast<uint32_t>(input_grad_scratch(band.g, consumer.blocks))});
  }
  std::vector<uint32_t> next_slot(l.emit.core().mxu_count, 0);
  const uint32_t scratch =
      input_grad_scratch(g, consumer.blocks) > 0 ? 1 : 0;  // (width 0: the output's)
  const bool bf16 = n.dtype == DType::kBF16;
  const isa::Block sums = l.emit.rowwise_bands(
      static_cast<uint64_t>(n.shape.dim(0)), bands, scratch,
      consumer.present() ? consumer.r.accumulated() : 0, [&](Tile& t, size_t i) {
        sim::CoreBuilder& b = t.e_builder();
        const Im2col& bg = (*parts)[i].g;
        const isa::Block image = gradient_rows(t, consumer, bg);
        // The consumer reads the gradient once the tile's chain has it, rounded as its own
        // fragment would store it; one after the MXUs' products waits for them all.
        auto finish = [&](bool after_products) {
          if (bf16) round_bf16_in_tile(t, image, after_products);
          if (!consumer.present()) return;
          consume_gradient(l, t, consumer, bg, image, i == 0 && t.first_row() == 0,
                           after_products && !bf16);
        };
        if (bg.windowed) {
          // Each kernel offset's products accumulate into the pixels its windows read.
          const WindowHooks hooks = zeroed_output(t, image);
          input_grad_window_products(l.emit.core(), b,
                                     WindowTile{bg, t.rows(), image.address(), t.in(0).address(),
                                                t.in(1).address(), static_cast<uint32_t>(filters)},
                                     l.precision, next_slot, hooks);
          finish(true);
          return;
        }
        // The patch gradients are the image gradient's rows when the patches are the images.
        const uint64_t patches = bg.identity ? image.address() : t.scratch(0).address();
        const auto pixels = static_cast<uint32_t>(t.rows() * bg.pixels());
        emit_mxu_product(
            l.emit.core(), b,
            block(t.in(0).address(), pixels, static_cast<uint32_t>(filters), isa::F32),
            block(t.in(1).address(), static_cast<uint32_t>(filters), static_cast<uint32_t>(g.patch),
                  isa::F32),
            block(patches, pixels, static_cast<uint32_t>(g.patch), isa::F32), false, l.precision,
            next_slot, [&](sim::InstrRef& load) { t.after_loads(load); },
            // The products need only the tile's loads, which each MXU's load_weights waits for (an
            // MXU runs its instructions in order): the MXUs may work on this tile while the vector
            // unit still sums the last one into its images.
            [&](sim::InstrRef& mm, bool) { t.fan_out(mm, 0); });
        if (bg.identity) {  // the store waits for the products; a rounding reads them
          finish(true);
          return;
        }
        // col2im reads what the MXUs wrote: its first op waits for them all.
        t.chain(t.join(b.fill(image, 0)));
        if (bg.flat) zero_wrapped(t, bg, patches);
        for_each_window_run(bg, image.address(), patches, t.rows(),
                            [&](const isa::Block& pixels_block, const isa::Block& windows) {
                              t.chain(b.binary(Vector::ADD, pixels_block, pixels_block, windows));
                            });
        finish(false);
      });
  if (consumer.present() && !consumer.r.reductions.empty()) consumer.r.store(l, sums);
  return absl::OkStatus();
}

// Kernel gradient: per tile of images and band of their output rows (the whole image when it
// fits), im2col into scratch (as the forward does) and the tile's output gradient transposed to
// [filters, pixels] beside it; g^T x patches on the MXUs (the patches as weights, 128 pixels
// deep at a time) accumulates [filters, patch] over all the tiles of every band in the
// once-loaded region. After the last tile the sum is transposed to [patch, filters] into the
// tile slots, which the tiles are done with, and written.
absl::Status lower_conv_filter_grad(Lowering& l, int id, const Fusion& conv) {
  const Node& n = l.node(id);
  const Node& e = l.node(conv.patches);
  const Shape& in = l.node(e.inputs[0]).shape;
  const Im2col g(e.attrs.window, in, e.shape, conv.feed);
  const auto filters = static_cast<uint32_t>(n.shape.dim(1));
  const auto patch = static_cast<uint32_t>(g.patch);
  const ImageProducer producer = image_producer(l, e.inputs[0]);
  const auto parts =
      conv_bands(l, g, Cut::kWindowRows, filter_grad_widths(filters, producer.blocks));
  if (!parts.ok()) return parts.status();
  std::vector<TileBand> bands;
  for (const Band& band : *parts) {
    std::vector<TileOperand> inputs{images_of(l, producer, e.inputs[0], g, band),
                                    window_rows(l.address(n.inputs[1]), g, band, filters)};
    add_rows(producer, &inputs);
    bands.push_back({TileOperand{}, std::move(inputs),
                     static_cast<uint32_t>(with_producer(filter_grad_scratch(band.g, filters),
                                                         band.g, producer.blocks))});
  }
  sim::CoreBuilder& b = l.emit.builder();
  std::vector<uint32_t> next_slot(l.emit.core().mxu_count, 0);
  const isa::Block sums = l.emit.reduce_bands(
      static_cast<uint64_t>(in.dim(0)), bands, 1, patch * filters, [&](Tile& t, size_t i) {
        const Im2col& bg = (*parts)[i].g;
        const auto pixels = static_cast<uint32_t>(t.rows() * bg.pixels());
        // The patches: the images themselves (identity), else built first in the scratch.
        const uint64_t patches = bg.identity ? t.in(0).address() : t.scratch(0).address();
        const uint64_t grad_t = t.scratch(0).address() +
                                (bg.identity ? 0 : uint64_t{t.rows()} * bg.patch_elements() * 4);
        const uint64_t phases = grad_t + uint64_t{pixels} * filters * 4;
        produce_images(l, producer, t, bg, 2);
        if (!bg.identity) build_patches(t, bg, t.in(0).address(), patches, phases);
        t.chain(b.transpose(block(grad_t, filters, pixels, isa::F32),
                            block(t.in(1).address(), pixels, filters, isa::F32)));
        const uint64_t built = t.chain_count();
        emit_mxu_product(
            l.emit.core(), b, block(grad_t, filters, pixels, isa::F32),
            block(patches, pixels, patch, isa::F32),
            block(t.accumulator().address(), filters, patch, isa::F32), i > 0 || t.first_row() > 0,
            l.precision, next_slot, [&](sim::InstrRef& load) { t.fan_out(load, built); },
            [&](sim::InstrRef& mm, bool) { t.fan_out(mm, built); });
      });
  Tile last = l.emit.epilogue();
  const isa::Block result = block(l.emit.epilogue_vmem(), patch, filters, isa::F32);
  last.chain(last.join(b.transpose(result, block(sums.address(), filters, patch, isa::F32))));
  if (n.dtype == DType::kBF16) round_bf16_in_tile(last, result, false);
  last.store(result, block(l.address(id), patch, filters, isa::F32), last.chain_count());
  return absl::OkStatus();
}

}  // namespace

absl::Status lower_conv_into_consumer(Lowering& l, int id, const Fusion& conv,
                                      const std::vector<std::vector<int>>& reductions,
                                      const std::vector<int>& consumer) {
  if (conv.kind != Fusion::Kind::kConvInputGrad)
    return absl::InternalError(
        "tpusim backend: a consumer taken in by a fusion that is no "
        "convolution input gradient");
  InputGradConsumer c;
  c.gradient = id;
  c.r = plan_sibling_reductions(l, reductions, consumer, {id});
  if (c.r.stored < 0)
    return absl::InternalError(
        "tpusim backend: a consumer taken in by a convolution has no buffer");
  const Shape& shape = l.node(id).shape;
  c.blocks.taken = true;
  c.blocks.channels = shape.dim(shape.rank() - 1);
  c.blocks.blocks = c.r.plan.blocks;
  c.blocks.sums = static_cast<uint32_t>(reductions.size());
  for (const auto& [node, slot] : c.r.ops.slot) {
    if (node == id) continue;
    const TileOperand::Kind kind = c.r.ops.tiles[slot].kind;
    if (kind == TileOperand::Kind::kFull) ++c.blocks.images;
    if (kind == TileOperand::Kind::kColumn)
      return absl::InternalError("tpusim backend: a convolution's consumer reads a column");
  }
  return lower_conv_input_grad(l, id, conv, c);
}

absl::Status lower_conv(Lowering& l, int id, const Fusion& conv) {
  // Each kind rounds a bf16 result in VMEM before storing it (fusion_rounds_output).
  switch (conv.kind) {
    case Fusion::Kind::kConvForward:
      return lower_conv_forward(l, id, conv);
    case Fusion::Kind::kConvInputGrad: {
      InputGradConsumer none;
      return lower_conv_input_grad(l, id, conv, none);
    }
    case Fusion::Kind::kConvFilterGrad:
      return lower_conv_filter_grad(l, id, conv);
    default:
      break;
  }
  return absl::InternalError("tpusim backend: lower_conv of a fusion that is no convolution");
}

}  // namespace tpusim::runtime::tpusim_backend
