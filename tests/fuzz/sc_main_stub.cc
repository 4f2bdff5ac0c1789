// libsystemc.so carries a main() that calls sc_main(), so a harness linking it needs the symbol
// (sim/system.cc defines one, but a harness that uses no System pulls no object of it in). The
// harnesses never reach it: libFuzzer's main runs them.
extern "C" __attribute__((weak)) int sc_main(int /*argc*/, char* /*argv*/[]) { return 1; }
