// The folders are layers (docs/ARCHITECTURE.md): a file includes headers of its own folder and of
// the folders below it only; the runtime reaches backends only through codegen/backend.hpp; no
// backend includes another; and the public header does not pull in the graph's internals.
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>

#include "oracle.hpp"

namespace {

namespace fs = std::filesystem;

const std::map<std::string, int> kLayer = {{"support", 0}, {"ir", 1},      {"passes", 2},
                                           {"codegen", 3}, {"runtime", 4}, {"frontend", 5},
                                           {"kiln", 5},    {"glm", 6},     {"python", 7}};

// The "dir/file" includes of a source file.
std::vector<std::string> includes(const fs::path& file) {
  std::ifstream in(file);
  std::vector<std::string> out;
  static const std::regex re(R"re(^\s*#\s*include\s*"([^"]+)")re");
  std::string line;
  std::smatch m;
  while (std::getline(in, line))
    if (std::regex_search(line, m, re)) out.push_back(m[1]);
  return out;
}

std::string top(const std::string& include) { return include.substr(0, include.find('/')); }
bool starts(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

TEST(Layering, IncludesPointDownOnly) {
  fs::path root = kt::source_dir();
  std::vector<std::string> bad;
  int files = 0;
  for (const auto& [folder, layer] : kLayer) {
    if (folder == "kiln") continue;
    for (const auto& e : fs::recursive_directory_iterator(root / folder)) {
      std::string ext = e.path().extension().string();
      if (ext != ".cpp" && ext != ".hpp") continue;
      ++files;
      std::string rel = fs::relative(e.path(), root).string();
      for (const std::string& inc : includes(e.path())) {
        auto it = kLayer.find(top(inc));
        if (it == kLayer.end()) continue;  // a sibling header ("ufuncs.def" style) or a system one
        if ((folder == "glm" || folder == "python") && top(inc) != "kiln")
          bad.push_back(rel + " includes " + inc + " (" + folder +
                        "/ uses the public API, kiln/, only)");
        if (it->second > layer) bad.push_back(rel + " includes " + inc + " (a layer above)");
        if (folder == "runtime" && (starts(inc, "codegen/cpu/") || starts(inc, "codegen/interp/") ||
                                    starts(inc, "codegen/cuda/")))
          bad.push_back(rel + " includes " + inc +
                        " (a backend's folder: use codegen/backend.hpp)");
        for (const char* b : {"codegen/cpu/", "codegen/interp/", "codegen/cuda/"}) {
          bool own = starts(rel, b);
          bool registry = rel == "codegen/backend.cpp";
          if (starts(inc, b) && !own && !registry && folder == "codegen")
            bad.push_back(rel + " includes " + inc + " (another backend's folder)");
        }
      }
    }
  }
  EXPECT_GT(files, 40);
  for (const auto& b : bad) ADD_FAILURE() << b;
}
TEST(Layering, ThePublicHeaderHidesTheGraphsInternals) {
  // Every header kiln/kiln.hpp reaches through quoted includes.
  fs::path root = kt::source_dir();
  std::set<std::string> seen;
  std::function<void(const std::string&)> walk = [&](const std::string& h) {
    if (!seen.insert(h).second) return;
    fs::path p = starts(h, "kiln/") ? root / "frontend" / h : root / h;
    ASSERT_TRUE(fs::exists(p)) << h;
    for (const std::string& inc : includes(p))
      if (kLayer.count(top(inc))) walk(inc);
  };
  walk("kiln/kiln.hpp");
  EXPECT_GT(seen.size(), 1u);
  for (const char* internal :
       {"ir/node.hpp", "ir/graph.hpp", "ir/fused.hpp", "runtime/plan.hpp", "codegen/kernel_ir.hpp"})
    EXPECT_EQ(seen.count(internal), 0u) << "kiln/kiln.hpp reaches " << internal;
}
