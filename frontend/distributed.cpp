// kiln::distributed (kiln/kiln.hpp): the public face of runtime/distributed.hpp.
#include "runtime/distributed.hpp"
#include "kiln/kiln.hpp"

namespace kiln::distributed {

void init(int& argc, char**& argv) { dist::start(&argc, &argv); }
void init() { dist::start(nullptr, nullptr); }
bool active() { return dist::world() != nullptr; }
int rank() {
  dist::Transport* w = dist::world();
  return w ? w->rank() : 0;
}
int size() {
  dist::Transport* w = dist::world();
  return w ? w->size() : 1;
}
std::string library() {
  dist::Transport* w = dist::world();
  return w ? w->library() : std::string();
}
std::string host() {
  dist::Transport* w = dist::world();
  return w ? w->host() : std::string();
}
void finalize() { dist::stop(); }

}  // namespace kiln::distributed
