// Config text protos on any text: parsed and validated as a slice, a chip and a host.
#include "configs/loader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tpusim::config::ConfigText text;
  text.label = "fuzz.pbtxt";
  text.text.assign(reinterpret_cast<const char*>(data), size);
  (void)tpusim::config::parse_slice(text);
  (void)tpusim::config::parse_chip(text);
  (void)tpusim::config::parse_host(text);
  return 0;
}
