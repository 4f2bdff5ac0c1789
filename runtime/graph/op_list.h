#pragma once
// Every graph op, one row each: X(enumerator, name, class). The list makes the Op enum
// (graph.h) and the table of names and classes (graph.cc's op_table()), so the two cannot
// disagree; a new op is a new row here, then the pieces docs/runtime.md "Adding an op" lists.
// The class says which backends' shared code takes it: elementwise kernels (kBinary, kUnary,
// kOtherElementwise), reductions, layout, linear algebra, indexing, a collective, or a source.
// Attributes each op reads are in the comment after its row.

// clang-format off
#define TPUSIM_GRAPH_OPS(X)                                                                     \
  X(kConstant, "constant", kSource)              /* attrs.value */                              \
  X(kVariable, "variable", kSource)              /* attrs.name, attrs.initializer */            \
  X(kInfeed, "infeed", kSource)                  /* attrs.name: one batch per step */           \
  /* uniform [0, 1) from (attrs.seed, step, element index): counter-based */                    \
  X(kRngUniform, "rng_uniform", kSource)                                                        \
  /* Elementwise, numpy broadcasting between the two inputs. */                                 \
  X(kAdd, "add", kBinary)                                                                       \
  X(kSub, "sub", kBinary)                                                                       \
  X(kMul, "mul", kBinary)                                                                       \
  X(kDiv, "div", kBinary)                                                                       \
  X(kMax, "max", kBinary)                                                                       \
  X(kMin, "min", kBinary)                                                                       \
  X(kEqual, "equal", kBinary)                                                                   \
  /* 1.0 where true, 0.0 where false (in the operands' float type; f32 for s32) */              \
  X(kGreater, "greater", kBinary)                                                               \
  /* inputs (condition, a, b): a where condition != 0, else b */                                \
  X(kSelect, "select", kOtherElementwise)                                                       \
  /* Elementwise unary. */                                                                      \
  X(kNeg, "neg", kUnary)                                                                        \
  X(kRelu, "relu", kUnary)                                                                      \
  X(kTanh, "tanh", kUnary)                                                                      \
  X(kSigmoid, "sigmoid", kUnary)                                                                \
  X(kExp, "exp", kUnary)                                                                        \
  X(kLog, "log", kUnary)                                                                        \
  X(kRsqrt, "rsqrt", kUnary)                                                                    \
  X(kSquare, "square", kUnary)                                                                  \
  /* the error function (GELU's); gradient 2 / sqrt(pi) * exp(-x^2) */                          \
  X(kErf, "erf", kUnary)                                                                        \
  /* identity whose gradient is zero */                                                         \
  X(kStopGradient, "stop_gradient", kIdentity)                                                  \
  X(kCast, "cast", kOtherElementwise)            /* to attrs.to */                              \
  /* Reductions over attrs.axes (removed from the shape). */                                    \
  X(kReduceSum, "reduce_sum", kReduction)                                                       \
  X(kReduceMax, "reduce_max", kReduction)                                                       \
  /* s32 index of the maximum along attrs.axis (removed) */                                     \
  X(kArgMax, "argmax", kReduction)                                                              \
  /* Layout. */                                                                                 \
  X(kReshape, "reshape", kLayout)                /* to the node's shape */                      \
  /* attrs.axes is the permutation: output dim i is input dim axes[i] */                        \
  X(kTranspose, "transpose", kLayout)                                                           \
  /* attrs.axes[i] is the output dim of input dim i; others are repeated */                     \
  X(kBroadcast, "broadcast", kLayout)                                                           \
  X(kConcat, "concat", kLayout)                  /* along attrs.axis */                         \
  X(kSlice, "slice", kLayout)                    /* [attrs.begin, attrs.end) per dimension */   \
  /* attrs.begin zeros before and attrs.end after, per dimension */                             \
  X(kPad, "pad", kLayout)                                                                       \
  /* Linear algebra. [..., M, K] x [..., K, N]: batch dims equal, or the rhs rank 2 */          \
  X(kMatMul, "matmul", kLinearAlgebra)                                                          \
  /* NHWC -> [N, OH, OW, KH * KW * C] (im2col), attrs.window */                                 \
  X(kExtractPatches, "extract_patches", kLinearAlgebra)                                         \
  /* the adjoint of kExtractPatches: sums patches back into NHWC */                             \
  X(kPatchesToImage, "patches_to_image", kLinearAlgebra)                                        \
  X(kOneHot, "one_hot", kLinearAlgebra)          /* s32 labels -> f32 [..., attrs.depth] */     \
  /* Indexing (TensorFlow's embedding lookup and its gradient). An index i names row          \
     clamp(i, 0, V - 1) of a [V, D] table: out of range it is clamped, as XLA's gather clamps  \
     its start indices on TPU (TF's own CPU kernel would fail instead), on every backend.      \
     kGather: (table [V, D] floating, indices s32 [...]) -> [..., D]: tf.gather(table, ids).   \
     kScatterAdd: (updates [..., D], indices s32 [...]) -> [attrs.depth = V, D]: zeros, then   \
     each update row added to the row its index names, in index order (row-major over the      \
     indices), in f32: gather's adjoint, XLA's densified IndexedSlices. */                     \
  X(kGather, "gather", kIndexing)                                                               \
  X(kScatterAdd, "scatter_add", kIndexing)                                                      \
  /* Collectives: a sum over replicas (identity on one). */                                     \
  X(kCrossReplicaSum, "cross_replica_sum", kCollective)
// clang-format on
