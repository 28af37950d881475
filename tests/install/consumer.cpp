// A program built only against the installed ordo (headers + pkg-config).
#include <cstdio>
#include <ordo/ordo.hpp>

int main() {
  ordo::Graph g;
  auto x = g.location<long>("x", 8);
  auto y = g.location<long>("y", 8);
  g.task("produce", {ordo::write(x)}, [=](ordo::Context& ctx) {
    for (auto& v : ctx.write(x)) v += 1;
  });
  g.task("consume", {ordo::read(x), ordo::write(y)}, [=](ordo::Context& ctx) {
    auto in = ctx.read(x);
    auto out = ctx.write(y);
    for (std::size_t i = 0; i < in.size(); ++i) out[i] += in[i];
  });
  ordo::Runtime rt({.workers = 2});
  rt.run(g, 10);
  // After k iterations x = k and y = 1 + 2 + ... + k.
  bool ok = g.data(x)[7] == 10 && g.data(y)[7] == 55;
  std::puts(ok ? "consumer: ok" : "consumer: wrong result");
  return ok ? 0 : 1;
}
