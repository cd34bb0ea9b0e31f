// The zero.* configuration keys (see config.hpp).
#include "zt/zero/config.hpp"

namespace zt::zero {

void add_zero_keys(config::Schema& s) {
  const EngineOptions d;
  {
    auto& k = s.add_int("zero.stage", d.stage,
                        "ZeRO stage: 0 replicate (DDP), 1 shard optimizer state, 2 + gradients, "
                        "3 + parameters");
    k.min = 0;
    k.max = 3;
  }
  {
    auto& k = s.add_int("zero.hpz_partition_size", d.hpz_partition_size,
                        "hpZ secondary group (stage 3): 0 = ranks per node, 1 = off, or a "
                        "divisor of the ranks per node");
    k.min = 0;
    k.max = 1 << 20;
  }
  {
    auto& k = s.add_int("zero.prefetch", d.prefetch,
                        "stage-3 unit gathers in flight ahead of the computing unit");
    k.min = 0;
    k.max = 16;
  }
  s.add_bool("zero.quantize_weights", d.quantize_weights,
             "qwZ: stage-3 parameter gathers as int8 blocks + fp32 scales");
  s.add_bool("zero.quantize_grads", d.quantize_grads,
             "qgZ: gradient reduce-scatters as int8 all-to-alls, intra- then inter-node "
             "(stages 1-3)");
  s.add_string("zero.reduce_dtype", std::string("fp32"),
               "element type of unquantized gradient reductions")
      .choices = {"fp32", "bf16"};
  {
    auto& k = s.add_int("zero.quantize_block", d.quantize_block,
                        "elements per quantization block (one fp32 scale each; multiple of 16)");
    k.min = 16;
    k.max = 65536;
  }
  {
    auto& k = s.add_int("moe.expert_parallel", d.expert_parallel,
                        "ranks of one expert group: each holds model.experts / N of every "
                        "block's experts (tokens dispatched by all-to-all); ZeRO over the "
                        "other world / N; must divide the ranks and model.experts");
    k.min = 1;
    k.max = 1 << 20;
  }
}

EngineOptions zero_options(const config::Config& c) {
  EngineOptions o;
  o.stage = static_cast<int>(c.get_int("zero.stage"));
  o.hpz_partition_size = static_cast<int>(c.get_int("zero.hpz_partition_size"));
  o.prefetch = static_cast<int>(c.get_int("zero.prefetch"));
  o.quantize_weights = c.get_bool("zero.quantize_weights");
  o.quantize_grads = c.get_bool("zero.quantize_grads");
  o.reduce_dtype = parse_reduce_dtype(c.get_string("zero.reduce_dtype"));
  o.quantize_block = static_cast<int>(c.get_int("zero.quantize_block"));
  o.expert_parallel = static_cast<int>(c.get_int("moe.expert_parallel"));
  return o;
}

}  // namespace zt::zero
