// A main for fuzz targets built without libFuzzer (the release build): runs the target once on
// every file named on the command line, or in the folders named, so that the checked-in corpus
// (inputs that once crashed among them) is a regression test everywhere.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  std::size_t runs = 0;
  auto run = [&](const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "cannot open %s\n", p.c_str());
      std::exit(1);
    }
    std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
    ++runs;
  };
  for (int i = 1; i < argc; ++i) {
    const fs::path p = argv[i];
    if (fs::is_directory(p)) {
      for (const auto& e : fs::directory_iterator(p))
        if (e.is_regular_file()) run(e.path());
    } else if (fs::is_regular_file(p)) {
      run(p);
    } else {
      // A corpus that is not there must fail the test, not replay one empty input and pass.
      std::fprintf(stderr, "no input file or folder %s\n", p.c_str());
      return 1;
    }
  }
  std::printf("replayed %zu input(s)\n", runs);
  return runs > 0 ? 0 : 1;
}
