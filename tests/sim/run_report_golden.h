#pragma once
// What System::report printed for run_report_test's small_program() on v3-8, timing-only and
// with the tpu MXU policy, before the report was typed: RunReport::to_json() must print it
// byte for byte (dump(2)).

namespace tpusim::sim::testing {

inline constexpr const char* kSmallProgramReport = R"json(
{
  "cycles": 647,
  "seconds": 6.882978723404256e-07,
  "cores": [
    {
      "core": 0,
      "shadow": false,
      "cycles": 647,
      "mxu_utilization": 0.19783616692426584,
      "infeed_wait_cycles": 0,
      "outfeed_wait_cycles": 0,
      "vmem_high_water_bytes": 4259840,
      "units": {
        "dma0": {
          "busy_cycles": 539.0,
          "stall_cycles": 0.0,
          "utilization": 0.8330757341576507
        },
        "dma1": {
          "busy_cycles": 0.0,
          "stall_cycles": 0.0,
          "utilization": 0.0
        },
        "dma2": {
          "busy_cycles": 0.0,
          "stall_cycles": 0.0,
          "utilization": 0.0
        },
        "dma3": {
          "busy_cycles": 0.0,
          "stall_cycles": 0.0,
          "utilization": 0.0
        },
        "mxu0": {
          "busy_cycles": 384.0,
          "stall_cycles": 0.0,
          "utilization": 0.5935085007727975
        },
        "mxu1": {
          "busy_cycles": 0.0,
          "stall_cycles": 0.0,
          "utilization": 0.0
        },
        "vpu": {
          "busy_cycles": 1.0,
          "stall_cycles": 636.0,
          "utilization": 0.0015455950540958269
        },
        "infeed": {
          "busy_cycles": 0.0,
          "stall_cycles": 0.0,
          "utilization": 0.0
        },
        "outfeed": {
          "busy_cycles": 0.0,
          "stall_cycles": 0.0,
          "utilization": 0.0
        },
        "ici": {
          "busy_cycles": 0.0,
          "stall_cycles": 0.0,
          "utilization": 0.0
        }
      },
      "ops": [
        {
          "label": "dense/matmul",
          "op": "matmul",
          "flops": 8388608.0,
          "mxu_flops": 8388608.0,
          "hbm_bytes": 0.0,
          "ici_bytes": 0.0,
          "cycles": 638,
          "instructions": 2
        },
        {
          "label": "relu",
          "op": "relu",
          "flops": 1024.0,
          "mxu_flops": 0.0,
          "hbm_bytes": 0.0,
          "ici_bytes": 0.0,
          "cycles": 9,
          "instructions": 1
        },
        {
          "label": "load",
          "op": "copy",
          "flops": 0.0,
          "mxu_flops": 0.0,
          "hbm_bytes": 65536.0,
          "ici_bytes": 0.0,
          "cycles": 539,
          "instructions": 1
        }
      ]
    },
    {
      "core": 1,
      "shadow": false,
      "cycles": 647,
      "mxu_utilization": 0.19783616692426584,
      "infeed_wait_cycles": 0,
      "outfeed_wait_cycles": 0,
      "vmem_high_water_bytes": 4259840,
      "units": {
        "dma0": {
          "busy_cycles": 0.0,
          "stall_cycles": 0.0,
          "utilization": 0.0
        },
        "dma1": {
          "busy_cycles": 607.0,
          "stall_cycles": 0.0,
          "utilization": 0.9381761978361669
        },
        "dma2": {
          "busy_cycles": 0.0,
          "stall_cycles": 0.0,
          "utilization": 0.0
        },
        "dma3": {
          "busy_cycles": 0.0,
          "stall_cycles": 0.0,
          "utilization": 0.0
        },
        "mxu0": {
          "busy_cycles": 0.0,
          "stall_cycles": 0.0,
          "utilization": 0.0
        },
        "mxu1": {
          "busy_cycles": 384.0,
          "stall_cycles": 0.0,
          "utilization": 0.5935085007727975
        },
        "vpu": {
          "busy_cycles": 1.0,
          "stall_cycles": 636.0,
          "utilization": 0.0015455950540958269
        },
        "infeed": {
          "busy_cycles": 0.0,
          "stall_cycles": 0.0,
          "utilization": 0.0
        },
        "outfeed": {
          "busy_cycles": 0.0,
          "stall_cycles": 0.0,
          "utilization": 0.0
        },
        "ici": {
          "busy_cycles": 0.0,
          "stall_cycles": 0.0,
          "utilization": 0.0
        }
      },
      "ops": [
        {
          "label": "dense/matmul",
          "op": "matmul",
          "flops": 8388608.0,
          "mxu_flops": 8388608.0,
          "hbm_bytes": 0.0,
          "ici_bytes": 0.0,
          "cycles": 638,
          "instructions": 2
        },
        {
          "label": "relu",
          "op": "relu",
          "flops": 1024.0,
          "mxu_flops": 0.0,
          "hbm_bytes": 0.0,
          "ici_bytes": 0.0,
          "cycles": 9,
          "instructions": 1
        },
        {
          "label": "load",
          "op": "copy",
          "flops": 0.0,
          "mxu_flops": 0.0,
          "hbm_bytes": 65536.0,
          "ici_bytes": 0.0,
          "cycles": 607,
          "instructions": 1
        }
      ]
    },
    {
      "core": 2,
      "shadow": false,
      "cycles": 9,
      "mxu_utilization": 0.0,
      "infeed_wait_cycles": 0,
      "outfeed_wait_cycles": 0,
      "vmem_high_water_bytes": 4096,
      "units": {
        "dma0": {
          "busy_cycles": 0.0,
          "stall_cycles": 0.0,
          "utilization": 0.0
        },
        "dma1": {
          "busy_cycles": 0.0,
          "stall_cycles": 0.0,
          "utilization": 0.0
        },
        "dma2": {
          "busy_cycles": 0.0,
          "stall_cycles": 0.0,
          "utilization": 0.0
        },
        "dma3": {
          "busy_cycles": 0.0,
          "stall_cycles": 0.0,
          "utilization": 0.0
        },
        "mxu0": {
          "busy_cycles": 0.0,
          "stall_cycles": 0.0,
          "utilization": 0.0
        },
        "mxu1": {
          "busy_cycles": 0.0,
          "stall_cycles": 0.0,
          "utilization": 0.0
        },
        "vpu": {
          "busy_cycles": 1.0,
          "stall_cycles": 0.0,
          "utilization": 0.1111111111111111
        },
        "infeed": {
          "busy_cycles": 0.0,
          "stall_cycles": 0.0,
          "utilization": 0.0
        },
        "outfeed": {
          "busy_cycles": 0.0,
          "stall_cycles": 0.0,
          "utilization": 0.0
        },
        "ici": {
          "busy_cycles": 0.0,
          "stall_cycles": 0.0,
          "utilization": 0.0
        }
      },
      "ops": [
        {
          "label": "zeros",
          "op": "fill",
          "flops": 0.0,
          "mxu_flops": 0.0,
          "hbm_bytes": 0.0,
          "ici_bytes": 0.0,
          "cycles": 9,
          "instructions": 1
        }
      ]
    }
  ],
  "chips": [
    {
      "chip": 0,
      "hbm_bytes": 131072.0,
      "hbm_achieved_bytes_per_s": 190429180834.6213,
      "hbm_peak_bytes_per_s": 900000000000.0,
      "ops": [
        {
          "label": "dense/matmul",
          "op": "matmul",
          "flops": 16777216.0,
          "mxu_flops": 16777216.0,
          "hbm_bytes": 0.0,
          "ici_bytes": 0.0,
          "cycles": 638,
          "instructions": 4
        },
        {
          "label": "relu",
          "op": "relu",
          "flops": 2048.0,
          "mxu_flops": 0.0,
          "hbm_bytes": 0.0,
          "ici_bytes": 0.0,
          "cycles": 9,
          "instructions": 2
        },
        {
          "label": "load",
          "op": "copy",
          "flops": 0.0,
          "mxu_flops": 0.0,
          "hbm_bytes": 131072.0,
          "ici_bytes": 0.0,
          "cycles": 607,
          "instructions": 2
        }
      ]
    }
  ]
}
)json";

}  // namespace tpusim::sim::testing
